"""The second robot, added by YAML alone (`robots/ur5e.yaml`: robosuite's UR5e and its Franka hand,
two actuators): the same scripted experts solve every single-arm task on >= 90% of seeds 0-19."""

import pytest

from pear_agent.kinematics import Kinematics
from pear_agent.robot_config import load_robot
from tests.policies.rates import expert_success_rate

SEEDS = range(20)


@pytest.fixture(scope="module")
def ur5e():
    robot = load_robot("ur5e")
    return robot, Kinematics(robot)


@pytest.mark.parametrize("task", ["pick_cube", "place_in_bowl", "push_to_target", "conveyor_pick"])
def test_ur5e_expert_success_rate(ur5e, task: str) -> None:
    robot, kin = ur5e
    rate, failures = expert_success_rate(task, robot, kin, SEEDS)
    assert rate >= 0.9, failures
