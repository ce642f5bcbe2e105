"""The LIBERO pick-and-place expert's decisions on synthetic facts (pure numpy, no LIBERO)."""

import math

from pear_agent.policies.experts_libero import RIM_OPENING, grasp_plan, pick_place

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
    _, act = pick_place(arm([45, 0, 26], 1.0), facts(BOWL))
    assert act["arm"]["gripper"] == RIM_OPENING and act["arm"]["position"][1] > 5


def test_closed_on_the_wall_it_lifts_out_of_where_the_bowl_rested():
    bowl = BOWL | {"rest_bottom_cm": 15.0, "min_cm": [54.0, 15.0, 15.0], "max_cm": [65.0, 26.0, 20.1]}
    reason, act = pick_place(arm([54.6, 20.5, 18.9], 0.05), facts(bowl))
    assert "lift" in reason
    dx, dy, dz = act["arm"]["position"]
    assert dx == dy == 0 and dz >= 8.5 and act["arm"]["gripper"] == 0.0  # bottom to rest + 9 cm


def test_closed_on_nothing_it_reopens():
    reason, act = pick_place(arm([54.6, 20.5, 2.7], 0.0), facts(BOWL | {"rest_bottom_cm": -1.2}))
    assert "holds nothing" in reason and act["arm"]["gripper"] == RIM_OPENING


def test_above_the_plate_it_lowers_then_lets_go():
    over = {"min_cm": [65.5, 15.0, 5.0], "max_cm": [76.5, 26.0, 10.1], "position_cm": [71, 20.5, 7.5]}
    bowl = over | {"rest_bottom_cm": -1.2}
    _, act = pick_place(arm([66.1, 20.5, 8.9], 0.05), facts(bowl))
    assert act["arm"]["position"][2] < -2
    low = {"min_cm": [65.5, 15.0, 1.6], "max_cm": [76.5, 26.0, 6.7], "position_cm": [71, 20.5, 4.1]}
    _, act = pick_place(arm([66.1, 20.5, 5.5], 0.05), facts(low | {"rest_bottom_cm": -1.2}))
    assert act["arm"] == {"gripper": 1.0}
