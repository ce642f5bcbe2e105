"""The scripted expert must solve each task on >= 90% of seeds 0-49 (the baseline's contract)."""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pear_agent.loop.arm_environment import arm_episode
from pear_agent.loop.registry import make_backend
from pear_agent.loop.task_experts import scripted_policy
from pear_agent.policies.experts import (
    BACK_OFF_SAYS,
    FAILED_STATUSES,
    Stop,
    _same_move,
    reply_history,
    unstick,
    wrap,
)
from pear_agent.robot.loader import load_robot
from sim_adapters.mujoco.experts.single_arm import (
    CONVEYOR_PICK,
    PICK_CUBE,
    PLACE_IN_BOWL,
    PUSH_TO_TARGET,
    _belt_grasp_yaw,
)
from tests.policies.rates import expert_success_rate, expert_with_object_swept_off

SINGLE_ARM_EXPERTS = {e.__name__: e for e in (PICK_CUBE, PLACE_IN_BOWL, PUSH_TO_TARGET, CONVEYOR_PICK)}

SEEDS = range(50)


@pytest.mark.parametrize("task", ["pick_cube", "place_in_bowl", "push_to_target"])
def test_expert_success_rate(panda, panda_kin, task: str) -> None:
    rate, failures = expert_success_rate(task, panda, panda_kin, SEEDS)
    assert rate >= 0.9, failures


def test_noisy_expert_replies_differ_but_parse(panda, panda_kin) -> None:
    backend = make_backend("pick_cube", panda, render=False)
    try:
        a = arm_episode(backend, panda_kin, scripted_policy("pick_cube", action_noise_cm=1.0, seed=1))
        b = arm_episode(backend, panda_kin, scripted_policy("pick_cube", action_noise_cm=1.0, seed=2))
        a.run(0)
        b.run(0)
    finally:
        backend.close()
    replies_a = [m["content"] for m in a.messages if m["role"] == "assistant"]
    replies_b = [m["content"] for m in b.messages if m["role"] == "assistant"]
    assert replies_a != replies_b


def test_wrap() -> None:
    assert abs(abs(float(wrap(3 * math.pi))) - math.pi) < 1e-6  # wraps onto +-pi
    assert float(wrap(-2.5 * math.pi)) == pytest.approx(-0.5 * math.pi)
    assert float(wrap(0.5)) == pytest.approx(0.5)


# -- the experts honour the robot (pure: synthetic facts, no simulator) -----------------------------
TOOL = {
    "fingertip_below_tcp_cm": 1.0,
    "max_opening_cm": 8.0,
    "table_z_cm": 0.0,
    "max_step_cm": 10.0,
    "max_turn_rad": 0.5,
    "workspace_cm": {"x": [20, 80], "y": [-40, 40], "z": [0.5, 60]},
}


def arm_state(pos, yaw=0.0, gripper=1.0):
    return {"arm": {"position": list(pos), "orientation": [math.pi, 0.0, yaw], "gripper": gripper}}


def cube_facts(pos, yaw=0.0, tool=None, size=4.0):
    return {
        "task": "pick_cube",
        "part": "arm",
        "tool": tool or TOOL,
        "object": {"position_cm": list(pos), "yaw_rad": yaw, "size_cm": size},
        "object_start_z_cm": 2.0,
        "lift_cm": 10.0,
    }


def within(act: dict, tool: dict) -> bool:
    move = np.asarray(act.get("position", [0, 0, 0]), float)
    turn = np.asarray(act.get("orientation", [0, 0, 0]), float)
    return np.linalg.norm(move) <= tool["max_step_cm"] and np.all(np.abs(turn) <= tool["max_turn_rad"])


def test_a_long_move_is_split_over_turns_within_the_caps() -> None:
    state = arm_state([30, 30, 40], yaw=1.4)
    why, action = SINGLE_ARM_EXPERTS["pick_cube"](state, cube_facts([60, -25, 2], yaw=0.0))
    assert within(action["arm"], TOOL), action
    assert np.linalg.norm(action["arm"]["position"]) == pytest.approx(10.0, abs=0.02)
    assert "more than one turn's 10 cm" in why
    # it heads where the uncapped move went: towards the cube, and down
    move = np.asarray(action["arm"]["position"])
    assert move[0] > 0 and move[1] < 0 and move[2] < 0


