"""The YAM station in MuJoCo: model, cameras, gripper, and the dual-arm tasks' success checks; the
same tasks on two arms in another layout."""

from pathlib import Path

import mujoco
import numpy as np
import pytest

from pear_agent.loop.registry import make_backend
from pear_agent.robot.backend import PartCommand
from sim_adapters.mujoco.scene import ee_site_name
from sim_adapters.mujoco.tasks.base import set_free_pose
from sim_adapters.mujoco.tasks.bimanual import BAR_HALF_M, BLOCK_HALF_M, BLOCK_NAMES, LINE_X_M


@pytest.fixture(scope="module")
def kin(yam_kin):
    return yam_kin


def test_fk_matches_mujoco_and_cameras_render(yam, kin) -> None:
    backend = make_backend("bimanual_pickup", yam, render=True)
    try:
        obs = backend.reset(0)
        for part in yam.parts:
            site = backend.data.site(ee_site_name(part)).xpos
            fk = kin.fk(part, obs.joints_rad[part]).position_m
            assert np.linalg.norm(site - fk) < 1e-3
            assert obs.gripper[part] == pytest.approx(1.0, abs=0.02)
        assert set(obs.images) == {"top", "left_wrist", "right_wrist"}
        for img in obs.images.values():
            assert img.shape == (256, 256, 3) and img.std() > 5  # lit, not a blank frame
    finally:
        backend.close()


def test_gripper_closes_both_fingers_and_holds_pose(yam, kin) -> None:
    backend = make_backend("align_blocks", yam, render=False)
    try:
        backend.reset(1)
        out = backend.execute({"left_arm": PartCommand(gripper=0.0), "right_arm": PartCommand(gripper=0.0)})
        assert out.status == "reached"
        for io in backend.parts.values():
            q = backend.data.qpos[io.g_qadr]
            assert np.all(q < 0.002) and abs(q[0] - q[1]) < 0.001  # both fingers driven, in step
    finally:
        backend.close()


def test_bimanual_pickup_needs_both_hands_and_level(yam) -> None:
    backend = make_backend("bimanual_pickup", yam, render=False)
    m, d, task = backend.model, backend.data, backend._task
    try:
        backend.reset(0)
        assert not task.success(m, d)
        set_free_pose(m, d, "bar", np.array([0.25, -0.3, BAR_HALF_M[2] + 0.15]), 0.0)
        mujoco.mj_forward(m, d)
        assert not task.success(m, d)  # lifted but held by nobody
        priv = task.privileged(m, d)
        assert priv["object"]["position_cm"][2] == pytest.approx(17.0, abs=0.1)
        left, right = priv["grasp_points_cm"]["left_arm"], priv["grasp_points_cm"]["right_arm"]
        assert left[1] > right[1] and abs(left[1] - right[1]) == pytest.approx(26.0, abs=0.1)
    finally:
        backend.close()


def test_align_blocks_success_from_physics(yam) -> None:
    backend = make_backend("align_blocks", yam, render=False)
    m, d, task = backend.model, backend.data, backend._task
    try:
        backend.reset(0)
        assert not task.success(m, d)
        for i, name in enumerate(BLOCK_NAMES):
            set_free_pose(m, d, name, np.array([LINE_X_M + 0.005, -0.15 - 0.15 * i, BLOCK_HALF_M]), 0.0)
        mujoco.mj_forward(m, d)
        for _ in range(50):
            mujoco.mj_step(m, d)
        assert task.success(m, d)
        set_free_pose(m, d, BLOCK_NAMES[1], np.array([LINE_X_M + 0.03, -0.3, BLOCK_HALF_M]), 0.0)
        mujoco.mj_forward(m, d)
        assert not task.success(m, d)
    finally:
        backend.close()


FACING = Path(__file__).resolve().parents[1] / "robots" / "yam_facing.yaml"


def test_two_arm_tasks_lie_between_arms_facing_each_other() -> None:
    """Two YAMs 80 cm apart, facing each other (YAML only): the bar lies along the line between
    their bases in the middle of the table, each role's grasp point on its own arm's side; the
    blocks' line runs along the same line and success measures the distance across it."""
    from pear_agent.robot.loader import load_robot

    robot = load_robot(FACING)
    backend = make_backend("bimanual_pickup", robot, render=False)
    try:
        for seed in range(3):
            priv = backend.reset(seed).privileged
            bar = np.array(priv["object"]["position_cm"])
            assert abs(bar[0] - 40.0) < 6.0 and abs(bar[1]) < 7.0
            axis = backend.data.body("bar").xmat.reshape(3, 3)[:, 1]
            assert abs(axis[0]) > 0.97  # along x, the line between the bases
            bases = {"arm_a": 0.0, "arm_b": 80.0}
            for role, part in priv["arms"].items():
                mine = abs(priv["grasp_points_cm"][role][0] - bases[part])
                other = min(abs(priv["grasp_points_cm"][role][0] - x) for p, x in bases.items() if p != part)
                assert mine < other
    finally:
        backend.close()
    backend = make_backend("align_blocks", robot, render=False)
    m, d, task = backend.model, backend.data, backend._task
    try:
        priv = backend.reset(0).privileged
        assert np.allclose(np.abs(priv["line"]["direction"]), [1.0, 0.0])
        for i, name in enumerate(BLOCK_NAMES):  # on the line: across it (y) within tolerance
            set_free_pose(m, d, name, np.array([0.3 + 0.1 * i, 0.005, BLOCK_HALF_M]), 0.0)
        mujoco.mj_forward(m, d)
        for _ in range(50):
            mujoco.mj_step(m, d)
        assert task.success(m, d)
        set_free_pose(m, d, BLOCK_NAMES[1], np.array([0.4, 0.03, BLOCK_HALF_M]), 0.0)
        mujoco.mj_forward(m, d)
        assert not task.success(m, d)
    finally:
        backend.close()


ALOHA = Path(__file__).resolve().parents[1] / "robots" / "aloha.yaml"


@pytest.mark.parametrize(
    "robot_path", [FACING, ALOHA, "yam_bimanual"], ids=["facing", "aloha_facing", "side_by_side"]
)
def test_align_blocks_draws_its_line_along_the_scored_line(robot_path) -> None:
    """The painted line is drawn along the line the blocks are scored on, whatever the arms'
    layout: with arms facing each other it was drawn across it (MuJoCo never read the rotation
    set at reset: the geom was compiled in its body's frame)."""
    from pear_agent.robot.loader import load_robot

    backend = make_backend("align_blocks", load_robot(robot_path), render=False)
    try:
        for seed in range(2):
            priv = backend.reset(seed).privileged
            mujoco.mj_forward(backend.model, backend.data)
            long_axis = backend.data.geom("line").xmat.reshape(3, 3)[:2, 1]  # the box is long along y
            assert abs(float(long_axis @ np.array(priv["line"]["direction"]))) > 0.999
            centre = backend.data.geom("line").xpos[:2] * 100
            assert np.allclose(centre, priv["line"]["point_cm"][:2], atol=0.05)
    finally:
        backend.close()
