"""Dual-arm tabletop tasks for the YAM station: lift a long bar with both arms, line up blocks.

`bimanual_pickup` needs both arms by construction: success asks for the bar lifted 10 cm *and*
level *and* held by both grippers, so lifting one end with one arm does not count.
`align_blocks` spreads three blocks across the table, between the arms; each arm pushes the blocks
on its side onto a painted line.
"""

from __future__ import annotations

from typing import Any

import mujoco
import numpy as np

from pear_agent.robot_config import RobotConfig
from sim_adapters.mujoco.tasks.base import (
    TWO_ARMS,
    MujocoTask,
    TaskArea,
    add_free_box,
    body_speed,
    body_yaw,
    geoms_touch,
    set_free_pose,
)

ARMS = ("left_arm", "right_arm")
"""Roles; a robot's two gripper arms take them by where their workspaces lie (left = larger y)."""
CENTER_Y_M = -0.305  # halfway between the two bases
# The placements below were written for the YAM station's task area; `TaskArea` maps them into
# any two-arm robot's `table.task_area_cm` (identity for the YAM station).
REF_X_M, REF_Y_M = (0.16, 0.32), (-0.55, -0.06)


def _cm(v: np.ndarray) -> list[float]:
    return [round(float(x) * 100.0, 2) for x in v]


def _finger_geoms(model: mujoco.MjModel, joints: list[str]) -> set[int]:
    bodies = {int(model.joint(j).bodyid[0]) for j in joints}
    return {g for g in range(model.ngeom) if int(model.geom_bodyid[g]) in bodies}


# The i2rt finger meshes are L-shaped; MuJoCo collides their convex hulls, which fill the space
# between the pads and wedge a held object out. Each finger collides through a box on its pad
# instead (measured from the tip meshes, in the tip body's frame), the mesh stays visual.
PAD_CENTER_M = (0.024, -0.0495, -0.0731)
PAD_HALF_M = (0.02, 0.005, 0.017)


def _pad_fingers(spec: mujoco.MjSpec, side: str) -> None:
    for tip, sign in (("tip_left", 1.0), ("tip_right", -1.0)):
        body = spec.body(f"{side}_{tip}")
        if body is None:
            continue
        for geom in body.geoms:
            geom.contype = 0
            geom.conaffinity = 0
        body.add_geom(
            name=f"{side}_{tip}_pad",
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=list(PAD_HALF_M),
            pos=[sign * PAD_CENTER_M[0], sign * PAD_CENTER_M[1], PAD_CENTER_M[2]],
            rgba=[0.2, 0.2, 0.2, 0.0],
            friction=[1.5, 0.01, 0.001],
            condim=4,
            group=3,
        )


def arm_roles(robot: RobotConfig) -> dict[str, str]:
    """Role (left_arm / right_arm) -> part name: of the first two gripper arms, the one whose
    workspace box lies further to +y is the left one."""
    parts = robot.gripper_parts()[:2]

    def y_mid(n: str) -> float:
        lo, hi = robot.parts[n].limits.workspace_cm["y"]
        return (lo + hi) / 2

    left, right = sorted(parts, key=y_mid, reverse=True)
    return {"left_arm": left, "right_arm": right}


class _BimanualTask(MujocoTask):
    requires = TWO_ARMS

    def build(self, spec: mujoco.MjSpec, robot: RobotConfig) -> None:
        missing = self.requires.missing(robot)
        if missing:
            raise ValueError(f"task {self.name}: {missing}")
        self.roles = arm_roles(robot)
        self.area = TaskArea(robot, REF_X_M, REF_Y_M)
        self.z0 = self.area.z_m
        self.center_y = self.area.y(CENTER_Y_M)
        # The base is welded to the world, so MuJoCo's parent filter does not apply to link1:
        # their meshes' convex hulls overlap at every pose.
        for side in ("left", "right"):
            if spec.body(f"{side}_base") is not None and spec.body(f"{side}_link1") is not None:
                spec.add_exclude(bodyname1=f"{side}_base", bodyname2=f"{side}_link1")
        for side in ("left", "right"):
            _pad_fingers(spec, side)
        for site in spec.sites:  # the i2rt model's tcp markers would show in the wrist images
            if site.name.startswith("tcp_"):
                site.rgba = [0, 0, 0, 0]
        # elliptic friction cones with a high impratio: held objects do not creep out of the grip
        spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
        spec.option.impratio = 10.0
        self._gripper_joints = {
            a: list(robot.parts[p].gripper.joints) + list(robot.parts[p].gripper.mimic_joints)
            for a, p in self.roles.items()
        }
        self._fingers: dict[str, set[int]] | None = None

    def fingers(self, model: mujoco.MjModel) -> dict[str, set[int]]:
        if self._fingers is None:
            self._fingers = {a: _finger_geoms(model, j) for a, j in self._gripper_joints.items()}
        return self._fingers


BAR_HALF_M = (0.02, 0.18, 0.02)
BAR_GRASP_OFFSET_M = 0.13
BAR_MAX_TILT_RAD = 0.25