def test_moves_stay_inside_the_workspace_box() -> None:
    tool = TOOL | {"workspace_cm": {"x": [20, 80], "y": [-40, 40], "z": [0.5, 12]}}
    state = arm_state([50, 0, 11], gripper=0.5)  # holding: lift to 15 cm above the table
    facts = cube_facts([50, 0, 3], tool=tool)
    _, action = SINGLE_ARM_EXPERTS["pick_cube"](state, facts)
    assert 11 + action["arm"]["position"][2] <= 12 + 1e-9


@given(
    pos=st.tuples(st.floats(20, 80), st.floats(-40, 40), st.floats(1, 60)),
    obj=st.tuples(st.floats(20, 80), st.floats(-40, 40)),
    yaw=st.floats(-math.pi, math.pi),
    grip=st.floats(0, 1),
    step=st.floats(1, 15),
    turn=st.floats(0.05, 1.0),
    task=st.sampled_from(["pick_cube", "place_in_bowl", "push_to_target", "conveyor_pick"]),
)
@settings(max_examples=300, deadline=None, database=None)
def test_no_single_arm_expert_asks_beyond_the_caps(pos, obj, yaw, grip, step, turn, task) -> None:
    tool = TOOL | {"max_step_cm": step, "max_turn_rad": turn}
    facts = cube_facts([obj[0], obj[1], 2.0], tool=tool) | {
        "container": {"position_cm": [50, 0, 0], "radius_cm": 7.5, "rim_height_cm": 3.5},
        "object_inside": False,
        "target": {"position_cm": [45, 10, 0], "radius_cm": 4.0},
        "belt": {"velocity_cm_s": [0, -3, 0], "top_cm": 1.0},
    }
    _, action = SINGLE_ARM_EXPERTS[task](arm_state(pos, yaw, grip), facts)
    assert within(action.get("arm", {}), tool), action


@pytest.mark.parametrize("task_success", [None, False, True])
def test_a_cube_on_the_floor_stops_the_expert_but_done_needs_the_tasks_check(task_success) -> None:
    """The expert stops (it holds still); it claims done only when the task's own success check
    agrees (`task_success`), else it says it cannot finish."""
    from pear_agent.policies.base import TurnContext
    from pear_agent.protocol.actions import parse_reply
    from pear_agent.robot.backend import Observation

    state = arm_state([50, 0, 20])
    facts = cube_facts([50, 0, -293])
    if task_success is not None:
        facts["task_success"] = task_success
    why, action = SINGLE_ARM_EXPERTS["pick_cube"](state, facts)
    assert isinstance(action, Stop) and "fallen off the table" in why
    obs = Observation(joints_rad={}, gripper={}, images={}, time_s=0.0, success=False, privileged=facts)
    reply = scripted_policy("pick_cube").act([], TurnContext(1, "pick_cube", state, obs))
    parsed = parse_reply(reply.text, load_robot("panda"))
    arm = parsed.parts["arm"]  # a hold: nothing moves
    assert arm.position_cm is None and arm.orientation_rad is None and arm.gripper is None
    assert parsed.done is bool(task_success)
    assert ("I cannot finish the task" in reply.text) is not bool(task_success)


def test_a_cube_beyond_reach_or_wider_than_the_gripper_stops() -> None:
    _, action = SINGLE_ARM_EXPERTS["pick_cube"](arm_state([50, 0, 20]), cube_facts([50, -60, 2]))
    assert isinstance(action, Stop)
    why, action = SINGLE_ARM_EXPERTS["pick_cube"](
        arm_state([50, 0, 20]), cube_facts([50, 0, 2], tool=TOOL | {"max_opening_cm": 3.0})
    )
    assert isinstance(action, Stop) and "opens only 3 cm" in why


def tool_y(yaw: float) -> np.ndarray:
    """The tool's y axis in the base frame, the hand pointing down (roll pi) at this yaw."""
    return np.array([math.sin(yaw), -math.cos(yaw)])


