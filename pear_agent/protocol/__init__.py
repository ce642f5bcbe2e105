"""The text protocol between a model and the runtime: state JSON, actions, prompts and messages."""

from pear_agent.protocol.actions import Action, ActionError, PartAction, action_schema, parse_reply
from pear_agent.protocol.state import PartPose, robot_state, state_json

__all__ = [
    "Action",
    "ActionError",
    "PartAction",
    "PartPose",
    "action_schema",
    "parse_reply",
    "robot_state",
    "state_json",
]
