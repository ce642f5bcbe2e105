"""The one registry of environment families: every task of every family is built the same way.

A family (the MuJoCo arm tasks, LIBERO, the flying roadster, one that lives in another package) is
a `Family`: it names its tasks, declares its own command-line options (`--robot`, `--wind`,
`--suite`), builds an `Environment` for a task from a plain `EnvSpec`, and gives a task's default
policy. `run`, `bench`, `rollouts`, `serve` and `prompt` only ever ask this module (and, for the
parts only some families have, `pear_agent.loop.family_parts`).

Families are found by entry point (group `pear_agent.families`, each naming a `Family` instance or
class), so one can live outside this repository:

    [options.entry_points]
    pear_agent.families =
        mine = my_package.family:FAMILY

The four in this repository are registered the same way (setup.cfg) and are also known here by
name, so an install whose metadata predates them still finds them. Adapter modules are imported
only through this registry, lazily: nothing in `pear_agent/` imports `sim_adapters` by name, not even
inside a function (`tests/loop/test_registry.py` scans every import statement); what only an adapter can
do for a command is an optional part of its family (`pear_agent.loop.family_parts`).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from pear_agent.loop import family_parts
from pear_agent.loop.config import EpisodeConfig
from pear_agent.loop.environment import environment_options
from pear_agent.settings import add_arguments, from_args

if TYPE_CHECKING:
    from pear_agent.loop.environment import Environment
    from pear_agent.policies.base import Policy
    from pear_agent.robot.backend import Backend
    from pear_agent.robot.config import RobotConfig

ENTRY_POINT_GROUP = "pear_agent.families"
BUILTIN_FAMILIES: dict[str, str] = {
    name: f"sim_adapters.{name}.family:FAMILY" for name in ("mujoco", "libero", "roadster", "metaworld")
}
"""The families of this repository, each `sim_adapters/<name>/family.py`'s `FAMILY` (also declared as
entry points in setup.cfg)."""


class UnknownNameError(ValueError):
    """An unknown task, or a task a robot cannot do: one line for the user."""


@dataclass(frozen=True)
class EnvSpec:
    """What a worker needs to build one task's environment: plain values (picklable, hashable), so
    it crosses to worker processes and keys the per-process pool of built environments."""

    task: str
    """The family's canonical name, e.g. `pick_cube`, `libero_spatial/0`, `roadster_kickflip:storm`."""
    options: tuple[tuple[str, Any], ...] = ()
    """The family's own options (e.g. `robot`), as sorted (name, value) pairs."""
    mode: str = "paused"
    render: bool = True
    """Camera images (arm tasks); the roadster renders only video frames."""
    loop: EpisodeConfig = field(default_factory=EpisodeConfig)
    """The loop settings the environment is built with (`ENVIRONMENT_OPTIONS`: observation, scene
    facts, max_chunk (None: the robot's or environment's default), max_turns, ...); the loop's
    other settings stay at their defaults here, so they never split the pool."""

    @classmethod
    def of(
        cls,
        task: str,
        options: dict[str, Any] | None = None,
        *,
        mode: str = "paused",
        render: bool = True,
        config: EpisodeConfig | None = None,
    ) -> EnvSpec:
        loop = EpisodeConfig(**environment_options(config)) if config is not None else EpisodeConfig()
        opts = tuple(sorted((k, v) for k, v in (options or {}).items() if v is not None))
        return cls(task, opts, mode, render, loop)

    def option(self, name: str, default: Any = None) -> Any:
        return dict(self.options).get(name, default)


@dataclass(frozen=True)
class PolicyAsk:
    """What a caller asks of a family's scripted policy (`Family.default_policy`)."""

    seed: int = 0
    """Seeds the policy's noise, for stochastic rollouts."""
    action_noise_cm: float = 0.0
    """Arm experts: noise added to each target."""
    pilot_noise: float = 0.0
    """The roadster's pilot: its per-flight rule jitter (0 = deterministic)."""
    config: EpisodeConfig | None = None
    """The episode's loop settings where the policy plans by them (the roadster's pilot plans for
    the injected decision time, `--latency`, when it flies plans)."""


NO_ASK = PolicyAsk()
"""The default ask: seed 0, no noise, no loop settings."""


def add_option(parser: Any, *flags: str, **kwargs: Any) -> None:
    """Add an option unless another family already declared it (e.g. `--robot`, shared by arms)."""
    if any(f in parser._option_string_actions for f in flags):
        return
    parser.add_argument(*flags, **kwargs)


