"""`pear-agent ros ...` on its own: the event lines, which question counts as open, the agent file it
reads names from, and one clear line (exit 1, no traceback) for each command when nothing runs. The
commands against a running graph are in test_desk_graph.py (the docs' lines, verbatim)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pear_agent.ros2.ros_session import AgentStatus, agent_params, describe_event

REPO = Path(__file__).resolve().parents[2]


def _status(events: list[dict]) -> AgentStatus:
    st = AgentStatus.__new__(AgentStatus)
    st.events, st._lock = list(events), __import__("threading").Lock()
    return st


def test_a_question_is_open_until_its_answer_or_the_end() -> None:
    q = {"event": "question", "kind": "success", "question": "success?"}
    home = {"event": "question", "kind": "home", "question": "home?"}
    assert _status([{"event": "start"}, q]).open_question("success") == q
    assert _status([home]).open_question("success") is None  # `judge` never answers the home question
    assert _status([q, {"event": "answer", "kind": "success"}]).open_question("success") is None
    assert _status([q, {"event": "done"}]).open_question("success") is None
    assert _status([q, {"event": "answer"}, q]).open_question("success") == q  # asked again


def test_event_lines() -> None:
    assert describe_event({"event": "turn", "turn": 2, "summary": "left_arm move", "outcome": "reached"}) == (
        "turn 2: left_arm move -> reached"
    )
    line = describe_event({"event": "question", "kind": "success", "question": "success?"})
    assert "pear-agent ros judge yes|no" in line
    done = describe_event(
        {"event": "done", "success": False, "end_reason": "stopped", "detail": "e-stop", "turns": 3}
        | {"exit_code": 3, "run_dir": "runs/x"}
    )
    assert done == "done: failure (stopped: e-stop) in 3 turns, exit code 3; run folder runs/x"


def test_names_come_from_the_agents_file(tmp_path: Path) -> None:
    p = agent_params(str(REPO / "launch" / "config" / "agent_i2rt_sim.yaml"))
    assert p["disabled_cameras"] == "all" and p["estop_topic"] == "/pear/estop"
    bad = tmp_path / "bad.yaml"
    bad.write_text("pear_agent:\n  ros__parameters:\n    estop_topik: /x\n")
    with pytest.raises(ValueError, match="not agent_node parameters: estop_topik"):
        agent_params(str(bad))
    with pytest.raises(ValueError, match="no such file"):
        agent_params(str(tmp_path / "none.yaml"))
    (tmp_path / "broken.yaml").write_text("pear_agent: [")
    with pytest.raises(ValueError, match="not YAML"):
        agent_params(str(tmp_path / "broken.yaml"))


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (["stop", "--timeout-s", "1"], "nobody listens on /pear/estop"),
        (["instruct", "hello", "--timeout-s", "1"], "no agent listened on /pear/instruction within 1 s"),
        (
            ["judge", "yes", "--timeout-s", "1"],
            "no agent is running: nothing publishes on /pear/agent/status",
        ),
        (["release", "--timeout-s", "1"], "no driver found"),
        (["status", "--timeout-s", "1"], "no agent publishes on /pear/agent/status"),
        (["health", "--timeout-s", "1", "--window-s", "0.5"], "FAIL /joint_states: no message within 0.5 s"),
        (["stop", "--params-file", "/nonexistent.yaml"], "--params-file /nonexistent.yaml: no such file"),
    ],
)
def test_with_nothing_running_each_command_says_so_in_one_line(args: list[str], expect: str) -> None:
    pytest.importorskip("rclpy", reason="ROS 2 wheels not installed")
    t0 = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "pear_agent", "ros", *args],
        cwd=REPO,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    text = out.stdout + out.stderr
    assert out.returncode == (2 if "--params-file" in args else 1), text
    assert expect in text and "Traceback" not in text, text
    if args[0] != "health":
        # one line that says why (a progress line "... waiting for ..." may come before it)
        lines = [x for x in out.stderr.splitlines() if x.strip() and ": waiting for " not in x]
        assert len(lines) == 1, out.stderr
    assert time.monotonic() - t0 < 60
