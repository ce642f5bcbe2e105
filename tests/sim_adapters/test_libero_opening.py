"""The side opening of a roofed container, found from its fixed parts' boxes."""

import numpy as np
import pytest

from sim_adapters.libero.expert.opening import side_opening

# LIBERO's microwave (libero/assets/articulated_objects/microwave.xml) as libero_10/9 init state 0
# places it: its six collision boxes in the robot base frame (cm), and its heating region
MICROWAVE = [
    ([47.79, 26.86, 0.8], [50.69, 46.77, 19.5]),  # left wall
    ([71.39, 26.86, 0.8], [82.29, 46.77, 19.5]),  # control panel (right)
    ([50.64, 43.72, 0.8], [71.34, 46.72, 19.5]),  # back wall
    ([50.69, 26.87, 17.6], [71.39, 43.77, 19.5]),  # ceiling
    ([50.69, 26.87, 0.8], [71.39, 43.67, 3.2]),  # floor
    ([73.79, 24.62, 0.8], [82.29, 27.02, 19.5]),  # front of the panel, beside the opening
]
REGION_CENTER = np.array([65.04, 36.67, 10.4])
REGION_HALF = np.array([12.0, 8.35, 8.0])


def _boxes(parts):
    return [(np.array(lo, float), np.array(hi, float)) for lo, hi in parts]


def test_the_microwave_opens_towards_the_robot_side_it_faces():
    op = side_opening(REGION_CENTER, REGION_HALF, _boxes(MICROWAVE))
    assert op is not None
    assert (op.axis, op.sign) == (1, -1.0)  # out along -y
    assert np.allclose(op.outward, [0.0, -1.0])
    assert op.face == pytest.approx(-26.87, abs=0.01)  # the front edge of floor and ceiling
    assert op.back == pytest.approx(-43.72, abs=0.01)  # the back wall's inner face
    assert (op.side_lo, op.side_hi) == (pytest.approx(50.69), pytest.approx(71.39))
    assert op.floor_z == pytest.approx(3.2) and op.ceiling_z == pytest.approx(17.6)
    assert op.middle_cm == pytest.approx(61.04)


def test_opening_coordinates_round_trip():
    op = side_opening(REGION_CENTER, REGION_HALF, _boxes(MICROWAVE))
    xy = op.point(-20.0, 60.0)
    assert np.allclose(xy, [60.0, 20.0])
    assert op.out_cm(xy) == pytest.approx(-20.0) and op.side_cm(xy) == pytest.approx(60.0)
    assert op.out_cm([0.0, 10.0]) > op.out_cm([0.0, 30.0])  # nearer the robot side = further out


def test_a_container_turned_to_open_along_plus_x():
    turned = [([-hi[1], lo[0], lo[2]], [-lo[1], hi[0], hi[2]]) for lo, hi in MICROWAVE]  # x -> y, y -> -x
    center = np.array([-REGION_CENTER[1], REGION_CENTER[0], REGION_CENTER[2]])
    half = REGION_HALF[[1, 0, 2]]
    op = side_opening(center, half, _boxes(turned))
    assert op is not None
    assert (op.axis, op.sign) == (0, 1.0)
    assert op.face == pytest.approx(-26.87, abs=0.01)  # the front plane, x = -26.87
    assert (op.side_lo, op.side_hi) == (pytest.approx(50.69), pytest.approx(71.39))


def test_no_ceiling_means_reached_from_above():
    basket = [box for box in MICROWAVE if box[0][2] < 17.0]  # the microwave without its ceiling
    assert side_opening(REGION_CENTER, REGION_HALF, _boxes(basket)) is None


def test_closed_on_every_side_has_no_opening():
    door = ([50.69, 24.4, 0.8], [71.39, 26.8, 19.5])  # the door shut across the front
    assert side_opening(REGION_CENTER, REGION_HALF, _boxes([*MICROWAVE, door])) is None


def test_two_open_sides_are_not_guessed_between():
    no_back = [box for box in MICROWAVE if box[0][1] < 43.0 or box[1][0] > 72.0]  # back wall gone
    assert len(no_back) == len(MICROWAVE) - 1
    assert side_opening(REGION_CENTER, REGION_HALF, _boxes(no_back)) is None
