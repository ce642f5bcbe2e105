"""Stops a real arm can obey: the ROS backend (in this process, spun as agent_node spins it) against
the JTC stand-in (tests/ros2/jtc_double.py, its own process: the controller's own interpolation
from the measured position and velocity, servos with a lag). Speed, deceleration, reversal and
stopping distance are measured from the states the stand-in read (its truth topic, by their
stamps), whatever the delivery of /joint_states to the agent."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest

from pear_agent.robot.backend import PartCommand
from tests.ros2.conftest import TRUTH_TOPIC, Probe, double_config, home_joints

pytestmark = pytest.mark.wallclock

pytest.importorskip("rclpy", reason="ROS 2 wheels not installed (bash scripts/setup.sh --dev installs them)")

LEFT = "left_arm_controller"
DECEL_SLACK = 1.25
"""test_chunks_ros' bound on a chunk's brake: the configured stop deceleration + 25 %"""
REVERSAL_LIMIT_RAD = 0.005
WINDOW_S = 0.02
"""velocity and deceleration are finite differences over this span of joint-state stamps"""


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
    """Start a move to `target` in a thread; once some joint has moved at >= 99 % of the cap for
    CRUISE_S (from the stand-in's servo velocities), call `stop`. Returns (time of the stop, the
    speed then). In cruise, not while the arm still accelerates: a stop plans from the speed and
    zero acceleration, so an arm still gaining speed would stop short of the profile's distance;
    and in cruise for as long as the agent's view of the arm lags (CRUISE_S), so that its velocity
    estimate too is of the cruise, not of the end of the acceleration."""
    be = agent.backend
    cap = be.parts["left_arm"].vmax
    outcome: list[Any] = []
    mover = threading.Thread(
        target=lambda: outcome.append(be.execute({"left_arm": PartCommand(joints_rad=target)})), daemon=True
    )
    probe.wait_for(
        lambda: stamped_series(probe, joints, time.time() - 0.5)[0].size, 30, "joint states at the probe"
    )
    mover.start()

    def fast() -> float | None:
        assert mover.is_alive() or not outcome, f"the move ended before full speed: {outcome}"
        with probe.lock:
            rows = list(probe.truth_velocity[-200:])
        if not rows or rows[-1][0] - rows[0][0] < CRUISE_S:
            return None
        recent = [vel for t, vel in rows if t >= rows[-1][0] - CRUISE_S]
        speeds = [max((abs(vel[j]) for j in joints if j in vel), default=0.0) for vel in recent]
        return speeds[-1] if min(speeds) >= 0.99 * cap else None

    speed = probe.wait_for(fast, 30, "the left arm at full speed")
    t_stop = time.time() + clock_offset_s
    stop()
    mover.join(timeout=30)
    assert outcome and outcome[0].status == "stopped", outcome
    return t_stop, speed


CRUISE_S = 0.25
"""How long the arm cruises before a test stops it: more than the agent's view of it lags (LINK's
50 ms backlog, the 30 ms velocity window, the agent's executor late on a loaded machine). Stopped
at the first moment of cruise, the estimate from positions read 50-80 ms earlier is of the end of
the acceleration: 1.33-1.45 rad/s for the arm's 1.49 (measured), a plan starting 3-11 % slow whose
first cubic joins the arm's real speed harder (peaks of 5-6 rad/s2 for the 4 configured)."""


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


JERK_PHASE_S = 0.15
"""The stop's profile (docs/ros2.md): its jerk is capped so that the jerk phase starting the brake
lasts at least 0.15 s."""
DROP = 0.02
"""The brake's onset is measured where the fastest joint's speed has dropped 2 % below its peak
(a threshold on the servo's own velocity, exact; the 0.15 s jerk ramp leaves no sharper mark)."""
DECEL_WINDOW_S = 0.03
"""Decelerations are velocity differences over 30 ms of stamps (3 states of the 100 Hz stand-in)."""
DECEL_TOLERANCE = 0.25
"""How far above the configured deceleration (4 rad/s2 in these tests) a measured peak may be, and
what it is made of: the servo under the controller (critically damped, 50 rad/s, with velocity
feedforward) answers the profile's jerk ramp j = decel / 0.15 s with an overshoot of
j / (omega e) = 0.2 rad/s2 (5 %); a state stamped up to 1 ms away from when it was read shifts a
30 ms difference by 3 %; the controller's first cubic joins the profile from the state it measures
when the stop takes effect, a few mm off the predicted state: up to 0.6 rad/s2 (15 %) there.
Measured: 4.24-4.57 rad/s2 for the 4 limit; 1.5x harder 6.2-6.3, 1.5x softer 2.9-3.8."""
DISTANCE_TOLERANCE_RAD = 0.05
"""How far the stopping distance of the fastest joint (from the onset to rest) may differ from the
configured profile's: the stop brakes from the speed and position it predicts (published,
estimated or the trajectory's): a 3 % speed error moves the rest point by 0.45 s x 0.045 rad/s =
20 mm; a stop the controller takes 20 ms late (a loaded machine) leaves the arm 30 mm less room.
From 1.5 rad/s at 4 rad/s2 a profile 1.5x softer stops 90-140 mm further, one 1.5x harder 73-97
mm shorter (measured); 8 rad/s2 would halve those and not the errors."""


