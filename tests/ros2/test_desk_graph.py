"""The documented graphs run as written: docs/yam-driver.md's desk commands (both YAM drivers in
I2RT's sim mode, the agent with agent_i2rt_sim.yaml, the `pear-agent ros` operator commands), taken
from the page and run line by line, to an episode the operator judges a success, one stopped by an
e-stop and released, and one ended by Ctrl-C; each exit code and summary.json held to the lines'
comments and to docs/ros2.md's table. The same graph from a colcon build's install space. The
shipped agent files list every parameter."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ros2.doc_commands import (
    REPO,
    Line,
    Terminal,
    doc_lines,
    exit_table,
    summary_fields,
    wait,
    wait_for,
)

pytestmark = pytest.mark.wallclock

CONFIG = REPO / "launch" / "config"
RUNS = REPO / "runs"


def _needs_the_yam_driver() -> None:
    pytest.importorskip("rclpy", reason="ROS 2 wheels not installed (bash scripts/setup.sh --dev)")
    pytest.importorskip("i2rt.robots.get_robot", reason="I2RT driver deps missing (pip install -e '.[yam]')")
    pytest.importorskip("can", reason="python-can missing (pip install -e '.[yam]')")
    pytest.importorskip("diagnostic_msgs", reason="diagnostic_msgs missing (pip install -e '.[yam]')")
    if not (REPO / ".venv" / "bin" / "pear-agent").exists():
        pytest.skip("the docs' commands use .venv (bash scripts/setup.sh --dev)")


def _desk_runs() -> set[Path]:
    return set(RUNS.glob("*-desk-s0*"))


class Episodes:
    """The run folders the docs' agent (runs_dir: runs) creates, one per episode, in order."""

    def __init__(self) -> None:
        self.seen = _desk_runs()

    def next_summary(self) -> dict[str, Any]:
        new = wait_for(lambda: _desk_runs() - self.seen, 10, "a new run folder")
        assert len(new) == 1, new
        self.seen |= new
        (run,) = new
        wait_for((run / "summary.json").is_file, 10, "summary.json")
        return json.loads((run / "summary.json").read_text())


def _turns_logged(summary: dict[str, Any]) -> int:
    log = Path(summary["run_dir"]) / "episode.jsonl"
    rows = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    return sum(1 for r in rows if r.get("kind") == "turn" and "outcome" in r)


def check_ending(summary: dict[str, Any], code: int, table: dict[int, set[str]], fields: set[str]) -> None:
    assert set(summary) == fields, set(summary) ^ fields
    assert summary["end_reason"] in table[code], (code, summary["end_reason"], table)
    assert summary["turns"] == _turns_logged(summary), summary  # true counts, whatever the ending
    assert summary["decisions"] == len(summary["latencies_s"]) == summary["turns"]


def _ok(ran: Any) -> None:
    if ran is not None:
        assert ran.code == ran.line.expected_exit, f"{ran.line.text} -> {ran.code}\n{ran.output[-3000:]}"


def _run_all(term: Terminal, lines: list[Line]) -> list[Any]:
    out = []
    for line in lines:
        ran = term.run(line)
        _ok(ran)
        out.append(ran)
    return out