@pytest.mark.parametrize("belt", [(0.0, -3.0), (0.0, 3.0), (2.1, -2.1)])
def test_a_gripper_wide_enough_catches_along_the_belt_fingers_downstream(belt) -> None:
    v = np.array([*belt, 0.0])
    u = v[:2] / np.linalg.norm(v[:2])
    # 14 cm open straddles a 4 cm cube along the belt: closing axis along it, +y (the fingers of a
    # thumb-and-fingers hand) downstream, whatever the hand's yaw now
    for current in (-2.0, 0.0, 1.0, 3.0):
        yaw = _belt_grasp_yaw(v, 4.0, TOOL | {"max_opening_cm": 14.0}, current)
        assert tool_y(yaw) @ u == pytest.approx(1.0, abs=1e-6)
    # 8 cm (or unknown) does not: it closes across the belt, either way round, the nearer one
    for tool in (TOOL, {k: w for k, w in TOOL.items() if k != "max_opening_cm"}):
        yaw = _belt_grasp_yaw(v, 4.0, tool, 0.3)
        assert abs(tool_y(yaw) @ u) == pytest.approx(0.0, abs=1e-6)
        assert abs(float(wrap(yaw - 0.3))) <= math.pi / 2 + 1e-6


def test_the_conveyor_expert_turns_a_wide_hand_along_the_belt() -> None:
    facts = cube_facts([50, 15, 3]) | {"belt": {"velocity_cm_s": [0, -3, 0], "top_cm": 1.0}}
    state = arm_state([50, 0, 15], yaw=1.0)
    wide = facts | {"tool": TOOL | {"max_opening_cm": 14.0}}
    _, along = SINGLE_ARM_EXPERTS["conveyor_pick"](state, wide)
    _, across = SINGLE_ARM_EXPERTS["conveyor_pick"](state, facts)
    assert along["arm"]["orientation"][2] < 0  # towards yaw 0: tool +y = -y, the belt's way
    assert across["arm"]["orientation"][2] > 0  # towards yaw pi/2: fingers on both sides of the path


@pytest.mark.parametrize("fingertip_cm", [0.2, 1.0, 3.0])
def test_the_grasp_height_keeps_the_fingertips_off_the_table(fingertip_cm: float) -> None:
    tool = TOOL | {"fingertip_below_tcp_cm": fingertip_cm, "table_z_cm": 5.0}
    state = arm_state([50, 0, 15])
    _, action = SINGLE_ARM_EXPERTS["pick_cube"](state, cube_facts([50, 0, 7], tool=tool))
    target_z = 15 + action["arm"]["position"][2]
    assert target_z == pytest.approx(max(7 + 0.3, 5.0 + fingertip_cm + 0.5), abs=0.02)


def test_an_episode_whose_cube_falls_off_never_claims_done(panda, panda_kin) -> None:
    """The real loop: the cube is swept onto the floor after the expert's first move; the expert
    says it cannot finish and holds still (no move it cannot make, no invalid reply) and never
    claims the task done: the episode runs out of turns."""
    result, episode = expert_with_object_swept_off("pick_cube", panda, panda_kin, "cube", (0.5, 0.9, -0.7))
    assert result.end_reason == "turn_limit" and not result.success and result.invalid_replies == 0
    replies = [m["content"] for m in episode.messages if m["role"] == "assistant"]
    assert all('"done": true' not in r for r in replies)
    assert all("fallen off the table" in r and "I cannot finish the task" in r for r in replies[2:])


def test_the_push_turns_the_fingers_the_way_the_wrist_can() -> None:
    """Pushing with the fingers' face works either way round (yaw period pi); the nearer way (yaw
    0.43 from 1.57) is past the stop of a YAM left wrist (room 0.62 .. 4.81 rad): IK refused it on
    every turn. With the wrist's room in the tool facts the push turns the other way, to 3.58."""
    facts = cube_facts([40, -10, 2.5], size=5.0) | {
        "task": "push_to_target",
        "target": {"position_cm": [54, -3.5, 0], "radius_cm": 4.0},
    }
    state = arm_state([40, -20, 12], yaw=math.pi / 2, gripper=0.0)
    _, free = SINGLE_ARM_EXPERTS["push_to_target"](state, facts)
    assert free["arm"]["orientation"][2] < -0.4  # towards 0.43, the nearer way
    facts["tool"] = TOOL | {"yaw_room_rad": [0.62, 4.81]}
    _, held = SINGLE_ARM_EXPERTS["push_to_target"](state, facts)
    assert held["arm"]["orientation"][2] > 0.4  # towards 3.58, inside the wrist's room


# -- never the same failed move more than twice in a row ---------------------------------
def _turn(move, status):
    """An assistant reply asking for `move` and the next turn's report of its outcome."""
    wire = {"action": {"arm": {"move_cm": move}}}
    return [
        {"role": "assistant", "content": f"I move.\n```json\n{json.dumps(wire)}\n```"},
        {"role": "user", "content": [{"type": "text", "text": f"Turn 9 of 30.\nLast action: {status}: why"}]},
    ]


