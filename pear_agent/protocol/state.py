"""The state JSON a model sees each turn: every quantity of every part, in the robot's units."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from pear_agent.backend import Observation
from pear_agent.kinematics import Kinematics, Pose


@dataclass
class PartPose:
    """One part's end-effector state in protocol units (cm, rad, [0, 1])."""

    position_cm: np.ndarray
    orientation_rad: np.ndarray
    gripper: float | None
    pose: Pose

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "position": [round(float(v), 1) + 0.0 for v in self.position_cm],
            "orientation": [round(float(v), 2) + 0.0 for v in self.orientation_rad],
        }
        if self.gripper is not None:
            out["gripper"] = round(float(self.gripper), 2)
        return out


def robot_state(obs: Observation, kin: Kinematics) -> dict[str, PartPose]:
    state: dict[str, PartPose] = {}
    for name, part in kin.robot.parts.items():
        pose = kin.fk(name, obs.joints_rad[name])
        grip = obs.gripper.get(name) if part.gripper is not None else None
        state[name] = PartPose(pose.position_m * 100.0, pose.rpy, grip, pose)
    return state


def state_json(state: dict[str, PartPose]) -> str:
    return json.dumps({name: p.to_json() for name, p in state.items()})
