"""Tabletop tasks for a single arm: lift a cube, put it in a bowl, push a block onto a target."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from pear_agent.robot.config import RobotConfig
from sim_adapters.mujoco.lazy_mujoco import mujoco
from sim_adapters.mujoco.tasks.base import (
    ONE_ARM,
    MujocoTask,
    PlacementError,
    add_free_box,
    body_speed,
    body_yaw,
    geoms_touch,
    sample_apart,
    set_free_pose,
    to_cm,
    tool_facts,
)
from sim_adapters.mujoco.tasks.catalog import register_task
from sim_adapters.mujoco.tasks.layout import Box, TableFrame, arm_places, single_arm_frame

CUBE_HALF_M = 0.02


# The placements below were written for the Panda's task area (x forward, y left, metres);
# `TableFrame.place` maps them into the region of any arm (identity for the Panda): see `layout`.
REF_X_M, REF_Y_M = (0.40, 0.62), (-0.22, 0.22)
REF_AREA: Box = (REF_X_M, REF_Y_M)


class _SingleArmTask(MujocoTask):
    requires = ONE_ARM

    def build(self, spec: mujoco.MjSpec, robot: RobotConfig) -> None:
        self.take_robot(spec, robot)
        self.part = robot.gripper_parts()[0]
        self._frame: TableFrame | None = None
        self._tool = tool_facts(robot, self.part)

    def frame(self, model: mujoco.MjModel, data: mujoco.MjData) -> TableFrame:
        """This arm's region of the table, from the model at home (the first reset computes it)."""
        if self._frame is None:
            places = arm_places(model, data, self.robot)
            self._frame = single_arm_frame(self.robot, places, self.part, REF_AREA)
            # the yaws the wrist can turn the tool to, pointing down (its last joint's room)
            place = places[self.part]
            if place.yaw_offsets_rad is not None:
                lo, hi = place.yaw_offsets_rad
                self._tool = {
                    **self._tool,
                    "yaw_room_rad": [round(place.home_yaw_rad + lo, 4), round(place.home_yaw_rad + hi, 4)],
                }
        return replace(self._frame, mirrored=True) if self.mirror_layout else self._frame

    def _common(self) -> dict[str, Any]:
        return {"task": self.name, "part": self.part, "tool": self._tool}

    def _object(self, data: mujoco.MjData, name: str, half_m: float) -> dict[str, Any]:
        return {
            "position_cm": to_cm(data.body(name).xpos),
            "yaw_rad": round(body_yaw(data, name), 4),
            "size_cm": round(2 * half_m * 100, 2),
        }


REACH_M = 0.30
"""`pick_cube`'s shaped reward: the tool point this far from the cube or further earns no closeness."""


