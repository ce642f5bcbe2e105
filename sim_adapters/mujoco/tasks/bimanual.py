"""Dual-arm tabletop tasks for the YAM station: lift a long bar with both arms, line up blocks.

`bimanual_pickup` needs both arms by construction: success asks for the bar lifted 10 cm *and*
level *and* held by both grippers, so lifting one end with one arm does not count.
`align_blocks` spreads three blocks across the table, between the arms; each arm pushes the blocks
on its side onto a painted line.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from pear_agent.robot.config import RobotConfig
from sim_adapters.mujoco.lazy_mujoco import mujoco
from sim_adapters.mujoco.tasks.base import (
    BLOCK_NAMES,
    TWO_ARMS,
    MujocoTask,
    add_blocks,
    add_free_box,
    body_speed,
    body_yaw,
    geoms_touch,
    set_free_pose,
    to_cm,
    tool_facts,
)
from sim_adapters.mujoco.tasks.catalog import register_task
from sim_adapters.mujoco.tasks.layout import Box, TableFrame, TwoArmLayout, arm_places, two_arm_layout

ARMS = ("left_arm", "right_arm")
"""Roles; a robot's first two gripper arms take them from where their bases stand (see
`layout.two_arm_layout`): the left arm is on the left looking across the table."""
# The placements below were written for the YAM station (x forward, y left, metres; the arms'
# bases at y = 0 and -0.61): `TableFrame.place` maps them into the frame between any two arms,
# whatever their layout and heading (identity for the YAM station).
REF_X_M, REF_Y_M = (0.16, 0.32), (-0.55, -0.06)
REF_AREA: Box = (REF_X_M, REF_Y_M)
CENTER_X_M, CENTER_Y_M = 0.24, -0.305  # the reference area's centre, halfway between the bases


class _BimanualTask(MujocoTask):
    requires = TWO_ARMS
    default_robot = "yam_bimanual"

    def build(self, spec: mujoco.MjSpec, robot: RobotConfig) -> None:
        self.take_robot(spec, robot, hide_tcp_markers=True)
        self._layout: TwoArmLayout | None = None

    def layout(self, model: mujoco.MjModel, data: mujoco.MjData) -> TwoArmLayout:
        """The arms' roles and the frame between them, from the model at home (first reset)."""
        if self._layout is None:
            self._layout = two_arm_layout(self.robot, arm_places(model, data, self.robot), REF_AREA)
        return self._layout

    def placement_frame(self, model: mujoco.MjModel, data: mujoco.MjData) -> TableFrame:
        """The frame objects are placed in: the layout's, mirrored for the `layout` perturbation."""
        f = self.layout(model, data).frame
        return replace(f, mirrored=True) if self.mirror_layout else f

    @property
    def roles(self) -> dict[str, str]:
        assert self._layout is not None, "reset the task first"
        return self._layout.roles

    def fingers(self, model: mujoco.MjModel) -> dict[str, set[int]]:
        return {role: self.fingers_of(model, part) for role, part in self.roles.items()}

    def _arm_facts(self) -> dict[str, Any]:
        """Per role: the part, its tool facts (caps, gripper geometry), where it parks, the yaw its
        wrist is most at ease with (its home yaw) and how far the wrist can turn from it."""
        lay = self._layout
        assert lay is not None
        return {
            "arms": dict(lay.roles),
            "tool": {role: tool_facts(self.robot, part) for role, part in lay.roles.items()},
            "park_cm": {
                role: [*to_cm(lay.place_of(role).home_tool_m[:2]), self.z0 * 100 + 12.0] for role in ARMS
            },
            "preferred_yaw_rad": {role: round(lay.place_of(role).home_yaw_rad, 4) for role in ARMS},
            "yaw_offsets_rad": {
                role: None if (o := lay.place_of(role).yaw_offsets_rad) is None else [round(v, 4) for v in o]
                for role in ARMS
            },
        }


BAR_HALF_M = (0.02, 0.18, 0.02)
BAR_GRASP_OFFSET_M = 0.13
BAR_MAX_TILT_RAD = 0.25


class BimanualPickup(_BimanualTask):
    name = "bimanual_pickup"
    max_turns = 30
    instruction = (
        "Pick up the long orange bar with both arms, one hand near each end, and lift it at least "
        "10 cm above the table, keeping it level."
    )
    paraphrases = (
        "Using both grippers, lift the long bar at least 10 cm and keep it level.",
        "Hold the bar at both ends and raise it 10 cm or more without tilting it.",
        "Pick up the bar with two hands, one at each end, and lift it level by at least 10 cm.",
    )
    expert = "sim_adapters.mujoco.experts.bimanual:bimanual_pickup"

    def build(self, spec: mujoco.MjSpec, robot: RobotConfig) -> None:
        super().build(spec, robot)
        add_free_box(spec, "bar", list(BAR_HALF_M), [0.85, 0.45, 0.1, 1], mass_kg=0.4, friction=1.2)

    def reset(self, model: mujoco.MjModel, data: mujoco.MjData, rng: np.random.Generator) -> None:
        """The bar lies along the line between the arms' bases, in the middle of the task area."""
        f = self.placement_frame(model, data)
        u = f.uv(f.place(rng.uniform(0.20, 0.28), CENTER_Y_M))[0]
        xy = f.at(u, rng.uniform(-0.03, 0.03))
        # the bar's long axis is its own y: along the frame's left at local yaw 0
        set_free_pose(
            model, data, "bar", np.array([*xy, self.z0 + BAR_HALF_M[2]]), f.yaw(rng.uniform(-0.2, 0.2))
        )
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
        """Near each end of the bar: the left arm takes the end on its side, the right arm the other."""
        assert self._layout is not None
        centre = data.body("bar").xpos
        axis = data.body("bar").xmat.reshape(3, 3)[:, 1]
        if axis[:2] @ self._layout.frame.left < 0:
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
                "position_cm": to_cm(data.body("bar").xpos),
                "yaw_rad": round(body_yaw(data, "bar"), 4),
                "size_cm": [round(2 * h * 100, 2) for h in BAR_HALF_M],
                "tilt_rad": round(self.tilt(data), 4),
            },
            **self._arm_facts(),
            "grasp_points_cm": {a: to_cm(p) for a, p in self.grasp_points(data).items()},
            "touching": self.held_by(model, data),
            "object_start_z_cm": self._start_z * 100,
            "lift_cm": 10.0,
        }


