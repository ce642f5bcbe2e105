"""Adding a MuJoCo task from outside the repository: one class (instruction, paraphrases, needs,
expert), one registration line, named by PEAR_TASK_MODULES; it then runs through `run` and `bench`
like a built-in task, its expert succeeding under physics."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

TASK_MODULE = '''
"""A blue cube to lift 5 cm: a task and its expert, outside the repository."""

import numpy as np

from sim_adapters.mujoco.experts.single_arm import PICK_CUBE
from sim_adapters.mujoco.tasks import MujocoTask, register_task
from sim_adapters.mujoco.tasks.base import add_free_box, body_yaw, set_free_pose, tool_facts
from sim_adapters.mujoco.tasks.layout import arm_places, single_arm_frame
from sim_adapters.mujoco.tasks.pick_place import REF_AREA

HALF_M = 0.02


def lift_blue(state, priv):
    """The expert: the cube picker's plan, said of the blue cube."""
    why, action = PICK_CUBE(state, priv)
    return f"(blue cube) {why}", action


class LiftBlueCube(MujocoTask):
    name = "lift_blue_cube"
    max_turns = 25
    paraphrases = ("Raise the blue block 5 cm.", "Pick the blue cube up by 5 cm.", "Hold it 5 cm up.")
    expert = lift_blue

    def build(self, spec, robot):
        self.robot, self.part = robot, robot.gripper_parts()[0]
        self.z0 = robot.table_or_default().surface_z_cm / 100
        self.tool = tool_facts(robot, self.part)
        add_free_box(spec, "blue_cube", [HALF_M] * 3, [0.15, 0.3, 0.9, 1], mass_kg=0.05)
        self.instruction = "Lift the blue cube at least 5 cm above the table."

    def reset(self, model, data, rng):
        f = single_arm_frame(self.robot, arm_places(model, data, self.robot), self.part, REF_AREA)
        xy = f.sample(rng, (0.45, 0.55), (-0.1, 0.1))
        pos = np.array([xy[0], xy[1], self.z0 + HALF_M])
        set_free_pose(model, data, "blue_cube", pos, f.yaw(rng.uniform(-0.5, 0.5)))
        self.start_z = self.z0 + HALF_M

    def success(self, model, data):
        return bool(data.body("blue_cube").xpos[2] - self.start_z >= 0.05)

    def privileged(self, model, data):
        cube = {
            "position_cm": [round(float(v) * 100, 2) for v in data.body("blue_cube").xpos],
            "yaw_rad": round(body_yaw(data, "blue_cube"), 4),
            "size_cm": 2 * HALF_M * 100,
        }
        return {"task": self.name, "part": self.part, "tool": self.tool, "object": cube,
                "object_start_z_cm": self.start_z * 100, "lift_cm": 5.0}


