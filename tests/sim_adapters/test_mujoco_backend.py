import numpy as np
import pytest

from pear_agent.loop.registry import make_backend
from pear_agent.robot.backend import PartCommand


@pytest.fixture
def backend(panda):
    be = make_backend("pick_cube", panda)
    yield be
    be.close()


def test_reset_is_seeded_and_renders_every_camera(backend) -> None:
    a = backend.reset(3).privileged["object"]["position_cm"]
    b = backend.reset(4).privileged["object"]["position_cm"]
    obs = backend.reset(3)
    assert obs.privileged["object"]["position_cm"] == a != b
    assert set(obs.images) == {"front", "wrist"}
    assert obs.images["front"].shape == (256, 256, 3) and obs.images["front"].std() > 5
    assert obs.gripper["arm"] > 0.95 and not obs.success


def test_reachable_target_is_reached_and_still(backend, panda_kin) -> None:
    obs = backend.reset(0)
    q = obs.joints_rad["arm"] + np.array([0.2, 0.1, 0.0, -0.1, 0.0, 0.1, 0.0])
    out = backend.execute({"arm": PartCommand(joints_rad=q)})
    assert out.status == "reached", out.detail
    after = backend.observe(render=False).joints_rad["arm"]
    assert np.max(np.abs(after - q)) < 0.006
    # the speed cap sets the duration: 0.2 rad at <= 1.2 rad/s takes at least 1/6 s
    assert out.duration_s >= 0.2 / panda_kin.robot.parts["arm"].limits.joint_velocity_rad_s


def test_motion_into_the_table_is_blocked_with_joints_named(backend, panda_kin) -> None:
    from pear_agent.robot.kinematics import rpy_to_matrix

    obs = backend.reset(0)
    # joints that put the tool point 8 cm below the table top, away from the cube
    res = panda_kin.ik(
        "arm",
        np.array([0.45, -0.3 * np.sign(obs.privileged["object"]["position_cm"][1]), -0.08]),
        rpy_to_matrix([np.pi, 0, 0]),
        seed_rad=obs.joints_rad["arm"],
    )
    assert res.success
    q = res.joints_rad
    out = backend.execute({"arm": PartCommand(joints_rad=q)})
    assert out.status == "blocked", out
    assert out.blocked_joints and all(j.startswith("panda_joint") for j in out.blocked_joints)
    held = backend.observe(render=False).joints_rad["arm"]
    backend.execute({"arm": PartCommand()})
    assert np.max(np.abs(backend.observe(render=False).joints_rad["arm"] - held)) < 0.02


def test_gripper_closes_and_stop_refuses_motion(backend) -> None:
    backend.reset(0)
    out = backend.execute({"arm": PartCommand(gripper=0.0)})
    assert out.status == "reached"
    assert backend.observe(render=False).gripper["arm"] < 0.05
    backend.stop()
    assert backend.execute({"arm": PartCommand(gripper=1.0)}).status == "stopped"


def test_frames_reach_the_sink_during_motion(backend) -> None:
    frames = []
    obs = backend.reset(0)
    backend.set_frame_sink(frames.append, fps=20)
    backend.execute({"arm": PartCommand(joints_rad=obs.joints_rad["arm"] + 0.3)})
    assert len(frames) >= 5 and frames[0].shape == (256, 256, 3)


def test_advance_moves_time_and_holds_the_arm(backend) -> None:
    obs = backend.reset(0)
    backend.advance(0.5)
    after = backend.observe(render=False)
    assert after.time_s == pytest.approx(obs.time_s + 0.5, abs=0.003)
    assert np.max(np.abs(after.joints_rad["arm"] - obs.joints_rad["arm"])) < 0.01
