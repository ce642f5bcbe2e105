"""The flying roadster: a second environment family (command menu + telemetry rows instead of pose
deltas, images and IK). MuJoCo is imported lazily, by `sim.py` and `model.py` only."""