register_task(LiftBlueCube)
'''


def _cli(site: Path, modules: str, *args: str) -> subprocess.CompletedProcess:
    env = os.environ | {
        "PYTHONPATH": os.pathsep.join([str(site), str(REPO)]),
        "PEAR_TASK_MODULES": modules,
        "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"),
    }
    return subprocess.run(
        [sys.executable, "-m", "pear_agent", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture
def site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    (site / "blue_tasks.py").write_text(TASK_MODULE)
    return site


@pytest.mark.wallclock  # bench spreads its episodes over worker processes
def test_a_task_from_a_module_runs_through_run_and_bench_with_its_expert(site: Path, tmp_path: Path) -> None:
    p = _cli(site, "blue_tasks", "run", "--task", "lift_blue_cube", "--policy", "scripted", "--no-video",
             "--json", "--runs-dir", str(tmp_path / "runs"))  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    summary = json.loads(p.stdout.strip().splitlines()[-1])
    assert summary["task"] == "lift_blue_cube" and summary["success"] is True
    assert 1 < summary["turns"] <= 25
    log = (Path(summary["run_dir"]) / "episode.jsonl").read_text()
    assert "(blue cube)" in log  # the module's own expert answered, not a built-in one

    out = tmp_path / "bench"
    b = _cli(site, "blue_tasks", "bench", "--tasks", "lift_blue_cube", "--seeds", "0-1", "--workers", "2",
             "--no-video", "--quiet", "--out", str(out))  # fmt: skip
    assert b.returncode == 0, b.stderr[-3000:]
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(x["seed"] for x in lines) == [0, 1]  # found in the spawned workers too
    assert all(x["task"] == "lift_blue_cube" and x["success"] for x in lines)

    # its paraphrases are the instruction perturbation's
    p = _cli(site, "blue_tasks", "run", "--task", "lift_blue_cube~instruction", "--no-video", "--json",
             "--runs-dir", str(tmp_path / "runs2"))  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    summary = json.loads(p.stdout.strip().splitlines()[-1])
    assert summary["success"] is True
    header = json.loads((Path(summary["run_dir"]) / "episode.jsonl").read_text().splitlines()[0])
    assert header["instruction"] in {
        "Raise the blue block 5 cm.",
        "Pick the blue cube up by 5 cm.",
        "Hold it 5 cm up.",
    }


def test_a_module_that_fails_to_load_is_one_line_and_the_other_tasks_still_run(site: Path) -> None:
    p = _cli(site, "no_such_tasks,blue_tasks", "tasks", "--family", "mujoco")
    assert p.returncode == 0, p.stderr
    assert "lift_blue_cube" in p.stdout.split() and "pick_cube" in p.stdout.split()
    warnings = [line for line in p.stderr.splitlines() if "no_such_tasks" in line]
    assert len(warnings) == 1 and "ModuleNotFoundError" in warnings[0] and "PEAR_TASK_MODULES" in warnings[0]
    assert "Traceback" not in p.stderr


def test_a_duplicate_task_name_is_refused_with_a_clear_line(site: Path) -> None:
    (site / "dup_tasks.py").write_text(
        TASK_MODULE.replace('name = "lift_blue_cube"', 'name = "pick_cube"').replace(
            "HALF_M = 0.02", "HALF_M = 0.03"
        )
    )
    p = _cli(site, "dup_tasks", "run", "--task", "pick_cube", "--policy", "scripted", "--no-video",
             "--max-turns", "1", "--runs-dir", str(site / "runs"))  # fmt: skip
    assert "Traceback" not in p.stderr
    line = next(x for x in p.stderr.splitlines() if "dup_tasks" in x)
    assert "task name 'pick_cube' of dup_tasks.LiftBlueCube is taken by" in line
    assert "sim_adapters.mujoco.tasks.pick_place.PickCube" in line


def test_registering_in_process_refuses_a_taken_name_and_a_nameless_class() -> None:
    from sim_adapters.mujoco.tasks import MujocoTask, TaskRegistrationError, register_task
    from sim_adapters.mujoco.tasks.pick_place import PickCube

    assert register_task(PickCube) is PickCube  # the same class again: nothing changes

    class Again(PickCube):
        pass

    with pytest.raises(TaskRegistrationError, match=r"task name 'pick_cube' of .*Again is taken by"):
        register_task(Again)

    class Nameless(MujocoTask):
        pass

    with pytest.raises(TaskRegistrationError, match="needs a class attribute `name`"):
        register_task(Nameless)
    with pytest.raises(TaskRegistrationError, match="is not a MujocoTask subclass"):
        register_task(dict)  # type: ignore[arg-type]


def test_every_table_by_task_name_is_derived_from_the_classes() -> None:
    from pear_agent.loop.registry import family_of
    from pear_agent.loop.task_experts import EXPERTS
    from sim_adapters.mujoco import perturb
    from sim_adapters.mujoco.family import pear_entries, task_entries
    from sim_adapters.mujoco.tasks import task_classes

    classes = task_classes()
    for cls in classes:
        for name in cls.names():
            fam = family_of(name)
            assert fam.name == "mujoco" and fam.entry(name).default_robot == cls.default_robot
            assert fam.entry(name).requires == cls.requires
            assert (name in task_entries()) == cls.on_every_robot
            assert perturb.paraphrases_by_task().get(name, ()) == cls.paraphrases
            assert EXPERTS[name] is fam.expert(name) and callable(EXPERTS[name])
    assert list(task_entries())[:6] == ["pick_cube", "place_in_bowl", "push_to_target", "conveyor_pick",
                                 "bimanual_pickup", "align_blocks"]  # fmt: skip
    assert list(pear_entries()) == ["align_with_ruler"]