# -- the operator's day: success by the operator's answer, an e-stop and its release, a Ctrl-C --------
def test_an_operators_day_on_the_desk_graph_as_the_docs_say(tmp_path: Path) -> None:
    _needs_the_yam_driver()
    table, fields = exit_table(), summary_fields()
    desk = doc_lines("yam-driver.md", "-m pear_agent.ros2.yam_driver_node", "sim:=true")
    stop = doc_lines("yam-driver.md", "pear-agent ros stop")
    ctrl_c = doc_lines("yam-driver.md", "Ctrl-C while the arms move")
    assert [x.text.split()[0] for x in desk if x.starts_node].count(".venv/bin/python") == 3
    episodes = Episodes()
    term = Terminal(tmp_path)
    try:
        # 1. the graph comes up healthy, the operator instructs, the agent's 4 turns, the operator says yes
        ran = _run_all(term, desk)
        health = next(r for r in ran if r is not None and "ros health" in r.line.text)
        assert "14/14 joints" in health.output and "holding" in health.output, health.output
        first = episodes.next_summary()
        check_ending(first, 0, table, fields)
        assert first["success"] is True and first["end_reason"] == "done" and first["turns"] == 4, first
        assert first["policy"] == "bringup" and first["observation"] == "state" and first["video"] is None
        assert first["operator"]["success"] is True and "/pear/operator/judge" in first["operator"]["by"]
        prompt = (Path(first["run_dir"]) / "system_prompt.txt").read_text()
        assert "No camera images" in prompt, "the model must be told it gets no images"

        # 2. an e-stop ends the next episode stopped and latches both drivers
        for line in stop:
            if "ros release" in line.text:
                # latched: a new agent is refused at its stack check, by name, never "stalled"
                agent = term.start(stop[0])
                code = wait(agent, 120, term.log_of(agent))
                out = term.log_of(agent)
                assert code == 3, out[-3000:]
                refusal = [x for x in out.splitlines() if x.startswith("agent_node:")]
                assert len(refusal) == 1 and "latched by an e-stop" in refusal[0], out[-3000:]
                assert "pear-agent ros release" in refusal[0] and "stalled" not in out
                check_ending(episodes.next_summary(), 3, table, fields)
            ran = term.run(line)
            _ok(ran)
            if ran is not None and "ros stop" in line.text:
                assert "yam_left_driver" in ran.output and "yam_right_driver" in ran.output, ran.output
            if ran is not None and line.text.startswith("wait "):
                stopped = episodes.next_summary()
                check_ending(stopped, 3, table, fields)
                assert stopped["end_reason"] == "stopped" and "e-stop" in stopped["detail"], stopped
            if ran is not None and "ros health" in line.text:
                assert ran.output.count("latched by an e-stop") == 2, ran.output
                assert "pear-agent ros release" in ran.output
            if ran is not None and "ros release" in line.text:
                assert ran.output.count("released") == 2, ran.output

        # 3. Ctrl-C in the agent's terminal while it runs: arms held, records kept, drivers latched
        agent_line = next(x for x in ctrl_c if x.starts_node)
        for line in ctrl_c:
            if "ros release" in line.text:
                os.kill(agent.pid, signal.SIGINT)
                code = wait(agent, 60, term.log_of(agent))
                assert code == agent_line.expected_exit == 130, term.log_of(agent)[-3000:]
                interrupted = episodes.next_summary()
                check_ending(interrupted, 130, table, fields)
                assert interrupted["end_reason"] == "interrupted" and "SIGINT" in interrupted["detail"]
                assert interrupted["success"] is False and interrupted["operator"] is None
            ran = term.run(line)
            _ok(ran)
            if line is agent_line:
                agent = term.procs["$!"]
            if ran is not None and "ros release" in line.text:
                assert ran.output.count("released") == 2, ran.output  # Ctrl-C had latched them
    finally:
        drivers = [(line, p) for line, p, _ in term.started if "yam_driver_node" in line.text]
        t0 = time.monotonic()
        term.close()
        elapsed = time.monotonic() - t0
    # 4. the drivers stop on SIGTERM, saying so: at rest (hold sent), close(), exit 0
    assert len(drivers) == 2
    for _line, proc in drivers:
        log = term.log_of(proc)
        assert proc.returncode == 0, log[-2000:]
        assert "SIGTERM: at rest, holding at" in log and "(hold sent)" in log, log[-2000:]
        assert "calling i2rt close()" in log and "close() done" in log, log[-2000:]
        assert "terminate called" not in log and "Traceback" not in log, log[-2000:]
    print(f"desk graph: both drivers stopped on SIGTERM in {elapsed:.1f} s")
    assert elapsed < 15