def ideal_brake(v0: float, decel: float, jerk: float) -> tuple[float, float]:
    """The configured profile from speed `v0` at zero acceleration to rest: (duration, distance).
    Jerk j = min(jerk, decel / JERK_PHASE_S); the speed falls point-symmetrically about half the
    duration T, so the distance is v0 T / 2: v0^2 / (2 decel) + v0 decel / (2 j) when the
    deceleration reaches its limit (v0 >= decel^2 / j, T = v0 / decel + decel / j), else T =
    2 sqrt(v0 / j). Written from the documented profile, not from the braking code."""
    j = min(jerk, decel / JERK_PHASE_S)
    duration = v0 / decel + decel / j if v0 >= decel * decel / j else 2.0 * np.sqrt(v0 / j)
    return duration, v0 * duration / 2.0


def profile_figures(
    probe: Probe, joints: list[str], t_stop: float, decel: float, jerk: float
) -> dict[str, Any]:
    """The brake measured against the configured profile, from the stand-in's own states (truth
    topic: positions and servo velocities by their stamps): per moving joint the peak deceleration
    (velocity differences over DECEL_WINDOW_S); for the fastest joint the onset (its speed DROP below
    its peak), the distance from there to rest and the profile's for the same peak speed."""
    with probe.lock:
        rows = [(t, [js[j] for j in joints]) for t, js in probe.truth if t >= t_stop - 0.2]
        vrows = [[js[j] for j in joints] for t, js in probe.truth_velocity if t >= t_stop - 0.2]
    t = np.array([r[0] for r in rows])
    q = np.array([r[1] for r in rows])
    v = np.array(vrows[: len(t)])
    k_stop = int(np.searchsorted(t, t_stop))
    v_at_stop = v[max(0, k_stop - 1)]
    moving = np.abs(v_at_stop) > 0.2
    sign = np.sign(v_at_stop)
    f = int(np.argmax(np.abs(v_at_stop)))
    speed = v[:, f] * sign[f]
    k_peak = k_stop + int(np.argmax(speed[k_stop:]))
    v_peak = float(speed[k_peak])
    k1 = k_peak + int(np.argmax(speed[k_peak:] < (1 - DROP) * v_peak))
    w = (speed[k1 - 1] - (1 - DROP) * v_peak) / (speed[k1 - 1] - speed[k1])
    q_onset = q[k1 - 1, f] + w * (q[k1, f] - q[k1 - 1, f])
    j_eff = min(jerk, decel / JERK_PHASE_S)
    t_drop = np.sqrt(2 * DROP * v_peak / j_eff)  # in the first jerk phase: v = v0 - j t^2 / 2
    _, whole = ideal_brake(v_peak, decel, jerk)
    ideal = whole - (v_peak * t_drop - j_eff * t_drop**3 / 6)
    peaks = np.zeros(len(joints))
    for k in range(k_stop, len(t)):
        m = int(np.searchsorted(t, t[k] + DECEL_WINDOW_S - 1e-4))
        if m >= len(t):
            break
        acc = (v[m] - v[k]) / (t[m] - t[k])
        peaks = np.maximum(peaks, -acc * sign)
    along = q[k_stop:] * sign[None, :]
    back = np.maximum.accumulate(along, axis=0) - along
    return {
        "v_at_stop": v_at_stop,
        "moving": moving,
        "fastest": f,
        "v_peak": v_peak,
        "peaks": peaks,
        "distance": float((q[-1, f] - q_onset) * sign[f]),
        "ideal_distance": float(ideal),
        "reversal": float(np.max(back[:, moving])) if np.any(moving) else 0.0,
        "v_end": v[-5:],
        "q_end": q[-1],
    }


