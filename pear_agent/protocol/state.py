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


# privileged facts that are bookkeeping for scripted experts or success checks, not scene geometry
_NOT_SCENE = {"task", "tool", "touching", "grasp_points_cm", "object_start_z_cm", "lift_cm"}
_SCENE_UNITS = ("_cm", "_rad", "_cm_s")


def _scene_value(value: Any) -> Any:
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in _NOT_SCENE:
                continue
            kept = _scene_value(v) if isinstance(v, dict) else v
            if isinstance(v, dict) and kept:
                out[k] = kept
            elif k == "name" or (k.endswith(_SCENE_UNITS) and not isinstance(v, dict)):
                out[k] = _rounded(v)
        return out
    return value


def _rounded(v: Any) -> Any:
    if isinstance(v, float | np.floating):
        return round(float(v), 2)
    if isinstance(v, list | tuple | np.ndarray):
        return [_rounded(x) for x in v]
    return v


def scene_facts(privileged: dict[str, Any]) -> str:
    """The objects' geometry from a simulator's privileged facts, as compact JSON for a text-only
    model (`--scene-facts`). Only unit-named quantities (`*_cm`, `*_rad`, `*_cm_s`) and names are
    kept; expert bookkeeping (grasp points, contacts, lift goals) is left out."""
    return json.dumps(_scene_value(privileged))
