"""Reinforcement-learning data: rollout groups, advantages, trajectory records, curriculum, and a
skyrl-gym environment. pear-agent does not train models; it is the environment and data source a
trainer (SkyRL, verl, TRL) plugs in. Nothing here imports a simulator at module level."""
