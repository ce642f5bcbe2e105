"""Thin entry points: the nodes live in the `pear_agent.ros2` package of pear-agent."""