class Family:
    """What every family of environments answers. Subclass it, name the tasks, build environments;
    every other hook has a default that suits a text world.

    The parts only some families have (a bench selection or summary, result fields, a report
    section, per-turn console lines, a prompt schema, RL rewards, scenario filters, serving
    without facts) are small protocols in `pear_agent.loop.family_parts` a family may also implement;
    the callers fall back to a default when it does not."""

    name: str = ""
    options_type: type | None = None
    """The family's own options: a dataclass of `pear_agent.settings.setting` fields (each says which
    commands take it), declared on those commands and read back as that dataclass (`parse`)."""
    default_episodes: int = 10
    """Episodes per task a bench runs when neither --episodes nor --seeds says."""
    idle_environments: int | None = None
    """Idle environments of this family a process keeps for reuse beyond those in flight (None:
    the pool's own limit); a family whose environments are large keeps fewer."""

    # -- names and options ---------------------------------------------------------------
    def task_names(self) -> list[str]:
        """Every task of the family (listed in errors and docs)."""
        return []

    def owns(self, task: str) -> bool:
        return task in self.task_names()

    def add_arguments(self, parser: argparse.ArgumentParser | Any, command: str) -> None:
        """Declare this family's options (`options_type`) for `command` (run, bench, rollouts,
        prompt); an option two families share is declared once."""
        if self.options_type is not None:
            add_arguments(parser, self.options_type, command=command)

    def parse(self, args: argparse.Namespace | Any) -> Any:
        """This family's options as its `options_type` (defaults for those `args` lacks)."""
        if self.options_type is None:
            raise TypeError(f"family {self.name!r} declares no options")
        return from_args(self.options_type, args)

    def options(self, args: argparse.Namespace | Any) -> dict[str, Any]:
        """This family's options from parsed arguments (plain values; they travel to workers)."""
        return {}

    def bench_options(self, args: argparse.Namespace | Any) -> dict[str, Any]:
        """The options a bench's workers need to build this family's environments (recorded with
        the bench; a resume must match them). Options that only name tasks are left out."""
        return self.options(args)

    def resolve(self, task: str, options: dict[str, Any]) -> str:
        """The canonical task name (e.g. with a wind band); raises ValueError for a bad one."""
        if not self.owns(task):
            raise UnknownNameError(f"unknown {self.name} task {task!r}")
        return task

    def expand(self, task: str, args: argparse.Namespace | Any) -> list[str]:
        """`bench --tasks`: the tasks one name stands for (the roadster: one per wind band)."""
        return [self.resolve(task, self.options(args))]

    # -- building --------------------------------------------------------------------------
    def make(self, spec: EnvSpec) -> Environment:
        """A new environment for `spec.task` (the caller closes it with `close_environment`)."""
        raise NotImplementedError

    def has_default_policy(self, task: str) -> bool:
        return False

    def default_policy(self, task: str, ask: PolicyAsk = NO_ASK) -> Policy:
        """The task's scripted policy (`--policy scripted`), as `ask` asks for it (`PolicyAsk`)."""
        raise ValueError(f"no scripted policy for task {task!r}; give --model")

    # -- what the commands print and record ----------------------------------------------
    def describe(self, env: Environment, task: str) -> str:
        """The console banner's middle: `panda / pick_cube`."""
        return f"{env.name} / {task}"

    def verdict(self, env: Environment) -> tuple[str, str]:
        """(word for a success, extra text) for the end-of-run line."""
        return "success", ""


# -- the registry ---------------------------------------------------------------------------
_FAMILIES: dict[str, Family] | None = None
_WARNED: set[str] = set()


def _load(target: Any) -> Family:
    obj = target.load() if hasattr(target, "load") else _import(target)
    if isinstance(obj, type):
        obj = obj()
    if not callable(getattr(obj, "make", None)) or not callable(getattr(obj, "task_names", None)):
        raise TypeError(f"{obj!r} is not a pear_agent.loop.registry.Family (no make / task_names)")
    return obj


def _import(target: str) -> Any:
    module, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


def _entry_points() -> list[Any]:
    try:
        return sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name)
    except Exception:  # broken metadata of some unrelated package: the built-ins still load
        return []


def families() -> dict[str, Family]:
    """Every registered family by name: this repository's, then entry points' (loaded once)."""
    global _FAMILIES
    if _FAMILIES is None:
        targets: dict[str, Any] = dict(BUILTIN_FAMILIES)
        for ep in _entry_points():
            targets.setdefault(ep.name, ep)
        found: dict[str, Family] = {}
        for name, target in targets.items():
            try:
                fam = _load(target)
            except Exception as exc:  # one broken family must not take the others down
                msg = f"environment family {name!r} could not be loaded: {type(exc).__name__}: {exc}"
                if msg not in _WARNED:
                    _WARNED.add(msg)
                    print(f"pear-agent: warning: {' '.join(msg.split())[:300]}", file=sys.stderr)
                continue
            fam.name = fam.name or name
            found[name] = fam
        _FAMILIES = found
    return _FAMILIES


