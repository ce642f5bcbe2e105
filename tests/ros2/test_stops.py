"""Stops a real arm can obey: the ROS backend (in this process, spun as agent_node spins it) against
the JTC stand-in (tests/ros2/jtc_double.py, its own process: the controller's own interpolation
from the measured position and velocity, servos with a lag). Speed, deceleration, reversal and
stopping distance are measured from the states the stand-in read (its truth topic, by their
stamps), whatever the delivery of /joint_states to the agent."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from pear_agent.robot.backend import PartCommand, TaskInfo
from tests.ros2.conftest import TRUTH_TOPIC, Probe, double_config, home_joints

pytestmark = pytest.mark.wallclock

pytest.importorskip("rclpy", reason="ROS 2 wheels not installed (bash scripts/setup.sh --dev installs them)")

LEFT = "left_arm_controller"
DECEL_SLACK = 1.25
"""the issue's bound: measured deceleration within the configured stop deceleration + 25 %"""
REVERSAL_LIMIT_RAD = 0.005
WINDOW_S = 0.02
"""velocity and deceleration are finite differences over this span of joint-state stamps"""


class InProcessAgent:
    """RosBackend on a node spun exactly as agent_node spins its own (spin_in_background)."""

    def __init__(self, robot: Any, **settings: Any) -> None:
        import rclpy

        from pear_agent.ros2.backend import RosBackend
        from pear_agent.ros2.graph import spin_in_background
        from pear_agent.ros2.settings import RosSettings

        rclpy.init()
        self.node = rclpy.create_node("pear_agent")
        defaults = {"disabled_cameras": "all", "operator_terminal": False, "wait_for_joint_states_s": 20.0}
        self.settings = RosSettings(**(defaults | settings))
        self.backend = RosBackend(robot, self.node, TaskInfo("stop_test", "", 30), self.settings)
        self._shutdown = spin_in_background(self.node)

    def close(self) -> None:
        self._shutdown()


@pytest.fixture
def agent(yam) -> Iterator[Any]:
    made: list[InProcessAgent] = []

    def make(**settings: Any) -> InProcessAgent:
        a = InProcessAgent(yam, **settings)
        made.append(a)
        return a

    yield make
    for a in made:
        a.close()


TRUTH = {"truth_topic": TRUTH_TOPIC}
"""the stand-in publishes every state it reads there too: the arm's motion, measured"""

BRAKING_ONLY = {"stall_tracking_error_rad": 1.5}
"""For the tests of braking from full speed: on a loaded 2-core machine the stand-in's Python loop
can fall 0.3 rad (the default stall threshold) behind its trajectory, and the move then ends as a
stall before full speed (seen once in CI under load). Stalls have their own test, at the default."""


def stamped_series(probe: Probe, joints: list[str], since_s: float) -> tuple[np.ndarray, np.ndarray]:
    """(stamps, N x J positions) of the states the stand-in read after `since_s` (system time): from
    its truth topic where it publishes one (TRUTH: every state at 100 Hz by its own clock, whatever
    the delivery of /joint_states), else from /joint_states by their header stamps."""
    with probe.lock:
        series = probe.truth or probe.stamped
        rows = [(t, [js[j] for j in joints]) for t, js in series if t >= since_s]
    return np.array([r[0] for r in rows]), np.array([r[1] for r in rows]).reshape(len(rows), len(joints))


