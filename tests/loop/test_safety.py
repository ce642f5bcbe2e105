import numpy as np

from pear_agent.loop.safety import clip_target
from pear_agent.protocol.actions import PartAction
from pear_agent.protocol.state import PartPose
from pear_agent.robot.kinematics import Pose


def _pose(pos) -> PartPose:
    return PartPose(np.array(pos, float), np.array([np.pi, 0, 0]), 1.0, Pose(np.zeros(3), np.eye(3)))


def test_step_is_shortened_keeping_direction(panda) -> None:
    arm = panda.parts["arm"]
    t = clip_target("arm", arm, _pose([50, 0, 30]), PartAction(position_cm=[30, 40, 0]))
    step = t.position_cm - np.array([50, 0, 30])
    assert np.isclose(np.linalg.norm(step), arm.limits.max_position_step_cm)
    assert np.allclose(step / np.linalg.norm(step), [0.6, 0.8, 0])
    assert any("shortened" in n for n in t.notes)


def test_workspace_and_rotation_caps(panda) -> None:
    arm = panda.parts["arm"]
    t = clip_target(
        "arm", arm, _pose([50, 0, 3]), PartAction(position_cm=[0, 0, -9], orientation_rad=[0, 0, 2.0])
    )
    assert t.position_cm[2] == arm.limits.workspace_cm["z"][0]
    assert np.isclose(t.orientation_rad[2], arm.limits.max_rotation_step_rad)
    assert len(t.notes) == 2 and t.moves_arm


def test_gripper_only_does_not_move_arm(panda) -> None:
    t = clip_target("arm", panda.parts["arm"], _pose([50, 0, 30]), PartAction(gripper=0.0))
    assert not t.moves_arm and t.gripper == 0.0 and not t.notes
