import numpy as np
import pytest

from pear_agent.kinematics import Kinematics, matrix_to_rpy, rpy_to_matrix
from pear_agent.robot_config import RobotConfigError, load_robot
from sim_adapters.mujoco.scene import build_robot_spec, ee_site_name


@pytest.mark.parametrize("name", ["panda", "ur5e_2f85"])
def test_fk_matches_mujoco_site(name: str) -> None:
    """Menagerie's UR5e turns its root body 180 deg about z, which Pinocchio 4.1's MJCF parser drops
    (stack-of-tasks/pinocchio#2782): the kinematics put it back, so FK agrees with MuJoCo."""
    import mujoco

    robot = load_robot(name)
    kin = Kinematics(robot)
    model = build_robot_spec(robot).compile()
    data = mujoco.MjData(model)
    lo, hi = kin.joint_limits("arm")
    lo, hi = np.maximum(lo, -np.pi), np.minimum(hi, np.pi)
    qadr = [model.joint(j).qposadr[0] for j in robot.parts["arm"].joints]
    rng = np.random.default_rng(1)
    for _ in range(100):
        q = rng.uniform(lo, hi)
        data.qpos[qadr] = q
        mujoco.mj_kinematics(model, data)
        site = data.site(ee_site_name("arm"))
        pose = kin.fk("arm", q)
        assert np.linalg.norm(pose.position_m - site.xpos) < 1e-3
        assert np.abs(pose.rotation - site.xmat.reshape(3, 3)).max() < 1e-6


def test_rpy_round_trip() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        rpy = rng.uniform([-3, -1.4, -3], [3, 1.4, 3])
        assert np.allclose(matrix_to_rpy(rpy_to_matrix(rpy)), rpy, atol=1e-9)


def test_ik_solves_500_small_delta_targets(panda_kin: Kinematics) -> None:
    lo, hi = panda_kin.joint_limits("arm")
    home = np.array(panda_kin.robot.parts["arm"].home.joints_rad)
    rng = np.random.default_rng(7)
    worst_p, worst_r = 0.0, 0.0
    for _ in range(500):
        q = np.clip(home + rng.uniform(-0.6, 0.6, 7), lo + 0.05, hi - 0.05)
        start = panda_kin.fk("arm", q)
        dp = rng.uniform(-1, 1, 3)
        dp *= rng.uniform(0, 0.02) / np.linalg.norm(dp)
        target_rot = rpy_to_matrix(start.rpy + rng.uniform(-0.1, 0.1, 3))
        res = panda_kin.ik("arm", start.position_m + dp, target_rot, seed_rad=q)
        assert res.success, res.reason
        assert np.all(res.joints_rad >= lo - 1e-9) and np.all(res.joints_rad <= hi + 1e-9)
        got = panda_kin.fk("arm", res.joints_rad)
        worst_p = max(worst_p, float(np.linalg.norm(got.position_m - start.position_m - dp)))
        rel = got.rotation.T @ target_rot
        worst_r = max(worst_r, float(np.arccos(np.clip((np.trace(rel) - 1) / 2, -1, 1))))
    assert worst_p < 1e-3 and worst_r < 0.01


def test_unreachable_target_reports_residual(panda_kin: Kinematics) -> None:
    home = np.array(panda_kin.robot.parts["arm"].home.joints_rad)
    res = panda_kin.ik("arm", np.array([1.5, 0.0, 0.3]), rpy_to_matrix([np.pi, 0, 0]), seed_rad=home)
    assert not res.success
    assert res.position_error_m > 0.3
    assert "cm" in res.reason and "joint limits" in res.reason


def test_unknown_joint_in_description_is_an_error(panda) -> None:
    arm = panda.parts["arm"].model_copy(update={"joints": ["nope", *panda.parts["arm"].joints[1:]]})
    robot = panda.model_copy(update={"parts": {"arm": arm}})
    with pytest.raises(ValueError, match="nope"):
        Kinematics(robot)


ROOT_MJCF = """<mujoco><compiler angle="radian"/><worldbody>
  <body name="base" pos="0.3 -0.2 0.1" quat="0.7071068 0 0 0.7071068">
    <body name="link1" pos="0 0 0.2"><joint name="j1" axis="0 0 1" range="-3 3"/><geom size="0.03"/>
      <body name="link2" pos="0.3 0 0"><joint name="j2" axis="0 1 0" range="-3 3"/><geom size="0.03"/>
      </body></body></body></worldbody></mujoco>"""

ROOT_YAML = """name: two_link
description: a two-joint arm whose root body is moved and turned
frame: {origin: world, x: forward, y: left, z: up}
model: {mjcf: arm.xml}
parts:
  arm:
    description: the arm
    joints: [j1, j2]
    end_effector: {name: tip, parent_body: link2, pos_m: [0.2, 0.0, 0.0]}
    home: {joints_rad: [0.0, 0.0]}
    limits:
      workspace_cm: {x: [-100, 100], y: [-100, 100], z: [-100, 100]}
      max_position_step_cm: 10
      max_rotation_step_rad: 0.5
      joint_velocity_rad_s: 1.0
"""


def test_root_body_pose_is_kept(tmp_path) -> None:
    import mujoco

    (tmp_path / "arm.xml").write_text(ROOT_MJCF)
    (tmp_path / "arm.yaml").write_text(ROOT_YAML)
    kin = Kinematics(load_robot(tmp_path / "arm.yaml"))
    model = mujoco.MjModel.from_xml_path(str(tmp_path / "arm.xml"))
    data = mujoco.MjData(model)
    for q in ([0.0, 0.0], [0.7, -1.1], [-2.0, 0.4]):
        data.qpos[:] = q
        mujoco.mj_kinematics(model, data)
        link2 = data.body("link2")
        tip = link2.xpos + link2.xmat.reshape(3, 3) @ np.array([0.2, 0.0, 0.0])
        pose = kin.fk("arm", np.array(q))
        assert np.linalg.norm(pose.position_m - tip) < 1e-9
        assert np.abs(pose.rotation - link2.xmat.reshape(3, 3)).max() < 1e-9


def test_root_body_turned_by_euler_is_refused(tmp_path) -> None:
    (tmp_path / "arm.xml").write_text(ROOT_MJCF.replace('quat="0.7071068 0 0 0.7071068"', 'euler="0 0 1.57"'))
    (tmp_path / "arm.yaml").write_text(ROOT_YAML)
    with pytest.raises(
        RobotConfigError, match=r"arm.yaml: key model.mjcf .*root body 'base' is oriented by euler"
    ):
        Kinematics(load_robot(tmp_path / "arm.yaml"))
