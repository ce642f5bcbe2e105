"""The dual-arm scripted experts must solve each YAM task on >= 80% of seeds 0-49."""

import pytest

from pear_agent.episode import Episode
from pear_agent.policies.expert_registry import EXPERTS
from pear_agent.policies.scripted import ScriptedPolicy
from pear_agent.registry import make_backend
from tests.policies.rates import expert_success_rate

SEEDS = range(50)


@pytest.mark.parametrize("task", ["bimanual_pickup", "align_blocks"])
def test_bimanual_expert_success_rate(yam, yam_kin, task: str) -> None:
    rate, failures = expert_success_rate(task, yam, yam_kin, SEEDS)
    assert rate >= 0.8, failures


def test_experts_are_registered_and_use_both_arms(yam, yam_kin) -> None:
    backend = make_backend("bimanual_pickup", yam, render=False)
    try:
        episode = Episode(backend, yam_kin, ScriptedPolicy("bimanual_pickup"))
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

    from pear_agent.kinematics import Kinematics
    from pear_agent.robot_config import ROBOTS_DIR, load_robot

    raw = yaml.safe_load((ROBOTS_DIR / "yam_bimanual.yaml").read_text())
    raw["parts"] = {"starboard": raw["parts"]["right_arm"], "port": raw["parts"]["left_arm"]}
    path = tmp_path / "two_arms.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    robot = load_robot(path)
    rate, failures = expert_success_rate("bimanual_pickup", robot, Kinematics(robot), range(3))
    assert rate == 1.0, failures
