"""Scripted experts for the dual-arm tasks. Like the single-arm ones they are stateless: each turn
every arm's phase is read from the geometry (privileged facts), so a slipped grasp or a block
knocked askew is simply retried. They think in roles (left_arm, right_arm; the task says which
part plays which), take every height from the table top and each gripper's geometry, keep each
arm's moves within its caps (`within_caps`), and stop when the object has left the table or both
arms' reach. Units are the protocol's: cm and rad, robot base frame.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from pear_agent.policies.experts import (
    Expert,
    State,
    _act,
    _lowest_tcp_cm,
    _rot_delta,
    object_lost,
    push_line,
    stop,
    within_caps,
    wrap,
)

ARMS = ("left_arm", "right_arm")
# Without the task's own figures: the YAM station's (pointing down, these yaws leave each wrist
# mid-range; the idle arms wait near home)
PREFERRED_YAW = {"left_arm": np.pi / 2, "right_arm": -np.pi / 2}
PARK_CM = {"left_arm": np.array([22.0, -10.0, 12.0]), "right_arm": np.array([22.0, -51.0, 12.0])}
MIDDLE_BAND_CM = 9.0


YAW_MARGIN_RAD = 0.25
"""How close to the end of its wrist's room an arm is asked to turn."""


def _yaw_mod_pi(target: float, preferred: float, offsets: list[float] | None = None) -> float:
    """Of `target + k*pi` (a two-finger grip is pi-periodic), the yaw closest to the preferred one
    among those the wrist can turn to (`offsets`: its room below and above the preferred yaw)."""
    options = target + np.arange(-3, 4) * np.pi
    dist = np.abs(wrap(options - preferred))
    if offsets is not None:
        lo, hi = offsets[0] + YAW_MARGIN_RAD, offsets[1] - YAW_MARGIN_RAD
        d = wrap(options - preferred)
        inside = np.array([any(lo <= v + k * 2 * np.pi <= hi for k in (-1, 0, 1)) for v in d])
        if inside.any():
            dist = np.where(inside, dist, np.inf)
    return float(options[np.argmin(dist)])


def _near(arm: dict[str, Any], point: np.ndarray, xy_cm: float = 2.5, z_cm: float = 3.0) -> bool:
    p = np.asarray(arm["position"], float)
    return bool(np.linalg.norm(p[:2] - point[:2]) < xy_cm and abs(p[2] - point[2]) < z_cm)


def _table_z(tool: dict[str, Any]) -> float:
    return float(tool.get("table_z_cm") or 0.0)


def _grasp_bar_end(
    arm: dict[str, Any],
    point: np.ndarray,
    bar_yaw: float,
    half_h: float,
    preferred_yaw: float,
    tool: dict[str, Any],
    offsets: list[float] | None = None,
) -> tuple[str, dict]:
    """Open gripper: above the grasp point, fingers across the bar, descend, close."""
    p = np.asarray(arm["position"], float)
    hover_z = point[2] + half_h + 7.0
    # the pads cover the bar with the fingertips just above the table
    grasp_z = max(point[2] - half_h + 0.8, _lowest_tcp_cm(tool, _table_z(tool)))
    # fingers close along the tool's y axis, which is (-sin yaw, cos yaw) when pointing down; the
    # bar's long axis is its own y: a tool yaw of bar_yaw + pi/2 puts the fingers across the bar
    yaw = _yaw_mod_pi(bar_yaw + np.pi / 2, preferred_yaw, offsets)
    rot = _rot_delta(arm, yaw)
    dxy = point[:2] - p[:2]
    g = float(arm.get("gripper", 1.0))
    if g < 0.9:
        up = max(0.0, min(6.0, hover_z - p[2]))
        return "closed on nothing; I open and back off upwards", _act(np.array([0, 0, up]), None, 1.0)
    if np.linalg.norm(dxy) > 0.8:
        if p[2] < point[2] + half_h + 3.0:
            return "low and off the grasp point; I rise first", _act(np.array([0, 0, hover_z - p[2]]), rot)
        return (
            f"{np.linalg.norm(dxy):.1f} cm from my end of the bar; I move above it, fingers across the bar",
            _act(np.array([dxy[0], dxy[1], hover_z - p[2]]), rot),
        )
    if max(abs(v) for v in rot) > 0.04:
        return "above my end of the bar; I turn the fingers across it", _act(None, rot)
    if p[2] > grasp_z + 0.6:
        return "aligned; I lower the open gripper around the bar", _act(
            np.array([dxy[0], dxy[1], grasp_z - p[2]]), rot
        )
    return "the bar is between my fingers; I close them", _act(None, None, 0.0)