def motion(t: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Velocities at the midpoints of WINDOW_S spans, and accelerations between them."""
    idx = [0]
    for i in range(1, len(t)):
        if t[i] - t[idx[-1]] >= WINDOW_S - 1e-3:
            idx.append(i)
    ts, qs = t[idx], q[idx]
    v = np.diff(qs, axis=0) / np.diff(ts)[:, None]
    tv = 0.5 * (ts[1:] + ts[:-1])
    a = np.diff(v, axis=0) / np.diff(tv)[:, None]
    return tv, v, a


def run_to_full_speed_then_stop(
    agent: Any, probe: Probe, joints: list[str], target: np.ndarray, stop: Any, clock_offset_s: float = 0.0
) -> tuple[float, float]:
    """Start a move to `target` in a thread; once some joint moves at >= 95 % of the cap (from
    /joint_states), call `stop`. Returns (time of the stop, the speed then)."""
    be = agent.backend
    cap = be.parts["left_arm"].vmax
    outcome: list[Any] = []
    mover = threading.Thread(
        target=lambda: outcome.append(be.execute({"left_arm": PartCommand(joints_rad=target)})), daemon=True
    )
    probe.wait_for(
        lambda: stamped_series(probe, joints, time.time() - 0.5)[0].size, 30, "joint states at the probe"
    )
    t_go = time.time()
    mover.start()

    def fast() -> float | None:
        assert mover.is_alive() or not outcome, f"the move ended before full speed: {outcome}"
        t, q = stamped_series(probe, joints, t_go)
        if len(t) < 4:
            return None
        _, v, _ = motion(t[-6:], q[-6:])
        speed = float(np.max(np.abs(v[-1]))) if len(v) else 0.0
        return speed if speed >= 0.95 * cap else None

    speed = probe.wait_for(fast, 30, "the left arm at full speed")
    t_stop = time.time() + clock_offset_s
    stop()
    mover.join(timeout=30)
    assert outcome and outcome[0].status == "stopped", outcome
    return t_stop, speed


LINK = {"joint_state_backlog_s": 0.05, "joint_state_backlog_period_s": 0.08, "joint_state_jitter_s": 0.003}
"""/joint_states over a link to a driver on another computer (the stand-in's delivery model): its
latency grows to 50 ms over every 80 ms and the messages it held back then arrive together (a
burst), plus up to 3 ms of jitter; stamps stay the times the states were read. Receipt times then
run at 0.6x the stamps' pace and jump at each burst: a velocity from receipt times is 0.6x or
1.6x the arm's at almost any moment, one from the stamps is exact. Every state is still within
`joint_state_max_age_s` (0.1 s) when it arrives."""

VELOCITY_CASES: dict[str, dict[str, Any]] = {
    "published": {"joint_state_velocity": "measured", **LINK},
    "none": {"joint_state_velocity": "none", **LINK},
    "nan": {"joint_state_velocity": "nan", **LINK},
    "stale": {"joint_state_velocity": "none", "joint_state_every": 24},
}
"""How /joint_states carries velocities: published (measured); an empty array (a broadcaster over
hardware without a velocity state interface); NaN (a driver filling an interface it does not
read); none at about 4 Hz (`stale`: every 24th state of the 100 Hz loop, so an estimate from the
stamped positions spans 0.24 s and lags 0.12 s, more than a state may be old: the stop brakes from
the trajectory the controller follows)."""

CASE_SETTINGS: dict[str, dict[str, Any]] = {"stale": {"wait_for_fresh_state_s": 1.0}}
"""What an owner of such a stream sets: at 4 Hz a state is fresh for 0.1 s of every 0.24 s, and a
starved stand-in (a loaded machine) can leave 0.5 s between two; the move should not end as stale
before full speed (staleness has its own tests)."""

PUBLISHED = {"velocities_published": True, "stop_velocity_source": "published", "fallback": None}
ESTIMATED = {"velocities_published": False, "stop_velocity_source": "estimated", "fallback": "trajectory"}
FOLLOWED = {"velocities_published": False, "stop_velocity_source": "trajectory", "fallback": None}
REPORTS = {
    "published": (PUBLISHED, "published"),
    "none": (ESTIMATED, "estimated"),
    "nan": (ESTIMATED, "estimated"),
    "stale": (FOLLOWED, "trajectory"),
}
"""Per case: what `velocity_report()` says for the left arm at the stack check, and what its e-stop
then braked from (`stop_sources`)."""


def brake_figures(probe: Probe, joints: list[str], t_stop: float) -> dict[str, Any]:
    """From the arm's measured motion (the stand-in's states, by their stamps) around a stop at
    `t_stop`: the velocity then, the peak deceleration against it, how far any moving joint came
    back, the stopping distance along the motion, and the last velocities and positions."""
    t, q = stamped_series(probe, joints, t_stop - 0.2)
    tv, v, acc = motion(t, q)
    k0 = int(np.searchsorted(tv, t_stop))
    v_at_stop = v[max(0, k0 - 1)]
    moving = np.abs(v_at_stop) > 0.2
    s = np.sign(v_at_stop)
    opposing = -acc[k0:] * s[None, :]  # deceleration against the direction of motion, per joint
    k_stop = int(np.searchsorted(t, t_stop))
    along = q[k_stop:] * s[None, :]
    back = np.maximum.accumulate(along, axis=0) - along
    return {
        "v_at_stop": v_at_stop,
        "moving": moving,
        "peak": float(np.max(opposing[:, moving])) if np.any(moving) else 0.0,
        "reversal": float(np.max(back[:, moving])) if np.any(moving) else 0.0,
        "distance": (q[-1] - q[k_stop]) * s,
        "v_end": v[-5:],
        "q_end": q[-1],
    }


def check_brake(f: dict[str, Any], decel: float, what: str) -> None:
    """Within the stop deceleration (+ 25 %) and braking for real, not back by more than 5 mrad,
    at rest, and stopped in about speed x T / 2 (T = the fastest joint's speed / deceleration + the
    0.15 s jerk ramp; every joint comes to rest at the same time, braking along the path)."""
    v0, moving, dist = f["v_at_stop"], f["moving"], f["distance"]
    print(
        f"{what}: peak {f['peak']:.2f} rad/s2 (limit {decel} + 25 %), back {1000 * f['reversal']:.2f} mrad, "
        f"stopping distance {np.round(dist[moving], 3)} from {np.round(v0[moving], 2)} rad/s"
    )
    assert np.any(moving), v0
    limit = DECEL_SLACK * decel
    assert f["peak"] <= limit, f"{what}: peak deceleration {f['peak']:.2f} rad/s2 over {limit}"
    assert f["peak"] > 0.5 * decel, f"{what}: peak deceleration {f['peak']:.2f}: it did not brake"
    assert f["reversal"] <= REVERSAL_LIMIT_RAD, f"{what}: came back {1000 * f['reversal']:.1f} mrad"
    assert np.max(np.abs(f["v_end"])) < 0.01, f"{what}: not at rest: {f['v_end']}"
    brake_s = float(np.max(np.abs(v0))) / decel + 0.15
    longest = DECEL_SLACK * np.abs(v0[moving]) * brake_s / 2 + 0.01
    assert np.all(dist[moving] > 0), f"{what}: stopped behind where it was: {dist}"
    too_far = f"{what}: stopping distance {np.round(dist[moving], 3)} over {np.round(longest, 3)}"
    assert np.all(dist[moving] < longest), too_far


@pytest.mark.parametrize("case", list(VELOCITY_CASES))
def test_an_estop_at_full_speed_brakes_within_the_stop_deceleration_without_reversal(
    start_double, probe: Probe, agent, yam, case: str
) -> None:
    """An e-stop at full speed, in every way /joint_states may carry velocities (VELOCITY_CASES),
    the first three over a jittery link with bursts (LINK): within the stop deceleration (+ 25 %),
    no come-back, the stopping distance of a brake from the arm's real speed, one braking
    trajectory; the stack check's velocity report and what the stop braked from are the case's.

    Read as zero (issue 30), the velocity made the stop a hold where the arm was: 32.5 rad/s2 and
    14 mrad back. Mutations tried once by hand (issue 42), each failing here:
    - pear_agent/ros2/backend.py `_on_joint_state`: `t_est = now` (the velocity estimate from
      receipt times, not the header stamps): [none] fails "peak deceleration 20.04 rad/s2 over
      10.0" (it braked from 1.7x the speed: 0.49 rad to stop), [nan] "peak deceleration 16.65
      rad/s2 over 10.0" (from 0.6x). Without LINK, [none] passed (8.14 rad/s2): on a local link
      the two clocks agree.
    - pear_agent/ros2/braking.py `_stop_msg`: the trajectory fallback removed (the lines setting
      `planned` deleted): [stale] fails "peak deceleration 35.98 rad/s2 over 10.0" (a hold at the
      last position: 277 mrad back). Only `choose_velocity(..., planned=None)` passes: the stop then
      brakes from the trajectory's own state instead, which the arm cannot tell apart (equivalent).
    - `velocity_report` saying "estimated" whenever velocities are not published: [stale] fails on
      the report ({'stop_velocity_source': 'estimated'} != {'stop_velocity_source': 'trajectory'})."""
    double = start_double(double_config(yam, cameras={}, **TRUTH, **VELOCITY_CASES[case]))
    decel = 8.0
    a = agent(
        stop_deceleration_rad_s2=decel, stop_jerk_rad_s3=100.0, **BRAKING_ONLY, **CASE_SETTINGS.get(case, {})
    )
    assert a.backend.check_stack() is None
    report, braked_from = REPORTS[case]
    # the report of a moment: a starved stand-in (a loaded machine) may leave a gap in the stream
    try:
        probe.wait_for(lambda: a.backend.velocity_report()[LEFT] == report, 5, f"the report {report}")
    except AssertionError:
        assert a.backend.velocity_report()[LEFT] == report
    joints = list(yam.parts["left_arm"].joints)
    start = np.array([home_joints(yam)[j] for j in joints])
    part = a.backend.parts["left_arm"]
    target = np.clip(start + np.array([1.2, 0.9, -0.9, 0.8, 0.0, 0.0]), part.lower + 0.05, part.upper - 0.05)
    marks: list[float] = []

    def estop() -> None:
        marks.append(time.monotonic())
        a.backend.emergency_stop("test")

    t_stop, speed = run_to_full_speed_then_stop(a, probe, joints, target, estop)
    time.sleep(1.5)
    assert speed > 1.4, speed
    f = brake_figures(probe, joints, t_stop)
    check_brake(f, decel, f"{case}: e-stop at {speed:.2f} rad/s")
    assert a.backend.stop_sources[part.topic] == braked_from, a.backend.stop_sources
    # one braking trajectory per controller, multi-point on the moving arm, ending at rest, accepted
    stops = [e for e in double.trajectories(LEFT) if e["t"] > marks[0]]
    assert len(stops) == 1 and stops[0]["accepted"] and stops[0]["points"] >= 2, stops  # a brake, not a hold
    assert stops[0]["kind"] == "cubic", stops[0]
    np.testing.assert_allclose(stops[0]["last"], f["q_end"], atol=0.01)


def test_where_the_robot_clock_disagrees_the_stop_starts_on_receipt_and_still_brakes(
    start_double, probe: Probe, agent, yam
) -> None:
    """Joint states stamped by a clock 5 s ahead: ages count from receipt (noted once), and a
    stamped stop would land 5 s off, so the stop is unstamped (the controller starts it on
    receipt, planned `command_latency_s` ahead). It is accepted and brakes without turning back."""
    double = start_double(double_config(yam, cameras={}, stamp_offset_s=5.0, **TRUTH))
    a = agent(**BRAKING_ONLY)
    assert a.backend.check_stack() is None
    note = a.backend._clock_note  # e.g. "joint state stamps are -4.99 s off this computer's clock"
    assert "s off this computer's clock" in note and 4.5 < abs(float(note.split()[4])) < 5.5, note
    joints = list(yam.parts["left_arm"].joints)
    start = np.array([home_joints(yam)[j] for j in joints])
    part = a.backend.parts["left_arm"]
    target = np.clip(start + np.array([1.2, 0.9, -0.9, 0.8, 0.0, 0.0]), part.lower + 0.05, part.upper - 0.05)
    marks: list[float] = []

    def estop() -> None:
        marks.append(time.monotonic())
        a.backend.emergency_stop("test")

    # the probe's stamped series is 5 s ahead too: read it in the robot's clock
    t_stop, speed = run_to_full_speed_then_stop(a, probe, joints, target, estop, clock_offset_s=5.0)
    time.sleep(1.5)
    stops = [e for e in double.trajectories(LEFT) if e["t"] > marks[0]]
    assert len(stops) == 1 and stops[0]["accepted"] and stops[0]["stamp_s"] == pytest.approx(0.0), stops
    t, q = stamped_series(probe, joints, t_stop - 0.2)
    tv, v, acc = motion(t, q)
    k0 = int(np.searchsorted(tv, t_stop))
    v_at_stop = v[max(0, k0 - 1)]
    moving = np.abs(v_at_stop) > 0.2
    peak = float(np.max((-acc[k0:] * np.sign(v_at_stop))[:, moving]))
    k_stop = int(np.searchsorted(t, t_stop))
    along = q[k_stop:] * np.sign(v_at_stop)[None, :]
    reversal = float(np.max((np.maximum.accumulate(along, axis=0) - along)[:, moving]))
    print(f"unstamped stop at {speed:.2f} rad/s: peak {peak:.2f} rad/s2, reversal {1000 * reversal:.2f} mrad")
    assert reversal <= REVERSAL_LIMIT_RAD, f"reversed by {1000 * reversal:.1f} mrad"
    assert np.max(np.abs(v[-5:])) < 0.01, v[-5:]


def test_a_stalled_arm_is_blocked_and_stopped_where_it_is(start_double, probe: Probe, agent, yam) -> None:
    """A joint held by an obstacle (the stand-in's `stuck_joints`): the move ends `blocked` naming
    it, and the arm gets one stop where it is (at rest: one point at the measured pose)."""
    double = start_double(double_config(yam, cameras={}, stuck_joints=["left_joint2"]))
    a = agent()
    assert a.backend.check_stack() is None
    joints = list(yam.parts["left_arm"].joints)
    start = np.array([home_joints(yam)[j] for j in joints])
    target = start + np.array([0.0, 0.6, 0.0, 0.0, 0.0, 0.0])
    outcome = a.backend.execute({"left_arm": PartCommand(joints_rad=target)})
    assert outcome.status == "blocked" and outcome.blocked_joints == ["left_joint2"], outcome
    assert "stalled during the motion" in outcome.detail
    sent = probe.wait_for(
        lambda: [e for e in double.trajectories(LEFT) if e["accepted"]][1:] and double.trajectories(LEFT),
        10,
        "the stop at the stand-in",
    )
    sent = [e for e in sent if e["accepted"]]
    assert len(sent) == 2 and sent[1]["points"] == 1, sent  # the move, then one stop at rest
    np.testing.assert_allclose(sent[1]["last"], sent[1]["actual"], atol=1e-3)