def check_profile(f: dict[str, Any], decel: float, what: str) -> None:
    """Along the configured profile, in both directions: the fastest joint stops within
    DISTANCE_TOLERANCE_RAD of the profile's distance from its onset (a softer brake stops further,
    a harder one shorter); no moving joint decelerates harder than `decel` x (1 + DECEL_TOLERANCE),
    and the fastest reaches `decel` x (1 - DECEL_TOLERANCE) (from >= 1.2 rad/s the profile holds
    its limit for a while: decel^2 / j = decel x 0.15 s); not back by more than 5 mrad; at rest."""
    moving, peaks, fastest = f["moving"], f["peaks"], f["fastest"]
    print(
        f"{what}: peak decelerations {np.round(peaks[moving], 2)} rad/s2 (limit {decel}), stopping distance "
        f"{f['distance']:.4f} rad from {f['v_peak']:.3f} rad/s (profile {f['ideal_distance']:.4f}), "
        f"back {1000 * f['reversal']:.2f} mrad"
    )
    assert np.any(moving), f["v_at_stop"]
    gap = f["distance"] - f["ideal_distance"]
    assert abs(gap) <= DISTANCE_TOLERANCE_RAD, (
        f"{what}: stopping distance {f['distance']:.3f} rad, the profile's {f['ideal_distance']:.3f} "
        f"(from {f['v_peak']:.2f} rad/s): {'longer' if gap > 0 else 'shorter'} by {abs(gap):.3f}"
    )
    limit = decel * (1 + DECEL_TOLERANCE)
    assert np.all(peaks[moving] <= limit), (
        f"{what}: peak deceleration {np.round(peaks[moving], 2)} over {limit}"
    )
    floor = decel * (1 - DECEL_TOLERANCE)
    assert peaks[fastest] >= floor, f"{what}: peak deceleration {peaks[fastest]:.2f} under {floor}"
    assert f["reversal"] <= REVERSAL_LIMIT_RAD, f"{what}: came back {1000 * f['reversal']:.1f} mrad"
    assert np.max(np.abs(f["v_end"])) < 0.01, f"{what}: not at rest: {f['v_end']}"


