"""Names the CLI accepts: tasks (with their backend and default robot) and policies.

Backends are imported only when a task that needs them is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pear_agent.backend import Backend
from pear_agent.robot_config import ONE_ARM, TWO_ARMS, Requirement, RobotConfig


@dataclass(frozen=True)
class TaskEntry:
    """A task: its backend, what it needs of a robot, and the robot it runs on by default.

    MuJoCo tasks run on any description that has what they need (`requires`); LIBERO tasks only on
    the robot LIBERO mounts (`robots`)."""

    backend: str
    default_robot: str
    requires: Requirement | None = None
    robots: tuple[str, ...] = ()

    def refusal(self, task: str, robot: RobotConfig) -> str | None:
        """Why `robot` cannot do `task`, or None."""
        if self.requires is not None:
            missing = self.requires.missing(robot)
            return f"robot {robot.label} cannot do task {task!r}: {missing}" if missing else None
        if self.robots and robot.name not in {Path(r).stem for r in self.robots}:
            return f"task {task!r} runs only on {[Path(r).stem for r in self.robots]}, not {robot.label}"
        return None


TASKS: dict[str, TaskEntry] = {
    "pick_cube": TaskEntry("mujoco", "panda", ONE_ARM),
    "place_in_bowl": TaskEntry("mujoco", "panda", ONE_ARM),
    "push_to_target": TaskEntry("mujoco", "panda", ONE_ARM),
    "conveyor_pick": TaskEntry("mujoco", "panda", ONE_ARM),
    "bimanual_pickup": TaskEntry("mujoco", "yam_bimanual", TWO_ARMS),
    "align_blocks": TaskEntry("mujoco", "yam_bimanual", TWO_ARMS),
}

# LIBERO (optional, .venv-libero only): `libero_spatial/0` ... `libero_10/9`. The robot description
# lives beside the adapter (its model file ships in robosuite), so it is named by path.
LIBERO_ROBOT = str(Path(__file__).resolve().parent.parent / "sim_adapters" / "libero" / "libero_panda.yaml")


def _libero_tasks() -> dict[str, TaskEntry]:
    from sim_adapters.libero import task_names

    return {name: TaskEntry("libero", LIBERO_ROBOT, robots=(LIBERO_ROBOT,)) for name in task_names()}


TASKS.update(_libero_tasks())


class UnknownNameError(ValueError):
    pass


def task_entry(task: str) -> TaskEntry:
    if task not in TASKS:
        names = ", ".join(sorted(TASKS) + list(ENVIRONMENT_TASKS))
        raise UnknownNameError(f"unknown task {task!r}; tasks are: {names}")
    return TASKS[task]


# Tasks that bring their own environment (no robot description, no IK): the flying roadster (issue 14).
# A wind band may follow the name: `roadster_kickflip:storm` (bench keys keep the bands apart).
ENVIRONMENT_TASKS: tuple[str, ...] = ("roadster_ramp_flip", "roadster_kickflip")


def is_environment_task(task: str) -> bool:
    return task.partition(":")[0] in ENVIRONMENT_TASKS


def make_environment(task: str, mode: str = "paused", render: bool = True, wind: str | None = None):  # noqa: ANN201
    """The environment for an ENVIRONMENT_TASKS task (`pear_agent.environment.Environment`)."""
    from sim_adapters.roadster.cli import make_environment as make_roadster

    return make_roadster(task, mode=mode, render=render, wind=wind)


def make_backend(task: str, robot: RobotConfig, render: bool = True) -> Backend:
    entry = task_entry(task)
    refusal = entry.refusal(task, robot)
    if refusal:
        raise UnknownNameError(refusal)
    if entry.backend == "mujoco":
        from sim_adapters.mujoco.backend import MujocoBackend
        from sim_adapters.mujoco.tasks import TASKS as MUJOCO_TASKS

        return MujocoBackend(robot, MUJOCO_TASKS[task](), render=render)
    if entry.backend == "libero":
        from sim_adapters.libero.backend import LiberoBackend

        return LiberoBackend(robot, task, render=render)
    raise UnknownNameError(f"backend {entry.backend!r} is not available")