def test_reply_history_reads_moves_and_outcomes_from_the_conversation() -> None:
    msgs = [
        {"role": "user", "content": "Turn 1"},
        *_turn([0, 0, -3], "blocked"),
        *_turn([1, 2, 3], "reached"),
    ]
    hist = reply_history(msgs)
    assert [(a, s) for a, s, _ in hist] == [
        ({"arm": {"position": [0, 0, -3]}}, "blocked"),
        ({"arm": {"position": [1, 2, 3]}}, "reached"),
    ]


@pytest.mark.parametrize(
    ("statuses", "backs_off"),
    [
        (["blocked", "blocked"], True),
        (["ik_failed", "timeout"], True),
        (["reached", "blocked"], False),  # only twice in a row counts
        (["blocked"], False),
    ],
)
def test_a_third_identical_failed_move_becomes_a_back_off(statuses, backs_off) -> None:
    move = [0.0, 3.0, -4.0]
    history = reply_history([m for s in statuses for m in _turn(move, s)])
    state = arm_state([50, 0, 10], gripper=0.5)
    why, steps = unstick(
        "I lower.", [{"arm": {"position": [0.3, 3.2, -4.1]}}], history, state, cube_facts([50, 0, 2])
    )
    assert why.startswith(BACK_OFF_SAYS) is backs_off
    if backs_off:
        back = np.asarray(steps[0]["arm"]["position"])
        assert back[2] > 0 and back[1] < 0  # up, and away from where the move was going
        assert "gripper" not in steps[0]["arm"]  # the first back-offs keep the grasp


def test_later_back_offs_turn_their_direction_and_then_let_go() -> None:
    move = [0.0, 3.0, -4.0]
    turns = [m for s in ("blocked", "blocked") for m in _turn(move, s)]
    earlier = [{"role": "assistant", "content": f"{BACK_OFF_SAYS}: ..."}] * 2
    history = reply_history(earlier + turns)
    state = arm_state([50, 0, 10], gripper=0.5)
    why, steps = unstick("I lower.", [{"arm": {"position": move}}], history, state, cube_facts([50, 0, 2]))
    back = np.asarray(steps[0]["arm"]["position"])
    assert why.startswith(BACK_OFF_SAYS) and steps[0]["arm"]["gripper"] == 1.0 and "grasp again" in why
    assert back[1] > 0  # the third back-off of the episode: turned half round (the first went -y)


def test_never_the_same_blocked_move_three_times_in_a_row_under_physics(panda, panda_kin) -> None:
    """A real blocked move: an expert that presses the closed gripper down onto the bowl's wall (the
    fingers stop on it, the outcome says blocked) asks for it again every turn; the shared
    machinery lets it through twice in a row at most, then backs off, and the expert re-plans."""
    from pear_agent.loop.config import EpisodeConfig
    from pear_agent.policies.experts import within_caps
    from pear_agent.policies.scripted import ScriptedPolicy

    def press(state, priv):
        arm = state["arm"]
        if float(arm["gripper"]) > 0.5:
            return "I close the gripper.", {"arm": {"gripper": 0.0}}
        c = priv["container"]
        wall = np.asarray(c["position_cm"], float) + np.array([c["radius_cm"] + 0.4, 0.0, 0.0])
        wall[2] = c["rim_height_cm"] - 2.0
        move = wall - np.asarray(arm["position"], float)
        return "I press down onto the bowl's wall.", {"arm": {"position": [round(float(v), 2) for v in move]}}

    backend = make_backend("place_in_bowl", panda, render=False)
    try:
        episode = arm_episode(
            backend,
            panda_kin,
            ScriptedPolicy("place_in_bowl", expert=within_caps(press)),
            EpisodeConfig(max_turns=14),
        )
        episode.run(0)
    finally:
        backend.close()
    hist = reply_history(episode.messages)
    failed = [s in FAILED_STATUSES for _, s, _ in hist]
    assert sum(failed) >= 4, hist  # the press really is blocked, again and again
    backs = [i for i, (_, _, text) in enumerate(hist) if text.startswith(BACK_OFF_SAYS)]
    assert len(backs) >= 2, [t for _, _, t in hist]
    for i in range(2, len(hist)):
        (a, sa, _), (b, sb, _), (c, _, _) = hist[i - 2], hist[i - 1], hist[i]
        repeated = sa in FAILED_STATUSES and sb in FAILED_STATUSES and _same_move(a, c) and _same_move(b, c)
        assert not repeated, (i, hist[i - 2 : i + 1])


