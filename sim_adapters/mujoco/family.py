"""The MuJoCo arm tasks as a family of the registry (`pear_agent.loop.registry`).

Everything here is derived from the registered task classes (`sim_adapters.mujoco.tasks`): a new
MuJoCo task is one `MujocoTask` class and one line, `register_task(MyTask)`; a module outside this
repository is named by `PEAR_TASK_MODULES`. Listing the tasks imports nothing heavy: MuJoCo is
imported when a task's backend is built. Every task also runs perturbed (`pick_cube~camera`, or
`--perturb camera`): see `perturb`.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pear_agent.loop.arm_family import ArmFamily, ArmOptions, TaskEntry
from pear_agent.loop.family_parts import RobotCheck
from pear_agent.loop.registry import NO_ASK, PolicyAsk, UnknownNameError
from pear_agent.robot.config import RobotConfig
from pear_agent.settings import setting
from sim_adapters.mujoco.perturb_names import DIMENSIONS, split_task
from sim_adapters.mujoco.tasks.catalog import task_classes
from sim_adapters.mujoco.tasks.objects import PickUpObject

if TYPE_CHECKING:
    from pear_agent.policies.experts import Expert
    from sim_adapters.mujoco.tasks.base import MujocoTask

PERTURB_HELP = (
    "MuJoCo tasks: a seeded perturbation ({}); the same as the task suffix `~NAME`, e.g. pick_cube~camera; "
    "bench: a comma list, one task per perturbation (`none` keeps the unperturbed task beside them), "
    "e.g. none,camera,layout"
).format(", ".join(DIMENSIONS))


@dataclass
class MujocoOptions(ArmOptions):
    """The MuJoCo family's options: `--robot` and `--perturb`."""

    perturb: str | None = setting(None, help=PERTURB_HELP)

    def __post_init__(self) -> None:
        for d in (self.perturb or "").split(","):
            if d.strip() and d.strip() not in ("none", *DIMENSIONS):
                raise ValueError(
                    f"--perturb: unknown perturbation {d.strip()!r}; perturbations are: none, "
                    f"{', '.join(DIMENSIONS)}"
                )


_ENTRY_OF: dict[type, TaskEntry] = {}
_EXPERT_OF: dict[type, Any] = {}


def _classes() -> list[type[MujocoTask]]:
    return task_classes()


def entry_of(cls: type[MujocoTask]) -> TaskEntry:
    """A task class's registry entry (one object per class, so entries compare by identity)."""
    if cls not in _ENTRY_OF:
        _ENTRY_OF[cls] = TaskEntry("mujoco", cls.default_robot, cls.requires)
    return _ENTRY_OF[cls]


def expert_of(cls: type[MujocoTask]) -> Expert | None:
    """The class's expert, its `"module:attr"` pointer imported on first use (a bad pointer is one
    line naming the task and the pointer)."""
    if cls not in _EXPERT_OF:
        pointer = cls.expert
        if isinstance(pointer, str):
            module, _, attr = pointer.partition(":")
            try:
                obj: Any = importlib.import_module(module)
                for part in filter(None, attr.split(".")):
                    obj = getattr(obj, part)
            except (ImportError, AttributeError) as exc:
                raise UnknownNameError(
                    f"task {cls.name!r}: its expert {pointer!r} cannot be found: {type(exc).__name__}: {exc}"
                ) from None
            pointer = obj
        if pointer is not None and not callable(pointer):
            raise UnknownNameError(f"task {cls.name!r}: its expert {cls.expert!r} is not callable")
        _EXPERT_OF[cls] = pointer
    return _EXPERT_OF[cls]


def task_entries() -> dict[str, TaskEntry]:
    """The tasks every robot's check runs (`robots --check --tasks`, the per-robot expert tables),
    derived from the registered classes."""
    return {n: entry_of(c) for c in _classes() if c.on_every_robot for n in c.names()}


def pear_entries() -> dict[str, TaskEntry]:
    """The PEAR paper's station tasks (not parametrised), derived from the registered classes."""
    return {c.name: entry_of(c) for c in _classes() if not c.on_every_robot and c.names() == [c.name]}


def object_tasks() -> list[str]:
    """`pick_up_object/<name>`: one task per object YAML."""
    return PickUpObject.names()


