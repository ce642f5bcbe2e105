"""Reinforcement-learning data: rollout groups, advantages, trajectory records, curriculum, and a
skyrl-gym environment: the environment and data source a trainer (SkyRL, verl, TRL, or pear-agent's
own `pear_agent.train`) plugs in. Nothing here imports a simulator at module level."""