def reload_families() -> dict[str, Family]:
    """Forget the loaded families (a test that installs one, a long-lived process)."""
    global _FAMILIES
    _FAMILIES = None
    return families()


def task_names() -> list[str]:
    return [t for fam in families().values() for t in fam.task_names()]


def family_of(task: str) -> Family:
    """The family that owns `task`; UnknownNameError naming every task otherwise."""
    for fam in families().values():
        if fam.owns(task):
            return fam
    raise UnknownNameError(f"unknown task {task!r}; tasks are: {_task_summary()}")


def _task_summary(most: int = 20) -> str:
    """Every family's tasks for a one-line error; a family with many (LIBERO-Plus alone has 10,030)
    by its first few and its count (`pear-agent tasks` lists them all)."""
    parts = []
    for fam in families().values():
        names = fam.task_names()
        if len(names) <= most:
            parts += names
        else:
            listing = f"pear-agent tasks --family {fam.name}"
            parts.append(f"{', '.join(names[:3])} ... ({len(names)} {fam.name} tasks: {listing})")
    return ", ".join(parts)


def resolve(task: str, options: dict[str, Any] | None = None) -> tuple[Family, str]:
    fam = family_of(task)
    return fam, fam.resolve(task, options or {})


def add_family_arguments(parser: argparse.ArgumentParser | Any, command: str) -> None:
    """Every family's own options for `command`."""
    for fam in families().values():
        fam.add_arguments(parser, command)


def family_options(args: argparse.Namespace | Any, task: str | None = None) -> dict[str, Any]:
    """The options of `task`'s family (of every family when None) from parsed arguments."""
    fams = [family_of(task)] if task is not None else list(families().values())
    out: dict[str, Any] = {}
    for fam in fams:
        out |= fam.options(args)
    return out


def make_environment(
    task: str,
    *,
    mode: str = "paused",
    render: bool = True,
    config: EpisodeConfig | None = None,
    **options: Any,
) -> Environment:
    """A new environment for any task of any family (e.g. `make_environment("roadster_kickflip",
    wind="storm")`, `make_environment("pick_cube", robot="ur5e")`)."""
    fam, canonical = resolve(task, options)
    return fam.make(EnvSpec.of(canonical, options, mode=mode, render=render, config=config))


def make_spec_environment(spec: EnvSpec) -> Environment:
    return family_of(spec.task).make(spec)


def text_expert_reply(messages: Any) -> tuple[str, str] | None:
    """(reasoning, reply) from the first family whose scripted policy answers `messages` alone
    (`pear-agent serve` without privileged facts), or None."""
    if not isinstance(messages, list):
        return None
    for fam in families().values():
        answer = family_parts.text_expert(fam, messages)
        if answer is not None:
            return answer
    return None


def report_html(task: str, lines: list[dict[str, Any]]) -> str:
    """Extra HTML the task's family adds to an episode's report page ('' when none)."""
    try:
        fam = family_of(task)
    except UnknownNameError:
        return ""
    return family_parts.report_html(fam, lines)


def close_environment(env: Any) -> None:
    """Release what an environment holds (simulator, renderers); never raises."""
    close = getattr(env, "close", None)
    if callable(close):
        with contextlib.suppress(Exception):  # closing must not mask the episode's own outcome
            close()


# -- arm tasks (robots described in YAML; used by the ROS 2 sim node and robots --check) ---------
def task_entry(task: str) -> Any:
    """The `TaskEntry` of an arm task (its backend, needs, default robot); UnknownNameError else."""
    fam = family_of(task)
    entry = getattr(fam, "entry", None)
    if entry is None:
        raise UnknownNameError(f"task {task!r} is not an arm task (it has no robot description)")
    return entry(task)


def make_backend(task: str, robot: RobotConfig, render: bool = True) -> Backend:
    """The simulator backend of an arm task on `robot` (refused when the robot cannot do it)."""
    fam = family_of(task)
    build = getattr(fam, "backend", None)
    if build is None:
        raise UnknownNameError(f"task {task!r} has no robot backend (it brings its own environment)")
    return build(task, robot, render)


def arm_tasks() -> dict[str, Any]:
    """Every arm task of every family -> its `TaskEntry` (what `robots --check` asks of a robot);
    tasks named by pattern (`pick_up_object/<name>`) are left out: `task_entry` knows them."""
    out: dict[str, Any] = {}
    for fam in families().values():
        out |= dict(getattr(fam, "entries", {}) or {})
    return out