BLOCK_HALF_M = 0.02
LINE_X_M = 0.24  # in the reference frame: the line runs along y (between the bases) at this x
LINE_TOL_M = 0.015
# three lanes across the table: one near each arm, one in the middle
BLOCK_LANES_Y_M = ((-0.12, -0.20), (-0.27, -0.34), (-0.41, -0.49))


class AlignBlocks(_BimanualTask):
    name = "align_blocks"
    max_turns = 40
    instruction = (
        "Push the red, green and blue blocks along the table so that all three centres end on the "
        "white line (a straight row across the table). Do not pick them up."
    )
    paraphrases = (
        "Line the red, green and blue blocks up on the white line.",
        "Push the three coloured blocks until each one sits on the white stripe.",
        "Get every block (red, green, blue) onto the white line across the table.",
    )
    expert = "sim_adapters.mujoco.experts.bimanual:align_blocks"

    def build(self, spec: mujoco.MjSpec, robot: RobotConfig) -> None:
        super().build(spec, robot)
        add_blocks(spec, BLOCK_HALF_M, mass_kg=0.1, friction=0.5)
        spec.worldbody.add_geom(  # placed along the line between the bases at reset
            name="line",
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=[0.004, 0.3, 0.0005],
            pos=[0.0, 0.0, self.z0 + 0.0005],
            rgba=[0.95, 0.95, 0.95, 1],
            contype=0,
            conaffinity=0,
        )
        self._line_xy = np.zeros(2)

    def reset(self, model: mujoco.MjModel, data: mujoco.MjData, rng: np.random.Generator) -> None:
        f = self.placement_frame(model, data)
        self._line_xy = f.place(LINE_X_M, CENTER_Y_M)
        line = model.geom("line").id
        model.geom_pos[line][:2] = self._line_xy
        model.geom_quat[line] = [np.cos(f.heading_rad / 2), 0.0, 0.0, np.sin(f.heading_rad / 2)]
        # compiled with the world's rotation, MuJoCo marks the geom as turning with its body and
        # never reads geom_quat: the line was drawn across the scored line unless the arms stand
        # side by side (heading 0). Not so any more: it reads the rotation set here
        model.geom_sameframe[line] = 0
        lanes = [sorted(f.uv(f.place(LINE_X_M, y))[1] for y in lane) for lane in BLOCK_LANES_Y_M]
        order = rng.permutation(len(BLOCK_NAMES))
        for k, name in zip(order, BLOCK_NAMES, strict=True):
            v = rng.uniform(*lanes[k])
            u = rng.choice([-1.0, 1.0]) * rng.uniform(0.03, 0.08)
            xy = self._line_xy + u * f.forward + v * f.left
            pos = np.array([*xy, self.z0 + BLOCK_HALF_M])
            set_free_pose(model, data, name, pos, f.yaw(rng.uniform(-0.3, 0.3)))

    def offsets(self, data: mujoco.MjData) -> dict[str, float]:
        """Each block's distance from the line, along the frame's forward."""
        assert self._layout is not None
        fwd = self._layout.frame.forward
        return {n: float((data.body(n).xpos[:2] - self._line_xy) @ fwd) for n in BLOCK_NAMES}

    def success(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        return all(
            abs(off) < LINE_TOL_M
            and data.body(n).xpos[2] < self.z0 + BLOCK_HALF_M + 0.01
            and body_speed(model, data, n) < 0.05
            for n, off in self.offsets(data).items()
        )

    def privileged(self, model: mujoco.MjModel, data: mujoco.MjData) -> dict[str, Any]:
        assert self._layout is not None
        return {
            "task": self.name,
            "objects": {
                n: {
                    "position_cm": to_cm(data.body(n).xpos),
                    "yaw_rad": round(body_yaw(data, n), 4),
                    "size_cm": round(2 * BLOCK_HALF_M * 100, 2),
                }
                for n in BLOCK_NAMES
            },
            **self._arm_facts(),
            "line": {
                "point_cm": [*to_cm(self._line_xy), round(self.z0 * 100, 2)],
                # along the line (from the right arm's side to the left's), and across it
                "direction": [round(float(v), 4) for v in self._layout.frame.left],
                "normal": [round(float(v), 4) for v in self._layout.frame.forward],
                "tolerance_cm": LINE_TOL_M * 100,
            },
        }


register_task(BimanualPickup)
register_task(AlignBlocks)
