"""The scripted expert of `align_with_ruler`: grasp the ruler's fin, push the ruler along its
edge's normal until the edge reaches the front-most block's rear face (every block then rests
against the straight edge, so their centres line up), let go, rise, and go home.

Stateless: each turn's phase comes from the geometry (the blocks in line or not, the ruler held or
not, where the arm is), so a slipped grip is retried. The ruler slides on the table; it is never
lifted, so the fingers only have to push it, along the closing direction.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pear_agent.policies.experts import State, _act, _lowest_tcp_cm, _rot_delta, within_caps, wrap

PUSH_STEP_CM = 4.0
ALIGNED_MARGIN = 0.6
BACK_OFF_CM = 2.5
RELEASE_OPENING = 0.6
"""Half open is enough to let go of the 1.2 cm fin, and keeps the fingers off the blocks."""


def _tool_yaw_for(close_yaw: float, current: float) -> float:
    """Tool yaw whose fingers (tool y) close along `close_yaw`, the nearer of the two to `current`."""
    options = close_yaw - np.pi / 2 + np.arange(-3, 4) * np.pi
    return float(options[np.argmin(np.abs(wrap(options - current)))])


def _go_home(state: State, priv: dict[str, Any], part: str) -> tuple[str, dict[str, Any]]:
    arm = state[part]
    p = np.asarray(arm["position"], float)
    home = np.asarray(priv["home_cm"][part], float)
    table_z = float(priv["table_z_cm"])
    if p[2] < table_z + 6.0 and np.linalg.norm(home[:2] - p[:2]) > 3.0:
        return "The ruler is released; I rise clear of it.", {part: _act(np.array([0, 0, 6.0]), None, None)}
    home_yaw = float(priv.get("home_yaw_rad", {}).get(part, arm["orientation"][2]))
    return "The blocks are in line and the ruler is released; I return the arm home.", {
        part: _act(home - p, _rot_delta(arm, home_yaw), 1.0)
    }


def align_with_ruler(state: State, priv: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    part = priv["part"]
    arm = state[part]
    p = np.asarray(arm["position"], float)
    g = float(arm.get("gripper", 1.0))
    ruler = priv["ruler"]
    tool = priv.get("tool") or {}
    table_z = float(priv["table_z_cm"])
    # a margin under the tolerance before letting go: a block still turning settles a little
    if priv["aligned"] and float(priv["line_deviation_cm"]) <= ALIGNED_MARGIN * float(
        priv["line_tolerance_cm"]
    ):
        if ruler["held"]:
            normal = np.asarray(ruler["normal"], float)
            edge = np.asarray(ruler["edge_mid_cm"], float)[:2]
            blocks = np.array([b["position_cm"][:2] for b in priv["blocks"].values()], float)
            gap = float(np.min(blocks @ normal) - float(priv["block_size_cm"]) / 2 - edge @ normal)
            if gap < BACK_OFF_CM - 0.5:
                # an opening finger sweeps past the edge: draw the ruler back off the blocks first
                back = (BACK_OFF_CM - gap) * normal
                return "The three blocks are in a straight line; I draw the ruler back off them.", {
                    part: _act(np.array([-back[0], -back[1], 0.0]), None, 0.0)
                }
            return "The three blocks are in a straight line; I let go of the ruler.", {
                part: _act(None, None, RELEASE_OPENING)
            }
        if g < RELEASE_OPENING - 0.1:
            return "I open the gripper a little more to let go of the ruler.", {
                part: _act(None, None, RELEASE_OPENING)
            }
        return _go_home(state, priv, part)
    fin = np.asarray(ruler["fin_cm"], float)
    normal = np.asarray(ruler["normal"], float)
    ruler_yaw = float(np.arctan2(normal[1], normal[0]))
    grasp_z = max(fin[2], _lowest_tcp_cm(tool, table_z + 0.5))
    if not ruler["held"]:
        # fingers close along the ruler's normal, across the fin
        yaw = _tool_yaw_for(ruler_yaw, float(arm["orientation"][2]))
        rot = _rot_delta(arm, yaw)
        hover_z = fin[2] + 7.0
        d = fin[:2] - p[:2]
        if g < 0.9:
            return "The gripper is closed on nothing; I open it and rise.", {
                part: _act(np.array([0, 0, max(0.0, min(6.0, hover_z - p[2]))]), None, 1.0)
            }
        if np.linalg.norm(d) > 0.8:
            if p[2] < fin[2] + 3.0:
                return "I am low and off the ruler's fin; I rise first.", {
                    part: _act(np.array([0, 0, hover_z - p[2]]), rot)
                }
            return f"The ruler's grip fin is {np.linalg.norm(d):.1f} cm away; I move above it.", {
                part: _act(np.array([d[0], d[1], hover_z - p[2]]), rot)
            }
        if max(abs(v) for v in rot) > 0.04:
            return "Above the fin; I turn the fingers across it.", {part: _act(None, rot)}
        if p[2] > grasp_z + 0.6:
            return "I lower the open gripper around the ruler's fin.", {
                part: _act(np.array([d[0], d[1], grasp_z - p[2]]), rot)
            }
        return "The fin is between my fingers; I close them on the ruler.", {part: _act(None, None, 0.0)}
    # holding the ruler: push it along its own normal (any straight edge lines the blocks up, so
    # it is never turned in the grip); before it touches a block, slide it sideways to centre it
    side = np.array([-normal[1], normal[0]])
    half = float(priv["block_size_cm"]) / 2
    blocks = np.array([b["position_cm"][:2] for b in priv["blocks"].values()], float)
    edge = np.asarray(ruler["edge_mid_cm"], float)[:2]
    s_edge = float(edge @ normal)
    rears = blocks @ normal - half
    s_rear, s_front = float(rears.min()), float(rears.max())
    lateral = float(np.mean(blocks @ side) - edge @ side) if s_edge < s_rear - 0.5 else 0.0
    step = min(s_front + 0.3 - s_edge, PUSH_STEP_CM)
    if step <= 0.1:
        step = 0.5  # every block should touch the edge by now: a little further straightens a turned one
    move = np.array([*(step * normal + lateral * side), grasp_z - p[2]])
    return (
        f"I hold the ruler; I push its edge {step:.1f} cm forward so every block comes to rest against it.",
        {part: _act(move, None, 0.0)},
    )


ALIGN_WITH_RULER = within_caps(align_with_ruler)
