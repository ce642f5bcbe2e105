"""Policies answer a conversation with a reply string: models, scripted experts, replays.

The package imports nothing itself: the LeRobot server (`pear_agent.policies.lerobot.server`) runs
in LeRobot's own environment, where only the standard library, numpy, torch and lerobot stand. The
policy contract is `pear_agent.policies.base` (`Policy`, `PolicyReply`, `TurnContext`)."""
