"""The Meta-World backend against Meta-World itself: task list, variations, success flag, cameras,
frames, move-until-still and chunks."""

from __future__ import annotations

import numpy as np
import pytest

from pear_agent.robot.backend import PartCommand
from sim_adapters.metaworld import ENV_NAMES, INSTRUCTIONS, MT10, task_names
from sim_adapters.metaworld.backend import MetaWorldBackend, sampled_task, to_metaworld, to_ours
from tests.metaworld.conftest import tool_speeds_cm


def test_task_list_is_metaworlds_own():
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS, MT10_V3

    assert list(ENV_NAMES) == list(ALL_V3_ENVIRONMENTS)
    assert list(MT10) == list(MT10_V3)
    assert len(task_names()) == 50 and set(INSTRUCTIONS) == set(ENV_NAMES)


def test_frames_round_trip_and_axes():
    p = np.array([0.1, 0.6, 0.2])
    assert np.allclose(to_metaworld(to_ours(p)), p)
    # Meta-World's +y (away from the robot) is our +x; its +x (robot's right) is our -y
    assert np.allclose(to_ours([0, 1, 0]), [1, 0, 0]) and np.allclose(to_ours([1, 0, 0]), [0, -1, 0])


def test_seed_picks_metaworlds_sampled_variation(mw_robot):
    import metaworld

    a, b = sampled_task("push-v3", 3), sampled_task("push-v3", 4)
    assert a.data == metaworld.MT1("push-v3", seed=0).train_tasks[3].data
    assert a.data != b.data
    be = MetaWorldBackend(mw_robot, "metaworld/push-v3", render=False)
    try:
        goals = {tuple(be.reset(s).privileged["goal"]["position_cm"]) for s in (3, 4, 3)}
        assert len(goals) == 2  # seed 3 twice gives the same goal, seed 4 another
        with pytest.raises(ValueError, match="negative"):
            be.reset(-1)
    finally:
        be.close()


def test_move_reaches_target_and_state_is_tool_point(mw_robot):
    be = MetaWorldBackend(mw_robot, "metaworld/reach-v3", render=False)
    try:
        obs = be.reset(0)
        start = obs.joints_rad["arm"]
        target = start + np.array([0.05, -0.03, 0.04])
        out = be.execute({"arm": PartCommand(joints_rad=target)})
        assert out.status == "reached", out.detail
        now = be.observe(render=False).joints_rad["arm"]
        assert np.linalg.norm(now - target) < 0.006
        assert np.allclose(to_metaworld(now), be.env.tcp_center, atol=1e-9)
        assert be.steps > 5
    finally:
        be.close()


def test_gripper_closes_and_opens(mw_robot):
    be = MetaWorldBackend(mw_robot, "metaworld/reach-v3", render=False)
    try:
        assert be.reset(0).gripper["arm"] > 0.9
        assert be.execute({"arm": PartCommand(gripper=0.0)}).status == "reached"
        assert be.observe(render=False).gripper["arm"] < 0.3
        assert be.execute({"arm": PartCommand(gripper=1.0)}).status == "reached"
        assert be.observe(render=False).gripper["arm"] > 0.9
    finally:
        be.close()


def test_table_blocks_a_move_down(mw_robot):
    be = MetaWorldBackend(mw_robot, "metaworld/reach-v3", render=False)
    try:
        start = be.reset(0).joints_rad["arm"]
        out = be.execute({"arm": PartCommand(joints_rad=start + np.array([0.0, 0.0, -0.3]))})
        assert out.status == "blocked" and "short of the target" in out.detail
    finally:
        be.close()


def test_chunk_runs_through_waypoints(mw_robot):
    be = MetaWorldBackend(mw_robot, "metaworld/reach-v3", render=False)
    try:
        start = be.reset(0).joints_rad["arm"]
        steps = [start + np.array([0.03 * i, 0.0, 0.0]) for i in (1, 2, 3)]
        out, reached = be.execute_chunk([{"arm": PartCommand(joints_rad=s)} for s in steps])
        assert out.status == "reached" and reached == 3
        assert np.linalg.norm(be.observe(render=False).joints_rad["arm"] - steps[-1]) < 0.006
    finally:
        be.close()


def test_success_is_metaworlds_info_flag(mw_robot):
    """reach-v3 succeeds when the tool point is within 5 cm of the goal: drive it there and compare
    with Meta-World's own `evaluate_state` on the same observation."""
    be = MetaWorldBackend(mw_robot, "metaworld/reach-v3", render=False)
    try:
        obs = be.reset(2)
        assert not obs.success
        goal = np.asarray(obs.privileged["goal"]["position_cm"]) / 100
        for _ in range(6):  # per-turn caps: the expert would split this too
            here = be.observe(render=False).joints_rad["arm"]
            step = goal - here
            step *= min(1.0, 0.1 / max(np.linalg.norm(step), 1e-9))
            be.execute({"arm": PartCommand(joints_rad=here + step)})
        obs = be.observe(render=False)
        _, info = be.env.evaluate_state(be._obs, np.zeros(4))
        assert obs.success and bool(info["success"])
    finally:
        be.close()


