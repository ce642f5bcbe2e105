"""LIBERO-Pro and LIBERO-Plus tasks through the LIBERO backend: each perturbation reaches the
episode as its benchmark defines it, and a task that cannot run here is refused in one line."""

import numpy as np
import pytest

from sim_adapters.libero import plus
from sim_adapters.libero.backend import CAMERAS, LiberoBackend
from sim_adapters.libero.config import LiberoUnavailableError
from sim_adapters.libero.naming import parse, plus_catalog


def _first(dim, suite="libero_spatial", index=0, where=lambda name: True):
    """The first LIBERO-Plus variant of a task in a dimension whose file name passes `where`."""
    names = plus_catalog()[(suite, index, dim)]
    v = next(i for i, n in enumerate(names) if where(n))
    return f"libero_plus/{dim}/{suite}/{index}/{v}"


def test_pro_task_type_gives_the_new_task_its_own_instruction_and_goal(libero_robot):
    b = LiberoBackend(libero_robot, "libero_pro/task/libero_goal/0", render=False)
    try:
        assert b.task.instruction == "open the bottom drawer of the cabinet"
        assert b.goal == [["open", "wooden_cabinet_1_bottom_region"]]  # LIBERO's task 0: the middle one
        assert b.task.max_turns == 50
        obs = b.reset(3)
        assert obs.privileged["goal_done"] == [False]
    finally:
        b.close()


def test_pro_swap_keeps_the_instruction_and_moves_the_objects():
    from libero.libero import benchmark

    base = benchmark.get_benchmark_dict()["libero_spatial"]()
    swap = benchmark.get_benchmark_dict()["libero_spatial_swap"]()
    assert base.get_task(2).language == swap.get_task(2).language
    a, b = np.asarray(base.get_task_init_states(2)), np.asarray(swap.get_task_init_states(2))
    assert a.shape == b.shape and not np.allclose(a, b)


@pytest.mark.parametrize(
    ("dim", "where", "words"),
    [
        ("light", lambda n: True, "LIBERO-Plus's own assets"),
        ("background", lambda n: True, "LIBERO-Plus's own assets"),
        ("layout", lambda n: "_add_" in n, "LIBERO-Plus's own assets"),
    ],
)
def test_tasks_needing_assets_on_no_package_index_are_refused_in_one_line(libero_robot, dim, where, words):
    name = _first(dim, where=where)
    reason = plus.unavailable_reason(parse(name))
    assert reason is not None and words in reason and "\n" not in reason
    with pytest.raises(LiberoUnavailableError, match=words):
        LiberoBackend(libero_robot, name, render=False)


@pytest.mark.parametrize(
    ("name", "texture"),
    [
        ("libero_plus/background/libero_object/0/0", "CarbonFiber001_COL_6K.png"),
        # a floor and a wall style at once (`..._Combined_Floorbrick_disp_Wallgray_plaster`)
        ("libero_plus/background/libero_object/0/20", "Bricks02_DISP_6K.png"),
    ],
)
def test_a_background_painted_with_a_missing_texture_is_refused_by_its_file(libero_robot, name, texture):
    """Its scene file is LIBERO's, its floor texture only LIBERO-Plus's own: such variants once got
    past the check and ended as an `error` inside MuJoCo's compiler."""
    reason = plus.unavailable_reason(parse(name))
    assert reason is not None and f"textures/{texture}" in reason
    with pytest.raises(LiberoUnavailableError, match=texture.split(".")[0]):
        LiberoBackend(libero_robot, name, render=False)


def test_motion_blur_needs_imagemagick_or_runs():
    name = _first("noise", where=lambda n: 0 < int(n.rsplit("_", 1)[1]) <= 10)
    reason = plus.unavailable_reason(parse(name))
    if plus.magickwand_available():
        assert reason is None
    else:
        assert reason is not None and "MagickWand" in reason


def test_init_states_follow_libero_plus_rules():
    layout = parse(_first("layout", where=lambda n: "_level" in n))
    assert plus.init_states(layout).shape[0] == 1  # its own single state (libero_newobj)
    camera = parse(_first("camera"))
    assert plus.init_states(camera).shape[0] == 50  # LIBERO's states for the task


@pytest.fixture(scope="module")
def reference(libero_robot):
    """LIBERO-Plus's own unperturbed view of libero_spatial/0: the robot variant's camera and a
    clean render to compare perturbed ones with."""
    b = LiberoBackend(libero_robot, _first("noise", where=lambda n: int(n.rsplit("_", 1)[1]) > 10))
    try:
        obs = b.reset(0)
        cam = b.sim.model.camera_name2id(CAMERAS["agentview"])
        clean = np.ascontiguousarray(
            b.sim.render(width=256, height=256, camera_name=CAMERAS["agentview"])[::-1, ::-1]
        )
        yield {
            "cam_pos": b.sim.model.cam_pos[cam].copy(),
            "cam_quat": b.sim.model.cam_quat[cam].copy(),
            "noisy": obs.images["agentview"],
            "clean": clean,
            "wrist": obs.images["wrist"],
            "joints": obs.joints_rad["arm"],
        }
    finally:
        b.close()


def test_noise_corrupts_the_agentview_only_and_replays(reference):
    assert np.abs(reference["noisy"].astype(int) - reference["clean"].astype(int)).mean() > 2.0
    assert reference["wrist"].shape == (256, 256, 3)
    level = 45  # glass blur, seeded: the same image twice
    a = plus.corrupt(reference["clean"], level, seed=7)
    assert np.array_equal(a, plus.corrupt(reference["clean"], level, seed=7))


def test_camera_and_robot_variants_change_what_they_name(libero_robot, reference):
    cam_task = LiberoBackend(libero_robot, _first("camera"), render=False)
    try:
        cam_task.reset(0)
        cam = cam_task.sim.model.camera_name2id(CAMERAS["agentview"])
        moved = np.linalg.norm(cam_task.sim.model.cam_pos[cam] - reference["cam_pos"])  # metres
        turned = 1.0 - abs(float(cam_task.sim.model.cam_quat[cam] @ reference["cam_quat"]))
        assert moved > 0.01 or turned > 1e-4
    finally:
        cam_task.close()
    robot_task = LiberoBackend(libero_robot, _first("robot"), render=False)
    try:
        obs = robot_task.reset(0)
        start = robot_task.env.env.robots[0].robot_model.init_qpos
        np.testing.assert_allclose(obs.joints_rad["arm"], start, atol=0.05)  # its pose, settled
        assert np.abs(obs.joints_rad["arm"] - reference["joints"]).max() > 0.02
        assert "black bowl" in robot_task.task.instruction  # LIBERO's instruction for the task
    finally:
        robot_task.close()
