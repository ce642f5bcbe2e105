"""`align_with_ruler`: the scenes start out of line, the success check asks for the line *and* the
ruler released *and* the arms home, and the expert solves it with either YAM arm."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from pear_agent.loop.arm_environment import arm_episode
from pear_agent.loop.registry import make_backend
from pear_agent.loop.task_experts import scripted_policy
from sim_adapters.mujoco.tasks.ruler import BLOCK_NAMES, LINE_TOL_M, SCENES, line_deviation_m

TASK = "align_with_ruler"


def test_line_deviation() -> None:
    assert line_deviation_m(np.array([[0, 0], [0.1, 0.1], [0.2, 0.2]])) == pytest.approx(0.0, abs=1e-9)
    # the middle point 3 cm off the line through the others: 2 cm from the best-fit line
    assert line_deviation_m(np.array([[0, 0], [0.1, 0.03], [0.2, 0]])) == pytest.approx(0.02, abs=1e-3)


def test_every_scene_starts_out_of_line_on_either_arm(yam) -> None:
    backend = make_backend(TASK, yam, render=False)
    try:
        arms = set()
        for seed in range(2 * len(SCENES)):
            obs = backend.reset(seed)
            task = backend._task
            assert task.scene == seed % len(SCENES)
            arms.add(obs.privileged["part"])
            assert task.deviation_m(backend.data) > 2 * LINE_TOL_M
            assert (
                not obs.success
                and task.arms_home(backend.data)
                and task.released(backend.model, backend.data)
            )
        assert arms == {"left_arm", "right_arm"}
    finally:
        backend.close()


def test_success_refuses_a_line_while_the_ruler_is_held_or_an_arm_is_away(yam, yam_kin) -> None:
    """Turn by turn along the expert's episode: the blocks are in line while the ruler is still
    held, then after it is let go but before the arm is home; neither state counts."""
    backend = make_backend(TASK, yam, render=False)
    seen: dict[str, bool] = {}

    def check(_turn) -> None:
        m, d, task = backend.model, backend.data, backend._task
        if not task.aligned(m, d):
            return
        if not task.released(m, d):
            seen["held"] = True
            assert not task.success(m, d)
        elif not task.arms_home(d):
            seen["away"] = True
            assert not task.success(m, d)

    try:
        for seed in range(3):
            assert arm_episode(backend, yam_kin, scripted_policy(TASK), on_turn=check).run(seed).success
        assert seen == {"held": True, "away": True}
        # and a finished line with an arm moved off home is refused too
        m, d, task = backend.model, backend.data, backend._task
        assert task.success(m, d)
        part = yam.parts["left_arm"]
        d.qpos[m.joint(part.joints[0]).qposadr[0]] += 0.3
        mujoco.mj_forward(m, d)
        assert task.aligned(m, d) and not task.arms_home(d) and not task.success(m, d)
    finally:
        backend.close()


@pytest.mark.parametrize("seed", [2, 7])  # scene 2 on the left arm, then on the right arm
def test_expert_aligns_the_blocks_with_the_ruler(seed: int, yam, yam_kin) -> None:
    backend = make_backend(TASK, yam, render=False)
    try:
        result = arm_episode(backend, yam_kin, scripted_policy(TASK)).run(seed)
        points = np.array([backend.data.body(n).xpos[:2] for n in BLOCK_NAMES])
    finally:
        backend.close()
    assert result.success, result
    assert line_deviation_m(points) <= LINE_TOL_M
