"""The MuJoCo tasks' scripted experts, beside their family: the single-arm ones (`single_arm`), the
two-arm ones (`bimanual`), the PEAR paper's station tasks (`ruler`, `objects`). Each task class
points at its own (`MujocoTask.expert`, e.g. "sim_adapters.mujoco.experts.ruler:ALIGN_WITH_RULER");
the shared machinery (caps, stops, the approach-and-grasp and push geometry) stays in
`pear_agent.policies.experts`, which the LIBERO expert and the chunking also use."""
