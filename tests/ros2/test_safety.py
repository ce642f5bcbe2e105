"""agent_node against a strict stand-in for a stock ros2_control stack (tests/ros2/jtc_double.py),
each in its own process over real DDS: the e-stop, stale joint states, the stack check, the
operator's judgement. The double checks every message it receives against the speed cap."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.ros2.conftest import STARTUP_S, DoubleProcess, Probe, double_config, home_joints

pytestmark = pytest.mark.wallclock

pytest.importorskip("rclpy", reason="ROS 2 wheels not installed (bash scripts/setup.sh --dev installs them)")

AGENT = "pear_agent.ros2.agent_node"
LEFT = "left_arm_controller"
EPISODE_S = 30.0
"""How long one of these short episodes may take once the agent is up. A wait that also spans the
agent's start-up (imports, DDS discovery: tens of seconds on a loaded machine) adds STARTUP_S; each
wait ends at its event, so only a failing test waits it out."""


def _stack_check_bound_s() -> float:
    """The longest the stack check may take by its configured waits (RosSettings' defaults, which
    these agents run with): joint states, the drivers' status (2 s), the controllers' subscriptions
    and their activity (each `wait_for_controllers_s`), the cameras."""
    from pear_agent.ros2.settings import RosSettings

    s = RosSettings()
    return s.wait_for_joint_states_s + 2.0 + 2 * s.wait_for_controllers_s + s.wait_for_images_s


def _check_took_s(log: str) -> float:
    """From the start of the stack check (the agent's `arm mode` line, logged just before it) to the
    end of the episode it refused (`episode done`), by the stamps of the agent's own log lines: the
    time the process took to start is not the check's."""
    stamps: dict[str, float] = {}
    for line in log.splitlines():
        m = re.match(r"\[\w+\] \[(\d+\.\d+)\] \[pear_agent\]: (arm mode|episode done)", line)
        if m:
            stamps.setdefault(m.group(2), float(m.group(1)))
    assert set(stamps) == {"arm mode", "episode done"}, log
    return stamps["episode done"] - stamps["arm mode"]


def _replay(tmp_path: Path, moves: list[dict[str, Any]]) -> Path:
    path = tmp_path / "replay.jsonl"
    # shaped like a recorded episode.jsonl: a turn line with the reply that was executed
    lines = [
        {"kind": "turn", "turn": i + 1, "reply": json.dumps({"action": m}), "outcome": "reached"}
        for i, m in enumerate(moves)
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _agent(start_node, tmp_path: Path, moves: list[dict[str, Any]], **extra: Any):
    params = {
        "policy": "replay",
        "replay_path": str(_replay(tmp_path, moves)),
        "instruction": "Move the left gripper.",
        "task": "real_test",
        "task_status_topic": "",
        "go_home_on_reset": False,
        "operator_terminal": False,
        "operator_timeout_s": 20.0,
        "max_turns": len(moves),
        "runs_dir": str(tmp_path / "runs"),
    } | extra
    return start_node(AGENT, "pear_agent", params)


def _summary(tmp_path: Path) -> dict[str, Any]:
    files = list((tmp_path / "runs").glob("*/summary.json"))
    assert len(files) == 1, files
    return json.loads(files[0].read_text())


def _turns_logged(tmp_path: Path) -> list[dict[str, Any]]:
    logs = list((tmp_path / "runs").glob("*/episode.jsonl"))
    lines = [json.loads(x) for p in logs for x in p.read_text().splitlines() if x.strip()]
    return [x for x in lines if x.get("kind") == "turn"]


def _no_request_over_cap(double: DoubleProcess) -> int:
    accepted = [e for e in double.trajectories() if e["accepted"]]
    over = [e for e in accepted if e["over_cap"]]
    assert not over, over  # the whole request: its points' times, first and last, the pose it met
    return len(accepted)


def _call_set_bool(probe: Probe, service: str, value: bool, timeout_s: float) -> Any:
    from std_srvs.srv import SetBool

    client = probe.node.create_client(SetBool, service)
    assert client.wait_for_service(timeout_sec=STARTUP_S), f"{service} not available"
    deadline = time.monotonic() + timeout_s
    result, lost = None, False
    while time.monotonic() < deadline:
        future = client.call_async(SetBool.Request(data=value))
        end = time.monotonic() + 2.0
        while not future.done() and time.monotonic() < end:
            time.sleep(0.02)
        if not future.done():  # a reply lost while DDS was still matching the client: ask again
            client.remove_pending_request(future)
            lost = True
            continue
        result = future.result()
        if result.success or (lost and result.message == "no question is open"):
            return result  # (after a lost reply the question may have been answered already)
        time.sleep(0.1)
    raise AssertionError(f"{service} never accepted an answer: {result.message if result else 'no reply'}")


DOWN = {"left_arm": {"move_cm": [0.0, 0.0, -8.0]}}


def test_estop_mid_motion_brakes_every_controller_to_rest(
    tmp_path: Path, start_node, start_double, probe, yam
):
    double = start_double(double_config(yam))
    # the reply takes 3 s, as a model's may: DDS matches the e-stop publisher with the agent both
    # ways meanwhile, as a robot's e-stop button node would have long before a motion
    agent = _agent(start_node, tmp_path, [DOWN], replay_delay_s=3.0)
    probe.estop_subscribed()

    def moving():
        return next((e for e in double.trajectories(LEFT) if e["accepted"] and e["points"] > 1), None)

    move = probe.wait_for(moving, STARTUP_S + EPISODE_S, "the left arm's move")
    time.sleep(max(0.0, move["t"] + 0.4 * move["duration_s"] - time.monotonic()))
    t_estop = time.monotonic()
    probe.estop_topic()
    assert agent.wait(EPISODE_S) == 3, agent.log()
    time.sleep(1.0)
    summary = _summary(tmp_path)
    assert summary["end_reason"] == "stopped" and "e-stop" in summary["detail"], summary

    for controller in double_config(yam)["controllers"]:
        after = [e for e in double.trajectories(controller) if e["t"] > t_estop]
        assert len(after) == 1, (
            f"{controller}: {len(after)} trajectories after the e-stop (one stop, latched)"
        )
        assert after[0]["accepted"], after[0]
    stop = next(e for e in double.trajectories(LEFT) if e["t"] > t_estop)
    joints = list(yam.parts["left_arm"].joints)
    with probe.lock:
        rows = [(t, np.array([js[j] for j in joints])) for t, js in probe.joint_states]
    before = [q for t, q in rows if t <= stop["t"]]
    after_js = [q for t, q in rows if t > stop["t"]]
    direction = np.sign(before[-1] - before[-3])
    assert float(np.max(np.abs(before[-1] - before[-3]))) > 1e-3, (
        "the arm was not moving: the test proves nothing"
    )
    # a braking trajectory (one point when the brake is short: the controller's cubic from the
    # measured velocity to it is a constant deceleration) ending where the arm then comes to rest ...
    np.testing.assert_allclose(after_js[-1], stop["last"], atol=0.01)
    # ... ahead of where the arm was when it arrived, never back at an older pose
    ahead = (np.array(stop["last"]) - np.array(stop["actual"])) * direction
    assert np.all(ahead > -1e-3), (stop["last"], stop["actual"])
    # and not one joint reversed by more than 5 mrad on the way to rest
    along = np.array(after_js) * direction
    assert float(np.max(np.maximum.accumulate(along, axis=0) - along)) < 0.005
    target_dist = float(np.max(np.abs(after_js[-1] - np.array(move["last"]))))
    assert target_dist > 0.02, "the move had finished: the test proves nothing"
    _no_request_over_cap(double)


def test_joint_states_stopping_mid_motion_hold_within_the_cap_and_refuse(
    tmp_path: Path, start_node, start_double, probe, yam
):
    double = start_double(double_config(yam, stop_joint_states_after_trajectory_s=0.2))
    agent = _agent(start_node, tmp_path, [DOWN, DOWN])
    assert agent.wait(STARTUP_S + EPISODE_S) == 3, agent.log()
    summary = _summary(tmp_path)
    assert summary["end_reason"] == "refused", summary
    assert "joint states on /joint_states are" in summary["detail"] and "s old" in summary["detail"], summary
    left = [e for e in double.trajectories(LEFT) if e["accepted"]]
    assert len(left) == 2, left  # the move, then the stop along it; nothing more
    assert _no_request_over_cap(double) >= 2
    assert len(_turns_logged(tmp_path)) == 1


def test_joint_states_stopping_between_turns_refuse_the_next_turn(
    tmp_path: Path, start_node, start_double, probe, yam
):
    """Turn 1 reaches its target; the joint states stop while the model thinks (0.6 s a decision):
    turn 2 sends nothing and the episode ends refused, naming the topic and the age."""
    double = start_double(double_config(yam, stop_joint_states_after_trajectory_end_s=0.15))
    agent = _agent(start_node, tmp_path, [DOWN, DOWN], replay_delay_s=0.6)
    assert agent.wait(STARTUP_S + EPISODE_S) == 3, agent.log()
    summary = _summary(tmp_path)
    assert summary["end_reason"] == "refused" and summary["turns"] == 2, summary
    assert "joint states on /joint_states are" in summary["detail"], summary
    assert "no command was sent" in summary["detail"], summary
    turns = _turns_logged(tmp_path)
    assert [t["outcome"]["status"] for t in turns] == ["reached", "refused"]
    assert len([e for e in double.trajectories(LEFT) if e["accepted"]]) == 1
    _no_request_over_cap(double)


def test_joint_states_stopping_while_the_operator_is_asked_send_nothing(
    tmp_path: Path, start_node, start_double, probe, yam
):
    """States stop while the agent waits on the operator's go for the home move: the home move is
    refused with the topic and the age, nothing is commanded, the policy is never called."""
    start = home_joints(yam)
    start["left_joint1"] += 0.3
    double = start_double(double_config(yam, initial=start))
    agent = _agent(start_node, tmp_path, [DOWN], go_home_on_reset=True, confirm_home=True)
    probe.wait_for(lambda: probe.event("start"), STARTUP_S, "the agent's start")
    _call_set_bool(probe, "/jtc_double/joint_states", False, 5)
    time.sleep(0.3)
    _call_set_bool(probe, "/pear/operator/judge", True, 20)
    assert agent.wait(EPISODE_S) == 3, agent.log()
    summary = _summary(tmp_path)
    assert summary["end_reason"] == "refused", summary
    assert "/joint_states are" in summary["detail"] and "s old" in summary["detail"], summary
    assert double.trajectories() == []
    assert _turns_logged(tmp_path) == []


def test_estop_during_the_home_move_ends_before_the_first_policy_call(
    tmp_path: Path, start_node, start_double, probe, yam
):
    start = home_joints(yam)
    start["left_joint1"] += 0.6
    double = start_double(double_config(yam, initial=start))
    # the operator confirms the home move once the e-stop publisher has matched (DDS discovery)
    agent = _agent(start_node, tmp_path, [DOWN], go_home_on_reset=True, confirm_home=True)
    probe.estop_subscribed()
    _call_set_bool(probe, "/pear/operator/judge", True, 20)
    probe.wait_for(lambda: double.trajectories(LEFT), EPISODE_S, "the home move")
    time.sleep(0.2)
    probe.estop_topic()
    assert agent.wait(EPISODE_S) == 3, agent.log()
    summary = _summary(tmp_path)
    assert summary["end_reason"] == "stopped" and "home move" in summary["detail"], summary
    assert _turns_logged(tmp_path) == []
    left = [e for e in double.trajectories(LEFT) if e["accepted"]]
    assert len(left) == 2, left  # the home move, then the stop
    _no_request_over_cap(double)


@pytest.mark.parametrize(
    "case",
    [
        "no_robot",
        "missing_controller",
        "inactive_controller",
        "missing_joint",
        "outside_limits",
        "dead_camera",
    ],
)
def test_incomplete_stack_is_refused_with_one_line(case: str, tmp_path: Path, start_node, start_double, yam):
    """(No probe node here: its subscription to the command topics would stand in for a controller.)"""
    cfg = double_config(yam)
    expect = {
        "no_robot": "no joint states on /joint_states within",
        "missing_controller": "no controller subscribes to /left_arm_controller/joint_trajectory",
        "missing_joint": "joint states on /joint_states lack left_joint3",
        "dead_camera": "no image from camera top on /cameras/top/image_raw",
        "inactive_controller": "controllers not active: left_arm_controller inactive",
        "outside_limits": "left_arm: left_joint3 is at 3.2416 rad, above its upper limit 3.1416",
    }[case]
    if case == "inactive_controller":  # loaded and configured: subscribed, but acting on nothing
        cfg["inactive"] = [LEFT]
    elif case == "outside_limits":
        cfg["initial"] = home_joints(yam) | {"left_joint3": 3.1416 + 0.1}
    elif case == "missing_controller":
        cfg["controllers"]["left_arm"] = cfg["controllers"].pop(LEFT)  # named differently from the YAML
    elif case == "missing_joint":
        cfg["omit_joints"] = ["left_joint3"]
    elif case == "dead_camera":
        cfg["cameras"].pop("/cameras/top/image_raw")
    double = None if case == "no_robot" else start_double(cfg)
    agent = _agent(start_node, tmp_path, [DOWN])
    bound = _stack_check_bound_s()
    code = agent.wait(STARTUP_S + bound + EPISODE_S)
    assert code == 3, agent.log()
    # refused within the check's own waits (1 s for its work between them), long before the
    # instruction's wait (`instruction_timeout_s`, 30 s) would have ended the episode otherwise
    took = _check_took_s(agent.log())
    assert took < bound + 1.0, f"{case}: the stack check took {took:.1f} s (its waits: {bound:g} s)"
    lines = [x for x in agent.log().splitlines() if x.startswith("agent_node:")]
    assert len(lines) == 1 and expect in lines[0], agent.log()
    if case == "no_robot":
        assert "ROS_DOMAIN_ID=" in lines[0]
    summary = _summary(tmp_path)
    assert summary["end_reason"] == "refused" and expect in summary["detail"]
    assert _turns_logged(tmp_path) == [], "the policy was called"
    if double is not None:
        assert double.trajectories() == [], "a command was sent"


def test_camera_dying_mid_episode_ends_it(tmp_path: Path, start_node, start_double, probe, yam):
    """The cameras stop 1.5 s after the first command arrives (mid-episode whatever the agent's
    start-up took: a time from the stand-in's start raced the stack check on a loaded machine)."""
    up = {"left_arm": {"move_cm": [0.0, 0.0, 1.0]}}
    down = {"left_arm": {"move_cm": [0.0, 0.0, -1.0]}}
    double = start_double(double_config(yam, stop_images_after_trajectory_s=1.5))
    agent = _agent(start_node, tmp_path, [up, down] * 30)
    assert agent.wait(STARTUP_S + EPISODE_S) == 3, agent.log()
    summary = _summary(tmp_path)
    assert summary["end_reason"] == "refused", summary
    assert "camera" in summary["detail"] and "s old (limit 1 s)" in summary["detail"], summary
    # every image shown to the model was younger than the limit, and came at the YAML's size
    runs = next((tmp_path / "runs").glob("*"))
    lines = [json.loads(x) for x in (runs / "episode.jsonl").read_text().splitlines()]
    ages = [c["age_s"] for x in lines if x.get("kind") == "images" for c in x["cameras"].values()]
    assert ages and max(ages) <= 1.0 + 0.3
    assert all("stamp_s" in c for x in lines if x.get("kind") == "images" for c in x["cameras"].values())
    import cv2

    img = cv2.imread(str(next(runs.glob("images/*.jpg"))))
    assert img.shape[:2] == (256, 256)
    _no_request_over_cap(double)


@pytest.mark.parametrize("verdict", [True, False])
def test_operator_judges_a_real_robot_episode(
    verdict: bool, tmp_path: Path, start_node, start_double, probe, yam
):
    double = start_double(double_config(yam))
    up = {"left_arm": {"move_cm": [0.0, 0.0, 2.0]}}
    agent = _agent(start_node, tmp_path, [up, DOWN], video_camera="top")
    try:
        reply = _call_set_bool(probe, "/pear/operator/judge", verdict, STARTUP_S + EPISODE_S)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{agent.log()}") from None
    assert "success?" in reply.message
    assert agent.wait(EPISODE_S) == (0 if verdict else 1), agent.log()
    summary = _summary(tmp_path)
    assert summary["success"] is verdict and summary["operator"]["success"] is verdict, summary
    assert summary["end_reason"] == "turn_limit", summary
    video = Path(summary["video"])
    assert video.is_file() and video.stat().st_size > 1000
    assert _no_request_over_cap(double) >= 2


def test_policy_needing_simulator_facts_is_refused_at_start(tmp_path: Path, start_node, yam):
    agent = start_node(
        AGENT, "pear_agent", {"policy": "scripted", "task_status_topic": "", "runs_dir": str(tmp_path)}
    )
    assert agent.wait(STARTUP_S) == 2
    lines = [x for x in agent.log().splitlines() if x.strip()]
    assert len(lines) == 1 and "policy scripted reads simulator facts" in lines[0], lines
