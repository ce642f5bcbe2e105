"""The LIBERO pick-and-place expert's decisions on synthetic facts (pure numpy, no LIBERO)."""

import math

import numpy as np
import pytest

from sim_adapters.libero.expert.grasps import _shifted, clearing_shove, grasp_options, grasp_plan, graspable
from sim_adapters.libero.expert.hand import HAND_ABOVE_TCP_CM, hand_hits, travel
from sim_adapters.libero.expert.plan import libero_expert
from sim_adapters.libero.expert.scene import RIM_OPENING, Arm, Scene
from sim_adapters.libero.expert.side_openings import (
    HANDLE_OPENING,
    _door_in_front,
    _handle,
    _wide_open,
    side_opening_of,
)
from tests.sim_adapters.test_libero_opening import MICROWAVE

BOWL = {"min_cm": [54.0, 15.0, -1.2], "max_cm": [65.0, 26.0, 3.9], "position_cm": [59.5, 20.5, 1.3]}
PLATE = {"min_cm": [64.0, 13.0, -1.2], "max_cm": [78.0, 27.0, 0.7], "position_cm": [71.0, 20.0, -0.2]}

# the mug as libero_10/9 init state 0 leaves it on the table (base frame, cm): its handle points -y
MUG = {"min_cm": [58.74, -8.79, -1.2], "max_cm": [69.35, 5.18, 9.12], "rim_center_cm": [64.11, -0.08]}


def facts(bowl: dict) -> dict:
    return {"goal": [["on", "bowl", "plate"]], "objects": {"bowl": bowl, "plate": PLATE}}


def arm(pos, gripper, yaw=math.pi / 2):
    return {"arm": {"position": list(pos), "orientation": [math.pi, 0.0, yaw], "gripper": gripper}}


def test_bowl_is_taken_by_the_near_rim_with_a_partial_opening():
    point, yaw, opening = grasp_plan(BOWL)
    assert point[0] < BOWL["min_cm"][0] + 1.0 and abs(point[1] - 20.5) < 0.1  # near (robot-side) rim
    assert point[2] < BOWL["max_cm"][2] and yaw == math.pi / 2 and opening == RIM_OPENING
    _, _, small = grasp_plan({"min_cm": [50, 0, 0], "max_cm": [54, 6, 8]})
    assert small == 1.0


def test_far_from_the_bowl_it_moves_above_and_sets_the_opening():
    _, act = libero_expert(arm([45, 0, 26], 1.0), facts(BOWL))
    assert act["arm"]["gripper"] == RIM_OPENING and act["arm"]["position"][1] > 5


def test_closed_on_the_wall_it_lifts_out_of_the_drawer_it_rested_in():
    bowl = BOWL | {"rest_bottom_cm": 15.0, "min_cm": [54.0, 15.0, 15.0], "max_cm": [65.0, 26.0, 20.1]}
    drawer = {"min_cm": [50.0, 10.0, 14.0], "max_cm": [70.0, 30.0, 21.0]}  # its walls round the bowl
    reason, act = libero_expert(arm([54.6, 20.5, 18.9], 0.05), facts(bowl) | {"others": {"drawer": drawer}})
    assert "carry" in reason
    dx, dy, dz = act["arm"]["position"]
    assert abs(dx) < 0.05 and abs(dy) < 0.05 and dz >= 8.5 and act["arm"]["gripper"] == 0.0  # straight up


def test_closed_on_nothing_it_reopens():
    reason, act = libero_expert(arm([54.6, 20.5, 2.7], 0.0), facts(BOWL | {"rest_bottom_cm": -1.2}))
    assert "holds nothing" in reason and act["arm"]["gripper"] == RIM_OPENING


def test_above_the_plate_it_lowers_then_lets_go():
    over = {"min_cm": [65.5, 15.0, 5.0], "max_cm": [76.5, 26.0, 10.1], "position_cm": [71, 20.5, 7.5]}
    bowl = over | {"rest_bottom_cm": -1.2}
    _, act = libero_expert(arm([66.1, 20.5, 8.9], 0.05), facts(bowl))
    assert act["arm"]["position"][2] < -2
    low = {"min_cm": [65.5, 15.0, 1.6], "max_cm": [76.5, 26.0, 6.7], "position_cm": [71, 20.5, 4.1]}
    _, act = libero_expert(arm([66.1, 20.5, 5.5], 0.05), facts(low | {"rest_bottom_cm": -1.2}))
    assert act["arm"] == {"gripper": 1.0}


# an open drawer (the top one of a cabinet beside the bowl) hanging over the bowl's far half
OVERHANG = {"min_cm": [58.7, -17.8, 14.2], "max_cm": [80.6, 3.5, 21.0]}
RIMMED = {
    "min_cm": [52.6, -3.9, -1.2],
    "max_cm": [63.4, 6.8, 3.9],
    "position_cm": [58.0, 1.4, 1.3],
    "rim_center_cm": [57.8, 1.7],
    "rim_radius_cm": 4.7,
}