def test_the_colcon_workspace_runs_the_desk_graph_from_its_install_space(tmp_path: Path) -> None:
    """colcon from PyPI builds ros2_ws; its setup script is sourced and the installed executables and
    configs run the desk graph to an episode the operator judges."""
    _needs_the_yam_driver()
    pytest.importorskip("colcon_core", reason="colcon missing (pip install -e '.[colcon]')")
    table, fields = exit_table(), summary_fields()
    lines = doc_lines("yam-driver.md", "colcon build")
    nodes = [x.text for x in lines if x.starts_node]
    assert len(nodes) == 3 and all(x.startswith("$X/") for x in nodes), nodes
    episodes = Episodes()
    term = Terminal(tmp_path)
    try:
        _run_all(term, lines)
        summary = episodes.next_summary()
    finally:
        term.close()
    check_ending(summary, 0, table, fields)
    assert summary["success"] is True and summary["operator"]["success"] is True
    install = REPO / "ros2_ws" / "install" / "pear_agent_ros2"
    for exe in ("agent_node", "sim_robot_node", "yam_driver_node"):
        assert os.access(install / "lib" / "pear_agent_ros2" / exe, os.X_OK)
    share = install / "share" / "pear_agent_ros2" / "launch"
    assert {p.name for p in (share / "config").glob("*.yaml")} == {p.name for p in CONFIG.glob("*.yaml")}
    assert (share / "yam_i2rt_sim.launch.py").exists()
    for _, proc, _ in term.started:
        assert proc.returncode == 0, term.log_of(proc)[-2000:]


# -- the files and blocks themselves -------------------------------------------------------------
AGENT_FILES = ["agent_real.yaml", "agent_i2rt_sim.yaml", "agent_sim.yaml"]


@pytest.mark.parametrize("name", AGENT_FILES)
def test_every_agent_file_lists_every_parameter_with_its_type(name: str) -> None:
    from pear_agent.ros2.agent_node import PARAMS

    doc = yaml.safe_load((CONFIG / name).read_text())
    assert set(doc) == {"pear_agent"}
    params = doc["pear_agent"]["ros__parameters"]
    assert set(params) == set(PARAMS), {
        "missing": set(PARAMS) - set(params),
        "unknown": set(params) - set(PARAMS),
    }
    for key, value in params.items():
        want = type(PARAMS[key])
        assert isinstance(value, want) or (want is float and type(value) is int), (key, value)


def test_the_desk_file_declares_no_cameras_and_a_policy_without_simulator_facts() -> None:
    p = yaml.safe_load((CONFIG / "agent_i2rt_sim.yaml").read_text())["pear_agent"]["ros__parameters"]
    assert p["disabled_cameras"] == "all" and p["observation"] == "state" and p["video_camera"] == "none"
    assert p["policy"] == "bringup" and p["task_status_topic"] == "" and p["instruction"] == ""
    real = yaml.safe_load((CONFIG / "agent_real.yaml").read_text())["pear_agent"]["ros__parameters"]
    same = {k for k in real if real[k] == p[k]}
    assert len(same) > len(real) - 15, "the desk file is agent_real.yaml with the desk's differences"


def test_the_real_graph_block_is_the_desk_graph_on_can() -> None:
    """The real robot's commands are the desk's with the drivers on CAN and agent_real.yaml: every
    file they name exists and every -p is a parameter the node declares."""
    from pear_agent.ros2 import agent_node, yam_driver_node

    real = doc_lines("yam-driver.md", "agent_real.yaml", "-m pear_agent.ros2.yam_driver_node")
    desk = doc_lines("yam-driver.md", "-m pear_agent.ros2.yam_driver_node", "sim:=true")
    real_nodes = [x.text for x in real if x.starts_node]
    desk_nodes = [x.text.replace(" -p sim:=true", "") for x in desk if x.starts_node]
    assert real_nodes == desk_nodes
    env = {x.text.split("=")[0]: x.text.split("=", 1)[1] for x in real if re.match(r"^[A-Z]=", x.text)}
    assert env == {"P": "launch/config/yam_driver.yaml", "A": "launch/config/agent_real.yaml"}
    for path in env.values():
        assert (REPO / path).is_file()
    declared = {"yam_driver_node": yam_driver_node.PARAMS, "agent_node": agent_node.PARAMS}
    for text in real_nodes:
        node = "agent_node" if "agent_node" in text else "yam_driver_node"
        for key in re.findall(r"-p (\w+):=", text):
            assert key in declared[node], (text, key)