@pytest.mark.parametrize("case", list(VELOCITY_CASES))
def test_an_estop_at_full_speed_brakes_within_the_stop_deceleration_without_reversal(
    start_double, probe: Probe, agent, yam, case: str
) -> None:
    """An e-stop at full speed, in every way /joint_states may carry velocities (VELOCITY_CASES),
    the first three over a jittery link with bursts (LINK), brakes along the configured profile in
    both directions (`check_profile`): the stopping distance from the onset within 50 mm of the
    profile's for the measured speed (not softer, not harder), every joint's peak deceleration at
    most 4 rad/s2 + 25 % and the fastest's at least 4 - 25 % (the tolerances' budgets are at
    DECEL_TOLERANCE and DISTANCE_TOLERANCE_RAD); no come-back, one braking trajectory; the stack
    check's velocity report and what the stop braked from are the case's. Measured from the
    stand-in's own states: positions and servo velocities by their stamps (a second difference of
    positions over 20 ms, as this test used to take, turns one stamp 1 ms off into 7 rad/s2).

    Mutations of pear_agent/ros2/braking.py `_stop_msg` tried by hand, each failing every case
    (and the 50 ms planning test below), with the stop deceleration of these tests, 4 rad/s2:
    - `decel = 1.5 * s.stop_deceleration_rad_s2 if arm else ...` (1.5x harder): [published]
      "stopping distance 0.244 rad, the profile's 0.325 (from 1.51 rad/s): shorter by 0.082"
      (peak 6.22 rad/s2 over 5.0 too), [none] "shorter by 0.097", [nan] "shorter by 0.084",
      [stale] "shorter by 0.073", 50 ms "shorter by 0.094".
    - `decel = s.stop_deceleration_rad_s2 / 1.5 if arm else ...` (1.5x softer): [published]
      "stopping distance 0.457 rad, the profile's 0.318 (from 1.49 rad/s): longer by 0.140"
      (peak 2.90 rad/s2), [none] "longer by 0.127", [nan] "longer by 0.107", [stale] "longer by
      0.091", 50 ms "longer by 0.113".
    The upper bound on a peak alone (what this test checked before) let the softer stop pass.
    Read as zero, the velocity made the stop a hold where the arm was: 32.5 rad/s2 and
    14 mrad back. Mutations tried by hand with the earlier bound (peak <= 8 + 25 %):
    - pear_agent/ros2/backend.py `_on_joint_state`: `t_est = now` (the velocity estimate from
      receipt times, not the header stamps): [none] failed "peak deceleration 20.04 rad/s2 over
      10.0" (it braked from 1.7x the speed: 0.49 rad to stop), [nan] "peak deceleration 16.65
      rad/s2 over 10.0" (from 0.6x). Without LINK, [none] passed (8.14 rad/s2): on a local link
      the two clocks agree.
    - pear_agent/ros2/braking.py `_stop_msg`: the trajectory fallback removed (the lines setting
      `planned` deleted): [stale] failed "peak deceleration 35.98 rad/s2 over 10.0" (a hold at the
      last position: 277 mrad back). Only `choose_velocity(..., planned=None)` passes: the stop then
      brakes from the trajectory's own state instead, which the arm cannot tell apart (equivalent).
    - `velocity_report` saying "estimated" whenever velocities are not published: [stale] fails on
      the report ({'stop_velocity_source': 'estimated'} != {'stop_velocity_source': 'trajectory'})."""
    double = start_double(double_config(yam, cameras={}, **TRUTH, **VELOCITY_CASES[case]))
    decel = 4.0
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
    # 2.4 rad on the fastest joint: 1 s at the cap, so a test process late to call the stop on a
    # loaded machine still stops the arm in cruise (the profile starts at zero acceleration)
    target = np.clip(start + np.array([2.4, 0.9, -0.9, 0.8, 0.0, 0.0]), part.lower + 0.05, part.upper - 0.05)
    marks: list[float] = []

    def estop() -> None:
        marks.append(time.monotonic())
        a.backend.emergency_stop("test")

    t_stop, speed = run_to_full_speed_then_stop(a, probe, joints, target, estop)
    time.sleep(1.5)
    assert speed > 1.4, speed
    f = profile_figures(probe, joints, t_stop, decel, 100.0)
    check_profile(f, decel, f"{case}: e-stop at {speed:.2f} rad/s")
    assert a.backend.stop_sources[part.topic] == braked_from, a.backend.stop_sources
    # one braking trajectory per controller, multi-point on the moving arm, ending at rest, accepted
    stops = [e for e in double.trajectories(LEFT) if e["t"] > marks[0]]
    assert len(stops) == 1 and stops[0]["accepted"] and stops[0]["points"] >= 2, stops  # a brake, not a hold
    assert stops[0]["kind"] == "cubic", stops[0]
    np.testing.assert_allclose(stops[0]["last"], f["q_end"], atol=0.01)


