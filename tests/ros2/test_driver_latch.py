"""A YAM driver latched by its own e-stop (`~/estop`, which the agent does not hear) in the middle of an
episode: the agent ends it `stopped`, naming the driver, its latch and the command that releases it
-- never "stalled". Both drivers on I2RT's real SimRobot, the agent and a probe, each a process
over real DDS."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.ros2.conftest import STARTUP_S, NodeProcess

pytestmark = pytest.mark.wallclock

pytest.importorskip("rclpy", reason="ROS 2 wheels not installed (bash scripts/setup.sh --dev installs them)")
pytest.importorskip("i2rt.robots.get_robot", reason="I2RT driver deps missing (pip install -e '.[yam]')")
pytest.importorskip("can", reason="python-can missing (pip install -e '.[yam]')")
pytest.importorskip("diagnostic_msgs", reason="diagnostic_msgs missing (pip install -e '.[yam]')")

BOTH_UP = {"left_arm": {"move_cm": [0.0, 0.0, 3.0]}, "right_arm": {"move_cm": [0.0, 0.0, 3.0]}}
BOTH_DOWN = {"left_arm": {"move_cm": [0.0, 0.0, -3.0]}, "right_arm": {"move_cm": [0.0, 0.0, -3.0]}}


def _agent_params(tmp_path: Path, replay: Path, turns: int, **extra: Any) -> dict[str, Any]:
    """The agent on both drivers, replaying `replay`, state only, home first without asking."""
    return {
        "policy": "replay",
        "replay_path": str(replay),
        "max_turns": turns,
        "instruction": "up and down",
        "task_status_topic": "",
        "disabled_cameras": "all",
        "observation": "state",
        "go_home_on_reset": True,
        "confirm_home": False,
        "operator_terminal": False,
        # how fresh the joint states are is not these tests' question (test_stops.py and
        # test_safety.py ask it): a loaded 2-core machine delivered them 0.72 s late, past
        # 0.25 s, and the home move was refused before the latch
        "joint_state_max_age_s": 2.0,
        "wait_for_joint_states_s": 60.0,
        "wait_for_controllers_s": 30.0,
        "runs_dir": str(tmp_path / "runs"),
    } | extra


def test_a_driver_latched_mid_episode_ends_it_stopped_by_name(tmp_path: Path, probe: Any) -> None:
    from std_srvs.srv import Trigger

    procs: list[NodeProcess] = []
    try:
        for arm in ("left", "right"):
            params = {"arm": f"{arm}_arm", "sim": True}
            procs.append(
                NodeProcess("pear_agent.ros2.yam_driver_node", f"yam_{arm}_driver", params, tmp_path, True)
            )
        replay = tmp_path / "replay.jsonl"
        moves = [BOTH_UP, BOTH_DOWN] * 10
        replay.write_text(
            "".join(
                json.dumps({"kind": "turn", "turn": i + 1, "reply": json.dumps({"action": m}), "outcome": {}})
                + "\n"
                for i, m in enumerate(moves)
            )
        )
        agent_params = _agent_params(tmp_path, replay, len(moves), replay_delay_s=0.5, task="latch")
        agent = NodeProcess("pear_agent.ros2.agent_node", "pear_agent", agent_params, tmp_path)
        procs.append(agent)
        probe.wait_for(
            lambda: len([e for e in probe.status if e.get("event") == "turn"]) >= 2, 120, "two turns"
        )
        client = probe.node.create_client(Trigger, "/yam_right_driver/estop")
        assert client.wait_for_service(timeout_sec=STARTUP_S)
        future = client.call_async(Trigger.Request())
        probe.wait_for(future.done, 10, "the driver's e-stop reply")
        assert agent.wait(60) == 3, agent.log()[-3000:]
        summary = json.loads(next((tmp_path / "runs").glob("*/summary.json")).read_text())
        assert summary["end_reason"] == "stopped", summary
        detail = summary["detail"]
        assert "right_arm driver" in detail and "latched by an e-stop" in detail, detail
        assert "pear-agent ros release" in detail and "stalled" not in agent.log(), detail
        print(f"latched mid-episode: {detail}")
    finally:
        for p in reversed(procs):
            p.stop()


def test_a_driver_the_estop_would_not_reach_is_refused_before_anything_moves(tmp_path: Path) -> None:
    """A driver listening for the e-stop elsewhere (its `estop_topic` differs from the agent's): a
    stop or a Ctrl-C would brake the arm but leave that driver unlatched, so the stack check
    refuses the episode by the driver's name before the home move, and nothing is sent.

    Mutation tried by hand: without the e-stop's reach in the stack check (`_estop_unreached`
    returning []), the agent went on into the episode and this test failed: "pear_agent did not
    finish in 120 s"."""
    procs: list[NodeProcess] = []
    try:
        for arm, topic in (("left", "/elsewhere/estop"), ("right", "/pear/estop")):
            params = {"arm": f"{arm}_arm", "sim": True, "estop_topic": topic}
            procs.append(
                NodeProcess("pear_agent.ros2.yam_driver_node", f"yam_{arm}_driver", params, tmp_path, True)
            )
        replay = tmp_path / "replay.jsonl"
        replay.write_text(
            json.dumps({"kind": "turn", "turn": 1, "reply": json.dumps({"action": BOTH_UP}), "outcome": {}})
            + "\n"
        )
        agent_params = _agent_params(tmp_path, replay, 1, task="reach", wait_for_controllers_s=10.0)
        agent = NodeProcess("pear_agent.ros2.agent_node", "pear_agent", agent_params, tmp_path)
        procs.append(agent)
        assert agent.wait(120) == 3, agent.log()[-3000:]
        summary = json.loads(next((tmp_path / "runs").glob("*/summary.json")).read_text())
        assert summary["end_reason"] == "refused" and summary["turns"] == 0, summary
        detail = summary["detail"]
        assert "e-stop on /pear/estop would not reach the left_arm driver (/yam_left_driver)" in detail, (
            detail
        )
        assert "right_arm" not in detail, detail
        assert not any("accepted trajectory" in d.log() for d in procs[:2])  # nothing was sent
    finally:
        for p in procs:
            p.stop()
