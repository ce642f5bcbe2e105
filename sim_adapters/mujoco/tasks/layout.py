"""Where a task puts its objects on a given robot: a frame on the table derived from the robot's own
geometry (each arm's base and home pose as the compiled model places them, its workspace box, the
table's task area), so placements written once hold for any robot, in any layout and heading.

A task writes its placements in the coordinates of the robot it was first tuned on (the Panda for
the single-arm tasks, the YAM station for the dual-arm ones): a reference region with a centre, a
depth (away from the robot) and a width (across it). `TableFrame.place` maps such a point into this
robot's region: the same fraction of the depth along the robot's forward direction, the same
fraction of the width along its left. For the reference robot the map is the identity.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pear_agent.robot.config import RobotConfig
from pear_agent.robot.model import ee_site_name
from sim_adapters.mujoco.lazy_mujoco import mujoco

Box = tuple[tuple[float, float], tuple[float, float]]
"""An axis-aligned rectangle on the table, ((x_lo, x_hi), (y_lo, y_hi)) in metres."""


def rot90(v: np.ndarray) -> np.ndarray:
    """`v` turned +90 deg about z (forward -> left)."""
    return np.array([-v[1], v[0]])


def _unit(v: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    n = float(np.linalg.norm(v))
    return v / n if n > 1e-6 else fallback


def snap_to_axis(v: np.ndarray) -> np.ndarray:
    """The world axis direction (+-x, +-y) nearest to `v`."""
    i = int(np.argmax(np.abs(v)))
    out = np.zeros(2)
    out[i] = 1.0 if v[i] >= 0 else -1.0
    return out


def extent_along(box: Box, direction: np.ndarray) -> float:
    """How long the rectangle is along a unit direction (its projection's length)."""
    (x0, x1), (y0, y1) = box
    return abs(direction[0]) * (x1 - x0) + abs(direction[1]) * (y1 - y0)


@dataclass(frozen=True)
class ArmPlace:
    """One arm as the compiled model places it at home: where its first joint stands, which way
    its tool points about the vertical, and its workspace box (metres, base frame)."""

    part: str
    base_xy_m: np.ndarray
    home_tool_m: np.ndarray
    home_yaw_rad: float
    workspace_m: np.ndarray  # (3, 2): x, y, z lower and upper bounds
    yaw_offsets_rad: tuple[float, float] | None = None
    """How far the tool's yaw can turn from its home yaw, down and up, by the last joint alone
    where that joint rolls the tool about its axis and is limited (None: unlimited or unknown)."""

    def reach_box(self) -> Box:
        w = self.workspace_m
        return (float(w[0, 0]), float(w[0, 1])), (float(w[1, 0]), float(w[1, 1]))


def arm_places(model: mujoco.MjModel, data: mujoco.MjData, robot: RobotConfig) -> dict[str, ArmPlace]:
    """Every arm part's place, from the model at the pose `data` holds (the backend sets home
    before a task's reset). Runs the forward kinematics itself."""
    mujoco.mj_kinematics(model, data)
    out = {}
    for name, part in robot.parts.items():
        jid = model.joint(part.joints[0]).id
        site = data.site(ee_site_name(name))
        rot = site.xmat.reshape(3, 3)
        box = part.limits.workspace_cm
        out[name] = ArmPlace(
            part=name,
            base_xy_m=np.array(data.xanchor[jid][:2], dtype=float),
            home_tool_m=np.array(site.xpos, dtype=float),
            home_yaw_rad=float(np.arctan2(rot[1, 0], rot[0, 0])),
            workspace_m=np.array([box[a] for a in "xyz"], dtype=float) / 100.0,
            yaw_offsets_rad=_wrist_yaw_offsets(model, data, part.joints[-1], rot[:, 2]),
        )
    return out


def _wrist_yaw_offsets(
    model: mujoco.MjModel, data: mujoco.MjData, joint: str, tool_z: np.ndarray
) -> tuple[float, float] | None:
    """The last joint's room, as tool yaw: when it turns the tool about the tool's own axis (a
    wrist roll) and has limits, turning it by dq turns a pointing-down tool's yaw by -+dq."""
    j = model.joint(joint)
    if not j.limited[0] or j.type[0] != mujoco.mjtJoint.mjJNT_HINGE:
        return None
    align = float(data.xaxis[j.id] @ tool_z)
    if abs(align) < 0.95:
        return None
    q = float(data.qpos[j.qposadr[0]])
    lo, hi = (float(v) for v in j.range)
    # a pointing-down tool (z down) turns its yaw against a rotation about its own z
    sign = -float(np.sign(align)) * float(np.sign(-tool_z[2]) or 1.0)
    a, b = sign * (lo - q), sign * (hi - q)
    return (min(a, b), max(a, b))


@dataclass(frozen=True)
class TableFrame:
    """A frame on the table top: `centre_m` of the region a task works in, `forward` (unit, away
    from the robot), `left` = forward turned +90 deg; `depth_m` and `width_m` are the region's
    extents along them; `z_m` is the table top."""

    centre_m: np.ndarray
    forward: np.ndarray
    depth_m: float
    width_m: float
    z_m: float
    ref_centre_m: tuple[float, float]
    ref_depth_m: float
    ref_width_m: float
    mirrored: bool = False
    """The `layout` perturbation: `left` points right, so every placement (and yaw) is mirrored
    across the region's centre line (`sim_adapters/mujoco/perturb.py`)."""

    @property
    def left(self) -> np.ndarray:
        return -rot90(self.forward) if self.mirrored else rot90(self.forward)

    @property
    def heading_rad(self) -> float:
        return float(np.arctan2(self.forward[1], self.forward[0]))

    def at(self, u_m: float, v_m: float) -> np.ndarray:
        """The table point `u_m` ahead of the centre and `v_m` to its left (xy, metres)."""
        return self.centre_m + u_m * self.forward + v_m * self.left

    def uv(self, xy: np.ndarray) -> tuple[float, float]:
        d = np.asarray(xy[:2], dtype=float) - self.centre_m
        return float(d @ self.forward), float(d @ self.left)

    def place(self, x_ref: float, y_ref: float) -> np.ndarray:
        """A point written for the reference robot (its x forward, y left) in this robot's region."""
        u = (x_ref - self.ref_centre_m[0]) * self.depth_m / self.ref_depth_m
        v = (y_ref - self.ref_centre_m[1]) * self.width_m / self.ref_width_m
        return self.at(u, v)

    def sample(
        self, rng: np.random.Generator, x_ref: tuple[float, float], y_ref: tuple[float, float]
    ) -> np.ndarray:
        """A uniform point of a reference rectangle, mapped (two draws, x then y)."""
        return self.place(rng.uniform(*x_ref), rng.uniform(*y_ref))

    def scale(self, axis: int) -> float:
        """How much bigger this region is than the reference along depth (0) or width (1)."""
        return self.depth_m / self.ref_depth_m if axis == 0 else self.width_m / self.ref_width_m

    def yaw(self, local_rad: float) -> float:
        """A yaw written for the reference robot (0 = along its x) in this frame."""
        return self.heading_rad + (-local_rad if self.mirrored else local_rad)


def _intersect(a: Box, b: Box) -> Box | None:
    x0, x1 = max(a[0][0], b[0][0]), min(a[0][1], b[0][1])
    y0, y1 = max(a[1][0], b[1][0]), min(a[1][1], b[1][1])
    return ((x0, x1), (y0, y1)) if x0 < x1 and y0 < y1 else None


def _own_side(box: Box, own: np.ndarray, others: list[np.ndarray]) -> Box:
    """The part of the rectangle nearer to `own` base than to each other base, cut along the axis
    that separates them most (so it stays a rectangle)."""
    for other in others:
        axis = int(np.argmax(np.abs(own - other)))
        mid = float(own[axis] + other[axis]) / 2
        lo, hi = box[axis]
        lo, hi = (max(lo, mid), hi) if own[axis] > other[axis] else (lo, min(hi, mid))
        if lo < hi:
            box = ((lo, hi), box[1]) if axis == 0 else (box[0], (lo, hi))
    return box


def task_area_box(robot: RobotConfig) -> Box:
    t = robot.table_or_default()
    assert t.task_area_cm is not None
    (x0, x1), (y0, y1) = t.task_area_cm["x"], t.task_area_cm["y"]
    return (x0 / 100, x1 / 100), (y0 / 100, y1 / 100)


def table_z_m(robot: RobotConfig) -> float:
    z = robot.table_or_default().surface_z_cm
    assert z is not None
    return z / 100.0


def single_arm_frame(
    robot: RobotConfig,
    places: dict[str, ArmPlace],
    part: str,
    ref: Box,
) -> TableFrame:
    """The region one arm works in: the task area, within the arm's workspace box and, on a robot
    with several arms, on this arm's side (nearer its base than another's, clear of the others);
    forward is the axis from the base towards that region."""
    own = places[part]
    area = task_area_box(robot)
    region = _intersect(area, own.reach_box()) or area
    others = [p.base_xy_m for n, p in places.items() if n != part]
    region = _own_side(region, own.base_xy_m, others)
    centre = _centre(region)
    forward = snap_to_axis(_unit(centre - own.base_xy_m, np.array([1.0, 0.0])))
    return _frame(robot, region, centre, forward, ref)


def _centre(box: Box) -> np.ndarray:
    return np.array([(box[0][0] + box[0][1]) / 2, (box[1][0] + box[1][1]) / 2])


def _frame(robot: RobotConfig, region: Box, centre: np.ndarray, forward: np.ndarray, ref: Box) -> TableFrame:
    """The frame over `region` looking along `forward`, mapping the reference box `ref` into it."""
    (rx0, rx1), (ry0, ry1) = ref
    return TableFrame(
        centre_m=centre,
        forward=forward,
        depth_m=extent_along(region, forward),
        width_m=extent_along(region, rot90(forward)),
        z_m=table_z_m(robot),
        ref_centre_m=((rx0 + rx1) / 2, (ry0 + ry1) / 2),
        ref_depth_m=rx1 - rx0,
        ref_width_m=ry1 - ry0,
    )


@dataclass(frozen=True)
class TwoArmLayout:
    """Two arms and the frame between them: `roles` maps left_arm / right_arm to part names (the
    left arm is on the left looking along `frame.forward`); `frame.left` points from the right
    arm's base towards the left one's; objects that need both hands lie along it."""

    roles: dict[str, str]
    places: dict[str, ArmPlace]
    frame: TableFrame

    def place_of(self, role: str) -> ArmPlace:
        return self.places[self.roles[role]]


def two_arm_layout(robot: RobotConfig, places: dict[str, ArmPlace], ref: Box) -> TwoArmLayout:
    """The frame of a two-arm task from the first two gripper arms' bases and the task area.

    The bases' line is the frame's width axis; forward is perpendicular to it, towards the task
    area's centre from the midpoint of the bases. Where the centre lies on that line (arms facing
    each other across the table) forward is either perpendicular, and the first gripper part is
    the left arm."""
    a, b = robot.gripper_parts()[:2]
    pa, pb = places[a].base_xy_m, places[b].base_xy_m
    area = task_area_box(robot)
    centre = _centre(area)
    axis = _unit(pa - pb, np.array([0.0, 1.0]))  # b -> a
    mid = (pa + pb) / 2
    off = centre - mid
    perp = off - (off @ axis) * axis
    if np.linalg.norm(perp) > 0.02:
        forward = _unit(perp, rot90(axis))
        # the left arm is the one on forward's left
        left, right = (a, b) if (pa - mid) @ rot90(forward) > 0 else (b, a)
    else:
        left, right = a, b
        forward = -rot90(axis)  # so that left = rot90(forward) = axis points at part a
    frame = _frame(robot, area, centre, forward, ref)
    return TwoArmLayout({"left_arm": left, "right_arm": right}, places, frame)
