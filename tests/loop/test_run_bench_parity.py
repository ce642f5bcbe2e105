"""`run` and `bench` fly the same episode for the same task, seed and options (`run` read
`--latency` under a name the option no longer had, so its planning pilot crashed where `bench`
landed). The options compared are every turn-loop setting (`EpisodeConfig`) and every family
option both commands take, found from their definitions: a new one fails
`test_every_shared_option_has_a_sample` until it has a sample here, and is then compared."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from pear_agent.cli import build_parser, main
from pear_agent.loop.config import EpisodeConfig
from pear_agent.loop.registry import families
from pear_agent.settings import cli_fields

pytest.importorskip("mujoco")

ROADSTER = "roadster_kickflip:light"
SEED = 20000

SAMPLES: dict[str, tuple[str, list[str]]] = {
    "max_turns": (ROADSTER, ["--max-turns", "6"]),
    "max_invalid": (ROADSTER, ["--max-invalid", "1"]),
    "observation": (ROADSTER, ["--observation", "compact"]),
    "history": (ROADSTER, ["--history", "2"]),
    "history_older": (ROADSTER, ["--history", "2", "--history-older", "drop"]),
    "scene_facts": (ROADSTER, ["--scene-facts"]),
    "max_chunk": (ROADSTER, ["--max-chunk", "5"]),
    "mode": (ROADSTER, ["--realtime"]),
    "latency_s": (ROADSTER, ["--realtime", "--latency", "1.0", "--max-chunk", "10"]),
    "max_context_tokens": (ROADSTER, ["--max-context-tokens", "1500"]),
    "fly_whole_plan": (ROADSTER, ["--fly-whole-plan", "--max-chunk", "5"]),
    "wind": ("roadster_kickflip", ["--wind", "gale"]),
    "robot": ("pick_cube", ["--robot", "ur5e_2f85", "--observation", "state"]),
    "perturb": ("pick_cube", ["--perturb", "layout", "--observation", "state"]),
    "scene_relative": ("pick_cube", ["--scene-facts", "--scene-relative", "--observation", "compact"]),
    "record_fps": ("pick_cube", ["--record-fps", "10", "--observation", "state"]),
}
"""Option (its field's name) -> (task, the options given to both commands)."""

NOT_COMPARED = ("latency", "wall", "images", "policy_info", "usage", "_ms")
"""Turn-record keys (at any depth) that hold wall-clock times or file paths (they differ between
any two runs: `ik_ms` is how long IK took);
realtime without --latency, also `advanced_s` (the measured decision time: the roadster flies it
in whole 0.2 s intervals, so the flight itself is compared)."""


def _declared(command: str) -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest for a in sub.choices[command]._actions}


def shared_options() -> set[str]:
    """Every loop setting and family option (by field name) that both `run` and `bench` take."""
    definitions = [EpisodeConfig, *{f.options_type for f in families().values() if f.options_type}]
    names = {f.name for cls in definitions for f in cli_fields(cls)}
    return names & _declared("run") & _declared("bench")


def test_every_shared_option_has_a_sample() -> None:
    shared = shared_options()
    assert {"latency_s", "max_chunk", "mode", "fly_whole_plan"} <= shared
    assert set(SAMPLES) == shared, f"a sample for each option both commands take: {shared ^ set(SAMPLES)}"


def _kept(value: Any, skip: tuple[str, ...]) -> Any:
    if isinstance(value, dict):
        return {k: _kept(v, skip) for k, v in value.items() if not any(w in k for w in skip)}
    if isinstance(value, list):
        return [_kept(v, skip) for v in value]
    return value


def _turns(log: Path, measured: bool) -> list[dict[str, Any]]:
    skip = (*NOT_COMPARED, "advanced_s") if measured else NOT_COMPARED
    lines = [json.loads(raw) for raw in log.read_text().splitlines()]
    return [_kept(line, skip) for line in lines if line.get("kind") == "turn"]


def _run(tmp: Path, task: str, options: list[str], capsys: pytest.CaptureFixture) -> tuple[dict, list]:
    argv = ["run", "--task", task, "--seed", str(SEED), "--no-video", "--json", "--runs-dir", str(tmp)]
    main([*argv, *options])
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    return summary, _turns(next(tmp.rglob("episode.jsonl")), "--latency" not in options)


def _bench(tmp: Path, task: str, options: list[str]) -> tuple[dict, list]:
    argv = ["bench", "--tasks", task, "--seeds", str(SEED), "--no-video", "--quiet", "--out", str(tmp)]
    main([*argv, *options])
    (line,) = [json.loads(x) for x in (tmp / "results.jsonl").read_text().splitlines()]
    return line, _turns(next(tmp.rglob("episode.jsonl")), "--latency" not in options)


@pytest.mark.parametrize("option", sorted(SAMPLES))
def test_run_and_bench_fly_the_same_episode(option: str, tmp_path: Path, capsys) -> None:
    task, options = SAMPLES[option]
    ran, ran_turns = _run(tmp_path / "run", task, options, capsys)
    benched, bench_turns = _bench(tmp_path / "bench", task, options)
    assert ran["task"] == benched["task"]
    for key in ("success", "turns", "end_reason", "detail", "mode", "latency_injected_s", "max_chunk"):
        assert ran[key] == benched[key], (option, key, ran[key], benched[key])
    assert ran["sim_time_s"] == pytest.approx(benched["sim_time_s"], abs=1e-9)
    assert ran_turns and len(ran_turns) == len(bench_turns)
    for a, b in zip(ran_turns, bench_turns, strict=True):
        assert a == b, (option, a["turn"], {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)})


def test_the_parity_check_sees_a_difference(tmp_path: Path, capsys) -> None:
    """The comparison can fail: a different latency flies a different episode."""
    plans = ["--realtime", "--max-chunk", "10", "--latency"]
    _, ran_turns = _run(tmp_path / "run", ROADSTER, [*plans, "1.0"], capsys)
    _, bench_turns = _bench(tmp_path / "bench", ROADSTER, [*plans, "0.6"])
    assert ran_turns != bench_turns
