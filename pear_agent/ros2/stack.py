"""What every node of a pear-agent ROS 2 stack agrees on, declared once: the robot and the topics
they share. The agent (`settings.RosSettings`, `settings.AgentSettings`), the simulated robot
(`sim_robot_node`) and the YAM driver (`yam_driver_node`) take their defaults from here, so a stack
started with no parameter file talks on the same topics.

Light: pydantic only (a driver starts without loading kinematics or the loop)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

ROBOT = "yam_bimanual"
"""The robot every node of the stack describes (a name in robots/ or a path to a robot YAML)."""
JOINT_STATES_TOPIC = "/joint_states"
"""Where the robot's joint states are published (the joint_state_broadcaster's topic)."""
ESTOP_TOPIC = "/pear/estop"
"""std_msgs/Bool: true stops every arm (the agent and every driver listen)."""


def parameter_defaults(model: type[BaseModel]) -> dict[str, Any]:
    """A node's ROS parameters and their defaults, in its settings model's order."""
    return {name: f.default for name, f in model.model_fields.items()}


def parameter_descriptions(model: type[BaseModel]) -> dict[str, str]:
    """What `ros2 param describe` says of each parameter: its field's description."""
    return {name: f.description or "" for name, f in model.model_fields.items()}
