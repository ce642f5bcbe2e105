"""`pear-agent ros protocol pear_real` on the desk graph: both YAM drivers in I2RT's sim mode and the
agent (agent_i2rt_sim.yaml, its bring-up motion as the policy, 25 turns), as separate processes over
real DDS. The protocol says what to place where, renders the scene, sends the instruction, the
operator judges with `pear-agent ros judge yes`, and the result line pairs with a simulated
`bench --preset pear_real` line in `pear-agent compare`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pear_agent.bench import pear_real
from pear_agent.bench.compare import compare
from pear_agent.cli import main
from tests.ros2.test_desk_graph import _needs_the_yam_driver

pytestmark = pytest.mark.wallclock

REPO = Path(__file__).resolve().parents[2]
DRIVER = REPO / "launch" / "config" / "yam_driver.yaml"
AGENT = REPO / "launch" / "config" / "agent_i2rt_sim.yaml"


def _start(args: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, *args],
        cwd=REPO,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(5)


def test_a_real_trial_on_the_desk_graph_pairs_with_a_simulated_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _needs_the_yam_driver()
    trial = 12  # pick_up_object/bottle, seed 0
    task, seed = pear_real.trials()[trial].task, pear_real.trials()[trial].seed
    procs = []
    try:
        for arm, name in (("left_arm", "yam_left_driver"), ("right_arm", "yam_right_driver")):
            args = ["-m", "pear_agent.ros2.yam_driver_node", "--ros-args", "-r", f"__node:={name}"]
            args += ["--params-file", str(DRIVER), "-p", f"arm:={arm}", "-p", "sim:=true"]
            procs.append(_start(args, tmp_path / f"{name}.log"))
        agent_args = ["-m", "pear_agent.ros2.agent_node", "--ros-args", "--params-file", str(AGENT)]
        agent_args += ["-p", "max_turns:=25", "-p", f"runs_dir:={tmp_path / 'runs'}"]
        agent = _start(agent_args, tmp_path / "agent.log")
        procs.append(agent)
        out = tmp_path / "real"
        cli = [sys.executable, "-m", "pear_agent", "ros"]
        opts = ["--params-file", str(AGENT), "--timeout-s", "240"]
        protocol = subprocess.Popen(
            [*cli, "protocol", "pear_real", "--out", str(out), "--trial", str(trial), "--yes", *opts],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        judge = subprocess.run(
            [*cli, "judge", "yes", "--params-file", str(AGENT), "--timeout-s", "240"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
        said, _ = protocol.communicate(timeout=300)
        assert protocol.returncode == 0, said + (tmp_path / "agent.log").read_text()[-3000:]
        assert judge.returncode == 0, judge.stdout + judge.stderr
        assert agent.wait(60) == 0
    finally:
        for p in procs:
            _stop(p)
    # what the operator was told: the object, where, on which arm's side, and a picture
    assert "Pick up the glass bottle lying on its side" in said and "at x = " in said, said
    assert (out / "scenes" / f"{trial:02d}-pick_up_object-bottle-s0.png").stat().st_size > 1000
    (line,) = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert line["key"] == f"{task}/s{seed}" and line["mode"] == "real" and line["preset"] == "pear_real"
    assert line["success"] is True and line["turns"] == 4 and line["max_turns"] == 25, line
    # a simulated run of the same trial pairs with it
    few = [pear_real.Trial(task, seed)]
    monkeypatch.setattr(pear_real, "trials", lambda objects=None: few)
    sim = tmp_path / "sim"
    assert main(["bench", "--preset", "pear_real", "--no-video", "--quiet", "--out", str(sim)]) == 0
    c = compare(sim, out)
    assert c["shared"] == 1 and c["b"]["successes"] == 1
