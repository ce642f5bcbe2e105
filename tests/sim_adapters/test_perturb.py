"""The perturbation axis of the MuJoCo tasks: each dimension changes what it says (and only that),
is drawn from the seed (the same seed, the same perturbation; restored before each reset, so nothing
accumulates), is recorded, and the scripted expert still solves what it can see."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pear_agent.loop.arm_environment import arm_episode
from pear_agent.loop.task_experts import scripted_policy
from pear_agent.records.log import RunWriter
from pear_agent.robot.kinematics import Kinematics
from sim_adapters.mujoco.backend import MujocoBackend
from sim_adapters.mujoco.perturb import DIMENSIONS, paraphrases_by_task, split_task
from sim_adapters.mujoco.tasks import every_robot_tasks

TASKS = every_robot_tasks()
PARAPHRASES = paraphrases_by_task()


def backend(panda, dim: str | None, task: str = "pick_cube", render: bool = False) -> MujocoBackend:
    return MujocoBackend(panda, TASKS[task](), render=render, perturbation=dim)


def test_task_names_carry_the_dimension() -> None:
    assert split_task("pick_cube") == ("pick_cube", None)
    assert split_task("place_in_bowl~layout") == ("place_in_bowl", "layout")
    with pytest.raises(ValueError, match="perturbations are: camera, lighting"):
        split_task("pick_cube~fog")


def test_every_task_has_paraphrases_that_differ_from_its_instruction() -> None:
    for name, cls in TASKS.items():
        task = cls()
        assert len(PARAPHRASES[name]) >= 3
        assert all(p != task.instruction and p.endswith(".") for p in PARAPHRASES[name])


@pytest.mark.parametrize("dim", ["camera", "lighting", "table"])
def test_a_scene_perturbation_changes_its_fields_is_seeded_and_never_accumulates(panda, dim: str) -> None:
    plain, pert = backend(panda, None), backend(panda, dim)
    fields = {
        "camera": ("cam_pos", "cam_quat"),
        "lighting": ("light_diffuse", "light_pos", "light_dir"),
        "table": ("geom_rgba", "geom_matid"),
    }[dim]
    pert.reset(4)
    first = {f: getattr(pert.model, f).copy() for f in fields}
    params = pert.perturbation
    assert params is not None and params["dimension"] == dim
    for f in fields:  # changed against the unperturbed scene
        assert not np.allclose(first[f], getattr(plain.model, f)), f
    pert.reset(5)
    assert pert.perturbation != params  # another seed, another draw
    pert.reset(4)  # restored, then the same draw again: nothing accumulates
    for f in fields:
        np.testing.assert_allclose(getattr(pert.model, f), first[f], atol=1e-12)
    assert pert.perturbation == params
    # the physics is untouched: same placements as the unperturbed scene for the seed
    plain.reset(4)
    np.testing.assert_allclose(pert.data.qpos, plain.data.qpos, atol=1e-9)


def test_sensor_noise_changes_the_images_the_model_is_sent_within_its_sigma(panda) -> None:
    plain, noisy = backend(panda, None, render=True), backend(panda, "noise", render=True)
    try:
        clean = plain.reset(2).images["front"].astype(float)
        seen = noisy.reset(2).images["front"].astype(float)
        sigma = noisy.perturbation["sigma"]
        diff = seen - clean
        assert 6 <= sigma <= 16
        assert abs(float(diff.std()) - sigma) < 0.35 * sigma  # clipping at 0/255 narrows it a little
        assert abs(float(diff.mean())) < 2.0
    finally:
        plain.close()
        noisy.close()


def test_the_instruction_is_reworded_and_the_layout_mirrored(panda) -> None:
    b = backend(panda, "instruction", task="place_in_bowl")
    b.reset(7)
    assert b.task.instruction in PARAPHRASES["place_in_bowl"]
    assert b.perturbation["instruction"] == b.task.instruction

    plain, mirrored = backend(panda, None), backend(panda, "layout")
    plain.reset(3)
    mirrored.reset(3)
    frame = plain._task.frame(plain.model, plain.data)
    for body in ("cube",):
        a = plain.data.body(body).xpos[:2]
        b_xy = mirrored.data.body(body).xpos[:2]
        (ua, va), (ub, vb) = frame.uv(a), frame.uv(b_xy)
        assert ub == pytest.approx(ua, abs=0.005) and vb == pytest.approx(-va, abs=0.005)
        assert abs(va) > 0.005  # a seed whose cube is off the centre line: the mirror moves it


@pytest.mark.parametrize("task", ["pick_cube", "place_in_bowl", "push_to_target", "conveyor_pick"])
def test_the_expert_solves_the_mirrored_layout(panda, panda_kin, task: str) -> None:
    """The layout changes the plan; the privileged expert re-plans from the facts."""
    b = backend(panda, "layout", task=task)
    try:
        wins = sum(arm_episode(b, panda_kin, scripted_policy(task, seed=s)).run(s).success for s in range(5))
    finally:
        b.close()
    assert wins >= 4, f"{task}: {wins}/5"


def test_the_perturbation_is_recorded_in_the_header_and_summary(panda, panda_kin, tmp_path) -> None:
    b = backend(panda, "lighting")
    try:
        res = arm_episode(
            b, panda_kin, scripted_policy("pick_cube", seed=1), writer=RunWriter(tmp_path, None)
        ).run(1)
    finally:
        b.close()
    header = json.loads((tmp_path / "episode.jsonl").read_text().splitlines()[0])
    assert header["perturbation"]["dimension"] == "lighting" and header["perturbation"] == b.perturbation
    assert res.success


def test_every_dimension_is_known_to_the_backend(panda) -> None:
    for dim in DIMENSIONS:
        backend(panda, dim).reset(0)
    with pytest.raises(ValueError, match="unknown perturbation 'fog'"):
        backend(panda, "fog")


def test_the_bimanual_layout_mirror_keeps_both_tasks_solvable(yam) -> None:
    kin = Kinematics(yam)
    for task in ("bimanual_pickup", "align_blocks"):
        b = MujocoBackend(yam, TASKS[task](), render=False, perturbation="layout")
        try:
            wins = sum(arm_episode(b, kin, scripted_policy(task, seed=s)).run(s).success for s in range(3))
        finally:
            b.close()
        assert wins >= 2, f"{task}: {wins}/3"


def test_the_physics_perturbation_jitters_the_loose_objects_only_seeded_and_recorded(panda) -> None:
    """`physics`: each loose object's friction and mass within +-5% and its start
    moved by at most 3 mm, drawn from the seed, recorded, restored before the next reset; the
    robot and the fixed scene (the bowl) keep theirs."""
    import mujoco

    plain, pert = backend(panda, None, "place_in_bowl"), backend(panda, "physics", "place_in_bowl")
    try:
        plain.reset(3)
        pert.reset(3)
        drawn = pert.perturbation
        assert drawn is not None and set(drawn["objects"]) == {"cube"}
        cube = drawn["objects"]["cube"]
        assert 0.95 <= cube["friction_scale"] <= 1.05 and 0.95 <= cube["mass_scale"] <= 1.05
        assert cube["friction_scale"] != 1.0 and max(abs(v) for v in cube["shift_cm"]) <= 0.3
        body = pert.model.body("cube").id
        assert pert.model.body_mass[body] == pytest.approx(plain.model.body_mass[body] * cube["mass_scale"])
        geoms = pert.model.geom_bodyid == body
        np.testing.assert_allclose(
            pert.model.geom_friction[geoms], plain.model.geom_friction[geoms] * cube["friction_scale"]
        )
        others = ~geoms
        np.testing.assert_array_equal(pert.model.geom_friction[others], plain.model.geom_friction[others])
        moved = pert.data.body("cube").xpos[:2] - plain.data.body("cube").xpos[:2]
        np.testing.assert_allclose(moved * 100, cube["shift_cm"], atol=0.05)  # settled in place
        assert pert.data.body("bowl").xpos == pytest.approx(plain.data.body("bowl").xpos)
        pert.reset(4)
        assert pert.perturbation != drawn
        pert.reset(3)  # restored first: the same draw again, not compounded
        assert pert.perturbation == drawn
        assert pert.model.body_mass[body] == pytest.approx(plain.model.body_mass[body] * cube["mass_scale"])
        assert mujoco.mj_name2id(pert.model, mujoco.mjtObj.mjOBJ_BODY, "cube") == body
    finally:
        plain.close()
        pert.close()
