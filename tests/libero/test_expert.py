"""The scripted expert, through the text protocol and our IK, reaches LIBERO's own success check."""

import pytest

from pear_agent.episode import Episode
from pear_agent.kinematics import Kinematics
from pear_agent.policies.scripted import ScriptedPolicy
from sim_adapters.libero.backend import LiberoBackend


@pytest.mark.parametrize(
    "task",
    [
        "libero_object/0",  # pick up the alphabet soup and place it in the basket (top grasp)
        "libero_spatial/4",  # the black bowl from the open top drawer onto the plate (rim grasp, lift out)
    ],
)
def test_scripted_expert_reaches_libero_success(libero_robot, task):
    backend = LiberoBackend(libero_robot, task, render=False)
    try:
        result = Episode(backend, Kinematics(libero_robot), ScriptedPolicy(task)).run(0)
        assert result.success, f"{result.end_reason}: {result.detail}"
        assert result.end_reason == "success"
        assert backend.env.check_success()  # LIBERO's BDDL goal holds at the end
    finally:
        backend.close()


def test_no_expert_for_other_suites():
    with pytest.raises(ValueError, match="no scripted expert"):
        ScriptedPolicy("libero_goal/0")
