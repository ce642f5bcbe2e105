"""The whole ROS 2 path with no hardware: sim_robot_node and agent_node as separate processes over
real DDS (ROS 2 Kilted wheels), observed by a probe node in the test process."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from pear_agent.episode import Episode
from pear_agent.kinematics import Kinematics
from pear_agent.policies.scripted import ScriptedPolicy
from pear_agent.records import RunWriter
from pear_agent.registry import make_backend
from pear_agent.ros2.conversions import trajectory_arrays, trajectory_violations
from tests.ros2.conftest import Probe, as_array, home_joints

pytest.importorskip("rclpy", reason="ROS 2 wheels not installed (bash scripts/setup.sh --dev installs them)")

SIM = "pear_agent.ros2.sim_robot_node"
AGENT = "pear_agent.ros2.agent_node"
POSE_TOLERANCE_CM = 2.0
"""Replaying the same replies through ROS 2 ends with the object this close to the in-process run
(the ROS path runs in wall-clock time, ramps the gripper over its trajectory and starts each move
from the measured joints, so the two runs are not bit-identical)."""


def _limits(yam, kin: Kinematics) -> dict[str, tuple[list[str], np.ndarray, np.ndarray, float]]:
    """topic -> (joints, lower, upper, speed cap)"""
    out = {}
    for name, part in yam.parts.items():
        lo, hi = kin.joint_limits(name)
        out[f"/{part.controller}/joint_trajectory"] = (
            list(part.joints),
            lo,
            hi,
            part.limits.joint_velocity_rad_s,
        )
    return out


def _check_all(probe: Probe, yam, kin: Kinematics) -> int:
    limits = _limits(yam, kin)
    checked = 0
    for _, topic, msg, js in list(probe.trajectories):
        if topic not in limits:
            continue
        joints, lo, hi, vmax = limits[topic]
        start = as_array(js, joints) if js and all(j in js for j in joints) else None
        bad = trajectory_violations(msg, joints, lo, hi, vmax, start=start)
        assert not bad, f"{topic}: {bad}"
        checked += 1
    return checked


def test_replay_through_ros2_matches_in_process(
    tmp_path: Path, start_node, probe: Probe, yam, yam_kin
) -> None:
    task, seed = "bimanual_pickup", 3
    backend = make_backend(task, yam, render=False)
    writer = RunWriter(tmp_path / "inproc", video_fps=None)
    try:
        ref = Episode(backend, yam_kin, ScriptedPolicy(task), writer=writer).run(seed)
        ref_bar = backend.data.body("bar").xpos.copy()
    finally:
        backend.close()
    assert ref.success, ref.detail

    start_node(
        SIM, "pear_sim_robot", {"task": task, "seed": seed, "publish_images": True, "image_rate_hz": 1.0}
    )
    agent = start_node(
        AGENT,
        "pear_agent",
        {
            "policy": "replay",
            "replay_path": str(writer.log_path),
            "seed": seed,
            "runs_dir": str(tmp_path / "ros"),
        },
    )
    code = agent.wait(90)
    done = probe.wait_for(lambda: probe.event("done"), 5, "the agent's final status")
    assert code == 0 and done["success"], (done["end_reason"], done["detail"], agent.log())
    assert done["turns"] == ref.turns
    ros_bar = np.array(done["final_status"]["objects"]["bar"][:3])
    err_cm = float(np.linalg.norm(ros_bar - ref_bar)) * 100
    assert err_cm < POSE_TOLERANCE_CM, f"bar ends {err_cm:.2f} cm from the in-process run"
    # the images crossed DDS and reached the model's turn messages
    jpgs = list((tmp_path / "ros").glob("*/images/*.jpg"))
    assert {p.stem.split("_", 2)[2] for p in jpgs} == set(yam.cameras)
    assert _check_all(probe, yam, yam_kin) >= ref.turns


def test_randomized_run_respects_limits_and_speed_cap(
    tmp_path: Path, start_node, probe: Probe, yam, yam_kin
) -> None:
    seed = int(np.random.default_rng().integers(0, 1000))
    start_node(SIM, "pear_sim_robot", {"task": "align_blocks", "seed": seed, "publish_images": False})
    agent = start_node(
        AGENT,
        "pear_agent",
        {
            "policy": "scripted",
            "action_noise_cm": 2.0,
            "seed": seed,
            "max_turns": 8,
            "runs_dir": str(tmp_path / "ros"),
            "wait_for_images_s": 0.0,
        },
    )
    agent.wait(90)
    done = probe.wait_for(lambda: probe.event("done"), 5, "the agent's final status")
    assert done["end_reason"] in ("success", "turn_limit"), (done, agent.log())
    n = _check_all(probe, yam, yam_kin)
    assert n >= 8, f"only {n} arm trajectories seen (seed {seed})"


def _agent_without_robot(start_node, tmp_path: Path, **extra):
    replay = tmp_path / "replay.jsonl"
    replay.write_text(
        '{"kind": "turn", "turn": 1, "reply": "{\\"left_arm\\": {\\"position\\": [0, 0, 2]}}"}\n'
    )
    params = {
        "policy": "replay",
        "replay_path": str(replay),
        "instruction": "Lift the left gripper 2 cm.",
        "task": "ros2_test",
        "task_status_topic": "",
        "go_home_on_reset": False,
        "joint_state_max_age_s": 0.3,
        "wait_for_joint_states_s": 3.0,
        "wait_for_images_s": 1.0,
        "runs_dir": str(tmp_path / "ros"),
    } | extra
    return start_node(AGENT, "pear_agent", params)


def test_missing_joint_refuses_without_commanding(tmp_path: Path, start_node, probe: Probe, yam) -> None:
    joints = home_joints(yam)
    del joints["left_joint3"]
    agent = _agent_without_robot(start_node, tmp_path, instruction="")  # from the topic instead
    while agent.proc.poll() is None:
        probe.publish_joints(joints)
        if probe.event("start") is None:
            probe.publish_instruction("Raise the left gripper by 2 cm.")
        time.sleep(0.02)
    done = probe.wait_for(lambda: probe.event("done"), 5, "the agent's final status")
    assert probe.event("start")["instruction"] == "Raise the left gripper by 2 cm."
    assert agent.proc.returncode == 1
    assert done["end_reason"] == "refused", done
    assert "joint states lack left_joint3" in done["detail"] and "no command was sent" in done["detail"]
    assert probe.trajectories == []


def test_stale_joint_states_refuse_without_commanding(tmp_path: Path, start_node, probe: Probe, yam) -> None:
    joints = home_joints(yam)
    agent = _agent_without_robot(start_node, tmp_path)
    # a live robot until the agent hears it and its episode starts, then silence: by the first
    # action (after the 1 s wait for camera images) the data are stale
    matched_at = None
    while agent.proc.poll() is None:
        probe.publish_joints(joints)
        time.sleep(0.02)
        if matched_at is None and probe.js_pub.get_subscription_count() > 1:  # the probe's own + the agent's
            matched_at = time.monotonic()
        if matched_at and time.monotonic() - matched_at > 0.3 and probe.event("start"):
            break
    agent.wait(30)
    done = probe.wait_for(lambda: probe.event("done"), 5, "the agent's final status")
    assert done["end_reason"] == "refused", done
    assert "joint states are" in done["detail"] and "s old (limit 0.3 s)" in done["detail"], done["detail"]
    assert probe.trajectories == []


@pytest.mark.parametrize("how", ["topic", "service"])
def test_estop_mid_motion_holds_and_ends(
    how: str, tmp_path: Path, start_node, probe: Probe, yam, yam_kin
) -> None:
    start_node(SIM, "pear_sim_robot", {"task": "align_blocks", "seed": 0, "publish_images": False})
    agent = start_node(
        AGENT,
        "pear_agent",
        {"policy": "scripted", "seed": 0, "runs_dir": str(tmp_path / "ros"), "wait_for_images_s": 0.0},
    )
    arms = {f"/{p.controller}/joint_trajectory": list(p.joints) for p in yam.parts.values()}

    probe.wait_for(lambda: probe.joint_states, 30, "joint states at the probe")
    t_ready = time.monotonic()

    def long_move():
        for t, topic, msg, _ in list(probe.trajectories):
            if t > t_ready and topic in arms and msg.points and trajectory_arrays(msg)[1][-1] > 0.25:
                return topic, msg
        return None

    topic, move = probe.wait_for(long_move, 60, "an arm move longer than 0.25 s")
    joints = arms[topic]
    time.sleep(0.08)
    if how == "topic":
        probe.estop_topic()
    else:
        assert "holding the last pose" in probe.estop_service()
    t_stop = time.monotonic()
    agent.wait(30)
    done = probe.wait_for(lambda: probe.event("done"), 5, "the agent's final status")
    assert done["end_reason"] == "stopped" and "e-stop" in done["detail"], done
    time.sleep(0.3)
    assert set(joints) <= set(probe.latest_joints()), (
        len(probe.joint_states),
        probe.latest_joints(),
        probe.status[-3:],
    )
    held_a = as_array(probe.latest_joints(), joints)
    time.sleep(1.2)
    held_b = as_array(probe.latest_joints(), joints)
    assert np.max(np.abs(held_b - held_a)) < 0.01, "the arm drifted after the e-stop"
    target = np.array(move.points[-1].positions)
    assert np.max(np.abs(held_b - target)) > 0.02, "the arm finished its move: the e-stop came too late"
    # per topic: the last message is the empty "hold" trajectory; nothing with points after it
    for topic in Probe.TRAJ_TOPICS:
        msgs = [m for _, t, m, _ in probe.trajectories if t == topic]
        empties = [i for i, m in enumerate(msgs) if not m.points]
        assert empties, f"{topic}: no hold message"
        assert all(not m.points for m in msgs[empties[0] :]), f"{topic}: commanded after the e-stop"
    late = [t for t, _, m, _ in probe.trajectories if m.points and t > t_stop + 0.5]
    assert not late, "a trajectory was published after the e-stop"
    assert _check_all(probe, yam, yam_kin) >= 1
