"""The MuJoCo arm tasks as a family of the registry (`pear_agent.registry`).

Listing the tasks imports nothing heavy: MuJoCo is imported when a task's backend is built.
A new MuJoCo task is one class in `sim_adapters/mujoco/tasks/` plus one line in `ENTRIES`.
Every task also runs perturbed (`pick_cube~camera`, or `--perturb camera`): see `perturb`.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from typing import Any

from pear_agent.arm_family import ArmFamily, TaskEntry
from pear_agent.registry import UnknownNameError, add_option
from pear_agent.robot_config import ONE_ARM, TWO_ARMS, RobotConfig
from sim_adapters.mujoco.perturb_names import DIMENSIONS, split_task

PERTURB_HELP = (
    "MuJoCo tasks: a seeded perturbation ({}); the same as the task suffix `~NAME`, e.g. pick_cube~camera"
).format(", ".join(DIMENSIONS))

ENTRIES: dict[str, TaskEntry] = {
    "pick_cube": TaskEntry("mujoco", "panda", ONE_ARM),
    "place_in_bowl": TaskEntry("mujoco", "panda", ONE_ARM),
    "push_to_target": TaskEntry("mujoco", "panda", ONE_ARM),
    "conveyor_pick": TaskEntry("mujoco", "panda", ONE_ARM),
    "bimanual_pickup": TaskEntry("mujoco", "yam_bimanual", TWO_ARMS),
    "align_blocks": TaskEntry("mujoco", "yam_bimanual", TWO_ARMS),
}
PEAR_ENTRIES: dict[str, TaskEntry] = {"align_with_ruler": TaskEntry("mujoco", "yam_bimanual", ONE_ARM)}
"""The PEAR paper's real-robot tasks (with `pick_up_object/<name>`): kept out of `ENTRIES`, which
`robots --check --tasks` and the per-robot expert tables run on every robot."""
OBJECT_TASK_PREFIX = "pick_up_object/"
OBJECT_ENTRY = TaskEntry("mujoco", "yam_bimanual", ONE_ARM)
"""`pick_up_object/<name>`: one task per object YAML (`pear_agent.object_config`), any arm; by
default on the YAM station, where the PEAR paper evaluates it (`--robot panda` for the Panda)."""


def object_tasks() -> list[str]:
    from pear_agent.object_config import object_names

    return [f"{OBJECT_TASK_PREFIX}{n}" for n in object_names()]


class MujocoFamily(ArmFamily):
    name = "mujoco"

    def __init__(self) -> None:
        self._renderers: dict[tuple[str, str, int], dict[tuple[int, int], Any]] = {}
        """Per process: one renderer cache per scene (task + robot file), shared by the pooled
        backends of episodes in flight together (`MujocoBackend(renderers=...)`); a backend built
        on its own (`registry.make_backend`) keeps its own renderer."""
        atexit.register(self.close_renderers)

    @property
    def entries(self) -> dict[str, TaskEntry]:
        return ENTRIES

    def task_names(self) -> list[str]:
        return [*ENTRIES, *PEAR_ENTRIES, *object_tasks()]

    def entry(self, task: str) -> TaskEntry:
        base, _ = split_task(task)
        if base.startswith(OBJECT_TASK_PREFIX):
            if base not in object_tasks():
                from pear_agent.object_config import object_names

                raise UnknownNameError(
                    f"unknown object {base[len(OBJECT_TASK_PREFIX) :]!r} in task {base!r}; objects are: "
                    f"{', '.join(object_names())} (an object is one YAML in objects/ or a folder named by "
                    "PEAR_OBJECT_DIRS)"
                )
            return OBJECT_ENTRY
        if base in PEAR_ENTRIES:
            return PEAR_ENTRIES[base]
        if base not in ENTRIES:
            raise UnknownNameError(f"unknown mujoco task {base!r}; tasks are: {', '.join(ENTRIES)}")
        return ENTRIES[base]

    def owns(self, task: str) -> bool:
        base = task.partition("~")[0]
        return base in ENTRIES or base in PEAR_ENTRIES or base.startswith(OBJECT_TASK_PREFIX)

    def add_arguments(self, parser: Any, command: str) -> None:
        super().add_arguments(parser, command)
        if command == "bench":
            add_option(
                parser,
                "--perturb",
                default=None,
                help="MuJoCo tasks: comma-separated perturbations, one task per perturbation ("
                + ", ".join(DIMENSIONS)
                + "; `none` keeps the unperturbed task beside them), e.g. none,camera,layout",
            )
        elif command in ("run", "prompt", "rollouts"):
            add_option(parser, "--perturb", default=None, choices=list(DIMENSIONS), help=PERTURB_HELP)

    def options(self, args: Any) -> dict[str, Any]:
        out = super().options(args)
        perturb = getattr(args, "perturb", None)
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
        listed = [d.strip() for d in (getattr(args, "perturb", None) or "").split(",") if d.strip()]
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
        base = split_task(task)[0]
        return base.startswith(OBJECT_TASK_PREFIX) or super().has_default_policy(base)

    def default_policy(
        self, task: str, *, seed: int = 0, action_noise_cm: float = 0.0, pilot_noise: float = 0.0
    ) -> Any:
        # the expert reads the simulator's facts: a visual perturbation is invisible to it, a
        # reworded instruction means nothing to it, a mirrored layout changes its plan
        return super().default_policy(
            split_task(task)[0], seed=seed, action_noise_cm=action_noise_cm, pilot_noise=pilot_noise
        )

    def build_backend(self, task: str, robot: RobotConfig, render: bool, pooled: bool = False) -> Any:
        from sim_adapters.mujoco.backend import MujocoBackend
        from sim_adapters.mujoco.tasks import make_task

        base, dim = split_task(task)
        # a perturbed backend's model changes per episode: it keeps its own renderer. One cache per
        # scene and thread: a GL context is current in the thread that made it (EGL refuses it in
        # another: EGL_BAD_ACCESS), e.g. skyrl-gym's episode threads beside the main one
        key = (base, robot.label, threading.get_ident())
        shared = self._renderers.setdefault(key, {}) if render and pooled and not dim else None
        return MujocoBackend(robot, make_task(base), render=render, renderers=shared, perturbation=dim)

    def close_renderers(self) -> None:
        for cache in self._renderers.values():
            for r in cache.values():
                with contextlib.suppress(Exception):  # closing at exit must never raise
                    r.close()
        self._renderers.clear()


FAMILY = MujocoFamily()