class PickCube(_SingleArmTask):
    name = "pick_cube"
    max_turns = 25
    instruction = "Pick up the red cube and lift it at least 10 cm above the table."
    paraphrases = (
        "Grab the red block and raise it at least 10 cm off the table.",
        "Lift the red cube so that it is 10 cm or more above the tabletop.",
        "Take hold of the small red cube and hold it at least ten centimetres up in the air.",
    )
    expert = "sim_adapters.mujoco.experts.single_arm:PICK_CUBE"

    def build(self, spec: mujoco.MjSpec, robot: RobotConfig) -> None:
        super().build(spec, robot)
        add_free_box(spec, "cube", [CUBE_HALF_M] * 3, [0.85, 0.15, 0.12, 1], mass_kg=0.08)

    def reset(self, model: mujoco.MjModel, data: mujoco.MjData, rng: np.random.Generator) -> None:
        f = self.frame(model, data)
        xy = f.sample(rng, (0.40, 0.62), (-0.2, 0.2))
        set_free_pose(
            model,
            data,
            "cube",
            np.array([xy[0], xy[1], self.z0 + CUBE_HALF_M]),
            f.yaw(rng.uniform(-np.pi / 4, np.pi / 4)),
        )
        self._start_z = self.z0 + CUBE_HALF_M

    def success(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        return bool(data.body("cube").xpos[2] - self._start_z >= 0.10)

    def shaped_reward(
        self, model: mujoco.MjModel, data: mujoco.MjData, tool_m: dict[str, np.ndarray]
    ) -> float:
        """1 on success; else how far the episode got: 0.3 x the tool point's closeness to the cube
        (1 at its centre, 0 from REACH_M away) + 0.7 x the lift as a fraction of the 10 cm asked."""
        if self.success(model, data):
            return 1.0
        cube = data.body("cube").xpos
        reach = max(0.0, 1.0 - float(np.linalg.norm(cube - tool_m[self.part])) / REACH_M)
        lift = float(np.clip((cube[2] - self._start_z) / 0.10, 0.0, 1.0))
        return round(0.3 * reach + 0.7 * lift, 4)

    def privileged(self, model: mujoco.MjModel, data: mujoco.MjData) -> dict[str, Any]:
        return {
            **self._common(),
            "object": self._object(data, "cube", CUBE_HALF_M),
            "object_start_z_cm": self._start_z * 100,
            "lift_cm": 10.0,
        }


BOWL_RADIUS_M = 0.075
BOWL_WALL_H_M = 0.035
BOWL_FLOOR_TOP_M = 0.006
"""The top of the bowl's floor over the table."""


class PlaceInBowl(_SingleArmTask):
    name = "place_in_bowl"
    max_turns = 30
    instruction = "Put the red cube into the blue bowl."
    paraphrases = (
        "Move the red cube so it ends up inside the blue bowl.",
        "Drop the red block into the blue bowl.",
        "The red cube belongs in the blue bowl: put it there.",
    )
    expert = "sim_adapters.mujoco.experts.single_arm:PLACE_IN_BOWL"

    def build(self, spec: mujoco.MjSpec, robot: RobotConfig) -> None:
        super().build(spec, robot)
        add_free_box(spec, "cube", [CUBE_HALF_M] * 3, [0.85, 0.15, 0.12, 1], mass_kg=0.08)
        bowl = spec.worldbody.add_body(name="bowl", pos=[0.5, 0.2, 0.0])
        bowl.add_geom(
            name="bowl_floor",
            type=mujoco.mjtGeom.mjGEOM_CYLINDER,
            size=[BOWL_RADIUS_M + 0.008, BOWL_FLOOR_TOP_M / 2, 0],
            pos=[0, 0, BOWL_FLOOR_TOP_M / 2],
            rgba=[0.15, 0.3, 0.85, 1],
        )
        n = 12
        seg = 2 * (BOWL_RADIUS_M + 0.008) * np.tan(np.pi / n) / 2 + 0.002
        for k in range(n):
            a = 2 * np.pi * k / n
            r = BOWL_RADIUS_M + 0.004
            bowl.add_geom(
                name=f"bowl_wall{k}",
                type=mujoco.mjtGeom.mjGEOM_BOX,
                size=[0.004, seg, BOWL_WALL_H_M / 2],
                pos=[r * np.cos(a), r * np.sin(a), BOWL_WALL_H_M / 2],
                quat=[np.cos(a / 2), 0, 0, np.sin(a / 2)],
                rgba=[0.15, 0.3, 0.85, 1],
            )

    def reset(self, model: mujoco.MjModel, data: mujoco.MjData, rng: np.random.Generator) -> None:
        f = self.frame(model, data)
        for _ in range(20):  # a bowl in the middle of a small region may leave no room for the cube
            bowl_xy = f.sample(rng, (0.42, 0.62), (-0.22, 0.22))
            try:
                cube_xy = sample_apart(lambda: f.sample(rng, (0.40, 0.62), (-0.22, 0.22)), [bowl_xy], 0.17)
                break
            except PlacementError:
                continue
        else:
            raise PlacementError(f"task {self.name}: this arm's region is too small for a bowl and a cube")
        model.body_pos[model.body("bowl").id] = [bowl_xy[0], bowl_xy[1], self.z0]
        set_free_pose(
            model,
            data,
            "cube",
            np.array([*cube_xy, self.z0 + CUBE_HALF_M]),
            f.yaw(rng.uniform(-np.pi / 4, np.pi / 4)),
        )

    def _inside(self, data: mujoco.MjData) -> bool:
        cube, bowl = data.body("cube").xpos, data.body("bowl").xpos
        return bool(
            np.linalg.norm(cube[:2] - bowl[:2]) < BOWL_RADIUS_M - 0.01
            and cube[2] < self.z0 + BOWL_WALL_H_M + CUBE_HALF_M
        )

    def success(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        cube_geom = {model.geom("cube").id}
        return (
            self._inside(data)
            and body_speed(model, data, "cube") < 0.05
            and not geoms_touch(model, data, cube_geom, self.fingers_of(model, self.part))
        )

    def privileged(self, model: mujoco.MjModel, data: mujoco.MjData) -> dict[str, Any]:
        return {
            **self._common(),
            "object": self._object(data, "cube", CUBE_HALF_M),
            "container": {
                "position_cm": to_cm(data.body("bowl").xpos),
                "radius_cm": BOWL_RADIUS_M * 100,
                "rim_height_cm": (self.z0 + BOWL_WALL_H_M) * 100,
                "floor_cm": (self.z0 + BOWL_FLOOR_TOP_M) * 100,
            },
            "object_inside": self._inside(data),
        }


BLOCK_HALF_M = 0.025
TARGET_RADIUS_M = 0.04


class PushToTarget(_SingleArmTask):
    name = "push_to_target"
    max_turns = 30
    instruction = (
        "Push the yellow block so that its centre ends inside the green circle "
        "on the table. Do not pick it up."
    )
    paraphrases = (
        "Slide the block across the table until it sits inside the green circle.",
        "Shove the block into the green target circle without lifting it.",
        "Get the block into the green ring by pushing it.",
    )
    expert = "sim_adapters.mujoco.experts.single_arm:PUSH_TO_TARGET"

    def build(self, spec: mujoco.MjSpec, robot: RobotConfig) -> None:
        super().build(spec, robot)
        add_free_box(spec, "block", [BLOCK_HALF_M] * 3, [0.95, 0.75, 0.1, 1], mass_kg=0.25, friction=0.5)
        target = spec.worldbody.add_body(name="target", pos=[0.5, 0.0, 0.0])
        target.add_geom(
            name="target_disk",
            type=mujoco.mjtGeom.mjGEOM_CYLINDER,
            size=[TARGET_RADIUS_M, 0.0005, 0],
            pos=[0, 0, 0.0005],
            rgba=[0.1, 0.75, 0.25, 1],
            contype=0,
            conaffinity=0,
        )

    def reset(self, model: mujoco.MjModel, data: mujoco.MjData, rng: np.random.Generator) -> None:
        f = self.frame(model, data)
        (u0, v0), (u1, v1) = f.uv(f.place(0.38, -0.25)), f.uv(f.place(0.65, 0.25))
        for _ in range(200):
            block_xy = f.sample(rng, (0.42, 0.58), (-0.15, 0.15))
            ang = rng.uniform(-np.pi, np.pi)
            dist = rng.uniform(0.12, 0.2)
            target_xy = block_xy + dist * np.array([np.cos(ang), np.sin(ang)])
            u, v = f.uv(target_xy)
            if u0 <= u <= u1 and v0 <= v <= v1:
                break
        model.body_pos[model.body("target").id] = [target_xy[0], target_xy[1], self.z0]
        set_free_pose(
            model,
            data,
            "block",
            np.array([*block_xy, self.z0 + BLOCK_HALF_M]),
            f.yaw(rng.uniform(-np.pi / 4, np.pi / 4)),
        )

    def _distance(self, data: mujoco.MjData) -> float:
        return float(np.linalg.norm(data.body("block").xpos[:2] - data.body("target").xpos[:2]))

    def success(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        on_table = data.body("block").xpos[2] < self.z0 + BLOCK_HALF_M + 0.01
        return bool(self._distance(data) < TARGET_RADIUS_M and on_table)

    def privileged(self, model: mujoco.MjModel, data: mujoco.MjData) -> dict[str, Any]:
        return {
            **self._common(),
            "object": self._object(data, "block", BLOCK_HALF_M),
            "target": {"position_cm": to_cm(data.body("target").xpos), "radius_cm": TARGET_RADIUS_M * 100},
        }


register_task(PickCube)
register_task(PlaceInBowl)
register_task(PushToTarget)
