import math

import numpy as np
import pytest

from sim_adapters.roadster.commands import Climb, Coast, Land, Rotate
from sim_adapters.roadster.flight_computer import MAX_THRUST_N, FlightState, mix, thrusts


def state(roll_deg=0.0, vz=0.0, h=5.0, rates=(0.0, 0.0, 0.0), wheels=0):
    roll = math.radians(roll_deg)
    up_body = np.array([0.0, math.sin(roll), math.cos(roll)])
    return FlightState(roll, 0.0, np.array(rates), vz, h, math.cos(roll), 2140.0, wheels, up_body)


def test_mixer_respects_limits_and_gives_torque_first():
    f = mix(1e6, 5e4, 0.0)
    assert np.all(f >= 0) and np.all(f <= MAX_THRUST_N)
    left, right = f[0] + f[2], f[1] + f[3]
    assert left > right  # left pair harder: + roll torque
    f = mix(0.0, 0.0, -2e4)
    assert f[0] + f[1] > f[2] + f[3]  # front pair harder: nose up


def test_coast_is_all_off_and_climb_lifts_more_than_the_weight_when_sinking():
    assert not thrusts(Coast(mode="coast"), state()).any()
    f = thrusts(Climb(mode="climb", vz=3.0), state(vz=-2.0))
    assert f.sum() > 2140 * 9.81


def test_upside_down_no_lift_only_torque():
    f = thrusts(Climb(mode="climb", vz=3.0), state(roll_deg=180))
    # no common lift (it would drive the car into the ground): one side fires to roll it level
    assert min(f[0] + f[2], f[1] + f[3]) == pytest.approx(0.0, abs=1e-6)
    f = thrusts(Rotate(mode="rotate", axis="roll", to=360, lift=1.0), state(roll_deg=180))
    assert f[0] + f[2] > f[1] + f[3]  # rolls toward +roll


def test_land_cuts_thrust_when_a_wheel_touches():
    assert thrusts(Land(mode="land"), state(h=3.0, vz=-6.0)).sum() > 0
    assert thrusts(Land(mode="land"), state(h=0.1, vz=-1.0, wheels=1)).sum() == 0
