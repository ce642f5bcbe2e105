"""The bring-up modes of the ROS 2 backend over real DDS, against the JTC stand-in
(tests/ros2/jtc_double.py, its own process) and agent_node in its own process: slow (a speed scale),
shadow (a MuJoCo twin; nothing on the real trajectory topics) and step (each motion approved by
the operator through `pear-agent ros approve` / `reject`, a timeout being a reject)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pear_agent.robot.backend import PartCommand
from tests.ros2.conftest import LOADED, REPO, Probe, double_config, home_joints
from tests.ros2.test_agent_endings import DOWN, UP, _agent, _summary
from tests.ros2.test_stops import (
    BRAKING_ONLY,
    DECEL_SLACK,
    REVERSAL_LIMIT_RAD,
    TRUTH,
    motion,
    stamped_series,
)

pytestmark = pytest.mark.wallclock

pytest.importorskip("rclpy", reason="ROS 2 wheels not installed (bash scripts/setup.sh --dev installs them)")

LEFT_TOPIC = "/left_arm_controller/joint_trajectory"
RATE_HZ = 100.0
"""the stand-in's joint-state rate: a crossing measured from its states is late by up to 1/RATE_HZ"""


def _plan_of(msg: Any) -> tuple[np.ndarray, np.ndarray]:
    """(times, N x J positions) of a JointTrajectory as sent."""
    t = np.array([p.time_from_start.sec + p.time_from_start.nanosec * 1e-9 for p in msg.points])
    return t, np.array([list(p.positions) for p in msg.points])


def _progress_path(q: np.ndarray, start: np.ndarray, target: np.ndarray, n: int = 21) -> np.ndarray:
    """The positions where the joint that moves most has made 0, 5, ... 100 % of its way: a path
    compared at equal progress, whatever its timing."""
    j = int(np.argmax(np.abs(target - start)))
    frac = (q[:, j] - start[j]) / (target[j] - start[j])
    frac = np.maximum.accumulate(np.clip(frac, 0.0, 1.0))
    grid = np.linspace(0.0, 1.0, n)
    return np.array([[np.interp(g, frac, q[:, k]) for k in range(q.shape[1])] for g in grid])


def _moving_time_s(t: np.ndarray, q: np.ndarray, start: np.ndarray, target: np.ndarray) -> float:
    """From when the arm has made 2 % of its way to when it has made 98 % (the measured motion)."""
    j = int(np.argmax(np.abs(target - start)))
    frac = (q[:, j] - start[j]) / (target[j] - start[j])
    return float(t[np.argmax(frac >= 0.98)] - t[np.argmax(frac >= 0.02)])


def _planned_moving_time_s(msg: Any, start: np.ndarray, target: np.ndarray) -> float:
    """`_moving_time_s` of the trajectory as sent (its points from `start`, sampled every ms)."""
    t, pos = _plan_of(msg)
    t, pos = np.r_[0.0, t], np.vstack([start, pos])
    grid = np.arange(0.0, t[-1] + 1e-3, 1e-3)
    q = np.column_stack([np.interp(grid, t, pos[:, k]) for k in range(pos.shape[1])])
    return _moving_time_s(grid, q, start, target)


