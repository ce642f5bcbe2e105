"""Each loop option and model setting is declared once (a dataclass field) and the command lines
are made from it: a flag declared again by hand, or a command whose option drifted from its field,
fails here."""

from __future__ import annotations

import argparse
import ast
import dataclasses
from pathlib import Path

import pytest

from pear_agent.cli import build_parser
from pear_agent.episode import EpisodeConfig, clock_from_args
from pear_agent.policies.model_settings import ModelSettings, settings_from_args
from pear_agent.settings import add_arguments, cli_fields, flag_of, reference, setting, values_from_args

ROOT = Path(__file__).resolve().parent.parent
DEFINITIONS = (ModelSettings, EpisodeConfig)


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _hand_declared_flags() -> dict[str, list[str]]:
    """Every literal `add_argument("--flag", ...)` in the package and the adapters."""
    found: dict[str, list[str]] = {}
    for path in [*ROOT.glob("pear_agent/**/*.py"), *ROOT.glob("sim_adapters/**/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                "add_argument",
                "add_option",
            ):
                for arg in node.args:
                    if isinstance(arg, ast.Constant) and str(arg.value).startswith("--"):
                        found.setdefault(arg.value, []).append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


OTHER_MEANINGS = {
    ("--model", "pear_agent/train/cli.py"): "train eval: a local checkpoint folder, not an endpoint's model",
    ("--temperature", "pear_agent/train/cli.py"): "train eval: the local model's sampling",
    ("--timeout-s", "pear_agent/ros2/operator_cli.py"): "ros health: how long to wait for the graph",
    ("--latency", "pear_agent/bench/commands.py"): "serve: the reply delay the test server injects",
}
"""Flags that share a setting's name but mean something else in another command."""


def test_no_setting_is_declared_again_by_hand() -> None:
    hand = {
        flag: [w for w in where if (flag, w.split(":")[0]) not in OTHER_MEANINGS]
        for flag, where in _hand_declared_flags().items()
    }
    hand = {flag: where for flag, where in hand.items() if where}
    again = {
        flag_of(f): hand[flag_of(f)] for cls in DEFINITIONS for f in cli_fields(cls) if flag_of(f) in hand
    }
    assert not again, f"declared by hand besides its dataclass field: {again}"


@pytest.mark.parametrize("command", ["run", "bench"])
def test_run_and_bench_offer_every_setting_with_its_declared_default(command: str) -> None:
    parser = _subparser(command)
    by_dest = {a.dest: a for a in parser._actions}
    for cls in DEFINITIONS:
        for f in cli_fields(cls):
            action = by_dest.get(f.name)
            assert action is not None, f"`{command}` lacks {flag_of(f)} ({cls.__name__}.{f.name})"
            assert flag_of(f) in action.option_strings
            expected = f.metadata["argparse"].get("default", f.default)
            if expected is dataclasses.MISSING:
                expected = f.default_factory() if f.default_factory is not dataclasses.MISSING else None
            if f.name == "extra_body":
                expected = {}
            assert action.default == expected, (command, f.name, action.default, expected)
            assert action.help == f.metadata["help"]


def test_every_cli_field_is_documented_in_the_reference_rows() -> None:
    rows = {flag for cls in DEFINITIONS for flag, _, _ in reference(cls)}
    assert rows == {flag_of(f) for cls in DEFINITIONS for f in cli_fields(cls)}
    assert "--realtime" in rows and "--no-stream" in rows and "--latency" in rows


def test_command_line_values_reach_the_dataclasses_and_their_checks() -> None:
    parser = _subparser("run")
    args = parser.parse_args(
        [
            "--model",
            "m",
            "--realtime",
            "--latency",
            "0.5",
            "--max-tokens",
            "0",
            "--no-stream",
            "--max-context-tokens",
            "900",
            "--max-invalid",
            "2",
            "--observation",
            "state",
        ]
    )
    s = settings_from_args(args)
    assert s is not None and s.max_tokens is None and s.stream is False and s.retry_timeouts is False
    clock = clock_from_args(args)
    assert clock == {"mode": "realtime", "latency_s": 0.5, "max_context_tokens": 900}
    assert values_from_args(EpisodeConfig, args)["observation"] == "state"
    with pytest.raises(ValueError, match="--latency needs --realtime"):
        clock_from_args(parser.parse_args(["--latency", "2", "--max-context-tokens", "10"]))
    with pytest.raises(ValueError, match="--max-context-tokens must be > 0"):
        clock_from_args(parser.parse_args(["--max-context-tokens", "0"]))
    with pytest.raises(ValueError, match="--timeout-s must be > 0"):
        ModelSettings(model="m", timeout_s=0)  # the same check from Python as from the command line


def test_a_new_field_appears_on_the_command_line_with_its_shape() -> None:
    @dataclasses.dataclass
    class Knobs:
        speed_cm_s: float = setting(2.5, help="how fast")
        loud: bool = setting(False, action="store_true", help="say more")
        hidden: int = setting(1, cli=False, help="not a flag")

    p = argparse.ArgumentParser()
    add_arguments(p, Knobs)
    args = p.parse_args(["--speed-cm-s", "4", "--loud"])
    assert values_from_args(Knobs, args) == {"speed_cm_s": 4.0, "loud": True}
    with pytest.raises(SystemExit):
        p.parse_args(["--hidden", "2"])


def test_the_settings_reference_page_is_current_and_lists_every_setting() -> None:
    import subprocess
    import sys

    from pear_agent.ros2.settings import RosSettings

    p = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "settings_reference.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    page = (ROOT / "docs" / "settings-reference.md").read_text()
    for cls in DEFINITIONS:
        for f in cli_fields(cls):
            assert f"| `{flag_of(f)}` |" in page
    for name in RosSettings.model_fields:
        assert f"| `{name}` |" in page
