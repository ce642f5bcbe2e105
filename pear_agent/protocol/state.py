"""The state JSON a model sees each turn: every quantity of every part, in the robot's units."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # the protocol renders poses; it never solves them (Pinocchio stays with the robot)
    from pear_agent.robot.backend import Observation
    from pear_agent.robot.kinematics import Kinematics, Pose


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


# -- the compact observation (`--observation compact`): a few integer fields per part ------------
COMPACT_FIELDS = ("x", "y", "z", "roll", "pitch", "yaw", "grip")
"""Per part: tool point x, y, z in cm; orientation roll, pitch, yaw in degrees; gripper 1 open, 0
closed (rounded); all integers."""


def _int(v: float) -> int:
    return round(float(v)) + 0  # no "-0"


def compact_state(state: dict[str, PartPose]) -> str:
    """The state in one line, integer fields: `arm x=52 y=-3 z=15 roll=180 pitch=0 yaw=30 grip=1`
    (several parts: `; `-separated)."""
    out = []
    for name, p in state.items():
        deg = np.degrees(np.asarray(p.orientation_rad, float))
        bits = [f"{k}={_int(v)}" for k, v in zip(("x", "y", "z"), p.position_cm, strict=True)]
        bits += [f"{k}={_int(v)}" for k, v in zip(("roll", "pitch", "yaw"), deg, strict=True)]
        if p.gripper is not None:
            bits.append(f"grip={_int(p.gripper)}")
        out.append(f"{name} " + " ".join(bits))
    return "; ".join(out)


def parse_compact_state(line: str) -> dict[str, dict[str, int]]:
    """`compact_state`'s line back: part -> {field: integer}; ValueError naming what is wrong."""
    out: dict[str, dict[str, int]] = {}
    for chunk in line.split(";"):
        words = chunk.split()
        if not words:
            continue
        name, fields = words[0], {}
        for w in words[1:]:
            key, sep, value = w.partition("=")
            if not sep or key not in COMPACT_FIELDS:
                raise ValueError(f"not a compact state field: {w!r}")
            fields[key] = int(value)
        out[name] = fields
    if not out:
        raise ValueError("no part in the compact state line")
    return out


def compact_scene(privileged: dict[str, Any]) -> str:
    """The objects' positions as integer cm, one `name x= y= z=` per object (`--scene-facts` with
    the compact observation)."""
    out = []
    for key, value in _scene_value(privileged).items():
        if not isinstance(value, dict):
            continue
        pos = next((v for k, v in value.items() if k.startswith("position") and k.endswith("_cm")), None)
        if isinstance(pos, list) and len(pos) == 3:
            out.append(
                f"{value.get('name', key)} "
                + " ".join(f"{a}={_int(v)}" for a, v in zip("xyz", pos, strict=True))
            )
    return "; ".join(out)


Relative = dict[str, dict[str, dict[str, Any]]]
"""object -> part -> {"move_cm": [dx, dy, dz], "turn_rad": dyaw (where the object has a yaw)}."""


def _half_turn(rad: float) -> float:
    """An angle wrapped to [-pi/2, pi/2): a two-finger grip turned half a turn is the same grip."""
    return (rad + math.pi / 2) % math.pi - math.pi / 2


def relative_positions(privileged: dict[str, Any], state: dict[str, PartPose]) -> Relative:
    """Each object relative to each part's tool point (`--scene-relative`), in the action's units:
    `move_cm`, the object's position minus the tool point's (the move that brings the tool point
    onto it), and, where the facts give the object's yaw, `turn_rad`, the smallest yaw turn that
    lines the tool up with it (wrapped to [-pi/2, pi/2)). The objects are `compact_scene`'s (the
    scene facts' entries with a position)."""
    out: Relative = {}
    for key, value in _scene_value(privileged).items():
        if not isinstance(value, dict):
            continue
        pos = next((v for k, v in value.items() if k.startswith("position") and k.endswith("_cm")), None)
        if not (isinstance(pos, list) and len(pos) == 3):
            continue
        parts: dict[str, dict[str, Any]] = {}
        for part, p in state.items():
            rel: dict[str, Any] = {
                "move_cm": [
                    round(float(o) - float(t), 1) + 0.0 for o, t in zip(pos, p.position_cm, strict=True)
                ]
            }
            if isinstance(value.get("yaw_rad"), float | int):
                rel["turn_rad"] = (
                    round(_half_turn(float(value["yaw_rad"]) - float(p.orientation_rad[2])), 2) + 0.0
                )
            parts[part] = rel
        out[str(value.get("name", key))] = parts
    return out


def relative_json(relative: Relative) -> str:
    """`relative_positions` as JSON, for the full observation's `Relative:` line."""
    return json.dumps(relative)


def compact_relative(relative: Relative) -> str:
    """`relative_positions` as one `<object> from <part> dx= dy= dz= dyaw=` per object and part
    (dx dy dz integer cm, dyaw rad to 0.01, where known), `; `-separated (the compact observation's
    line with `--scene-relative`)."""
    out = []
    for name, parts in relative.items():
        for part, rel in parts.items():
            bits = [f"d{a}={_int(v)}" for a, v in zip("xyz", rel["move_cm"], strict=True)]
            if "turn_rad" in rel:
                bits.append(f"dyaw={rel['turn_rad']:.2f}")
            out.append(f"{name} from {part} " + " ".join(bits))
    return "; ".join(out)


def parse_compact_relative(line: str) -> dict[tuple[str, str], dict[str, float]]:
    """`compact_relative`'s line back: (object, part) -> {"dx": .., "dy": .., "dz": .., "dyaw": ..};
    ValueError naming what is wrong."""
    out: dict[tuple[str, str], dict[str, float]] = {}
    for chunk in line.split(";"):
        words = chunk.split()
        if not words:
            continue
        if len(words) < 6 or words[1] != "from":
            raise ValueError(f"not a relative line: {chunk.strip()!r}")
        fields = {}
        for w in words[3:]:
            key, sep, value = w.partition("=")
            if not sep or key not in ("dx", "dy", "dz", "dyaw"):
                raise ValueError(f"not a relative field: {w!r}")
            fields[key] = float(value)
        out[(words[0], words[2])] = fields
    if not out:
        raise ValueError("no object in the relative line")
    return out
