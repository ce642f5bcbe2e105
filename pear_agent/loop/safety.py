"""Per-turn safety clipping, applied before IK on every backend (simulated or real).

A requested change is shortened to the part's per-turn caps, then the target is clipped into the
workspace box. Each clip is reported in words, so the model learns why it moved less than asked.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pear_agent.protocol.actions import PartAction
from pear_agent.protocol.state import PartPose
from pear_agent.robot.config import Part


@dataclass
class PartTarget:
    position_cm: np.ndarray
    orientation_rad: np.ndarray
    gripper: float | None
    moves_arm: bool
    notes: list[str] = field(default_factory=list)


def clip_target(name: str, part: Part, current: PartPose, action: PartAction) -> PartTarget:
    lim = part.limits
    notes: list[str] = []
    dpos = np.array(action.position_cm if action.position_cm is not None else [0.0] * 3, dtype=float)
    drot = np.array(action.orientation_rad if action.orientation_rad is not None else [0.0] * 3, dtype=float)
    norm = float(np.linalg.norm(dpos))
    if norm > lim.max_position_step_cm:
        dpos *= lim.max_position_step_cm / norm
        notes.append(f"{name} position change of {norm:.1f} cm shortened to {lim.max_position_step_cm:g} cm")
    if np.any(np.abs(drot) > lim.max_rotation_step_rad):
        notes.append(f"{name} orientation change clipped to +-{lim.max_rotation_step_rad:g} rad per axis")
        drot = np.clip(drot, -lim.max_rotation_step_rad, lim.max_rotation_step_rad)
    pos = current.position_cm + dpos
    for i, axis in enumerate("xyz"):
        lo, hi = lim.workspace_cm[axis]
        if not lo <= pos[i] <= hi:
            clipped = min(max(pos[i], lo), hi)
            notes.append(f"{name} {axis} = {pos[i]:.1f} cm is outside the workspace; clipped to {clipped:g}")
            pos[i] = clipped
    moves = action.position_cm is not None or action.orientation_rad is not None
    return PartTarget(pos, current.orientation_rad + drot, action.gripper, moves, notes)
