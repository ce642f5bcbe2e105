"""pear_agent.ros2.yam_physics under I2RT's own MotorChainRobot (no ROS): it holds where it starts
against gravity, follows a commanded ramp with a lag and an overshoot of its own, and fails the way
I2RT's DM chain does (frames frozen while `running` stays True; a motor error that stops it)."""

from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip(
    "i2rt.robots.motor_chain_robot", reason="I2RT driver deps missing (pip install -e '.[yam]')"
)

from pear_agent.ros2.yam_physics import make_physics_yam

pytestmark = pytest.mark.wallclock

HOME = np.array([-0.427, 1.458, 1.291, -1.404, 0.0, 1.144])


@pytest.fixture
def robot():
    r = make_physics_yam(HOME)
    yield r
    r.close()


def test_it_holds_against_gravity_and_follows_a_ramp_with_physical_lag(robot) -> None:
    time.sleep(0.5)
    held = robot.get_observations()["joint_pos"]
    # I2RT over-compensates gravity (factors 1.1-1.2) against its PD: millimetres, not a fall
    assert float(np.max(np.abs(held - HOME))) < 0.02, held - HOME
    t0 = time.monotonic()
    log = []
    while (t := time.monotonic() - t0) < 1.0:
        q = HOME.copy()
        q[0] += 1.5 * min(t, 0.4)  # a ramp at 1.5 rad/s, then an abrupt stop at +0.6 rad
        robot.command_joint_pos(np.append(q, 1.0))
        obs = robot.get_observations()
        log.append((t, obs["joint_pos"][0] - HOME[0], obs["joint_vel"][0]))
        time.sleep(0.005)
    t, q, v = np.array(log).T
    assert 1.2 < float(np.max(v)) < 2.0, float(np.max(v))  # it really moves, at about the ramp's speed
    at = float(np.interp(0.3, t, q))
    assert 0.3 < at < 0.45, at  # behind the ramp (0.45 rad at 0.3 s) while following it
    overshoot = float(np.max(q) - 0.6)
    assert 0.0 < overshoot < 0.05, overshoot  # the abrupt stop overshoots, as a PD-driven arm does
    assert abs(float(q[-1]) - 0.6) < 0.01


# the chain's thread, then I2RT's server thread, die raising, as on hardware: expected here
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_stalled_bus_freezes_the_frames_and_a_motor_error_stops_the_chain(robot) -> None:
    chain = robot.motor_chain
    first = chain.state
    time.sleep(0.05)
    assert chain.state is not first  # a new list of frames every bus cycle
    chain.stall()
    time.sleep(0.05)
    frozen = chain.state
    time.sleep(0.2)
    assert chain.state is frozen and chain.running  # no new frames; `running` still True
    stamp = robot._joint_state.timestamp
    time.sleep(0.05)
    assert robot._joint_state.timestamp > stamp  # ... while I2RT's own timestamps stay fresh
    chain.fail("motor errors detected: [True]")
    deadline = time.monotonic() + 2
    while chain.running and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not chain.running
