"""The turn loop: the episode, the one runner that keeps many in flight, worker processes, the
environment seam (arm environments and families), safety clipping and the family registry."""