def test_slow_takes_four_times_as_long_on_the_same_path_and_a_stop_still_brakes_in_full(
    start_double, probe: Probe, agent, yam
) -> None:
    """speed_scale 0.25 against full speed, the same move from the same pose: the trajectory sent
    is the full-speed one stretched 4x in time (same points at the same share of the time), the arm
    measured takes at least 4x as long as the full-speed trajectory (less the stand-in's sampling)
    along the same path as the full-speed arm, never
    faster than 0.25 x the cap; and an e-stop in the slow move brakes at the configured
    deceleration (stopping distance of a brake at 8 rad/s2, not of one slowed too).

    Mutations tried once by hand, each failing here:
    - modes.scaled: acceleration and jerk left unscaled (only the speed cap x 0.25): fails "the slow
      trajectory is 2.04x the fast one, not 4x" (and the stretched-profile test "1.0875 ==
      1.762"): the ramps stay short, so the move is not the full-speed one stretched.
    - braking.py `_stop_msg`: `decel = s.stop_deceleration_rad_s2 * self.modes.speed_scale**2`: fails
      "stopping distance 0.142 rad over 0.052" (the stop slowed with the move)."""
    double = start_double(double_config(yam, cameras={}, **TRUTH))
    from pear_agent.ros2.modes import ArmModeSettings

    decel = 8.0
    a = agent(stop_deceleration_rad_s2=decel, stop_jerk_rad_s3=100.0, **BRAKING_ONLY, **LOADED)
    be = a.backend
    assert be.check_stack() is None
    joints = list(yam.parts["left_arm"].joints)
    start = np.array([home_joints(yam)[j] for j in joints])

    def heard() -> bool:
        """The stack check finds the controller in the graph; a reliable message reaches it only once
        both ends have discovered each other (a first message may be lost before): a move to where
        the arm is, until the stand-in has received one."""
        be.execute({"left_arm": PartCommand(joints_rad=start)})
        return bool(double.trajectories("left_arm_controller"))

    probe.wait_for(heard, 20, "the stand-in to hear the agent")
    probe.wait_for(lambda: stamped_series(probe, joints, time.time() - 0.5)[0].size, 30, "the arm's states")
    part = be.parts["left_arm"]
    target = np.clip(start + np.array([0.6, 0.5, -0.5, 0.4, 0.0, 0.0]), part.lower + 0.05, part.upper - 0.05)

    def settled_at(q: np.ndarray) -> bool:
        """The arm measured within 0.1 mrad of `q`: "reached" allows `reach_tolerance_rad` (10
        mrad), and moves compared for their duration must start from the same pose."""
        now, _ = be._read(joints)
        return bool(np.max(np.abs(now - q)) < 1e-4)

    def move(q: np.ndarray, scale: float) -> tuple[Any, np.ndarray, np.ndarray]:
        probe.wait_for(lambda: settled_at(start if q is target else target), 10, "the arm at rest")
        be.modes = ArmModeSettings(speed_scale=scale)
        sent = len(be.published)
        t0 = time.time()
        outcome = be.execute({"left_arm": PartCommand(joints_rad=q)})
        assert outcome.status == "reached", outcome
        time.sleep(0.2)  # the stand-in's last states reach the probe (its own loop publishes them)
        msg = next(m for _, topic, m in be.published[sent:] if topic == part.topic)
        t, pos = stamped_series(probe, joints, t0)
        return msg, t, pos

    fast_msg, fast_t, fast_q = move(target, 1.0)
    move(start, 1.0)
    slow_msg, slow_t, slow_q = move(target, 0.25)
    # the trajectory sent: the same points, 4x the time
    (tf, pf), (ts, ps) = _plan_of(fast_msg), _plan_of(slow_msg)
    ratio = ts[-1] / tf[-1]
    assert ratio == pytest.approx(4.0, abs=1e-3), f"the slow trajectory is {ratio:.2f}x the fast one, not 4x"
    for u in np.linspace(0.0, 1.0, 41):
        at_fast = [np.interp(u * tf[-1], np.r_[0, tf], np.r_[pf[0, k], pf[:, k]]) for k in range(len(joints))]
        at_slow = [np.interp(u * ts[-1], np.r_[0, ts], np.r_[ps[0, k], ps[:, k]]) for k in range(len(joints))]
        np.testing.assert_allclose(at_slow, at_fast, atol=2e-3)
    # the arm measured
    fast_s = _moving_time_s(fast_t, fast_q, start, target)
    slow_s = _moving_time_s(slow_t, slow_q, start, target)
    print(f"moving time: full speed {fast_s:.3f} s, speed_scale 0.25 {slow_s:.3f} s ({slow_s / fast_s:.2f}x)")
    # a starved stand-in makes a measured move longer, never shorter than its trajectory: compare
    # the slow arm with 4x the full-speed trajectory, less 5 of the stand-in's states (its sampling,
    # and how its servo lag, 2 / 50 rad/s = 40 ms, may differ at the two ends)
    fast_plan_s = _planned_moving_time_s(fast_msg, start, target)
    assert slow_s >= 4.0 * fast_plan_s - 5 / RATE_HZ, (fast_plan_s, slow_s)
    np.testing.assert_allclose(
        _progress_path(slow_q, start, target), _progress_path(fast_q, start, target), atol=0.03
    )
    _, v, _ = motion(slow_t, slow_q)
    peak = float(np.max(np.abs(v)))
    assert peak <= 0.25 * part.vmax * 1.1, f"slow peak {peak:.3f} rad/s over 0.25 x {part.vmax}"

    # an e-stop in a slow move: braked at the configured deceleration
    be.modes = ArmModeSettings(speed_scale=0.25)
    far = np.clip(start + np.array([-0.4, 1.2, -1.0, -0.6, 0.0, 0.0]), part.lower + 0.05, part.upper - 0.05)
    outcome: list[Any] = []
    mover = threading.Thread(
        target=lambda: outcome.append(be.execute({"left_arm": PartCommand(joints_rad=far)})), daemon=True
    )
    t_go = time.time()
    mover.start()

    def cruising() -> float | None:
        t, q = stamped_series(probe, joints, t_go)
        if len(t) < 6:
            return None
        _, vel, _ = motion(t[-6:], q[-6:])
        speed = float(np.max(np.abs(vel[-1]))) if len(vel) else 0.0
        return speed if speed >= 0.9 * 0.25 * part.vmax else None

    probe.wait_for(cruising, 30, "the slow move at its (scaled) cruising speed")
    t_stop = time.time()
    be.emergency_stop("test")
    mover.join(timeout=30)
    assert outcome and outcome[0].status == "stopped", outcome
    time.sleep(1.0)
    t, q = stamped_series(probe, joints, t_stop - 0.2)
    tv, vel, acc = motion(t, q)
    k0 = int(np.searchsorted(tv, t_stop))
    v0 = vel[max(0, k0 - 1)]
    moving = np.abs(v0) > 0.05
    s = np.sign(v0)
    k_stop = int(np.searchsorted(t, t_stop))
    along = q[k_stop:] * s[None, :]
    back = float(np.max((np.maximum.accumulate(along, axis=0) - along)[:, moving]))
    dist = (q[-1] - q[k_stop]) * s
    peak_decel = float(np.max((-acc[k0:] * s[None, :])[:, moving]))
    longest = DECEL_SLACK * np.abs(v0) * (float(np.max(np.abs(v0))) / decel + 0.15) / 2 + 0.01
    print(f"stop from {np.round(v0[moving], 3)} rad/s: {np.round(dist[moving], 3)} rad, {peak_decel:.2f}")
    assert peak_decel <= DECEL_SLACK * decel, peak_decel
    assert back <= REVERSAL_LIMIT_RAD, f"came back {1000 * back:.1f} mrad"
    assert np.max(np.abs(vel[-5:])) < 0.01, vel[-5:]
    far_rad, bound_rad = float(np.max(dist[moving])), float(np.max(longest[moving]))
    too_far = f"stopping distance {far_rad:.3f} rad over {bound_rad:.3f}"
    assert np.all(dist[moving] < longest[moving]), too_far


