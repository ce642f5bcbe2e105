"""A dynamic task: pick a cube off a moving conveyor belt before it leaves the robot's reach.

The belt is a heavy box on a frictionless slide joint, launched at a constant speed; the cube rides
on it by friction. The belt collides only with the cube (collision bits), so the fingers can
straddle the cube at belt level without dragging on it. Time matters here: at 3 cm/s, a policy that
thinks for 2 s while the world keeps moving (realtime mode) closes the gripper 6 cm behind the cube.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pear_agent.robot.config import RobotConfig
from sim_adapters.mujoco.lazy_mujoco import mujoco
from sim_adapters.mujoco.tasks.base import body_yaw, set_free_pose, to_cm
from sim_adapters.mujoco.tasks.catalog import register_task
from sim_adapters.mujoco.tasks.layout import rot90
from sim_adapters.mujoco.tasks.pick_place import CUBE_HALF_M, _SingleArmTask

BELT_HALF_M = (0.06, 0.7, 0.005)
BELT_TOP_M = 2 * BELT_HALF_M[2]
BELT_BITS = 2
"""contype/conaffinity of the belt; the cube has bits 1|2 so it touches both the belt and the robot."""
LIFT_M = 0.05


class ConveyorPick(_SingleArmTask):
    name = "conveyor_pick"
    max_turns = 20
    paraphrases = (
        "A belt is carrying a red cube away: catch it and lift it at least 5 cm.",
        "Pick the red cube off the moving belt before it leaves your reach, and raise it 5 cm.",
        "Grab the red cube riding on the conveyor and lift it 5 cm or more.",
    )
    expert = "sim_adapters.mujoco.experts.single_arm:CONVEYOR_PICK"

    def build(self, spec: mujoco.MjSpec, robot: RobotConfig) -> None:
        super().build(spec, robot)
        belt = spec.worldbody.add_body(name="belt", pos=[0.5, 0.0, 0.0])
        belt.add_joint(name="belt_slide", type=mujoco.mjtJoint.mjJNT_SLIDE, axis=[0, 1, 0])
        belt.add_geom(
            name="belt",
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=list(BELT_HALF_M),
            pos=[0, 0, BELT_HALF_M[2]],
            rgba=[0.18, 0.18, 0.2, 1],
            mass=200.0,
            friction=[1.2, 0.01, 0.001],
            contype=BELT_BITS,
            conaffinity=BELT_BITS,
        )
        cube = spec.worldbody.add_body(name="cube", pos=[0.5, 0.0, BELT_TOP_M + CUBE_HALF_M])
        cube.add_freejoint(name="cube_free")
        cube.add_geom(
            name="cube",
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=[CUBE_HALF_M] * 3,
            rgba=[0.85, 0.15, 0.12, 1],
            mass=0.08,
            friction=[1.0, 0.01, 0.001],
            condim=4,
            contype=1 | BELT_BITS,
            conaffinity=1 | BELT_BITS,
        )
        self.instruction = self._instruction("right")
        self._speed = 0.03
        self._belt_axis = np.array([0.0, 1.0])

    @staticmethod
    def _instruction(side: str) -> str:
        return (
            f"A conveyor belt carries a red cube towards the robot's {side}. Pick the cube off the "
            "belt and lift it at least 5 cm above the belt before it leaves your reach."
        )

    def reset(self, model: mujoco.MjModel, data: mujoco.MjData, rng: np.random.Generator) -> None:
        # the belt runs across the robot's front (along the region's width), towards its right
        f = self.frame(model, data)
        x_ref = rng.uniform(0.46, 0.56)
        self._speed = float(rng.uniform(0.025, 0.035))
        belt = model.body("belt").id
        model.body_pos[belt] = [*f.place(x_ref, 0.0), self.z0]
        model.body_quat[belt] = [np.cos(f.heading_rad / 2), 0.0, 0.0, np.sin(f.heading_rad / 2)]
        cube = f.place(x_ref, rng.uniform(0.14, 0.22))
        set_free_pose(
            model,
            data,
            "cube",
            np.array([*cube, self.z0 + BELT_TOP_M + CUBE_HALF_M]),
            f.yaw(rng.uniform(-0.15, 0.15)),
        )
        # the slide runs along the belt body's y: the frame's left, or its right when mirrored
        self._belt_axis = rot90(f.forward)
        along = float(f.left @ self._belt_axis)
        data.qpos[model.joint("belt_slide").qposadr[0]] = 0.0
        data.qvel[model.joint("belt_slide").dofadr[0]] = -self._speed * along
        dadr = model.joint("cube_free").dofadr[0]
        data.qvel[dadr : dadr + 2] = -self._speed * f.left
        self.instruction = self._instruction("left" if f.mirrored else "right")
        self._rest_z = self.z0 + BELT_TOP_M + CUBE_HALF_M

    def success(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        return bool(data.body("cube").xpos[2] - self._rest_z >= LIFT_M)

    def privileged(self, model: mujoco.MjModel, data: mujoco.MjData) -> dict[str, Any]:
        dadr = model.joint("cube_free").dofadr[0]
        return {
            **self._common(),
            "object": {
                "position_cm": to_cm(data.body("cube").xpos),
                "yaw_rad": round(body_yaw(data, "cube"), 4),
                "size_cm": round(2 * CUBE_HALF_M * 100, 2),
                "velocity_cm_s": to_cm(data.qvel[dadr : dadr + 3]),
            },
            "belt": {
                "velocity_cm_s": to_cm(
                    np.append(self._belt_axis * float(data.qvel[model.joint("belt_slide").dofadr[0]]), 0.0)
                ),
                "top_cm": (self.z0 + BELT_TOP_M) * 100,
            },
            "object_start_z_cm": self._rest_z * 100,
            "lift_cm": LIFT_M * 100,
        }


register_task(ConveyorPick)