# -- place_in_bowl: where the cube is let go ----------------------------------------------
def bowl_facts(cube, inside=False, yaw=0.0):
    return cube_facts(cube, yaw=yaw) | {
        "task": "place_in_bowl",
        "container": {"position_cm": [50, 0, 0], "radius_cm": 7.5, "rim_height_cm": 3.5, "floor_cm": 0.6},
        "object_inside": inside,
    }


def test_the_cube_is_carried_to_the_middle_then_lowered_inside_then_let_go_in_place() -> None:
    place = SINGLE_ARM_EXPERTS["place_in_bowl"]
    # 1.2 cm off the middle, over the rim: carried sideways first, not lowered
    _, act = place(arm_state([51.2, 0, 10], gripper=0.5), bowl_facts([51.2, 0, 10]))
    assert act["arm"]["position"][0] == pytest.approx(-1.2, abs=0.01) and act["arm"]["position"][2] >= 0
    # centred: lowered into the bowl, the cube's bottom 2 cm over the floor (centre 0.6 + 2 + 2)
    _, act = place(arm_state([50.3, 0.2, 10], gripper=0.5), bowl_facts([50.3, 0.2, 10]))
    assert 10 + act["arm"]["position"][2] == pytest.approx(4.6, abs=0.01)
    assert act["arm"]["gripper"] == 0.0
    # down there: let go, and nothing moves while the fingers open
    _, act = place(arm_state([50.3, 0.2, 4.6], gripper=0.5), bowl_facts([50.3, 0.2, 4.6]))
    assert act["arm"] == {"gripper": 1.0}
    # in the bowl, the gripper still opening: hold still; open: rise
    _, act = place(arm_state([50, 0, 4.6], gripper=0.3), bowl_facts([50, 0, 2.6], inside=True))
    assert act["arm"] == {"gripper": 1.0}
    _, act = place(arm_state([50, 0, 4.6], gripper=0.95), bowl_facts([50, 0, 2.6], inside=True))
    assert act["arm"]["position"][2] > 0


def test_a_cube_beside_the_bowl_is_grasped_with_the_fingers_along_the_wall() -> None:
    """The cube 10 cm from the bowl's centre along +x: the fingers (the tool's y axis) close along
    the wall (y), so the face yaw taken is the one nearest 0 mod pi, not the one nearest the hand."""
    place = SINGLE_ARM_EXPERTS["place_in_bowl"]
    state = arm_state([60, 0, 15], yaw=1.2)
    _, act = place(state, bowl_facts([60, 0, 2], yaw=0.3))
    assert act["arm"]["orientation"][2] == pytest.approx(-0.5, abs=0.01)  # towards 0.3 (capped)
    # far from the bowl: the nearest face yaw, as for pick_cube (1.2 -> 0.3 + pi/2)
    _, act = place(arm_state([30, -30, 15], yaw=1.2), bowl_facts([30, -30, 2], yaw=0.3))
    assert act["arm"]["orientation"][2] == pytest.approx(0.5, abs=0.01)  # towards 0.3 + pi/2 (capped)


def test_the_last_stretch_of_a_push_goes_part_of_the_way() -> None:
    """5 cm from the target the fingers push the block 3.5 cm (70%), not all the way: pushed all
    the way at once, a block slid on past the target out of the YAM's reach."""
    facts = cube_facts([45, 0, 2.5], size=5.0) | {
        "task": "push_to_target",
        "target": {"position_cm": [50, 0, 0]},
    }
    # behind the block on the line, low, closed: 1.2 cm of gap between the fingers and the block
    _, act = SINGLE_ARM_EXPERTS["push_to_target"](
        arm_state([45 - 2.5 - 1.2 - 1.0, 0, 2.5], gripper=0.0), facts
    )
    assert act["arm"]["position"][0] == pytest.approx(0.7 * 5.0 + 1.0, abs=0.02)
    # far away, the full 6 cm push as before
    far = facts | {"target": {"position_cm": [70, 0, 0]}}
    _, act = SINGLE_ARM_EXPERTS["push_to_target"](arm_state([45 - 2.5 - 1.2 - 1.0, 0, 2.5], gripper=0.0), far)
    assert act["arm"]["position"][0] == pytest.approx(6.0 + 1.0, abs=0.02)
