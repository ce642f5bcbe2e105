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
from pear_agent.cli.loop_options import clock_from_args, model_settings_from_args
from pear_agent.loop.config import EpisodeConfig
from pear_agent.policies.model_settings import ModelSettings
from pear_agent.ros2.modes import ArmModeSettings
from pear_agent.settings import (
    add_arguments,
    cli_fields,
    flag_of,
    from_args,
    reference,
    setting,
    values_from_args,
)

ROOT = Path(__file__).resolve().parent.parent
DEFINITIONS = (ModelSettings, EpisodeConfig, ArmModeSettings)


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
    ("--model", "pear_agent/cli/train.py"): "train eval: a local checkpoint folder, not an endpoint's model",
    ("--temperature", "pear_agent/cli/train.py"): "train eval: the local model's sampling",
    ("--timeout-s", "pear_agent/ros2/operator_cli.py"): "ros health: how long to wait for the graph",
    ("--latency", "pear_agent/cli/bench.py"): "serve: the reply delay the test server injects",
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
    s = model_settings_from_args(args)
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


@pytest.mark.parametrize("command", ["bench", "rollouts"])
def test_bench_and_rollouts_spread_their_episodes_with_the_one_declaration(command: str) -> None:
    from pear_agent.loop.workers import WorkerOptions

    parser = _subparser(command)
    by_dest = {a.dest: a for a in parser._actions}
    for f in cli_fields(WorkerOptions):
        action = by_dest[f.name]
        assert action.option_strings == [flag_of(f)] and action.help == f.metadata["help"]
        assert action.default == f.default, (command, f.name)
    assert not {flag_of(f) for f in cli_fields(WorkerOptions)} & set(_hand_declared_flags())
    spread = from_args(WorkerOptions, parser.parse_args(["--workers", "3", "--concurrency", "2"]))
    assert (spread.workers, spread.concurrency, spread.ray_address) == (3, 2, None)
    with pytest.raises(ValueError, match="--workers and --concurrency must be >= 1, not 1 and 0"):
        from_args(WorkerOptions, parser.parse_args(["--concurrency", "0"]))


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
    from pear_agent.ros2.settings import agent_parameters

    for p in agent_parameters():  # every agent node parameter, with where it is defined
        assert f"| `{p.name}` | {p.type.__name__} | `{p.default!r}` | `{p.source}` |" in page


# -- the ROS 2 agent node's parameters ------------------------------------------------------------
def _declared_twice(rows: list) -> dict[str, list[str]]:
    where: dict[str, list[str]] = {}
    for p in rows:
        where.setdefault(p.name, []).append(p.source)
    return {name: sources for name, sources in where.items() if len(sources) > 1}


def _literal_parameter_dicts(path: Path, names: set[str]) -> list[int]:
    """Lines of dict literals in `path` that give an agent parameter a literal default."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Dict):
            keys = [
                k.value
                for k, v in zip(node.keys, node.values, strict=True)
                if isinstance(k, ast.Constant) and k.value in names and isinstance(v, ast.Constant)
            ]
            if len(keys) >= 2:
                lines.append(node.lineno)
    return lines


OTHER_NODES = {
    "sim_robot_node.py": "the simulated robot's own parameters (robot, task, seed, its topics)",
    "yam_driver_node.py": "the YAM driver's own parameters (robot, its topics, its stop limits)",
}
"""ROS 2 modules whose parameter tables share names with the agent's: other nodes, other meanings."""


def test_no_agent_node_parameter_is_declared_twice() -> None:
    pytest.importorskip("pinocchio")
    from pear_agent.ros2 import agent_node
    from pear_agent.ros2.settings import Parameter, agent_defaults, agent_parameters

    rows = agent_parameters()
    assert _declared_twice(rows) == {}
    # the check fails when a name is declared again (e.g. a loop option restated in AgentSettings)
    again = [*rows, Parameter("max_turns", int, 30, "", "AgentSettings")]
    assert _declared_twice(again) == {"max_turns": ["EpisodeConfig.max_turns", "AgentSettings"]}
    assert agent_defaults() == agent_node.PARAMS and len(agent_node.PARAMS) == len(rows)
    # no default restated by hand anywhere in the ROS package but in the other nodes' own tables
    names = {p.name for p in rows}
    restated = {
        path.name: _literal_parameter_dicts(path, names)
        for path in sorted((ROOT / "pear_agent" / "ros2").glob("*.py"))
        if path.name not in OTHER_NODES and _literal_parameter_dicts(path, names)
    }
    assert restated == {}


