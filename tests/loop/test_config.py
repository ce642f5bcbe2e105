"""The loop's configuration is one typed object: `EpisodeConfig` in pear_agent/loop/config.py.

A class elsewhere in pear_agent/ or sim_adapters/ that declares a field named like one of its
settings (a dataclass, a pydantic model, a NamedTuple...) is a second declaration of that setting
unless it is on `ALLOWED` with its reason: a container carries the loop's object (`EnvSpec.loop`,
`RolloutJob.config`), or builds it (`Recipe.episode_config`)."""

from __future__ import annotations

import ast
import dataclasses
import pickle
from pathlib import Path

import pytest

from pear_agent.loop.config import EpisodeConfig, check_max_chunk, check_observation

ROOT = Path(__file__).resolve().parents[2]
HOME = "pear_agent/loop/config.py"
SETTINGS = frozenset(f.name for f in dataclasses.fields(EpisodeConfig))

ALLOWED: dict[tuple[str, str, str], str] = {
    # The training recipe's YAML keys (its files' format): each is handed to EpisodeConfig, which
    # checks it (`Recipe.episode_config`, also the recipe's validator).
    **{
        ("pear_agent/train/config.py", "Recipe", name): "the recipe's YAML key, checked by EpisodeConfig"
        for name in ("observation", "scene_facts", "scene_relative", "history", "history_older")
    },
    (
        "pear_agent/train/config.py",
        "GRPOConfig",
        "mode",
    ): "the recipe's grpo.mode YAML key, idem",
    ("pear_agent/train/config.py", "GRPOConfig", "max_turns"): "the recipe's grpo.max_turns YAML key, idem",
    # What an episode recorded: the values it ran with (resolved: max_chunk from the robot), not a setting.
    **{
        ("pear_agent/loop/episode.py", "EpisodeResult", name): "the result records what the episode ran with"
        for name in (
            "mode",
            "max_invalid",
            "observation",
            "scene_facts",
            "max_chunk",
            "history",
            "history_older",
        )
    },
    ("pear_agent/rl/trajectories.py", "TrajectoryRecord", "mode"): "a trajectory records its episode's mode",
    # Other things that share a name.
    ("pear_agent/loop/registry.py", "EnvSpec", "mode"): "the clock the environment is built for (a caller "
    "may build a paused one for a realtime config: `prompt`)",
    (
        "pear_agent/policies/base.py",
        "TurnContext",
        "observation",
    ): "the turn's observation itself",
    ("pear_agent/policies/base.py", "TurnContext", "max_chunk"): "the resolved chunk size the prompt states",
    ("pear_agent/policies/base.py", "PolicyReply", "latency_s"): "a reply's measured decision time",
    ("pear_agent/policies/openai_wire.py", "PrivilegedTurn", "max_chunk"): "the wire field the client sends",
    (
        "pear_agent/robot/config.py",
        "RobotConfig",
        "max_chunk",
    ): "the robot YAML's default, <= 16",
    (
        "pear_agent/robot/backend.py",
        "TaskInfo",
        "max_turns",
    ): "the task's own turn limit",
    ("sim_adapters/mujoco/tasks/base.py", "MujocoTask", "max_turns"): "a task's own turn limit",
    **{
        ("sim_adapters/roadster/commands.py", cmd, "mode"): "a roadster command's thruster mode"
        for cmd in ("Coast", "Climb", "Hold", "Rotate", "Land")
    },
    # Left as they are: a bench's jobs are JSON dicts recorded in the bench's folder and compared on
    # --resume; folding these four into its `episode` dict changes that recorded format.
    **{
        (
            "pear_agent/bench/runner.py",
            "BenchConfig",
            name,
        ): "a bench's recorded job fields"
        for name in ("mode", "latency_s", "max_turns", "max_context_tokens")
    },
}