class MujocoFamily(ArmFamily, RobotCheck):
    name = "mujoco"

    def __init__(self) -> None:
        self._renderers: dict[tuple[str, str, int], dict[tuple[int, int], Any]] = {}
        """Per process: one renderer cache per scene (task + robot file), shared by the pooled
        backends of episodes in flight together (`MujocoBackend(renderers=...)`); a backend built
        on its own (`registry.make_backend`) keeps its own renderer."""
        atexit.register(self.close_renderers)

    @property
    def entries(self) -> dict[str, TaskEntry]:
        return task_entries()

    def task_names(self) -> list[str]:
        return [n for c in _classes() for n in c.names()]

    def task_class(self, task: str) -> type[MujocoTask]:
        """The registered class of a task name (perturbed or not); UnknownNameError naming the tasks."""
        base, _ = split_task(task)
        for cls in _classes():
            if cls.claims(base):
                return cls
        raise UnknownNameError(f"unknown mujoco task {base!r}; tasks are: {', '.join(task_entries())}")

    def entry(self, task: str) -> TaskEntry:
        cls = self.task_class(task)
        try:
            cls.check_name(split_task(task)[0])
        except ValueError as exc:
            raise UnknownNameError(str(exc)) from None
        return entry_of(cls)

    def owns(self, task: str) -> bool:
        base = task.partition("~")[0]
        return any(c.claims(base) for c in _classes())

    def expert(self, task: str) -> Expert | None:
        """The expert the task's class points at (`MujocoTask.expert`)."""
        return expert_of(self.task_class(task))

    def expert_tasks(self) -> list[str]:
        """The tasks that have a scripted expert (what `EXPERTS` lists)."""
        return [n for c in _classes() if c.expert is not None for n in c.names()]

    options_type: type = MujocoOptions

    def options(self, args: Any) -> dict[str, Any]:
        out = super().options(args)
        perturb = self.parse(args).perturb
        if perturb is not None and "," in perturb:
            raise ValueError("--perturb takes one perturbation here (a comma list is for `bench`)")
        if perturb in DIMENSIONS:
            out["perturb"] = perturb
        return out

    def resolve(self, task: str, options: dict[str, Any]) -> str:
        base, dim = split_task(task)
        self.entry(base)
        dim = dim or options.get("perturb")
        return f"{base}~{dim}" if dim else base

    def expand(self, task: str, args: Any) -> list[str]:
        base, dim = split_task(task)
        self.entry(base)
        listed = [d.strip() for d in (self.parse(args).perturb or "").split(",") if d.strip()]
        if dim is not None or not listed:
            return [task]
        out = []
        for d in dict.fromkeys(listed):
            if d != "none" and d not in DIMENSIONS:
                raise ValueError(
                    f"--perturb: unknown perturbation {d!r}; perturbations are: none, {', '.join(DIMENSIONS)}"
                )
            out.append(base if d == "none" else f"{base}~{d}")
        return out

    def has_default_policy(self, task: str) -> bool:
        return self.expert(split_task(task)[0]) is not None

    def default_policy(self, task: str, ask: PolicyAsk = NO_ASK) -> Any:
        # the expert reads the simulator's facts: a visual perturbation is invisible to it, a
        # reworded instruction means nothing to it, a mirrored layout changes its plan
        return super().default_policy(split_task(task)[0], ask)

    def build_backend(self, task: str, robot: RobotConfig, render: bool, pooled: bool = False) -> Any:
        from sim_adapters.mujoco.backend import MujocoBackend  # heavy: mujoco

        base, dim = split_task(task)
        # a perturbed backend's model changes per episode: it keeps its own renderer. One cache per
        # scene and thread: a GL context is current in the thread that made it (EGL refuses it in
        # another: EGL_BAD_ACCESS), e.g. skyrl-gym's episode threads beside the main one
        key = (base, robot.label, threading.get_ident())
        shared = self._renderers.setdefault(key, {}) if render and pooled and not dim else None
        return MujocoBackend(
            robot, self.task_class(base).create(base), render=render, renderers=shared, perturbation=dim
        )

    def check_robot(self, task: str, robot: RobotConfig) -> tuple[list[str], list[str]]:
        """`robots --check`: the robot's scene for `task`, built and tried (`robot_check`)."""
        from sim_adapters.mujoco.robot_check import check_scene  # heavy: mujoco

        return check_scene(task, robot)

    def close_renderers(self) -> None:
        for cache in self._renderers.values():
            for r in cache.values():
                with contextlib.suppress(Exception):  # closing at exit must never raise
                    r.close()
        self._renderers.clear()


FAMILY = MujocoFamily()