def test_the_agent_nodes_shared_parameters_are_the_loops_and_the_model_clients() -> None:
    pytest.importorskip("pinocchio")
    from pear_agent.ros2.settings import UNSET, agent_parameters, shared_values

    fields = {f"{cls.__name__}.{f.name}": f for cls in DEFINITIONS for f in dataclasses.fields(cls)}
    shared = [p for p in agent_parameters() if "." in p.source]
    assert {p.name for p in shared} >= {"max_turns", "observation", "model", "temperature", "keep_images"}
    for p in shared:
        f = fields[p.source]
        assert p.default == (f.default if f.default is not None else UNSET[p.type]), p
        assert p.description.startswith(f.metadata["help"]), p
    # the ROS values read back as the client's settings: unset ones are None, the others as given
    params = {p.name: p.default for p in agent_parameters()} | {"model": "m", "max_tokens": 0}
    model = ModelSettings(**shared_values(params, "ModelSettings"))
    assert model.model == "m" and model.temperature is None and model.base_url is None
    assert model.max_tokens is None and model.keep_images is None and model.timeout_s == 120.0
    params |= {"temperature": 0.0, "keep_images": 2, "model_timeout_s": 30.0}
    model = ModelSettings(**shared_values(params, "ModelSettings"))
    assert model.temperature == 0.0 and model.keep_images == 2 and model.timeout_s == 30.0
    assert shared_values(params, "EpisodeConfig") == {
        "max_turns": None,
        "observation": "both",
        "history": None,
        "history_older": "line",
    }
    params |= {"history": 2, "history_older": "drop"}  # the window reaches the ROS agent's loop
    assert EpisodeConfig(**shared_values(params, "EpisodeConfig")).history == 2


# -- settings are read as fields ------------------------------------------------------------------
def _setting_names() -> set[str]:
    """Every field declared with `setting(...)` in the package and the adapters (the loop's, the
    model client's, each family's options): found by reading the source, so a new one counts."""
    names: set[str] = set()
    for path in [*ROOT.glob("pear_agent/**/*.py"), *ROOT.glob("sim_adapters/**/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name)
                and node.value.func.id == "setting"
            ):
                names.add(node.target.id)
    return names


def settings_read_by_name(source: str, settings: set[str]) -> list[tuple[int, str, str]]:
    """(line, object, name) of each `getattr(obj, "name"[, default])` in `source` that reads a setting
    by a string: any literal name off parsed arguments (`args`, `*_args`, a Namespace), or a name
    that is a declared setting off any object."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"):
            continue
        if len(node.args) < 2 or not isinstance(node.args[1], ast.Constant):
            continue
        obj, name = ast.unparse(node.args[0]), node.args[1].value
        if obj == "args" or obj.endswith(("_args", ".args", "namespace")) or name in settings:
            found.append((node.lineno, obj, name))
    return found


NOT_SETTINGS = {
    ("pear_agent/policies/openai_client.py", "chunk", "model"): "a streamed chunk's model name (the "
    "server's answer), not the model setting",
    ("pear_agent/policies/openai_client.py", "choice", "logprobs"): "a streamed choice's log-probabilities "
    "(the server's answer), not the logprobs setting",
    ("pear_agent/policies/openai_client.py", "resp.choices[0]", "logprobs"): "a reply's log-probabilities "
    "(the server's answer), not the logprobs setting",
}
"""`getattr` reads the scan finds whose name is a setting's but whose object is something else."""


def test_no_setting_is_read_by_its_name_as_a_string() -> None:
    settings = _setting_names()
    assert {"max_chunk", "latency_s", "model", "robot", "wind", "perturb"} <= settings
    found = {
        f"{path.relative_to(ROOT)}:{line}: getattr({obj}, {name!r})"
        for path in [*ROOT.glob("pear_agent/**/*.py"), *ROOT.glob("sim_adapters/**/*.py")]
        for line, obj, name in settings_read_by_name(path.read_text(), settings)
        if (str(path.relative_to(ROOT)), obj, name) not in NOT_SETTINGS
    }
    assert not found, "read a setting as a field (from_args / the dataclass), not by name: " + "; ".join(
        sorted(found)
    )


@pytest.mark.parametrize(
    "line",
    [
        'getattr(args, "latency", None)',  # a past regression: the option's field is latency_s
        'getattr(args, "json")',
        'getattr(self.args, "seed", 0)',
        'getattr(ctx, "max_chunk", 1)',
        'getattr(policy, "latency_s", None)',
    ],
)
def test_the_scan_catches_a_setting_read_by_name(line: str) -> None:
    assert settings_read_by_name(f"x = {line}\n", _setting_names()), line


def test_the_scan_leaves_plain_attribute_lookups_alone() -> None:
    source = 'a = getattr(resp, "choices", None)\nb = getattr(args, name)\nc = args.latency_s\n'
    assert settings_read_by_name(source, _setting_names()) == []


def test_a_family_option_goes_to_the_commands_it_names_once_and_reads_back_as_a_field() -> None:
    from pear_agent.settings import from_args

    @dataclasses.dataclass
    class Shared:
        robot: str | None = setting(None, help="shared by two families")

    @dataclasses.dataclass
    class Mine(Shared):
        wind: str = setting("light", commands=("run", "bench"), help="the wind")
        suite: str | None = setting(None, commands=("bench",), help="bench only")

    run, bench = argparse.ArgumentParser(), argparse.ArgumentParser()
    add_arguments(run, Shared, command="run")
    add_arguments(run, Mine, command="run", defaults={"wind": "gale"})  # --robot: declared once
    add_arguments(bench, Mine, command="bench")
    assert "--suite" not in run._option_string_actions and "--suite" in bench._option_string_actions
    got = from_args(Mine, run.parse_args(["--robot", "yam"]))
    assert (got.robot, got.wind, got.suite) == ("yam", "gale", None)  # suite: the field's default
    assert from_args(Mine, bench.parse_args(["--suite", "s"])).suite == "s"
