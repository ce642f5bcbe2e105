"""The bring-up motion: replies in the protocol's text form that the real parser accepts for any
robot, from the state alone, ending with done; run through the loop in MuJoCo it reaches every step."""

from __future__ import annotations

from typing import Any

import pytest

from pear_agent.loop.arm_environment import arm_episode
from pear_agent.loop.config import EpisodeConfig
from pear_agent.loop.registry import make_backend
from pear_agent.policies.base import TurnContext
from pear_agent.policies.bringup import BringupPolicy
from pear_agent.protocol.actions import parse_reply
from pear_agent.robot.loader import load_robot

STATE = {
    "left_arm": {"position": [30.0, 10.0, 20.0], "orientation": [3.1, 0.0, 0.0], "gripper": 1.0},
    "right_arm": {"position": [30.0, -70.0, 20.0], "orientation": [3.1, 0.0, 0.0], "gripper": 0.4},
}


def _replies(policy: BringupPolicy, state: dict, robot: Any) -> list:
    policy.reset(0)
    out = []
    for turn in range(1, 6):
        reply = policy.act([], TurnContext(turn, "desk", state, None))
        out.append(parse_reply(reply.text, robot))
        if out[-1].done:
            break
    return out


def test_four_steps_from_the_state_alone_then_done() -> None:
    robot = load_robot("yam_bimanual")
    actions = _replies(BringupPolicy(3.0), STATE, robot)
    assert len(actions) == 4 and [a.done for a in actions] == [False, False, False, True]
    up, down, half, back = actions
    for name in STATE:
        assert up.parts[name].position_cm == pytest.approx([0.0, 0.0, 3.0])
        assert down.parts[name].position_cm == pytest.approx([0.0, 0.0, -3.0])
    assert half.parts["left_arm"].gripper == pytest.approx(0.5)
    assert half.parts["right_arm"].gripper == pytest.approx(0.9)  # 0.4 is near half: it opens instead
    assert back.parts["left_arm"].gripper == pytest.approx(1.0)
    assert back.parts["right_arm"].gripper == pytest.approx(0.4)


def test_a_robot_without_grippers_gets_the_lift_only() -> None:
    robot = load_robot("yam_bimanual")
    state = {n: {k: v for k, v in s.items() if k != "gripper"} for n, s in STATE.items()}
    actions = _replies(BringupPolicy(2.0), state, robot)
    assert len(actions) == 2 and actions[-1].done
    assert actions[0].parts["left_arm"].position_cm == pytest.approx([0.0, 0.0, 2.0])


def test_a_lift_outside_the_caps_is_refused() -> None:
    with pytest.raises(ValueError, match="height_cm"):
        BringupPolicy(25.0)


def test_in_mujoco_every_step_is_reached_and_the_episode_ends_done() -> None:
    from pear_agent.robot.kinematics import Kinematics

    robot = load_robot("yam_bimanual")
    backend = make_backend("bimanual_pickup", robot, render=False)
    turns = []
    try:
        res = arm_episode(
            backend, Kinematics(robot), BringupPolicy(), EpisodeConfig(max_turns=10), on_turn=turns.append
        ).run(0)
    finally:
        backend.close()
    assert res.end_reason == "done" and res.turns == 4, (res.end_reason, res.detail)
    assert [t.outcome for t in turns] == ["reached"] * 4
