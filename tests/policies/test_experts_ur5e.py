"""The second vendor's arm, added by YAML alone, in two builds: `robots/ur5e.yaml` (robosuite's UR5e
and its Franka hand, two actuators) and `robots/ur5e_2f85.yaml` (MuJoCo Menagerie's UR5e and
Robotiq 2F-85, one tendon actuator with linkages). The same scripted experts solve every
single-arm task on >= 90% of seeds 0-19 with each."""

import pytest

from pear_agent.robot.kinematics import Kinematics
from pear_agent.robot.loader import load_robot
from tests.policies.rates import expert_success_rate

SEEDS = range(20)
TASKS = ["pick_cube", "place_in_bowl", "push_to_target", "conveyor_pick"]


@pytest.fixture(scope="module", params=["ur5e", "ur5e_2f85"])
def ur5e(request):
    robot = load_robot(request.param)
    return robot, Kinematics(robot)


@pytest.mark.parametrize("task", TASKS)
def test_ur5e_expert_success_rate(ur5e, task: str) -> None:
    robot, kin = ur5e
    rate, failures = expert_success_rate(task, robot, kin, SEEDS)
    assert rate >= 0.9, failures
