"""Three robots added by YAML alone, their model files as their packages ship them:
robosuite's Kinova Gen3 with continuous joints and Menagerie's Robotiq 2F-85 (`robots/kinova3.yaml`),
robosuite's dual-arm Baxter with Rethink's parallel grippers (`robots/baxter.yaml`), and robosuite's
Kinova Jaco with its three-finger hand (`robots/jaco.yaml`). The scripted experts solve every task
each can do on >= 80% of seeds 0-19 (the success table is in docs/robots.md)."""

import pytest

from pear_agent.loop.registry import arm_tasks
from pear_agent.robot.kinematics import Kinematics
from pear_agent.robot.loader import load_robot
from tests.policies.rates import expert_success_rate

SEEDS = range(20)
ROBOTS = ["kinova3", "baxter", "jaco"]
TASKS = arm_tasks()
MUJOCO_TASKS = [t for t, e in TASKS.items() if e.backend == "mujoco"]
# (robot, task) -> why its expert stays below 80%: a strict xfail, so a fixed gap is noticed. None left
# (the Jaco's conveyor_pick, 11 of 20 before, is 20 of 20 since the expert catches along the belt).
KNOWN_GAPS: dict[tuple[str, str], str] = {}
CASES = [
    pytest.param(r, t, marks=pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[(r, t)]))
    if (r, t) in KNOWN_GAPS
    else (r, t)
    for r in ROBOTS
    for t in MUJOCO_TASKS
    if TASKS[t].refusal(t, load_robot(r)) is None
]


@pytest.fixture(scope="module")
def robots() -> dict:
    out = {}
    for name in ROBOTS:
        robot = load_robot(name)
        out[name] = (robot, Kinematics(robot))
    return out


def test_every_task_a_robot_can_do_is_tested() -> None:
    cases = [c.values if hasattr(c, "values") else c for c in CASES]
    assert {t for r, t in cases if r == "baxter"} == set(MUJOCO_TASKS)  # one arm or two
    one_arm = {t for t in MUJOCO_TASKS if TASKS[t].requires.arms_with_gripper == 1}
    assert {t for r, t in cases if r == "jaco"} == one_arm


@pytest.mark.parametrize(("robot_name", "task"), CASES)
def test_added_robot_expert_success_rate(robots, robot_name: str, task: str) -> None:
    robot, kin = robots[robot_name]
    rate, failures = expert_success_rate(task, robot, kin, SEEDS)
    assert rate >= 0.8, failures
