"""The LeRobot path, one folder as LeRobot keeps `async_inference/`: the client policy
(`client`: `--policy lerobot:<checkpoint>`), its server process (`server`, run in `.venv-lerobot`)
and the queue of joint-target chunks the arm runs at the control rate (`joint_chunks`). The
vector layout both sides feed a policy (`control_vectors`, `split_action`) is the recording's:
`pear_agent.records.export_lerobot`.

The package imports nothing itself, so the server loads no core module it does not use."""
