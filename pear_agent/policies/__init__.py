"""Policies answer a conversation with a reply string: models, scripted experts, replays."""

from pear_agent.policies.base import Policy, PolicyReply, TurnContext

__all__ = ["Policy", "PolicyReply", "TurnContext"]
