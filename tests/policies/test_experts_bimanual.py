"""The dual-arm scripted experts must solve each YAM task on >= 80% of seeds 0-49, and honour the
robot: any layout of the two arms, the per-turn caps, the gripper geometry, a bar off the table."""

from pathlib import Path

import numpy as np
import pytest

from pear_agent.loop.arm_environment import arm_episode
from pear_agent.loop.registry import make_backend
from pear_agent.loop.task_experts import EXPERTS, scripted_policy
from pear_agent.policies.experts import Stop
from tests.policies.rates import expert_success_rate, expert_with_object_swept_off

SEEDS = range(50)


@pytest.mark.parametrize("task", ["bimanual_pickup", "align_blocks"])
def test_bimanual_expert_success_rate(yam, yam_kin, task: str) -> None:
    rate, failures = expert_success_rate(task, yam, yam_kin, SEEDS)
    assert rate >= 0.8, failures


@pytest.mark.parametrize("task", ["pick_cube", "place_in_bowl", "push_to_target", "conveyor_pick"])
def test_yam_one_arm_tasks_as_strong_as_any_arm(yam, yam_kin, task: str) -> None:
    """The YAM's one-arm tasks (its left arm) on seeds 0-19: at least 19 of 20 each (pick 14,
    place 6, push 17 before the finger armature and stiff finger contacts of robots/yam_bimanual.yaml).
    The margin, from `benchmarks/expert_perturbed.py` (
    `benchmarks/results/expert_perturbed-issue37-yam-one-arm.json`): 20/20 each as they are and
    20/20 each under small physics perturbations. Place was 18/20 on another CPU (the cube let go
    over the rim and flung out of the bowl): it now lowers the cube into the bowl and lets go with
    the hand still; push was 19/20 perturbed (a block pushed all the way slid out of reach): the
    last stretch now goes in shorter pushes."""
    rate, failures = expert_success_rate(task, yam, yam_kin, range(20))
    assert rate >= 0.95, failures


def test_experts_are_registered_and_use_both_arms(yam, yam_kin) -> None:
    backend = make_backend("bimanual_pickup", yam, render=False)
    try:
        episode = arm_episode(backend, yam_kin, scripted_policy("bimanual_pickup"))
        result = episode.run(0)
    finally:
        backend.close()
    assert {"bimanual_pickup", "align_blocks"} <= set(EXPERTS)
    assert result.success
    replies = [m["content"] for m in episode.messages if m["role"] == "assistant"]
    assert any('"left_arm"' in r and '"right_arm"' in r for r in replies)


def test_two_arm_tasks_take_any_part_names(tmp_path) -> None:
    """A two-arm description whose parts are named otherwise (and listed right arm first): the
    task finds its left and right arm from the workspace boxes, the expert answers by part name."""
    import yaml

    from pear_agent.robot.config import ROBOTS_DIR
    from pear_agent.robot.kinematics import Kinematics
    from pear_agent.robot.loader import load_robot

    raw = yaml.safe_load((ROBOTS_DIR / "yam_bimanual.yaml").read_text())
    raw["parts"] = {"starboard": raw["parts"]["right_arm"], "port": raw["parts"]["left_arm"]}
    path = tmp_path / "two_arms.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    robot = load_robot(path)
    rate, failures = expert_success_rate("bimanual_pickup", robot, Kinematics(robot), range(3))
    assert rate == 1.0, failures


# -- the experts honour the robot: layout, caps, gripper geometry, a bar that has left the table ------
FACING = Path(__file__).resolve().parents[1] / "robots" / "yam_facing.yaml"


@pytest.mark.parametrize("task", ["bimanual_pickup", "align_blocks"])
def test_arms_facing_each_other_solve_the_two_arm_tasks(task: str) -> None:
    """A layout the tasks were not written for (YAML only): two YAMs facing each other."""
    from pear_agent.robot.kinematics import Kinematics
    from pear_agent.robot.loader import load_robot

    robot = load_robot(FACING)
    rate, failures = expert_success_rate(task, robot, Kinematics(robot), range(5))
    assert rate >= 0.8, failures


TOOL = {
    "fingertip_below_tcp_cm": 0.2,
    "table_z_cm": 0.0,
    "max_step_cm": 10.0,
    "max_turn_rad": 0.5,
    "workspace_cm": {"x": [8, 45], "y": [-86, 25], "z": [0.5, 30]},
}