def _episode(tmp_path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    summary = _summary(tmp_path)
    rows = (Path(summary["run_dir"]) / "episode.jsonl").read_text().splitlines()
    return summary, [json.loads(r) for r in rows]


def test_shadow_sends_nothing_to_the_controllers_and_records_one_twin_outcome_per_turn(
    tmp_path: Path, start_node, start_double, probe: Probe, yam
) -> None:
    """arm_mode shadow through agent_node: three moves of the left arm, each run by the MuJoCo twin
    set from the real joint states; no message on any real trajectory topic (the probe's subscriber
    and the stand-in's own log both stay empty), and one shadow record per turn: what would have
    been sent (the left arm's trajectory within its cap) and the twin's outcome; the live view
    (`view`) shows the twin's arm for each.

    Mutation tried once by hand: `execute` without its shadow branch (the move sent as in free):
    fails "trajectories on the real topics: ['/left_arm_controller/joint_trajectory', ...]"."""
    double = start_double(double_config(yam))
    agent = _agent(
        start_node, tmp_path, [UP, DOWN, UP], arm_mode="shadow", operator_timeout_s=1.0, view=True, **LOADED
    )
    code = agent.wait(240)
    summary, lines = _episode(tmp_path)
    assert code == 1 and summary["end_reason"] == "turn_limit" and summary["turns"] == 3, (code, summary)
    with probe.lock:
        seen = [topic for _, topic, _, _ in probe.trajectories]
    assert seen == [] and double.trajectories() == [], f"trajectories on the real topics: {seen}"
    header = next(r for r in lines if r["kind"] == "header")
    assert header["arm_mode"] == "shadow" and header["speed_scale"] == 1.0, header
    shadows = [r for r in lines if r["kind"] == "shadow"]
    turns = [r for r in lines if r["kind"] == "turn" and "outcome" in r]
    assert len(shadows) == len(turns) == 3, (len(shadows), len(turns))
    cap = yam.parts["left_arm"].limits.joint_velocity_rad_s
    for rec, turn in zip(shadows, turns, strict=True):
        sent = rec["would_send"][LEFT_TOPIC]
        assert 0 < sent["duration_s"] < 10 and 0 < sent["peak_speed_rad_s"] <= cap + 1e-6, sent
        assert sent["clipped_to_limits"] is False and sent["speed_cap_rad_s"] == pytest.approx(cap), sent
        assert rec["twin"]["status"] == "reached" == turn["outcome"]["status"], (rec["twin"], turn["outcome"])
        assert "in the twin" in turn["outcome"]["detail"], turn["outcome"]
        twin_end = rec["twin"]["joints_rad"]["left_arm"]
        moved = np.abs(np.subtract(twin_end, rec["twin_start"]["joints_rad"]["left_arm"]))
        assert np.max(moved) > 0.01, rec  # the twin did move the arm the real one kept still
        # it started where the real arm was (the stand-in holds home: nothing moved it)
        real = [home_joints(yam)[j] for j in yam.parts["left_arm"].joints]
        np.testing.assert_allclose(rec["twin_start"]["joints_rad"]["left_arm"], real, atol=1e-3)
    # the live view (episode.rrd) has the twin's arm beside the real one, once per action
    from tests.records.test_view import read_rrd

    rrd = read_rrd(Path(summary["run_dir"]) / "episode.rrd")
    assert len(rrd["/world/twin/skeleton"]["turn"]) == 3 and len(rrd["/twin/outcome"]["turn"]) == 3
    assert len(rrd[f"/would_send{LEFT_TOPIC}/duration_s"]["turn"]) == 3


STEP_TIMEOUT_S = 40.0
"""long enough for `pear-agent ros approve` / `reject` to start and answer on a loaded machine (a few
seconds; over 20 s seen at a load of 29 on 2 cores), and the time the third motion waits before it
counts as rejected"""


def _ros_cli(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "pear_agent", "ros", *args, "--timeout-s", "120"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_step_runs_an_approved_motion_never_a_rejected_one_and_no_answer_is_a_reject(
    tmp_path: Path, start_node, start_double, yam
) -> None:
    """arm_mode step through agent_node and the operator commands, each in its own process: the
    first motion is shown and approved (`pear-agent ros approve`): the stand-in gets it; the second
    is rejected with a reason (`pear-agent ros reject too close`): nothing is sent and the model is
    told the reason as a blocked move; the third is not answered: after `step_timeout_s` it is
    rejected the same way. The stand-in receives exactly one trajectory.

    Mutation tried once by hand: `_ask_step` returning None when nobody answered (`if answer is
    None: return None`): fails on the third turn ("assert 'reached' == 'blocked'": it moved)."""
    double = start_double(double_config(yam))
    agent = _agent(
        start_node,
        tmp_path,
        [UP, DOWN, UP],
        arm_mode="step",
        step_timeout_s=STEP_TIMEOUT_S,
        operator_timeout_s=1.0,
        **LOADED,
    )
    approve = _ros_cli("approve")
    out, _ = approve.communicate(timeout=180)
    assert approve.returncode == 0 and "approved: move? model asked" in out, out
    assert "left_arm hand (" in out and " cm, " in out and "peak" in out, out  # what the operator was shown
    reject = _ros_cli("reject", "too", "close")
    out, _ = reject.communicate(timeout=180)
    assert reject.returncode == 0 and "rejected: move?" in out, out
    code = agent.wait(STEP_TIMEOUT_S + 120)
    summary, lines = _episode(tmp_path)
    assert code == 1 and summary["turns"] == 3, (code, summary)
    turns = [r for r in lines if r["kind"] == "turn" and "outcome" in r]
    first, second, third = (t["outcome"] for t in turns)
    assert first["status"] == "reached", first
    assert second["status"] == "blocked", second
    assert "the operator rejected the move: too close" in second["detail"], second
    assert third["status"] == "blocked", third
    assert f"no operator answer within {STEP_TIMEOUT_S:g} s" in third["detail"], third
    steps = [r for r in lines if r["kind"] == "step"]
    assert [s["answer"] for s in steps] == [True, False, None], steps
    assert steps[1]["reason"] == "too close", steps[1]
    sent = [e for e in double.trajectories("left_arm_controller") if e["accepted"]]
    assert len(sent) == 1, f"the stand-in got {len(sent)} trajectories, not 1"


# -- the settings and the plan's facts, without a graph ------------------------------------------
def test_the_settings_refuse_what_no_arm_could_use() -> None:
    from pear_agent.ros2.modes import ArmModeSettings

    for bad, said in (
        ({"speed_scale": 0.0}, "speed_scale: in (0, 1], not 0"),
        ({"speed_scale": 1.5}, "speed_scale: in (0, 1], not 1.5"),
        ({"arm_mode": "fast"}, "arm_mode: one of free, shadow, step, not 'fast'"),
        ({"step_timeout_s": 0.0}, "step_timeout_s: must be > 0"),
    ):
        with pytest.raises(ValueError, match=said.replace("(", r"\(").replace(")", r"\)")):
            ArmModeSettings(**bad)
    assert ArmModeSettings().header() == {"arm_mode": "free", "speed_scale": 1.0}


def test_a_scaled_move_is_the_full_speed_one_stretched_in_time(yam) -> None:
    """ruckig within the scaled limits gives the full-speed profile at 1/scale of its pace: the same
    positions at the same share of the time (to the 50 ms sampling's interpolation), the speeds x
    scale (what makes `slow` the same path)."""
    from pear_agent.robot.kinematics import Kinematics
    from pear_agent.ros2 import conversions as cv
    from pear_agent.ros2.modes import plan_facts, scaled

    kin = Kinematics(yam)
    lower, upper = kin.joint_limits("left_arm")
    full = cv.MoveLimits(1.5, 4.0, 40.0, lower, upper, 0.05)
    q0 = np.array(yam.parts["left_arm"].home.joints_rad)
    q1 = np.clip(q0 + np.array([0.6, 0.5, -0.5, 0.4, 0.0, 0.0]), lower, upper)
    names = list(yam.parts["left_arm"].joints)
    fast = cv.ruckig_plan(names, q0, q1, full)
    for scale in (0.5, 0.25, 0.1):
        slow = cv.ruckig_plan(names, q0, q1, scaled(full, scale))
        assert slow.duration_s == pytest.approx(fast.duration_s / scale, rel=1e-6)
        for u in np.linspace(0, 1, 11):
            np.testing.assert_allclose(
                slow.state(u * slow.duration_s)[0], fast.state(u * fast.duration_s)[0], atol=2e-3
            )
        f = plan_facts(slow, 1.5 * scale, q1)
        assert f["peak_speed_rad_s"] <= 1.5 * scale + 1e-6 and f["clipped_to_limits"] is False, f
    # a target beyond the joint limits is clipped, and the record says so
    beyond = q1.copy()
    beyond[0] = upper[0] + 1.0
    assert plan_facts(cv.ruckig_plan(names, q0, beyond, full), 1.5, beyond)["clipped_to_limits"] is True