class BimanualPickup(_BimanualTask):
    name = "bimanual_pickup"
    max_turns = 30

    def build(self, spec: mujoco.MjSpec, robot: RobotConfig) -> None:
        super().build(spec, robot)
        add_free_box(spec, "bar", list(BAR_HALF_M), [0.85, 0.45, 0.1, 1], mass_kg=0.4, friction=1.2)
        self.instruction = (
            "Pick up the long orange bar with both arms, one hand near each end, and lift it at least "
            "10 cm above the table, keeping it level."
        )

    def reset(self, model: mujoco.MjModel, data: mujoco.MjData, rng: np.random.Generator) -> None:
        a = self.area
        pos = np.array(
            [
                rng.uniform(*a.xr(0.20, 0.28)),
                self.center_y + rng.uniform(-0.03, 0.03),
                self.z0 + BAR_HALF_M[2],
            ]
        )
        set_free_pose(model, data, "bar", pos, rng.uniform(-0.2, 0.2))
        self._start_z = self.z0 + BAR_HALF_M[2]

    def tilt(self, data: mujoco.MjData) -> float:
        axis = data.body("bar").xmat.reshape(3, 3)[:, 1]
        return float(np.arcsin(min(1.0, abs(axis[2]))))

    def held_by(self, model: mujoco.MjModel, data: mujoco.MjData) -> dict[str, bool]:
        bar = {model.geom("bar").id}
        return {a: geoms_touch(model, data, bar, g) for a, g in self.fingers(model).items()}

    def success(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        lifted = data.body("bar").xpos[2] - self._start_z >= 0.10
        return bool(lifted and self.tilt(data) < BAR_MAX_TILT_RAD and all(self.held_by(model, data).values()))

    def grasp_points(self, data: mujoco.MjData) -> dict[str, np.ndarray]:
        """Near each end of the bar: the left arm takes the +y end, the right arm the -y end."""
        centre = data.body("bar").xpos
        axis = data.body("bar").xmat.reshape(3, 3)[:, 1]
        if axis[1] < 0:
            axis = -axis
        return {
            "left_arm": centre + BAR_GRASP_OFFSET_M * axis,
            "right_arm": centre - BAR_GRASP_OFFSET_M * axis,
        }

    def privileged(self, model: mujoco.MjModel, data: mujoco.MjData) -> dict[str, Any]:
        return {
            "task": self.name,
            "object": {
                "name": "bar",
                "position_cm": _cm(data.body("bar").xpos),
                "yaw_rad": round(body_yaw(data, "bar"), 4),
                "size_cm": [round(2 * h * 100, 2) for h in BAR_HALF_M],
                "tilt_rad": round(self.tilt(data), 4),
            },
            "arms": self.roles,
            "grasp_points_cm": {a: _cm(p) for a, p in self.grasp_points(data).items()},
            "touching": self.held_by(model, data),
            "object_start_z_cm": self._start_z * 100,
            "lift_cm": 10.0,
        }


BLOCK_HALF_M = 0.02
LINE_X_M = 0.24
LINE_TOL_M = 0.015
BLOCK_NAMES = ("red_block", "green_block", "blue_block")
BLOCK_RGBA = ([0.85, 0.15, 0.12, 1], [0.15, 0.7, 0.2, 1], [0.15, 0.3, 0.9, 1])
# three lanes across the table: one near each arm, one in the middle
BLOCK_LANES_Y_M = ((-0.12, -0.20), (-0.27, -0.34), (-0.41, -0.49))


class AlignBlocks(_BimanualTask):
    name = "align_blocks"
    max_turns = 40

    def build(self, spec: mujoco.MjSpec, robot: RobotConfig) -> None:
        super().build(spec, robot)
        for name, rgba in zip(BLOCK_NAMES, BLOCK_RGBA, strict=True):
            add_free_box(spec, name, [BLOCK_HALF_M] * 3, rgba, mass_kg=0.1, friction=0.5)
        spec.worldbody.add_geom(
            name="line",
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=[0.004, 0.3, 0.0005],
            pos=[self.area.x(LINE_X_M), self.center_y, self.z0 + 0.0005],
            rgba=[0.95, 0.95, 0.95, 1],
            contype=0,
            conaffinity=0,
        )
        self.instruction = (
            "Push the red, green and blue blocks along the table so that all three centres end on the "
            "white line (a straight row across the table). Do not pick them up."
        )

    def reset(self, model: mujoco.MjModel, data: mujoco.MjData, rng: np.random.Generator) -> None:
        a = self.area
        lanes = [sorted(a.yr(*lane)) for lane in BLOCK_LANES_Y_M]
        order = rng.permutation(len(BLOCK_NAMES))
        for k, name in zip(order, BLOCK_NAMES, strict=True):
            y = rng.uniform(*lanes[k])
            x = a.x(LINE_X_M) + rng.choice([-1.0, 1.0]) * rng.uniform(0.03, 0.08)
            set_free_pose(model, data, name, np.array([x, y, self.z0 + BLOCK_HALF_M]), rng.uniform(-0.3, 0.3))

    def offsets(self, data: mujoco.MjData) -> dict[str, float]:
        return {n: float(data.body(n).xpos[0] - self.area.x(LINE_X_M)) for n in BLOCK_NAMES}

    def success(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        return all(
            abs(off) < LINE_TOL_M
            and data.body(n).xpos[2] < self.z0 + BLOCK_HALF_M + 0.01
            and body_speed(model, data, n) < 0.05
            for n, off in self.offsets(data).items()
        )

    def privileged(self, model: mujoco.MjModel, data: mujoco.MjData) -> dict[str, Any]:
        return {
            "task": self.name,
            "objects": {
                n: {
                    "position_cm": _cm(data.body(n).xpos),
                    "yaw_rad": round(body_yaw(data, n), 4),
                    "size_cm": round(2 * BLOCK_HALF_M * 100, 2),
                }
                for n in BLOCK_NAMES
            },
            "arms": self.roles,
            "line": {"x_cm": self.area.x(LINE_X_M) * 100, "tolerance_cm": LINE_TOL_M * 100},
            "center_y_cm": self.center_y * 100,
            "park_cm": {
                "left_arm": [self.area.x(0.22) * 100, self.area.y(-0.10) * 100, self.z0 * 100 + 12.0],
                "right_arm": [self.area.x(0.22) * 100, self.area.y(-0.51) * 100, self.z0 * 100 + 12.0],
            },
        }
