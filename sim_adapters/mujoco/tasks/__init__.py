"""MuJoCo tasks by name: each is one `MujocoTask` class, made a task by one line,
`register_task(MyTask)` (`catalog`). Importing this package registers the built-in ones, in the order
`pear-agent tasks` lists them; `every_robot_tasks()` is derived from the registered classes."""

from __future__ import annotations

from sim_adapters.mujoco.tasks.base import MujocoTask
from sim_adapters.mujoco.tasks.catalog import (
    TASK_MODULES_ENV,
    TaskRegistrationError,
    make_task,
    paraphrases,
    register_task,
    task_class,
    task_classes,
    task_names,
)

# the built-in tasks, each registered beside its class: import order is listing order
# isort: off
from sim_adapters.mujoco.tasks import pick_place, conveyor, bimanual, ruler, objects  # noqa: F401
# isort: on

OBJECT_TASK_PREFIX = objects.TASK_PREFIX


def every_robot_tasks() -> dict[str, type[MujocoTask]]:
    """Name -> class of the tasks every robot's check runs (not parametrised), derived from the
    registered classes."""
    return {c.name: c for c in task_classes() if c.on_every_robot and c.names() == [c.name]}


__all__ = [
    "OBJECT_TASK_PREFIX",
    "TASK_MODULES_ENV",
    "MujocoTask",
    "TaskRegistrationError",
    "every_robot_tasks",
    "make_task",
    "paraphrases",
    "register_task",
    "task_class",
    "task_classes",
    "task_names",
]
