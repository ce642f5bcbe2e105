"""The MuJoCo arm tasks as a family of the registry (`pear_agent.registry`).

Listing the tasks imports nothing heavy: MuJoCo is imported when a task's backend is built.
A new MuJoCo task is one class in `sim_adapters/mujoco/tasks/` plus one line in `ENTRIES`.
"""

from __future__ import annotations

from typing import Any

from pear_agent.arm_family import ArmFamily, TaskEntry
from pear_agent.robot_config import ONE_ARM, TWO_ARMS, RobotConfig

ENTRIES: dict[str, TaskEntry] = {
    "pick_cube": TaskEntry("mujoco", "panda", ONE_ARM),
    "place_in_bowl": TaskEntry("mujoco", "panda", ONE_ARM),
    "push_to_target": TaskEntry("mujoco", "panda", ONE_ARM),
    "conveyor_pick": TaskEntry("mujoco", "panda", ONE_ARM),
    "bimanual_pickup": TaskEntry("mujoco", "yam_bimanual", TWO_ARMS),
    "align_blocks": TaskEntry("mujoco", "yam_bimanual", TWO_ARMS),
}


class MujocoFamily(ArmFamily):
    name = "mujoco"

    @property
    def entries(self) -> dict[str, TaskEntry]:
        return ENTRIES

    def build_backend(self, task: str, robot: RobotConfig, render: bool) -> Any:
        from sim_adapters.mujoco.backend import MujocoBackend
        from sim_adapters.mujoco.tasks import TASKS

        return MujocoBackend(robot, TASKS[task](), render=render)


FAMILY = MujocoFamily()