@pytest.mark.parametrize("camera", ["scene", "gripper"])
def test_images_right_side_up(mw_robot, camera):
    """Where the puck appears in our image (MuJoCo's segmentation render, turned as our images
    are) matches the pinhole projection of the puck; and a point above it projects higher in the
    image: world up is image up."""
    import mujoco

    from sim_adapters.metaworld.backend import CAMERAS

    be = MetaWorldBackend(mw_robot, "metaworld/pick-place-v3", render=True)
    try:
        obs = be.reset(0)
        img = obs.images[camera]
        cam = mw_robot.cameras[camera]
        assert img.shape == (cam.height, cam.width, 3) and img.dtype == np.uint8 and img.std() > 5
        mw_name, turn = CAMERAS[camera]
        r = mujoco.Renderer(be.env.model, cam.height, cam.width)
        r.enable_segmentation_rendering()
        r.update_scene(be.env.data, camera=mw_name)
        seg = r.render()[..., 0]
        r.close()
        seg = seg[::-1, ::-1] if turn else seg
        m = be.env.model
        body = m.body("obj").id  # the puck: in view of both cameras
        ids = [g for g in range(m.ngeom) if m.geom_bodyid[g] == body]
        point = be.env.data.body("obj").xpos.copy()
        rows, cols = np.nonzero(np.isin(seg, ids))
        assert rows.size > 10, "the body is not in view"
        u, v = be.project(camera, point)
        assert abs(cols.mean() - u) < 0.12 * cam.width and abs(rows.mean() - v) < 0.12 * cam.height
        _, v_up = be.project(camera, point + np.array([0.0, 0.0, 0.05]))
        assert v_up < v - 2  # 5 cm higher in the world is higher in the image
    finally:
        be.close()


def test_a_press_move_keeps_pushing_where_a_plain_move_ends_blocked(mw_robot):
    """The same move 30 cm down into the table: plain, it ends `blocked` after the stall window;
    with `press` it keeps driving for the move's whole time budget and the fingers end deeper in
    contact. Mutation seen to fail: `self._press = False` in `_command` (the press move ended
    `blocked` after the stall window, as the plain one)."""
    from sim_adapters.metaworld.backend import CONTROLLER

    MAX_STEPS = CONTROLLER.max_move_steps

    ends = {}
    for press in (False, True):
        be = MetaWorldBackend(mw_robot, "metaworld/reach-v3", render=False)
        try:
            start = be.reset(0).joints_rad["arm"]
            target = start + np.array([0.0, 0.0, -0.3])
            out = be.execute({"arm": PartCommand(joints_rad=target, press=press)})
            ends[press] = (out, be.steps, be.tcp()[2])
        finally:
            be.close()
    plain, pressed = ends[False], ends[True]
    assert plain[0].status == "blocked" and plain[1] < MAX_STEPS
    assert pressed[0].status == "timeout" and "pressed for" in pressed[0].detail
    assert pressed[1] == MAX_STEPS and pressed[2] < plain[2]


def test_a_press_move_that_arrives_is_reached(mw_robot):
    """In free space a press move is a plain move: reached and still at its target."""
    be = MetaWorldBackend(mw_robot, "metaworld/reach-v3", render=False)
    try:
        start = be.reset(0).joints_rad["arm"]
        target = start + np.array([0.04, 0.0, 0.03])
        out = be.execute({"arm": PartCommand(joints_rad=target, press=True)})
        assert out.status == "reached", out.detail
        assert np.linalg.norm(be.observe(render=False).joints_rad["arm"] - target) < 0.006
    finally:
        be.close()


def test_a_chunk_passes_its_waypoints_without_slowing_down(mw_robot):
    """Two 6 cm steps along one line as a chunk: the hand passes the first waypoint at speed (no
    step between the ends slower than half the fastest), where the same two steps as two moves come
    to rest at it; both end at the last target."""
    be = MetaWorldBackend(mw_robot, "metaworld/reach-v3", render=False)
    try:
        start = be.reset(0).joints_rad["arm"]
        steps = [start + np.array([0.0, 0.06 * i, 0.0]) for i in (1, 2)]
        chunk = tool_speeds_cm(
            be, lambda: be.execute_chunk([{"arm": PartCommand(joints_rad=s)} for s in steps])
        )
        assert np.linalg.norm(be.observe(render=False).joints_rad["arm"] - steps[-1]) < 0.006
        moving = np.nonzero(chunk > 0.5 * chunk.max())[0]
        assert chunk[moving[0] : moving[-1] + 1].min() > 0.5 * chunk.max(), chunk.round(2)
        be.reset(0)
        apart = tool_speeds_cm(be, lambda: [be.execute({"arm": PartCommand(joints_rad=s)}) for s in steps])
        moving = np.nonzero(apart > 0.5 * apart.max())[0]
        assert apart[moving[0] : moving[-1] + 1].min() < 0.1 * apart.max(), apart.round(2)
        assert np.linalg.norm(be.observe(render=False).joints_rad["arm"] - steps[-1]) < 0.006
    finally:
        be.close()
