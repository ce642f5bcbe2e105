"""What an episode leaves behind: the per-turn JSONL log and video, the Rerun view, and exports
(LeRobot datasets)."""