def declarations(source: str, path: str) -> list[tuple[str, str, str]]:
    """(path, class, field) for each class-level annotated field named like a loop setting."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                named = isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                if named and item.target.id in SETTINGS:  # type: ignore[union-attr]
                    found.append((path, node.name, item.target.id))  # type: ignore[union-attr]
    return found


def project_declarations() -> list[tuple[str, str, str]]:
    found = []
    for folder in ("pear_agent", "sim_adapters"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel != HOME:
                found += declarations(path.read_text(encoding="utf-8"), rel)
    return found


def test_each_loop_setting_is_declared_once() -> None:
    found = project_declarations()
    copies = [f"{p}: {c}.{n}" for p, c, n in found if (p, c, n) not in ALLOWED]
    assert not copies, (
        "a loop setting declared again outside pear_agent/loop/config.py (contain the EpisodeConfig, or "
        f"add the field to ALLOWED with its reason): {copies}"
    )
    stale = sorted(set(ALLOWED) - set(found))
    assert not stale, f"ALLOWED names fields that are gone: {stale}"
    assert ("pear_agent/loop/config.py", "EpisodeConfig", "observation") in declarations(
        (ROOT / HOME).read_text(encoding="utf-8"), HOME
    )


def test_the_scan_finds_a_copy_of_a_setting_in_any_kind_of_container() -> None:
    source = """
from dataclasses import dataclass
from typing import NamedTuple
from pydantic import BaseModel

@dataclass
class Options:
    max_chunk: int | None = None

class Wire(BaseModel):
    history: int | None = None

class Row(NamedTuple):
    observation: str
"""
    found = declarations(source, "pear_agent/x.py")
    assert found == [("pear_agent/x.py", "Options", "max_chunk"), ("pear_agent/x.py", "Wire", "history"),
                     ("pear_agent/x.py", "Row", "observation")]  # fmt: skip
    assert not any(f in ALLOWED for f in found)


def test_the_config_is_frozen_hashable_and_picklable() -> None:
    a = EpisodeConfig(observation="state", max_chunk=4, history=2)
    assert pickle.loads(pickle.dumps(a)) == a and hash(a) == hash(
        EpisodeConfig(observation="state", max_chunk=4, history=2)
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.observation = "both"  # type: ignore[misc]


@pytest.mark.parametrize("bad", [0, -1, True, 2.0, "3"])
def test_max_chunk_is_checked_by_one_function(bad) -> None:
    with pytest.raises(ValueError, match=r"^--max-chunk must be an integer >= 1, not "):
        EpisodeConfig(max_chunk=bad)
    with pytest.raises(ValueError, match=r"^--max-chunk must be an integer >= 1, not "):
        check_max_chunk(bad)
    check_max_chunk(16)


def test_observation_is_checked_by_one_function() -> None:
    with pytest.raises(ValueError, match=r"^observation must be one of \[.*\], not 'pixels'$"):
        EpisodeConfig(observation="pixels")
    with pytest.raises(ValueError, match=r"^observation must be one of"):
        check_observation("pixels")
    check_observation("compact")


def test_a_recipe_builds_the_loops_own_object() -> None:
    from pear_agent.train.config import load_recipe

    recipe = load_recipe("arm_pick", "cpu")
    cfg = recipe.episode_config()
    assert isinstance(cfg, EpisodeConfig)
    assert (cfg.observation, cfg.scene_facts, cfg.scene_relative) == (recipe.observation, True, True)
    assert (cfg.mode, cfg.max_turns) == (recipe.grpo.mode, recipe.grpo.max_turns)
    assert recipe.episode_config(teacher=True) == dataclasses.replace(cfg, mode="paused", max_turns=None)
    with pytest.raises(ValueError, match=r"observation must be one of"):
        load_recipe("arm_pick", "cpu", sets=["observation=pixels"])
    with pytest.raises(ValueError, match=r"--history must be an integer >= 0"):
        load_recipe("arm_pick", "cpu", sets=["history=-1"])