def test_a_bowl_the_open_drawer_would_hang_over_is_pushed_where_it_can_be_taken():
    later = Scene({"objects": {"bowl": RIMMED}, "others": {"drawer": OVERHANG}})
    assert not graspable(later, RIMMED, "bowl")
    shove = clearing_shove(Scene({"objects": {"bowl": RIMMED}}), later, RIMMED, "bowl")
    assert shove is not None  # the rim (where a grasp is planned) moves with the pushed bowl
    assert graspable(later, _shifted(RIMMED, shove), "bowl")
    moved = grasp_options(_shifted(RIMMED, shove), "bowl")[0][0][:2] - grasp_options(RIMMED, "bowl")[0][0][:2]
    assert np.allclose(moved, shove[:2], atol=1e-6)


def test_travel_keeps_the_hand_over_an_open_drawer_beside_the_path():
    """The drawer is 5 cm beside the tool's path (outside its margin) but under the hand, which
    reaches 10.6 cm along the fingers: the step must not descend into it."""
    scene = Scene({"objects": {}, "others": {"drawer": OVERHANG}})
    state = Arm(arm([70.0, 8.8, 31.0], 0.5, yaw=0.0))
    goal = np.array([52.5, 9.2, 6.9])
    step = travel(state, scene, goal, set(), yaw=0.0)
    for t in np.linspace(0.0, 1.0, 11):  # every point of the step over the drawer keeps the hand above it
        q = state.p + t * step
        if OVERHANG["min_cm"][0] - 4.3 < q[0]:
            assert q[2] + HAND_ABOVE_TCP_CM > OVERHANG["max_cm"][2]
    assert not np.allclose(step / np.linalg.norm(step), (goal - state.p) / np.linalg.norm(goal - state.p))


def test_a_plate_beside_a_cabinet_is_pushed_with_the_hand_turned_clear_of_its_handles():
    plate = {
        "min_cm": [64.3, -9.7, -1.2],
        "max_cm": [78.0, 4.1, 0.7],
        "position_cm": [71.2, -2.8, -0.3],
        "body_cm": [71.2, -2.9, -1.0],
        "rest_height_cm": 1.9,
    }
    region = {"position_cm": [61.0, 21.0, -1.7], "half_size_cm": [4.0, 4.0, 0.7], "site": True}
    drawers = {"drawer": {"min_cm": [58.7, -32.8, 0.4], "max_cm": [80.6, -12.5, 14.1]}}
    priv = {
        "goal": [["on", "plate", "front"]],
        "objects": {"plate": plate, "front": region},
        "others": drawers,
    }
    yaw = 0.0
    for _ in range(8):  # follow the wrist turns the expert asks for until it asks for none
        _, act = libero_expert(arm([44.0, 0.0, 25.0], 0.0, yaw=yaw), priv)
        turn = act["arm"].get("orientation", [0.0, 0.0, 0.0])[2]
        if abs(turn) < 0.02:
            break
        yaw += turn
    else:
        raise AssertionError("the wrist never settled")
    region_xy, body_xy = np.array([61.0, 21.0]), np.array([71.2, -2.9])
    u = (region_xy - body_xy) / np.linalg.norm(region_xy - body_xy)
    start = np.append(body_xy - u * 2.0, plate["min_cm"][2] + 1.5)  # where the fingertips go down
    assert not hand_hits(Scene(priv), start, yaw, {"plate"})
    assert hand_hits(Scene(priv), start, math.atan2(u[1], u[0]), {"plate"})  # fingers across: a handle


def test_a_can_with_a_tall_neighbour_under_the_hand_is_taken_the_other_way():
    can = {"min_cm": [39.6, -20.3, 1.7], "max_cm": [45.9, -14.1, 9.3], "position_cm": [42.7, -17.2, 5.5]}
    juice = {"min_cm": [46.98, -28.6, 1.7], "max_cm": [52.2, -23.3, 14.8]}  # beside it, taller than the hand
    scene = Scene({"objects": {"can": can}, "others": {"juice": juice}})
    first, yaw_first, _ = grasp_options(can, "can")[0]
    assert hand_hits(scene, first, yaw_first, {"can"})
    point, yaw, opening = grasp_plan(can, scene, "can")
    assert not hand_hits(scene, point, yaw, {"can"}) and opening == 1.0
    assert abs(math.cos(yaw - yaw_first)) < 1e-6  # square to the first way


def test_the_mug_is_taken_by_its_handle_from_above_when_the_microwave_is_the_goal():
    parts = [{"min_cm": list(lo), "max_cm": list(hi)} for lo, hi in MICROWAVE]
    region = {"site": True, "position_cm": [65.04, 36.67, 10.4], "half_size_cm": [12.0, 8.35, 8.0]}
    priv = {
        "goal": [["in", "mug", "oven"]],
        "objects": {"mug": {**MUG, "yaw_rad": -math.pi / 2}, "oven": {**region, "parent_parts": parts}},
    }
    text, act = libero_expert(arm([64.11, -8.3, 25.0], 1.0), priv)
    assert "handle" in text and act["arm"]["gripper"] == HANDLE_OPENING
    # held by the handle in front of the opening: carried straight in, level, to where the hand
    # (4.3 cm to either side of the fingers) still stays out of the opening
    held = {**MUG, "yaw_rad": -math.pi / 2, "min_cm": [55.9, 0.4, 4.6], "max_cm": [66.5, 14.4, 14.9]}
    held["rim_center_cm"] = [61.0, 9.1]
    priv["objects"]["mug"] = held
    text, act = libero_expert(arm([61.0, 0.9, 12.8], 0.23), priv)
    move = np.array(act["arm"]["position"])
    assert "into" in text and move[1] > 5.0 and abs(move[0]) < 0.5 and abs(move[2]) < 0.5


