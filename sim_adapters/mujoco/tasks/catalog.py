"""The registered MuJoCo task classes: every table the family, the perturbations and the scripted
policy read by task name is derived from here, so a task is one class and one line:

    register_task(NudgeCube)

A module outside this repository is found through `PEAR_TASK_MODULES` (comma-separated module
names, imported when tasks are first listed, in every process, so bench workers find them too), as
objects are through `PEAR_OBJECT_DIRS`.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from sim_adapters.mujoco.tasks.base import MujocoTask

TASK_MODULES_ENV = "PEAR_TASK_MODULES"
"""Modules (comma-separated) that register more tasks when imported."""

T = TypeVar("T", bound="type[MujocoTask]")

_CLASSES: list[type[MujocoTask]] = []
"""In registration order (the order `pear-agent tasks` lists them)."""
_IMPORTED: set[str] = set()
_WARNED: set[str] = set()


class TaskRegistrationError(ValueError):
    """A class that cannot be registered as a task (one line for the user)."""


def register_task(cls: T) -> T:
    """Make `cls` (a `MujocoTask` subclass) a task; refused when its name is taken. Returns `cls`,
    so it also works as a class decorator. Registering the same class again changes nothing."""
    from sim_adapters.mujoco.tasks.base import MujocoTask  # cycle: sim_adapters.mujoco.tasks

    if not (isinstance(cls, type) and issubclass(cls, MujocoTask)):
        raise TaskRegistrationError(f"register_task: {cls!r} is not a MujocoTask subclass")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name or "~" in name or ":" in name or name != name.strip():
        raise TaskRegistrationError(
            f"register_task: {cls.__module__}.{cls.__qualname__} needs a class attribute `name`: a task "
            f"name without '~' or ':' (got {name!r})"
        )
    for other in _CLASSES:
        if other is cls:
            return cls
        if other.claims(name) or cls.claims(other.name):
            raise TaskRegistrationError(
                f"task name {name!r} of {cls.__module__}.{cls.__qualname__} is taken by "
                f"{other.__module__}.{other.__qualname__}; a task needs a name of its own"
            )
    _CLASSES.append(cls)
    return cls


def _import_task_modules() -> None:
    """Import the modules named by PEAR_TASK_MODULES (once each); a module that fails is one
    warning line naming it and the cause, and the other tasks stay usable."""
    for module in (m.strip() for m in os.environ.get(TASK_MODULES_ENV, "").split(",")):
        if not module or module in _IMPORTED:
            continue
        _IMPORTED.add(module)
        try:
            importlib.import_module(module)
        except Exception as exc:  # a broken module must not take the built-in tasks down
            why = f"{type(exc).__name__}: {exc}"
            msg = f"task module {module!r} (from {TASK_MODULES_ENV}) could not be loaded: {why}"
            if msg not in _WARNED:
                _WARNED.add(msg)
                print(f"pear-agent: warning: {' '.join(msg.split())[:400]}", file=sys.stderr)


def task_classes() -> list[type[MujocoTask]]:
    """Every registered task class: the built-in ones, then those of PEAR_TASK_MODULES."""
    # cycle: sim_adapters.mujoco.tasks
    import sim_adapters.mujoco.tasks  # noqa: F401  (the built-in tasks register on import)

    _import_task_modules()
    return list(_CLASSES)


def task_class(name: str) -> type[MujocoTask] | None:
    """The class that claims a task name (without a `~perturbation`), or None."""
    for cls in task_classes():
        if cls.claims(name):
            return cls
    return None


def task_names() -> list[str]:
    return [n for cls in task_classes() for n in cls.names()]


def make_task(name: str) -> MujocoTask:
    """A new task by name (ValueError naming the tasks when none has it)."""
    cls = task_class(name)
    if cls is None:
        raise ValueError(f"unknown mujoco task {name!r}; tasks are: {', '.join(task_names())}")
    cls.check_name(name)
    return cls.create(name)


def paraphrases(name: str) -> tuple[str, ...]:
    """The task's instruction in other words (empty when it has none, or no such task)."""
    cls = task_class(name)
    return tuple(cls.paraphrases) if cls is not None else ()