def bar_facts(centre, tool=None, touching=(False, False)) -> dict:
    c = np.asarray(centre, float)
    return {
        "task": "bimanual_pickup",
        "object": {"name": "bar", "position_cm": list(c), "yaw_rad": 0.0, "size_cm": [4.0, 36.0, 4.0]},
        "arms": {"left_arm": "left_arm", "right_arm": "right_arm"},
        "tool": {"left_arm": tool or TOOL, "right_arm": tool or TOOL},
        "preferred_yaw_rad": {"left_arm": np.pi / 2, "right_arm": -np.pi / 2},
        "yaw_offsets_rad": {"left_arm": [-0.95, 3.24], "right_arm": [-3.24, 0.95]},
        "grasp_points_cm": {
            "left_arm": list(c + np.array([0, 13, 0])),
            "right_arm": list(c - np.array([0, 13, 0])),
        },
        "touching": {"left_arm": touching[0], "right_arm": touching[1]},
        "object_start_z_cm": 2.0,
        "lift_cm": 10.0,
    }


def arms(left, right, g=1.0, yaw=(np.pi / 2, -np.pi / 2)) -> dict:
    return {
        "left_arm": {"position": list(left), "orientation": [np.pi, 0.0, yaw[0]], "gripper": g},
        "right_arm": {"position": list(right), "orientation": [np.pi, 0.0, yaw[1]], "gripper": g},
    }


def test_a_bar_off_the_table_stops_both_arms_without_claiming_done() -> None:
    """The issue's episode: the bar fell off the table and the expert sent move_cm -293. Now both
    arms hold still and the reply says the expert cannot finish; it is not `done` (only
    the task's own check may agree to that)."""
    from pear_agent.policies.base import TurnContext
    from pear_agent.protocol.actions import parse_reply
    from pear_agent.robot.backend import Observation
    from pear_agent.robot.loader import load_robot

    state = arms([22, -10, 14], [22, -51, 14])
    facts = bar_facts([24, -30, -293])
    why, action = EXPERTS["bimanual_pickup"](state, facts)
    assert isinstance(action, Stop) and "fallen off the table" in why
    obs = Observation(joints_rad={}, gripper={}, images={}, time_s=0.0, success=False, privileged=facts)
    reply = scripted_policy("bimanual_pickup").act([], TurnContext(1, "bimanual_pickup", state, obs))
    parsed = parse_reply(reply.text, load_robot("yam_bimanual"))
    assert not parsed.done and all(p.position_cm is None for p in parsed.parts.values())
    assert "I cannot finish the task" in reply.text


def test_far_grasp_points_are_approached_within_the_caps() -> None:
    state = arms([40, 20, 28], [10, -80, 28])
    _, action = EXPERTS["bimanual_pickup"](state, bar_facts([24, -30, 2]))
    for part in ("left_arm", "right_arm"):
        move = np.asarray(action[part]["position"])
        assert np.linalg.norm(move) <= 10.0 and np.linalg.norm(move) > 9.9
        assert np.all(np.abs(action[part].get("orientation", [0, 0, 0])) <= 0.5)


@pytest.mark.parametrize("fingertip_cm", [0.2, 2.0])
def test_the_bar_grasp_keeps_the_fingertips_off_the_table(fingertip_cm: float) -> None:
    c = np.array([24.0, -30.0, 2.0])
    state = arms(
        c + np.array([0, 13, 8]), c - np.array([0, 13, -8])
    )  # above each grasp point, fingers across the bar
    _, action = EXPERTS["bimanual_pickup"](
        state, bar_facts(c, TOOL | {"fingertip_below_tcp_cm": fingertip_cm})
    )
    for part in ("left_arm", "right_arm"):
        target_z = 10.0 + action[part]["position"][2]
        assert target_z == pytest.approx(max(0.8, fingertip_cm + 0.5), abs=0.02)


def test_the_fingers_turn_across_the_bar_the_way_the_wrist_can() -> None:
    """Across a bar along x, yaw 0 and pi are both a quarter turn from the left arm's home yaw
    (pi/2); its wrist can turn 0.95 rad down and 3.24 up, so it turns up, to pi."""
    c = np.array([30.0, -30.0, 2.0])
    facts = bar_facts(c) | {"object": bar_facts(c)["object"] | {"yaw_rad": -np.pi / 2}}
    facts["grasp_points_cm"] = {
        "left_arm": list(c + np.array([13, 0, 0])),
        "right_arm": list(c - np.array([13, 0, 0])),
    }
    state = arms(c + np.array([13, 0, 10]), c - np.array([13, 0, -10]))
    _, action = EXPERTS["bimanual_pickup"](state, facts)
    assert action["left_arm"]["orientation"][2] == pytest.approx(0.5, abs=0.01)  # towards pi, capped
    assert action["right_arm"]["orientation"][2] == pytest.approx(-0.5, abs=0.01)  # towards -pi