def test_a_mugs_handle_from_its_bounds_and_yaw():
    h, bar = _handle({**MUG, "yaw_rad": -math.pi / 2})
    assert np.allclose(h, [0.0, -1.0], atol=1e-9)
    assert bar[0] == pytest.approx(64.11, abs=0.01) and -8.79 < bar[1] < -7.9  # inside the outer bar
    # set down turned 0.28 rad: the bounds' centre barely moves, the yaw says where the handle went
    turned = {"min_cm": [56.82, 20.33, 3.3], "max_cm": [67.42, 34.18, 13.62]}
    turned["rim_center_cm"] = [62.19, 28.96]
    h, bar = _handle({**turned, "yaw_rad": -1.292})
    assert np.allclose(h, [math.cos(-1.292), math.sin(-1.292)], atol=1e-9)
    assert bar[0] > 62.19 + 1.5  # the handle swung towards +x with the mug
    assert _handle({**MUG, "rim_center_cm": [64.0, -1.8]}) is None  # no handle: the rim is the middle


def test_leaning_takes_the_nearer_of_the_two_ways_to_write_it():
    for yaw_now in (-1.6, 1.53):  # pointing down, fingers along x, written either way
        arm = Arm(
            {"arm": {"position": [60.0, 10.0, 15.0], "orientation": [math.pi, 0.0, yaw_now], "gripper": 0.0}}
        )
        rot = arm.lean_to(np.array([0.0, 1.0]), 0.2)
        assert float(np.max(np.abs(rot))) < 1.45  # a tilt of 1.37 rad, not half a turn of the wrist
        leaned = Arm({"arm": {"position": [60.0, 10.0, 15.0], "orientation": list(arm.rpy + rot)}})
        assert np.allclose(leaned.approach(), [0.0, math.cos(0.2), -math.sin(0.2)], atol=1e-6)


def test_only_a_roofed_region_without_joints_is_reached_from_the_side():
    parts = [{"min_cm": list(lo), "max_cm": list(hi)} for lo, hi in MICROWAVE]
    region = {"site": True, "position_cm": [65.04, 36.67, 10.4], "half_size_cm": [12.0, 8.35, 8.0]}
    scene = Scene({"objects": {"mug": MUG, "oven": {**region, "parent_parts": parts}}})
    assert side_opening_of(scene, ["in", "mug", "oven"]) is not None
    assert side_opening_of(scene, ["on", "mug", "oven"]) is None
    drawer = Scene({"objects": {"mug": MUG, "oven": {**region, "parent_parts": parts, "articulation": [{}]}}})
    assert side_opening_of(drawer, ["in", "mug", "oven"]) is None  # a drawer has its own skill
    basket = Scene({"objects": {"mug": MUG, "oven": region}})
    assert side_opening_of(basket, ["in", "mug", "oven"]) is None


def test_a_half_open_door_in_front_of_the_opening_is_swung_wide_once():
    parts = [{"min_cm": list(lo), "max_cm": list(hi)} for lo, hi in MICROWAVE]
    region = {"site": True, "position_cm": [65.04, 36.67, 10.4], "half_size_cm": [12.0, 8.35, 8.0]}
    region |= {"parent_parts": parts, "parent_name": "oven"}
    ranges = {"open": [-2.094, -1.3], "close": [-0.005, 0.0]}
    # libero_10/9 init state 3 (shifted to state 0's microwave): open 1.43 rad, its edge 0.3 cm
    # beside the opening, where the wrist passes
    door = {"kind": "hinge", "value": -1.43, "ranges": ranges, "part_min_cm": [44.6, 0.9, 1.15]}
    door["part_max_cm"] = [50.4, 26.9, 19.65]
    scene = Scene({"objects": {"mug": MUG, "heat": region, "oven": {"articulation": [door]}}})
    op = side_opening_of(scene, ["in", "mug", "heat"])
    assert _door_in_front(scene, ["in", "mug", "heat"], op) == ("oven", door)
    assert _wide_open(door) == pytest.approx(-2.094 + 0.15)
    assert _wide_open({**door, "value": -1.9}) is None  # already about that far open
    # state 0: open 1.58 rad, 3 cm clear of the opening's side
    door0 = {**door, "value": -1.58, "part_min_cm": [41.18, 0.97, 1.15], "part_max_cm": [47.69, 26.89, 19.65]}
    scene0 = Scene({"objects": {"mug": MUG, "heat": region, "oven": {"articulation": [door0]}}})
    assert _door_in_front(scene0, ["in", "mug", "heat"], op) is None