def test_a_stop_that_takes_50_ms_to_plan_still_brakes_along_the_profile(
    start_double, probe: Probe, agent, yam, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The braking profile takes 50 ms to plan (the agent's process kept off the CPU on a loaded
    machine, as the repeat runs under load saw): the profile starts where the arm is when the
    planning ends, stamped then, so it still stops along the configured profile (`check_profile`).

    Mutation tried by hand (at the 8 rad/s2 this test first used): the profile planned from where
    the arm was when its state was read (no shift by the planning time): the arm, still at speed
    while it was planned, had that much less room to the rest point: "stopping distance 0.127 rad,
    the profile's 0.206 (from 1.52 rad/s): shorter by 0.079" (peak 13.62 rad/s2). The mutations of
    the deceleration in the test above fail here too ("shorter by 0.094", "longer by 0.113")."""
    from pear_agent.ros2 import conversions as cv

    plan = cv.brake_plan

    def slow_plan(names: list[str], q: np.ndarray, v: np.ndarray, *args: Any, **kwargs: Any) -> Any:
        if float(np.max(np.abs(np.nan_to_num(v)))) > 0.1:  # the moving arm's profile
            time.sleep(0.05)
        return plan(names, q, v, *args, **kwargs)

    monkeypatch.setattr(cv, "brake_plan", slow_plan)
    start_double(double_config(yam, cameras={}, **TRUTH))
    decel = 4.0
    a = agent(stop_deceleration_rad_s2=decel, stop_jerk_rad_s3=100.0, **BRAKING_ONLY)
    assert a.backend.check_stack() is None
    joints = list(yam.parts["left_arm"].joints)
    start = np.array([home_joints(yam)[j] for j in joints])
    part = a.backend.parts["left_arm"]
    target = np.clip(start + np.array([2.4, 0.9, -0.9, 0.8, 0.0, 0.0]), part.lower + 0.05, part.upper - 0.05)
    t_stop, speed = run_to_full_speed_then_stop(
        a, probe, joints, target, lambda: a.backend.emergency_stop("test")
    )
    time.sleep(1.5)
    f = profile_figures(probe, joints, t_stop, decel, 100.0)
    check_profile(f, decel, f"planned in 50 ms: e-stop at {speed:.2f} rad/s")


STALL_S = 2.0
"""How long the next test keeps a stop's planning off the CPU: longer than the move has left once
the arm cruises (2.4 rad at 1.5 rad/s: at most 1.4 s), so the arm reaches its target meanwhile."""


@pytest.mark.parametrize("via", ["call", "topic"])
def test_a_stop_planned_for_longer_than_the_move_had_left_holds_the_arm_where_it_ended(
    start_double, probe: Probe, agent, yam, monkeypatch: pytest.MonkeyPatch, via: str
) -> None:
    """The stop's planning is kept off the CPU for STALL_S (a loaded machine can stall a process
    that long), from a direct call (the turn loop's thread: joint states keep arriving meanwhile) or
    from the e-stop topic (the executor's thread: none arrive until it returns). The arm meanwhile
    follows its trajectory to the target and stops there. The stop the controller then gets starts
    where the arm is: the stand-in measures no request over the speed cap (from the pose it met to
    the first point, between points, in the velocity fields), and the arm rests at the target.

    Mutation tried by hand: the stop carried forward at the speed it was planned from for the whole
    stall (no planning again): [call] "a request of 10.10 rad/s (cap 1.5)", its rest point 3.547 rad
    for a target of 1.973 (0.05 rad inside the joint's upper limit): 1.5 rad past it; [topic] "9.98
    rad/s", 3.529 rad. An e-stop during a home move on a loaded CI machine requested 7.4 rad/s so."""
    from pear_agent.ros2 import conversions as cv

    plan = cv.brake_plan
    stalled: list[float] = []

    def stalling_plan(names: list[str], q: np.ndarray, v: np.ndarray, *args: Any, **kwargs: Any) -> Any:
        if not stalled and float(np.max(np.abs(np.nan_to_num(v)))) > 0.1:  # the moving arm's first
            stalled.append(time.monotonic())
            time.sleep(STALL_S)
        return plan(names, q, v, *args, **kwargs)

    monkeypatch.setattr(cv, "brake_plan", stalling_plan)
    double = start_double(double_config(yam, cameras={}, **TRUTH))
    a = agent(**BRAKING_ONLY)
    assert a.backend.check_stack() is None
    if via == "topic":
        probe.estop_subscribed()
    joints = list(yam.parts["left_arm"].joints)
    start = np.array([home_joints(yam)[j] for j in joints])
    part = a.backend.parts["left_arm"]
    target = np.clip(start + np.array([2.4, 0.0, 0.0, 0.0, 0.0, 0.0]), part.lower + 0.05, part.upper - 0.05)
    marks: list[float] = []

    def estop() -> None:
        marks.append(time.monotonic())
        if via == "call":
            a.backend.emergency_stop("test")
        else:
            probe.estop_topic()

    run_to_full_speed_then_stop(a, probe, joints, target, estop)
    probe.wait_for(lambda: [e for e in double.trajectories(LEFT) if e["t"] > marks[0]], 10, "the stop")
    assert stalled and stalled[0] >= marks[0], stalled  # the stop's planning was the one stalled
    stops = [e for e in double.trajectories(LEFT) if e["t"] > marks[0]]
    assert len(stops) == 1 and stops[0]["accepted"], stops
    stop = stops[0]
    assert not stop["over_cap"] and stop["speed_rad_s"] <= part.vmax + 1e-6, (
        f"a request of {stop['speed_rad_s']:.2f} rad/s (cap {part.vmax}) from "
        f"{np.round(stop['actual'], 3)} to {np.round(stop['last'], 3)}; target {np.round(target, 3)}"
    )
    np.testing.assert_allclose(stop["actual"], target, atol=0.02)  # the move ended during the stall
    np.testing.assert_allclose(stop["last"], target, atol=0.02)  # and the arm rests there
    assert np.all(np.array(stop["last"]) <= part.upper) and np.all(np.array(stop["last"]) >= part.lower)


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
