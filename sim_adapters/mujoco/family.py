"""The MuJoCo arm tasks as a family of the registry (`pear_agent.registry`).

Listing the tasks imports nothing heavy: MuJoCo is imported when a task's backend is built.
A new MuJoCo task is one class in `sim_adapters/mujoco/tasks/` plus one line in `ENTRIES`.
"""

from __future__ import annotations

import atexit
import contextlib
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

    def __init__(self) -> None:
        self._renderers: dict[tuple[str, str], dict[tuple[int, int], Any]] = {}
        """Per process: one renderer cache per scene (task + robot file), shared by the pooled
        backends of episodes in flight together (`MujocoBackend(renderers=...)`); a backend built
        on its own (`registry.make_backend`) keeps its own renderer."""
        atexit.register(self.close_renderers)

    @property
    def entries(self) -> dict[str, TaskEntry]:
        return ENTRIES

    def build_backend(self, task: str, robot: RobotConfig, render: bool, pooled: bool = False) -> Any:
        from sim_adapters.mujoco.backend import MujocoBackend
        from sim_adapters.mujoco.tasks import TASKS

        shared = self._renderers.setdefault((task, robot.label), {}) if render and pooled else None
        return MujocoBackend(robot, TASKS[task](), render=render, renderers=shared)

    def close_renderers(self) -> None:
        for cache in self._renderers.values():
            for r in cache.values():
                with contextlib.suppress(Exception):  # closing at exit must never raise
                    r.close()
        self._renderers.clear()


FAMILY = MujocoFamily()
