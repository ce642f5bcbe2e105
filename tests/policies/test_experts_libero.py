"""The LIBERO expert's decisions on synthetic facts (pure numpy, no LIBERO): what it does at each
stage of a pick and place, every reply within the per-turn caps."""

import math

import numpy as np

from pear_agent.policies.experts_libero import (
    MAX_STEP_CM,
    MAX_TURN_RAD,
    RIM_OPENING,
    grasp_plan,
    libero_expert,
)

BOWL = {"min_cm": [54.0, 15.0, -1.2], "max_cm": [65.0, 26.0, 3.9], "position_cm": [59.5, 20.5, 1.3]}
PLATE = {"min_cm": [64.0, 13.0, -1.2], "max_cm": [78.0, 27.0, 0.7], "position_cm": [71.0, 20.0, -0.2]}


def facts(bowl: dict, **extra) -> dict:
    return {"goal": [["on", "bowl", "plate"]], "objects": {"bowl": bowl, "plate": PLATE}} | extra


def arm(pos, gripper, yaw=math.pi / 2):
    return {"arm": {"position": list(pos), "orientation": [math.pi, 0.0, yaw], "gripper": gripper}}


def decide(state: dict, priv: dict) -> tuple[str, dict]:
    reason, act = libero_expert(state, priv)
    a = act["arm"]
    # never relies on clipping (replies carry 0.01 cm / 0.001 rad: rounding may add a little)
    assert np.linalg.norm(a.get("position", [0, 0, 0])) <= MAX_STEP_CM + 0.01
    assert max(abs(v) for v in a.get("orientation", [0, 0, 0])) <= MAX_TURN_RAD + 0.001
    return reason, a


def test_bowl_is_taken_by_the_near_rim_with_a_partial_opening():
    point, yaw, opening = grasp_plan(BOWL)
    assert point[0] < BOWL["min_cm"][0] + 1.0 and abs(point[1] - 20.5) < 0.1  # near (robot-side) rim
    assert point[2] < BOWL["max_cm"][2] and yaw == math.pi / 2 and opening == RIM_OPENING
    _, _, small = grasp_plan({"min_cm": [50, 0, 0], "max_cm": [54, 6, 8]})
    assert small == 1.0


def test_far_from_the_bowl_it_moves_towards_it_and_sets_the_opening():
    start = np.array([45.0, 0.0, 26.0])
    _, a = decide(arm(start, 1.0), facts(BOWL))
    after = start + np.array(a["position"])
    rim, _, _ = grasp_plan(BOWL)
    assert np.linalg.norm(after[:2] - rim[:2]) < np.linalg.norm(start[:2] - rim[:2]) - 5.0
    assert a["gripper"] == RIM_OPENING


def test_holding_the_bowl_inside_a_cabinet_it_rises_before_carrying():
    bowl = {"min_cm": [54.0, 15.0, 15.0], "max_cm": [65.0, 26.0, 20.1], "position_cm": [59.5, 20.5, 17.5]}
    cabinet = {"cabinet/top": {"min_cm": [50.0, 10.0, -1.2], "max_cm": [70.0, 30.0, 14.5]}}
    reason, a = decide(arm([54.6, 20.5, 18.9], 0.05), facts(bowl | {"rest_bottom_cm": 15.0}, others=cabinet))
    dx, dy, dz = a["position"]
    assert "carry" in reason and abs(dx) < 1e-6 and abs(dy) < 1e-6 and dz > 0 and a["gripper"] == 0.0
    # with nothing in the way it heads for the plate at once
    _, free = decide(arm([54.6, 20.5, 18.9], 0.05), facts(bowl | {"rest_bottom_cm": 15.0}))
    assert free["position"][0] > 1.0


def test_closed_on_nothing_it_reopens_and_rises():
    reason, a = decide(arm([54.6, 20.5, 2.7], 0.0), facts(BOWL | {"rest_bottom_cm": -1.2}))
    assert "nothing" in reason and a["gripper"] == RIM_OPENING and a["position"][2] > 0


def test_above_the_plate_it_lowers_then_lets_go():
    over = {"min_cm": [65.5, 15.0, 5.0], "max_cm": [76.5, 26.0, 10.1], "position_cm": [71, 20.5, 7.5]}
    _, a = decide(arm([66.1, 20.5, 8.9], 0.05), facts(over | {"rest_bottom_cm": -1.2}))
    assert a["position"][2] < -2 and a["gripper"] == 0.0
    low = {"min_cm": [65.5, 15.0, 1.6], "max_cm": [76.5, 26.0, 6.7], "position_cm": [71, 20.5, 4.1]}
    _, a = decide(arm([66.1, 20.5, 5.5], 0.05), facts(low | {"rest_bottom_cm": -1.2}))
    assert a == {"gripper": 1.0}
    # the goal already holds with the bowl still in hand: it lets go (and moves no further down)
    _, a = decide(arm([66.1, 20.5, 5.5], 0.05), facts(low | {"rest_bottom_cm": -1.2}, goal_done=[True]))
    assert a["gripper"] == 1.0 and a.get("position", [0, 0, 0])[2] >= 0
