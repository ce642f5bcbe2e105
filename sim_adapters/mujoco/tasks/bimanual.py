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
    MujocoTask,
    add_free_box,
    body_speed,
    body_yaw,
    geoms_touch,
    set_free_pose,
)

ARMS = ("left_arm", "right_arm")
CENTER_Y_M = -0.305  # halfway between the two bases


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


class _BimanualTask(MujocoTask):
    robots = ("yam_bimanual",)

    def table_kwargs(self) -> dict[str, Any]:
        return {"table_size_m": (0.35, 0.65), "table_center_m": (0.3, CENTER_Y_M)}

    def build(self, spec: mujoco.MjSpec, robot: RobotConfig) -> None:
        missing = [a for a in ARMS if a not in robot.parts]
        if missing:
            raise ValueError(f"task {self.name} needs parts {list(ARMS)}; robot {robot.name} lacks {missing}")
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
            a: list(robot.parts[a].gripper.joints) for a in ARMS if robot.parts[a].gripper
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
        pos = np.array([rng.uniform(0.20, 0.28), CENTER_Y_M + rng.uniform(-0.03, 0.03), BAR_HALF_M[2]])
        set_free_pose(model, data, "bar", pos, rng.uniform(-0.2, 0.2))
        self._start_z = BAR_HALF_M[2]

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
            pos=[LINE_X_M, CENTER_Y_M, 0.0005],
            rgba=[0.95, 0.95, 0.95, 1],
            contype=0,
            conaffinity=0,
        )
        self.instruction = (
            "Push the red, green and blue blocks along the table so that all three centres end on the "
            "white line (a straight row across the table). Do not pick them up."
        )

    def reset(self, model: mujoco.MjModel, data: mujoco.MjData, rng: np.random.Generator) -> None:
        lanes = list(BLOCK_LANES_Y_M)
        order = rng.permutation(len(BLOCK_NAMES))
        for k, name in zip(order, BLOCK_NAMES, strict=True):
            y = rng.uniform(*sorted(lanes[k]))
            x = LINE_X_M + rng.choice([-1.0, 1.0]) * rng.uniform(0.03, 0.08)
            set_free_pose(model, data, name, np.array([x, y, BLOCK_HALF_M]), rng.uniform(-0.3, 0.3))

    def offsets(self, data: mujoco.MjData) -> dict[str, float]:
        return {n: float(data.body(n).xpos[0] - LINE_X_M) for n in BLOCK_NAMES}

    def success(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        return all(
            abs(off) < LINE_TOL_M
            and data.body(n).xpos[2] < BLOCK_HALF_M + 0.01
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
            "line": {"x_cm": LINE_X_M * 100, "tolerance_cm": LINE_TOL_M * 100},
            "center_y_cm": CENTER_Y_M * 100,
        }
