import numpy as np
import pytest

from pear_agent.kinematics import Kinematics, matrix_to_rpy, rpy_to_matrix
from sim_adapters.mujoco.scene import build_robot_spec, ee_site_name


def test_fk_matches_mujoco_site(panda, panda_kin: Kinematics) -> None:
    import mujoco

    model = build_robot_spec(panda).compile()
    data = mujoco.MjData(model)
    lo, hi = panda_kin.joint_limits("arm")
    qadr = [model.joint(j).qposadr[0] for j in panda.parts["arm"].joints]
    rng = np.random.default_rng(1)
    for _ in range(100):
        q = rng.uniform(lo, hi)
        data.qpos[qadr] = q
        mujoco.mj_kinematics(model, data)
        site = data.site(ee_site_name("arm"))
        pose = panda_kin.fk("arm", q)
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