def _by_role(state: State, priv: dict[str, Any]) -> tuple[State, dict[str, str]]:
    """The task names which part plays the left and which the right arm (`arms`); the expert
    thinks in roles and answers with part names."""
    roles = dict(priv.get("arms") or {a: a for a in ARMS})
    return {a: state[p] for a, p in roles.items()}, roles


def _named(action: dict[str, Any], roles: dict[str, str]) -> dict[str, Any]:
    out = {roles[a]: act for a, act in action.items()}
    return type(action)(out) if type(action) is not dict else out


def _in_roles(expert: Expert) -> Expert:
    """An expert that thinks in roles (`ARMS`), answering with the robot's part names."""

    @functools.wraps(expert)
    def by_part(state: State, priv: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        by_role, roles = _by_role(state, priv)
        why, action = expert(by_role, priv)
        return why, _named(action, roles)

    return by_part


def _tool(priv: dict[str, Any], role: str) -> dict[str, Any]:
    return (priv.get("tool") or {}).get(role) or {}


def _preferred_yaw(priv: dict[str, Any], role: str) -> float:
    return float((priv.get("preferred_yaw_rad") or PREFERRED_YAW)[role])


def _yaw_offsets(priv: dict[str, Any], role: str) -> list[float] | None:
    return (priv.get("yaw_offsets_rad") or {}).get(role)


def _bimanual_pickup(state: State, priv: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    obj = priv["object"]
    lost = object_lost(obj["position_cm"], priv, "bar")
    if lost:
        return stop(lost, list(ARMS))
    half_h = float(obj["size_cm"][2]) / 2
    points = {a: np.asarray(p, float) for a, p in priv["grasp_points_cm"].items()}
    holding = {
        a: 0.15 < float(state[a].get("gripper", 1.0)) < 0.85
        and _near(state[a], points[a])
        and bool(priv["touching"].get(a))
        for a in ARMS
    }
    if all(holding.values()):
        goal_z = priv["object_start_z_cm"] + priv["lift_cm"] + 3.0
        # both hands by the same height, within the tighter of the two caps, so the bar stays level
        caps = [float(_tool(priv, a).get("max_step_cm") or 99.0) - 0.01 for a in ARMS]
        dz = float(np.clip(goal_z - float(obj["position_cm"][2]), 0.0, min(6.0, *caps)))
        return (
            f"Both hands hold the bar; I lift both by {dz:.1f} cm together so it stays level.",
            {a: _act(np.array([0.0, 0.0, dz]), None, 0.0) for a in ARMS},
        )
    action: dict[str, Any] = {}
    notes = []
    for a in ARMS:
        if holding[a]:
            notes.append(f"{a}: holding, waiting for the other hand")
            continue
        why, act = _grasp_bar_end(
            state[a],
            points[a],
            float(obj["yaw_rad"]),
            half_h,
            _preferred_yaw(priv, a),
            _tool(priv, a),
            _yaw_offsets(priv, a),
        )
        notes.append(f"{a}: {why}")
        if act:
            action[a] = act
    return "; ".join(notes) + ".", action


def _push(
    arm: dict[str, Any],
    obj: dict[str, Any],
    target_xy: np.ndarray,
    preferred_yaw: float,
    tool: dict[str, Any],
    offsets: list[float] | None = None,
) -> tuple[str, dict[str, Any]]:
    """One pushing move of a block's centre towards `target_xy` with the closed fingers."""
    p = np.asarray(arm["position"], float)
    o = np.asarray(obj["position_cm"], float)
    size = float(obj["size_cm"])
    table_z = _table_z(tool)
    dist, u, push_z, along, lateral, grip = push_line(arm, o, target_xy, tool, table_z)
    standoff = size / 2 + 3.0
    hover_z = table_z + size + 3.5
    # push with the broad outside face of the closed fingers: the tool's y axis along the push
    yaw = _yaw_mod_pi(float(np.arctan2(u[1], u[0])) + np.pi / 2, preferred_yaw, offsets)
    rot = _rot_delta(arm, yaw)
    in_line = lateral < 1.0 and -(standoff + 1.5) < along < -(size / 2 - 0.5)
    if in_line and p[2] < push_z + 1.0:
        gap = max(0.0, -along - size / 2 - 1.2)
        step = min(dist + gap - 0.3, gap + 4.0)
        return f"behind the block, {dist:.1f} cm to go; I push {step:.1f} cm", _act(
            np.append(u * step, 0.0), None, grip
        )
    if p[2] < table_z + size + 3.0:
        return "low but not lined up behind the block; I rise", _act(
            np.array([0, 0, hover_z - p[2]]), None, grip
        )
    pre = o[:2] - u * standoff
    d = pre - p[:2]
    if np.linalg.norm(d) > 0.8 or max(abs(v) for v in rot) > 0.05:
        return "I move above the point behind the block", _act(
            np.array([d[0], d[1], hover_z - p[2]]), rot, grip
        )
    return "above the pushing point; I lower the fingers to the table", _act(
        np.array([d[0], d[1], push_z - p[2]]), None, grip
    )


def _align_blocks(state: State, priv: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    line = priv["line"]
    point = np.asarray(line["point_cm"], float)[:2]
    along = np.asarray(line["direction"], float)  # from the right arm's side to the left's
    across = np.asarray(line["normal"], float)
    tol = float(line["tolerance_cm"]) * 0.5
    park = {a: np.asarray(p, float) for a, p in (priv.get("park_cm") or PARK_CM).items()}
    todo: dict[str, list[tuple[str, dict[str, Any]]]] = {a: [] for a in ARMS}
    objects = priv["objects"]
    for name, obj in objects.items():
        lost = object_lost(obj["position_cm"], priv, name.replace("_", " "))
        if lost:
            return stop(lost, list(ARMS))

    def along_line(obj: dict[str, Any]) -> float:
        return float((np.asarray(obj["position_cm"], float)[:2] - point) @ along)

    for name, obj in sorted(objects.items(), key=lambda kv: -along_line(kv[1])):  # left to right
        o = np.asarray(obj["position_cm"], float)[:2]
        if abs(float((o - point) @ across)) > tol:
            todo["left_arm" if (o - point) @ along > 0 else "right_arm"].append((name, obj))
    # the block nearest each arm's own base first, so the arms stay apart
    jobs = {a: (todo[a][0] if a == "left_arm" else todo[a][-1]) if todo[a] else None for a in ARMS}
    in_middle = {a: jobs[a] is not None and abs(along_line(jobs[a][1])) < MIDDLE_BAND_CM for a in ARMS}
    # the middle of the table is shared: an arm whose next block is there waits until the other
    # arm is done; when both arms' next blocks are there, the left arm goes first (both waited for
    # ever before, holding still, until the episode ran out of turns)
    first = "left_arm" if all(in_middle.values()) else None
    action: dict[str, Any] = {}
    notes = []
    for a in ARMS:
        arm = state[a]
        tool = _tool(priv, a)
        table_z = _table_z(tool)
        other = ARMS[1 - ARMS.index(a)]
        job = jobs[a]
        if job is not None and todo[other] and in_middle[a] and a != first:
            job = None  # wait for the other arm
        if job is None:
            p = np.asarray(arm["position"], float)
            d = park[a] - p
            if np.linalg.norm(d) > 1.5:
                if p[2] < table_z + 6.0:
                    d = np.array([0.0, 0.0, table_z + 8.0 - p[2]])
                action[a] = _act(d, _rot_delta(arm, _preferred_yaw(priv, a)))
                notes.append(f"{a}: nothing for me to push now; I move out of the way")
            continue
        name, obj = job
        o = np.asarray(obj["position_cm"], float)[:2]
        target = o - float((o - point) @ across) * across  # the block's foot on the line
        why, act = _push(arm, obj, target, _preferred_yaw(priv, a), tool, _yaw_offsets(priv, a))
        notes.append(f"{a} ({name.replace('_', ' ')}): {why}")
        if act:
            action[a] = act
    return "; ".join(notes) + ".", action


bimanual_pickup = within_caps(_in_roles(_bimanual_pickup))
align_blocks = within_caps(_in_roles(_align_blocks))