def test_an_episode_whose_bar_falls_off_never_claims_done(yam, yam_kin) -> None:
    result, episode = expert_with_object_swept_off("bimanual_pickup", yam, yam_kin, "bar", (0.3, 0.9, -0.7))
    assert result.end_reason == "turn_limit" and not result.success and result.invalid_replies == 0
    replies = [m["content"] for m in episode.messages if m["role"] == "assistant"]
    assert all('"done": true' not in r for r in replies)
    assert "I cannot finish the task" in replies[-1]


def blocks_facts(blocks_cm: dict[str, list[float]]) -> dict:
    """align_blocks facts on the YAM station: the line along y through (24, -30.5)."""
    facts = bar_facts([24, -30.5, 2.0])
    for key in ("object", "grasp_points_cm", "touching", "object_start_z_cm", "lift_cm"):
        facts.pop(key)
    return facts | {
        "task": "align_blocks",
        "objects": {n: {"position_cm": p, "yaw_rad": 0.0, "size_cm": 4.0} for n, p in blocks_cm.items()},
        "park_cm": {"left_arm": [22.0, -10.0, 12.0], "right_arm": [22.0, -51.0, 12.0]},
        "line": {
            "point_cm": [24.0, -30.5, 0.0],
            "direction": [0.0, 1.0],
            "normal": [1.0, 0.0],
            "tolerance_cm": 1.5,
        },
    }


def test_align_blocks_both_next_blocks_in_the_middle_do_not_deadlock() -> None:
    """Both arms' next blocks near the middle of the line: each arm waited for the other to be
    done, both held still for ever, and the empty action ended the episode invalid. Now the left
    arm goes first and the right one waits out of the way."""
    facts = blocks_facts(
        {"red_block": [30.0, -27.5, 2.0], "green_block": [18.0, -33.5, 2.0], "blue_block": [24.0, -50.0, 2.0]}
    )
    state = arms([22, -10, 12], [22, -51, 12])  # both parked
    why, action = EXPERTS["align_blocks"](state, facts)
    assert "left_arm" in action and np.linalg.norm(action["left_arm"]["position"]) > 1.0, why
    assert "left_arm (red block)" in why and "right_arm (green block)" not in why
    # the right arm's block alone in the middle, the left arm done: the right arm goes
    facts["objects"]["red_block"]["position_cm"] = [24.2, -27.5, 2.0]
    _, action = EXPERTS["align_blocks"](state, facts)
    assert "right_arm" in action and np.linalg.norm(action["right_arm"]["position"]) > 1.0


def test_a_waiting_expert_holds_a_part_the_robot_has() -> None:
    """An expert turn with nothing to do was sent as `{"action": {"arm": ...}}` on a robot with no
    part `arm`: three refusals and the episode ended invalid. It holds the robot's own part now."""
    from pear_agent.policies.base import TurnContext
    from pear_agent.protocol.actions import parse_reply
    from pear_agent.robot.backend import Observation
    from pear_agent.robot.loader import load_robot

    # all blocks on the line and both arms parked: nothing to do this turn
    facts = blocks_facts(
        {"red_block": [24.0, -15.0, 2.0], "green_block": [24.0, -30.0, 2.0], "blue_block": [24.0, -45.0, 2.0]}
    )
    state = arms([22, -10, 12], [22, -51, 12])
    assert EXPERTS["align_blocks"](state, facts)[1] == {}
    obs = Observation(joints_rad={}, gripper={}, images={}, time_s=0.0, success=False, privileged=facts)
    reply = scripted_policy("align_blocks").act([], TurnContext(1, "align_blocks", state, obs))
    parsed = parse_reply(reply.text, load_robot("yam_bimanual"))
    assert list(parsed.parts) == ["left_arm"] and parsed.parts["left_arm"].position_cm is None


def test_align_blocks_on_a_narrow_table_solved(tmp_path) -> None:
    """A task area 23 cm wide puts all three blocks near the middle of the line: the expert
    deadlocked (0 of 3 seeds, both arms waiting out the turns); it solves them now."""
    import yaml

    from pear_agent.robot.config import ROBOTS_DIR
    from pear_agent.robot.kinematics import Kinematics
    from pear_agent.robot.loader import load_robot

    raw = yaml.safe_load((ROBOTS_DIR / "yam_bimanual.yaml").read_text())
    raw["table"]["task_area_cm"] = {"x": [16, 32], "y": [-42, -19]}
    path = tmp_path / "yam_narrow.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    robot = load_robot(path)
    rate, failures = expert_success_rate("align_blocks", robot, Kinematics(robot), range(3))
    assert rate == 1.0, failures
