"""Meta-World as a family of the registry: its 50 v3 tasks (`metaworld/<env>`), the presets
`bench --preset metaworld_mt10` / `metaworld_mt50`, and Meta-World's own scripted policies as the
expert. Episodes run through the one bench runner (resume, workers, concurrency, report,
`compare`). Meta-World itself is imported only when a backend is built (in `.venv-metaworld`).
"""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path
from typing import Any

from pear_agent.bench.runner import parse_seeds
from pear_agent.loop.arm_environment import ArmEnvironment
from pear_agent.loop.arm_family import ArmFamily, ArmOptions, TaskEntry
from pear_agent.loop.environment import environment_options
from pear_agent.loop.family_parts import Selection
from pear_agent.loop.registry import EnvSpec
from pear_agent.policies.experts import within_caps
from pear_agent.robot.config import RobotConfig
from pear_agent.robot.loader import load_robot
from sim_adapters.metaworld import ENV_NAMES, MT10, PREFIX, task_names
from sim_adapters.metaworld.backend import MetaWorldBackend, ToolKinematics
from sim_adapters.metaworld.expert import metaworld_expert

METAWORLD_ROBOT = str(Path(__file__).resolve().parent / "metaworld_sawyer.yaml")
PRESETS: dict[str, tuple[str, ...]] = {"metaworld_mt10": MT10, "metaworld_mt50": ENV_NAMES}
"""`bench --preset NAME`: Meta-World's MT10 (10 tasks) and MT50 (all 50)."""
PRESET_SEEDS = "0-9"
"""A preset's default seeds: Meta-World's sampled variations 0-9 of each task (`--seeds` overrides)."""
SETUP_HINT = (
    "Meta-World runs in its own environment: bash scripts/setup_metaworld.sh, "
    "then .venv-metaworld/bin/pear-agent"
)


class MetaWorldUnavailableError(ValueError):
    """Meta-World is not installed in this Python (a ValueError: the CLI says it in one line)."""


def available() -> bool:
    return importlib.util.find_spec("metaworld") is not None


class MetaWorldEnvironment(ArmEnvironment):
    """The arm path over Meta-World: a turn is ignored (its gripper cannot turn), with a note."""

    def plan(
        self, action: Any, state: Any, joints_rad: Any, parts: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any], Any]:
        notes = []
        kept = {}
        for name, pa in (action.parts if parts is None else parts).items():
            if pa.orientation_rad is not None and any(abs(float(v)) > 1e-9 for v in pa.orientation_rad):
                notes.append(f"{name}: Meta-World's gripper cannot turn; the turn was ignored")
            kept[name] = dataclasses.replace(pa, orientation_rad=None)
        commands, info, refused = super().plan(action, state, joints_rad, kept)
        info["notes"] = notes + info["notes"]
        return commands, info, refused


class MetaWorldFamily(ArmFamily):
    name = "metaworld"
    default_episodes = 10
    options_type: type = ArmOptions

    def __init__(self) -> None:
        entry = TaskEntry("metaworld", METAWORLD_ROBOT, robots=(METAWORLD_ROBOT,))
        self._entries = {name: entry for name in task_names()}

    @property
    def entries(self) -> dict[str, TaskEntry]:
        return self._entries

    def expert(self, task: str) -> Any:
        """Meta-World's own scripted policy for the task (`expert.py`), within the per-turn caps."""
        return within_caps(metaworld_expert) if self.owns(task) else None

    def select(self, args: Any, *, model: bool) -> Selection | None:
        preset = self.parse(args).preset
        if not preset or not preset.startswith("metaworld"):
            return None
        if preset not in PRESETS:
            raise ValueError(f"unknown Meta-World preset {preset!r}; presets are: {', '.join(PRESETS)}")
        if not available():
            raise MetaWorldUnavailableError(f"Meta-World is not installed in this Python; {SETUP_HINT}")
        tasks = [PREFIX + n for n in PRESETS[preset]]
        seeds = parse_seeds(args.seeds or PRESET_SEEDS)
        print(
            f"{preset}: {len(tasks)} tasks x {len(seeds)} seeds = {len(tasks) * len(seeds)} episodes",
            flush=True,
        )
        # the expert reads Meta-World's own observation: no cameras unless a model looks
        return Selection(tasks, seeds=seeds, render=model, extra={"preset": preset})

    def build_backend(self, task: str, robot: RobotConfig, render: bool, pooled: bool = False) -> Any:
        if not available():
            raise MetaWorldUnavailableError(f"Meta-World is not installed in this Python; {SETUP_HINT}")

        return MetaWorldBackend(robot, task, render=render)

    def make(self, spec: EnvSpec) -> Any:

        robot = load_robot(spec.option("robot") or self.entry(spec.task).default_robot)
        backend = self.backend(
            spec.task, robot, spec.render and spec.loop.observation != "state", pooled=True
        )
        return MetaWorldEnvironment(backend, ToolKinematics(robot), **environment_options(spec.loop))  # type: ignore[arg-type]


FAMILY = MetaWorldFamily()
