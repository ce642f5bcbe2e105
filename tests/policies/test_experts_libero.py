"""The LIBERO pick-and-place expert's decisions on synthetic facts (pure numpy, no LIBERO)."""

import math

import numpy as np

from pear_agent.policies.experts_libero import (
    HAND_ABOVE_TCP_CM,
    RIM_OPENING,
    Arm,
    Scene,
    _shifted,
    clearing_shove,
    grasp_options,
    grasp_plan,
    graspable,
    hand_hits,
    libero_expert,
    travel,
)

BOWL = {"min_cm": [54.0, 15.0, -1.2], "max_cm": [65.0, 26.0, 3.9], "position_cm": [59.5, 20.5, 1.3]}
PLATE = {"min_cm": [64.0, 13.0, -1.2], "max_cm": [78.0, 27.0, 0.7], "position_cm": [71.0, 20.0, -0.2]}


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
