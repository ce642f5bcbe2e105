"""`pick_up_object/<name>`: the ten object YAMLs, a new object from one file (no code), the
success check (lifted 10 cm *and* held), the expert on the Panda and on either arm of the YAM."""

from __future__ import annotations

from pathlib import Path

import mujoco
import pytest

from pear_agent.loop.arm_environment import arm_episode
from pear_agent.loop.registry import UnknownNameError, make_backend, resolve, task_names
from pear_agent.loop.task_experts import scripted_policy
from pear_agent.robot.object_config import OBJECT_DIRS_ENV, ObjectConfigError, load_object, object_names
from sim_adapters.mujoco.tasks.objects import BODY

TEN = {"block", "bottle", "can", "cereal_box", "cup", "lemon", "marker", "mug", "sponge", "toy_car"}


def test_ten_objects_load_with_licence_and_a_model_file() -> None:
    assert set(object_names()) >= TEN
    for name in TEN:
        obj = load_object(name)
        assert obj.licence and obj.description.startswith("the ")
        path = obj.mesh_path()
        assert path is None or path.is_file()  # robosuite's meshes ship in its wheel
    assert {f"pick_up_object/{n}" for n in TEN} <= set(task_names())


DUCK = """\
description: the yellow rubber duck
licence: test
shapes:
  - {type: ellipsoid, size_m: [0.035, 0.025, 0.022]}
  - {type: sphere, size_m: [0.016], pos_m: [0.02, 0.0, 0.03]}
mass_kg: 0.03
rgba: [1.0, 0.85, 0.1, 1.0]
grasp: {height_cm: 2.5, across: y}
"""


def test_a_new_object_is_one_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, panda, panda_kin) -> None:
    (tmp_path / "duck.yaml").write_text(DUCK)
    monkeypatch.setenv(OBJECT_DIRS_ENV, str(tmp_path))
    assert "pick_up_object/duck" in task_names()
    backend = make_backend("pick_up_object/duck", panda, render=False)
    try:
        result = arm_episode(backend, panda_kin, scripted_policy("pick_up_object/duck")).run(0)
        assert backend.task.instruction == "Pick up the yellow rubber duck and lift it 10 cm above the table."
    finally:
        backend.close()
    assert result.success, result


def test_bad_object_files_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "both.yaml").write_text(
        DUCK + "mesh: pkg://robosuite/robosuite/models/assets/objects/meshes/can.stl\n"
    )
    (tmp_path / "typo.yaml").write_text(DUCK.replace("mass_kg", "mass"))
    (tmp_path / "nopkg.yaml").write_text(
        "description: the thing\nlicence: x\nmass_kg: 0.1\nmesh: pkg://no-such-dist/a.stl\n"
    )
    monkeypatch.setenv(OBJECT_DIRS_ENV, str(tmp_path))
    with pytest.raises(ObjectConfigError, match="exactly one of mesh"):
        load_object("both")
    with pytest.raises(ObjectConfigError, match=r"typo.yaml: key mass: Extra inputs"):
        load_object("typo")
    with pytest.raises(ObjectConfigError, match=r"key mesh: .*'no-such-dist' is not installed"):
        load_object("nopkg").mesh_path()
    with pytest.raises(UnknownNameError, match=r"unknown object 'unicorn'.*objects are: .*mug"):
        resolve("pick_up_object/unicorn")


def test_success_needs_the_lift_and_the_grip(panda) -> None:
    backend = make_backend("pick_up_object/mug", panda, render=False)
    try:
        backend.reset(0)
        m, d, task = backend.model, backend.data, backend._task
        assert not task.success(m, d) and task.bottom_height_m(m, d) == pytest.approx(0.0, abs=0.005)
        # 12 cm up with no finger on it: not a pick-up
        adr = m.joint(f"{BODY}_free").qposadr[0]
        d.qpos[adr + 2] += 0.12
        mujoco.mj_forward(m, d)
        assert task.bottom_height_m(m, d) == pytest.approx(0.12, abs=0.005)
        assert not task.success(m, d)
    finally:
        backend.close()


@pytest.mark.parametrize("name", ["mug", "bottle", "marker"])
def test_expert_picks_up_on_the_panda(name: str, panda, panda_kin) -> None:
    task = f"pick_up_object/{name}"
    backend = make_backend(task, panda, render=False)
    try:
        wins = [arm_episode(backend, panda_kin, scripted_policy(task)).run(s).success for s in range(2)]
    finally:
        backend.close()
    assert all(wins), wins


def test_either_arm_of_the_yam(yam, yam_kin) -> None:
    """The seed puts the object on one arm's side; the expert lifts it with that arm."""
    task = "pick_up_object/bottle"
    backend = make_backend(task, yam, render=False)
    arms, wins = [], []
    try:
        for seed in range(4):
            obs = backend.reset(seed)
            arms.append(obs.privileged["part"])
            result = arm_episode(backend, yam_kin, scripted_policy(task)).run(seed)
            wins.append(result.success)
            if result.success:
                touching = backend._task.held_by(backend.model, backend.data)
                assert touching[arms[-1]] and not touching[next(a for a in touching if a != arms[-1])]
    finally:
        backend.close()
    assert set(arms) == {"left_arm", "right_arm"}
    assert sum(wins) >= 3, wins


BALL = """\
# one sphere primitive, written from docs/object-reference.md alone
description: the orange ball
licence: pear-agent (Apache-2.0)
shapes:
  - {type: sphere, size_m: [0.025]}
mass_kg: 0.05
rgba: [1.0, 0.5, 0.1, 1.0]
"""


@pytest.mark.parametrize(("robot_name", "seeds", "least"), [("panda", range(10), 9), ("yam", range(4), 4)])
def test_a_ball_is_held_and_done_is_never_claimed_without_the_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request, robot_name: str, seeds: range, least: int
) -> None:
    """A sphere on the Panda and the YAM (the Panda lifted it 4 of 10 and the 6 others
    ended `done` with the ball not held). The expert lifts it, and no episode ends `done` unless
    the task's own check says success."""
    (tmp_path / "ball.yaml").write_text(BALL)
    monkeypatch.setenv(OBJECT_DIRS_ENV, str(tmp_path))
    robot, kin = request.getfixturevalue(robot_name), request.getfixturevalue(f"{robot_name}_kin")
    backend = make_backend("pick_up_object/ball", robot, render=False)
    try:
        results = [arm_episode(backend, kin, scripted_policy("pick_up_object/ball")).run(s) for s in seeds]
    finally:
        backend.close()
    assert all(r.success for r in results if r.end_reason == "done"), results
    assert sum(r.success for r in results) >= least, [(r.end_reason, r.detail) for r in results]
