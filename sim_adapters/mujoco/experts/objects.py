"""The scripted expert of `pick_up_object/<name>`: one expert for every object, read from the
task's facts (the object's size, where its description says to grasp it, across which side).

Stateless like the others: above the grasp point with the fingers across the object's chosen side,
down to the grasp height (never the fingertips into the table), close, lift until the object's
lowest point is 10 cm (plus a margin) over the table. A fumbled grasp opens and retries.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pear_agent.policies.experts import (
    GraspWords,
    State,
    _act,
    _lowest_tcp_cm,
    approach_and_grasp,
    object_lost,
    stop,
    within_caps,
    wrap,
)

LIFT_MARGIN_CM = 1.5


def _close_yaw(close_yaw: float, current: float) -> float:
    """The tool yaw whose finger axis (tool y: yaw + pi/2 pointing down) lies along `close_yaw`,
    of the two (a two-finger grip is pi-periodic) the nearer to the current yaw."""
    options = close_yaw - np.pi / 2 + np.arange(-3, 4) * np.pi
    return float(options[np.argmin(np.abs(wrap(options - current)))])


def _holding(arm: dict[str, Any], grasp: dict[str, Any], touching: bool) -> bool:
    p, o = np.asarray(arm["position"], float), np.asarray(grasp["position_cm"], float)
    g = float(arm.get("gripper", 1.0))
    return touching and g < 0.85 and np.linalg.norm(p[:2] - o[:2]) < 3.0 and abs(p[2] - o[2]) < 4.0


def pick_up_object(state: State, priv: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    part = priv.get("part", "arm")
    arm = state[part]
    obj = priv["object"]
    what = str(obj.get("name", "object")).replace("_", " ")
    tool = priv.get("tool") or {}
    lost = object_lost(obj["position_cm"], priv, what)
    if lost:
        return stop(lost, [part])
    grasp = obj["grasp"]
    opening = tool.get("max_opening_cm")
    if opening is not None and float(grasp["width_cm"]) > float(opening) - 0.5:
        return stop(
            f"The {what} is {grasp['width_cm']:g} cm across and the gripper opens only {opening:g} cm", [part]
        )
    touching = bool((priv.get("touching") or {}).get(part))
    table_z = float(priv.get("table_z_cm") or tool.get("table_z_cm") or 0.0)
    if _holding(arm, grasp, touching):
        goal = table_z + float(priv["lift_cm"]) + LIFT_MARGIN_CM
        dz = goal - float(obj["bottom_cm"])
        return f"I hold the {what}; I lift it {dz:.1f} cm more.", {
            part: _act(np.array([0, 0, dz]), None, 0.0)
        }
    o = np.asarray(grasp["position_cm"], float)
    top = float(obj["bottom_cm"]) + float(obj["size_cm"][2])
    grasp_z = max(o[2], _lowest_tcp_cm(tool, table_z))
    hover_z = max(top + 6.0, grasp_z + 6.0)
    yaw = _close_yaw(float(grasp["close_yaw_rad"]), float(arm["orientation"][2]))
    width = float(grasp["width_cm"])
    words = GraspWords(
        reopen=f"The gripper is closed but does not hold the {what}; I open it and back off upwards.",
        rise=f"I am low and not above the {what}; I rise before moving sideways.",
        move=lambda dist: (
            f"The {what} is {dist:.1f} cm away; I move above it and turn the fingers "
            f"across its {width:g} cm side."
        ),
        turn=f"I am above the {what}; I turn the fingers across it.",
        lower=f"Aligned above the {what}; I lower the open gripper around it.",
        close=f"The {what} is between the fingers; I close the gripper.",
    )
    why, act = approach_and_grasp(arm, o, yaw, grasp_z, hover_z, top + 2.0, words)
    return why, {part: act}


OBJECT_EXPERT = within_caps(pick_up_object)
