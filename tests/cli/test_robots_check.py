"""`pear-agent robots [--check] [FILE]` against real MuJoCo and Pinocchio: every malformed robot
YAML gives one line naming the file and the key, exit code 2 and no traceback; `--check` flags
cameras that cannot help the model and a home pose outside the joint limits. Each case here is a
row of the README's table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from pear_agent.robot.config import ROBOTS_DIR

PANDA = ROBOTS_DIR / "panda.yaml"


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    return subprocess.run(
        [sys.executable, "-m", "pear_agent", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )


def _variant(tmp_path: Path, mutate, name: str = "variant.yaml") -> Path:
    raw = yaml.safe_load(PANDA.read_text())
    mutate(raw)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _arm(raw: dict) -> dict:
    return raw["parts"]["arm"]


def _set_quat(raw: dict, cam: str, quat: list[float]) -> None:
    sim = raw["cameras"][cam]["sim"]
    sim.pop("look_at_m", None)
    sim["quat_wxyz"] = quat


# (case, mutation of panda.yaml, the key the one-line error must name)
MALFORMED = [
    (
        "missing gripper joint",
        lambda r: _arm(r)["gripper"].update(joints=["no_such_finger"]),
        "parts.arm.gripper.joints",
    ),
    (
        "missing end-effector body",
        lambda r: _arm(r)["end_effector"].update(parent_body="no_link"),
        "parts.arm.end_effector.parent_body",
    ),
    (
        "open position = closed position",
        lambda r: _arm(r)["gripper"].update(open_joint_pos=0.0),
        "parts.arm.gripper",
    ),
    ("ctrl open = ctrl closed", lambda r: _arm(r)["gripper"].update(ctrl_open=0.0), "parts.arm.gripper"),
    (
        "misspelled gripper actuator",
        lambda r: _arm(r)["gripper"].update(actuator="hand_panda_hand_actuatr"),
        "parts.arm.gripper.actuator",
    ),
    (
        "model path climbing out with ../",
        lambda r: r["model"].update(mjcf="../../../../../../etc/passwd"),
        "model.mjcf",
    ),
    ("absolute model path", lambda r: r["model"].update(mjcf="/etc/passwd"), "model.mjcf"),
    (
        "pkg:// path climbing out",
        lambda r: r["model"].update(mjcf="pkg://dm-robotics-panda/../../../etc/passwd"),
        "model.mjcf",
    ),
    (
        "attachment path climbing out",
        lambda r: r["model"]["attachments"][0].update(file="../../etc/passwd"),
        "model.attachments.0.file",
    ),
    (
        "attachment parent body missing",
        lambda r: r["model"]["attachments"][0].update(parent_body="no_link"),
        "model.attachments.0.parent_body",
    ),
    (
        "attachment body missing",
        lambda r: r["model"]["attachments"][0].update(body="no_body"),
        "model.attachments.0.body",
    ),
    (
        "MuJoCo refuses the file (repeated mesh name)",
        lambda r: r["model"]["attachments"][0].update(
            file="pkg://robosuite/robosuite/models/assets/grippers/robotiq_gripper_85.xml",
            body="robotiq_85_adapter_link",
        ),
        "model.attachments.0.file",
    ),
    (
        "camera looking at its own position",
        lambda r: r["cameras"]["front"]["sim"].update(look_at_m=[1.0, 0.0, 0.45]),
        "cameras.front.sim",
    ),
    (
        "negative field of view",
        lambda r: r["cameras"]["front"]["sim"].update(fovy_deg=-55),
        "cameras.front.sim.fovy_deg",
    ),
    (
        "camera mount body missing",
        lambda r: r["cameras"]["wrist"]["sim"].update(mount_body="no_body"),
        "cameras.wrist.sim.mount_body",
    ),
    (
        "arm joint missing",
        lambda r: _arm(r).update(joints=[*_arm(r)["joints"][:6], "no_joint"]),
        "parts.arm.joints",
    ),
    (
        "home pose outside the joint limits",
        lambda r: _arm(r)["home"].update(joints_rad=[0.0, -0.785, 0.0, 0.5, 0.0, 1.571, 0.785]),
        "parts.arm.home.joints_rad",
    ),
    ("home pose of the wrong length", lambda r: _arm(r)["home"].update(joints_rad=[0.0]), "has 1 values"),
    (
        "unknown key (the keys allowed there listed)",
        lambda r: _arm(r).update(gripr={}),
        "key parts.arm.gripr: unknown key 'gripr' in parts.arm; allowed: kind, description, joints,",
    ),
    (
        "wrong type",
        lambda r: _arm(r)["limits"].update(max_position_step_cm="far"),
        "parts.arm.limits.max_position_step_cm",
    ),
    (
        "task area upside down",
        lambda r: r["table"].update(task_area_cm={"x": [60, 40], "y": [-20, 20]}),
        "table.task_area_cm",
    ),
]


@pytest.mark.parametrize(("case", "mutate", "key"), MALFORMED, ids=[c[0] for c in MALFORMED])
def test_malformed_yaml_is_one_line_naming_file_and_key(tmp_path: Path, case: str, mutate, key: str) -> None:
    path = _variant(tmp_path, mutate)
    p = _cli("robots", "--check", str(path))
    assert p.returncode == 2, (case, p.stdout, p.stderr)
    assert "Traceback" not in p.stdout + p.stderr
    lines = p.stdout.strip().splitlines()
    assert len(lines) == 1 and "ERROR" in lines[0], p.stdout
    assert str(path) in lines[0] and key in lines[0], lines[0]


TEXT_CASES = [
    ("duplicate part key", "parts:\n  arm:", "parts:\n  arm: {}\n  arm:", "duplicate key 'arm'"),
    (
        "duplicate camera key",
        "cameras:\n  front:",
        "cameras:\n  wrist: {}\n  front:",
        "duplicate key 'wrist'",
    ),
    ("not YAML", "name: panda", "name: [panda", "not valid YAML"),
    ("not a mapping", None, "- just\n- a list\n", "expected a mapping"),
]


@pytest.mark.parametrize(("case", "old", "new", "what"), TEXT_CASES, ids=[c[0] for c in TEXT_CASES])
def test_malformed_text_is_one_line(tmp_path: Path, case: str, old: str | None, new: str, what: str) -> None:
    text = PANDA.read_text()
    text = new if old is None else text.replace(old, new, 1)
    path = tmp_path / "variant.yaml"
    path.write_text(text)
    p = _cli("robots", "--check", str(path))
    assert p.returncode == 2 and "Traceback" not in p.stdout + p.stderr, p.stdout + p.stderr
    lines = p.stdout.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and what in lines[0], p.stdout


def _upside_down(raw: dict) -> None:
    from sim_adapters.mujoco.scene import look_at_quat

    sim = raw["cameras"]["front"]["sim"]
    q = look_at_quat(np.array(sim["pos_m"]), np.array(sim["look_at_m"]))
    w, x, y, z = q  # q * (180 deg about the camera's own axis): the image turned upside down
    _set_quat(raw, "front", [float(-z), float(y), float(-x), float(w)])


CHECK_FLAGS = [
    (
        "black camera (inside the table)",
        lambda r: r["cameras"]["front"]["sim"].update(pos_m=[0.45, 0.0, -0.01], look_at_m=[0.45, 0.0, -1.0]),
        "camera front",
    ),
    ("upside-down camera", _upside_down, "upside down"),
    (
        "camera looking away from the table",
        lambda r: r["cameras"]["front"]["sim"].update(look_at_m=[2.0, 0.0, 1.0]),
        "sees no part of the task area",
    ),
]


@pytest.mark.parametrize(("case", "mutate", "what"), CHECK_FLAGS, ids=[c[0] for c in CHECK_FLAGS])
def test_check_flags_cameras_the_model_cannot_use(tmp_path: Path, case: str, mutate, what: str) -> None:
    path = _variant(tmp_path, mutate)
    p = _cli("robots", "--check", str(path))
    assert p.returncode == 1 and "Traceback" not in p.stdout + p.stderr, p.stdout + p.stderr
    line = p.stdout.strip()
    assert str(path) in line and "FAIL" in line and what in line, line


@pytest.mark.parametrize("path", [PANDA, ROBOTS_DIR / "ur5e_2f85.yaml"], ids=["panda", "ur5e_2f85"])
def test_check_passes_the_shipped_panda_and_sees_the_fingertips(path: Path) -> None:
    p = _cli("robots", "--check", str(path))
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"{path}  ok" in p.stdout
    assert "camera wrist: gripper visible" in p.stdout
    assert "gripper closes" in p.stdout
    assert "arm: grasp-and-carry ok" in p.stdout


def test_listing_prints_one_line_per_file_with_its_path(tmp_path: Path) -> None:
    twin = _variant(tmp_path, lambda r: None, "twin.yaml")  # same `name: panda`, another file
    p = _cli("robots", str(PANDA), str(twin))
    assert p.returncode == 0, p.stderr
    assert [ln.split()[0] for ln in p.stdout.strip().splitlines()] == [str(PANDA), str(twin)]


def test_yaml_in_a_tmp_folder_runs_pick_cube_through_the_cli(tmp_path: Path) -> None:
    """A description outside robots/, with another name and another part name: no code change."""

    def mutate(raw: dict) -> None:
        raw["name"] = "my_arm"
        raw["parts"] = {"manipulator": raw["parts"]["arm"]}
        raw.pop("table")  # the task area derives from the workspace box

    path = _variant(tmp_path, mutate, "my_arm.yaml")
    p = _cli(
        "run",
        "--robot",
        str(path),
        "--task",
        "pick_cube",
        "--json",
        "--no-video",
        "--runs-dir",
        str(tmp_path / "runs"),
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert json.loads(p.stdout.strip().splitlines()[-1])["success"] is True


def test_task_refused_only_for_what_the_robot_lacks(tmp_path: Path) -> None:
    no_gripper = _variant(tmp_path, lambda r: _arm(r).pop("gripper"), "no_gripper.yaml")
    p = _cli(
        "run", "--robot", str(no_gripper), "--task", "pick_cube", "--no-video", "--runs-dir", str(tmp_path)
    )
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "needs one arm part with a gripper" in p.stderr and "arm (arm without gripper)" in p.stderr
    p = _cli(
        "run", "--robot", str(PANDA), "--task", "bimanual_pickup", "--no-video", "--runs-dir", str(tmp_path)
    )
    assert p.returncode == 2 and "needs 2 arm parts with grippers" in p.stderr


# -- makers' files as they ship: each failure a new user met, now working or one keyed line

KINOVA3 = Path(__file__).resolve().parents[1] / "robots" / "kinova3_continuous.yaml"
PANDA_DIR = "pkg://dm-robotics-panda/dm_robotics/panda/assets/panda"


def test_continuous_joints_check_ok() -> None:
    """robosuite's Kinova Gen3, unmodified: joints 1, 3, 5, 7 have no range. They were read as
    limits [0, 0] (`Actuator1 = -0.0686 not in [0, 0]`); now they turn without limit."""
    p = _cli("robots", "--check", str(KINOVA3))
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"{KINOVA3}  ok" in p.stdout and "home, FK, IK ok" in p.stdout


def _stand_robot(tmp_path: Path, stand_xml: str, mutate=lambda r: None) -> Path:
    """The shipped Panda YAML on a base file of our own (`stand.xml`, what a maker's file might
    hold besides the arm): the unmodified panda.xml and hand attached to its `stand` body."""
    (tmp_path / "stand.xml").write_text(stand_xml)

    def change(raw: dict) -> None:
        hand = raw["model"]["attachments"][0]
        raw["model"] = {
            "mjcf": "stand.xml",
            "attachments": [
                {"file": f"{PANDA_DIR}/panda.xml", "body": "panda_link0", "parent_body": "stand"},
                {**hand, "file": f"{PANDA_DIR}/panda_hand.xml"},
            ],
        }
        mutate(raw)

    return _variant(tmp_path, change, "stand_panda.yaml")


STAND = """<mujoco model="stand">
  <!-- a maker's compiler settings: without inertia from geoms, a task's cube would have no mass -->
  <compiler angle="degree" inertiafromgeom="false"/>
  <worldbody>
    <light name="key" pos="0 0 3"/>
    <camera name="front" pos="2 0 1" euler="0 60 90"/>
    <geom name="table" type="box" size="0.2 0.2 0.01" pos="0 0 -0.6" contype="0" conaffinity="0"/>
    <geom name="floor" type="plane" size="2 2 0.1" pos="0 0 -0.8" contype="0" conaffinity="0"/>
    <body name="stand"/>
  </worldbody>
  {actuators}
</mujoco>"""


def _run(path: Path, tmp_path: Path, task: str = "pick_cube") -> subprocess.CompletedProcess:
    return _cli(
        "run",
        "--robot",
        str(path),
        "--task",
        task,
        "--json",
        "--no-video",
        "--runs-dir",
        str(tmp_path / "runs"),
    )


def test_model_names_like_the_runtimes_and_its_compiler_stay_apart(tmp_path: Path) -> None:
    """A model with a geom `table`, a `floor`, a light `key` and a camera `front` (the names the
    runtime gave its own table, floor, light and camera: `repeated name 'table' in geom`), and a
    `<compiler inertiafromgeom="false">` (which reached the task's cube: `mass and inertia of
    moving bodies must be larger than mjMINVAL Element name 'cube'`): pick_cube now runs."""
    path = _stand_robot(tmp_path, STAND.format(actuators=""))
    p = _run(path, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert json.loads(p.stdout.strip().splitlines()[-1])["success"] is True


def test_model_name_a_task_uses_is_one_keyed_line(tmp_path: Path) -> None:
    stand = STAND.format(actuators="").replace(
        '<body name="stand"/>', '<body name="stand"/><body name="cube"/>'
    )
    path = _stand_robot(tmp_path, stand)
    p = _run(path, tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    line = p.stderr.strip()
    assert "\n" not in line and str(path) in line
    assert "key model.mjcf: the model has a body named 'cube', and the task 'pick_cube' adds one" in line


UNNAMED_SERVOS = "<actuator>{}</actuator>".format(
    "".join(
        f'<position joint="panda_joint{i}" kp="{kp}" kv="{kp / 10:g}"/>'
        for i, kp in enumerate([4500, 4500, 3500, 3500, 2000, 2000, 2000], 1)
    )
)


def test_unnamed_actuators_by_index_joint_or_found_by_joint(tmp_path: Path) -> None:
    """A file whose arm servos have no names: the YAML names them by index or by joint (or says
    nothing and the sim finds each joint's servo); `''` could not be referred to before."""
    refs = [0, 1, {"joint": "panda_joint3"}, 3, {"joint": "panda_joint5"}, 5, 6]
    by_ref = _stand_robot(
        tmp_path, STAND.format(actuators=UNNAMED_SERVOS), lambda r: _arm(r)["sim"].update(actuators=refs)
    )
    p = _run(by_ref, tmp_path)
    assert p.returncode == 0 and json.loads(p.stdout.strip().splitlines()[-1])["success"] is True, p.stderr
    found = _stand_robot(tmp_path, STAND.format(actuators=UNNAMED_SERVOS), lambda r: _arm(r).pop("sim"))
    p = _run(found, tmp_path)
    assert p.returncode == 0 and json.loads(p.stdout.strip().splitlines()[-1])["success"] is True, p.stderr


def test_unnamed_servo_the_yaml_would_double_is_one_keyed_line(tmp_path: Path) -> None:
    path = _stand_robot(tmp_path, STAND.format(actuators=UNNAMED_SERVOS))  # sim.kp/kv: servos added
    p = _cli("robots", "--check", str(path))
    assert p.returncode == 2 and "Traceback" not in p.stdout + p.stderr
    line = p.stdout.strip()
    assert "\n" not in line and str(path) in line
    assert "key parts.arm.sim.actuators: the model's actuator 'pear/actuator0' already servos joint " in line
    assert "by name, index or {joint: ...}" in line


@pytest.mark.parametrize(
    ("ref", "what"),
    [
        (9, "actuator index 9 is out of range (the model has 8 actuators)"),
        ({"joint": "panda_joint9"}, "no actuator of the model drives joint 'panda_joint9'"),
        ({"joint": "panda_joint1", "tendon": "t"}, "give exactly one of joint or tendon"),
    ],
    ids=["index out of range", "no actuator on the joint", "joint and tendon"],
)
def test_bad_actuator_reference_is_one_keyed_line(tmp_path: Path, ref, what: str) -> None:
    refs = [ref, 1, 2, 3, 4, 5, 6]
    path = _stand_robot(
        tmp_path, STAND.format(actuators=UNNAMED_SERVOS), lambda r: _arm(r)["sim"].update(actuators=refs)
    )
    p = _cli("robots", "--check", str(path))
    assert p.returncode == 2 and "Traceback" not in p.stdout + p.stderr
    line = p.stdout.strip()
    assert "\n" not in line and "parts.arm.sim.actuators.0" in line and what in line, line


def test_includes_and_two_top_level_arms_list_ok(tmp_path: Path) -> None:
    """A dual-arm file with `<include>`s and two top-level arm bodies: the kinematics read all of
    what MuJoCo compiles (they read the first top-level body only: `joints [...] are not in the
    model file`)."""
    from tests.robot.test_kinematics import (
        INCLUDE_DEFAULTS,
        INCLUDE_LEFT,
        INCLUDE_MAIN,
        TWO_ARMS_PART,
        TWO_ARMS_YAML,
    )

    (tmp_path / "two_arms.xml").write_text(INCLUDE_MAIN)
    (tmp_path / "defaults.xml").write_text(INCLUDE_DEFAULTS)
    (tmp_path / "arm_left.xml").write_text(INCLUDE_LEFT)
    path = tmp_path / "two_arms.yaml"
    path.write_text(TWO_ARMS_YAML + TWO_ARMS_PART.format(side="left") + TWO_ARMS_PART.format(side="right"))
    p = _cli("robots", str(path))
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"{path}  ok  two_arms: parts: left (2 joints), right (2 joints)" in p.stdout


ROBOTIQ140 = Path(__file__).resolve().parents[1] / "robots" / "ur5e_robotiq140.yaml"


def _weak_grip(tmp_path: Path) -> Path:
    return _variant(tmp_path, lambda r: _arm(r)["gripper"].update(sim={"force_limit": 2.0}), "weak.yaml")


def test_check_fails_a_gripper_that_cannot_hold_the_cube(tmp_path: Path) -> None:
    """A gripper that closes and opens but cannot carry what the tasks carry used to pass
    (a UR5e with another hand: ok, then place_in_bowl 1/5). The grasp-and-carry step closes on
    the tasks' 4 cm cube, lifts it and carries it sideways: robosuite's 2F-140 lets it slip out,
    and a Panda hand limited to 2 N cannot lift it."""
    weak = _weak_grip(tmp_path)
    p = _cli("robots", "--check", str(ROBOTIQ140), str(weak))
    assert p.returncode == 1 and "Traceback" not in p.stdout + p.stderr, p.stdout + p.stderr
    lines = p.stdout.strip().splitlines()
    assert len(lines) == 2
    for path, line in zip((ROBOTIQ140, weak), lines, strict=True):
        assert (
            line.startswith(f"{path}  FAIL") and "arm: grasp-and-carry: closed on the 4 cm cube but" in line
        )
    # the Panda hand at 2 N: too weak, and the message says which keys make it hold
    assert "a gripper too weak or slippery" in lines[1] and "gripper.sim.friction" in lines[1], lines[1]


def test_check_tasks_reports_the_expert_success_per_task(tmp_path: Path) -> None:
    p = _cli("robots", "--check", "--tasks", "--seeds", "1", str(PANDA), str(_weak_grip(tmp_path)))
    assert p.returncode == 1, p.stdout + p.stderr
    ok, weak = p.stdout.strip().splitlines()
    assert (
        ok.startswith(f"{PANDA}  ok") and "tasks: pick_cube 1/1, place_in_bowl 1/1, push_to_target 1/1" in ok
    )
    assert "FAIL" in weak and "task pick_cube: its expert succeeds 0/1 (want >= 80%)" in weak
    assert "task push_to_target" not in weak  # pushing needs no grip


def test_suggest_home_prints_joints_that_reach_the_pose() -> None:
    from pear_agent.robot.kinematics import Kinematics
    from pear_agent.robot.loader import load_robot

    p = _cli("robots", str(PANDA), "--suggest-home", "45", "5", "25")
    assert p.returncode == 0, p.stdout + p.stderr
    line = p.stdout.strip()
    assert line.startswith("parts.arm.home.joints_rad: [") and "# tool at [45.0, 5.0, 25.0] cm" in line
    joints = json.loads(line.split(": ", 1)[1].split("  #")[0])
    pose = Kinematics(load_robot(PANDA)).fk("arm", np.array(joints))
    assert np.linalg.norm(pose.position_m * 100 - [45.0, 5.0, 25.0]) < 0.1
    assert abs(abs(pose.rpy[0]) - np.pi) < 0.01 and abs(pose.rpy[1]) < 0.01  # pointing down
    p = _cli("robots", str(PANDA), "--suggest-home", "150", "0", "25")
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert "parts.arm.home: tool at [150.0, 0.0, 25.0] cm" in p.stdout and "cm and" in p.stdout


def test_home_as_a_tool_pose_is_solved_when_loaded(tmp_path: Path) -> None:
    from pear_agent.robot.config import RobotConfigError
    from pear_agent.robot.kinematics import Kinematics
    from pear_agent.robot.loader import load_robot

    pose = {"position_cm": [42.0, -5.0, 22.0], "orientation_rad": [3.14159, 0.0, 0.3]}
    path = _variant(tmp_path, lambda r: _arm(r).update(home={"tool_pose": pose, "gripper": 1.0}))
    robot = load_robot(path)
    joints = robot.parts["arm"].home.joints_rad
    assert joints is not None and len(joints) == 7
    got = Kinematics(robot).fk("arm", np.array(joints))
    assert np.linalg.norm(got.position_m * 100 - pose["position_cm"]) < 0.1
    assert abs(got.rpy[2] - 0.3) < 0.01
    far = _variant(
        tmp_path, lambda r: _arm(r).update(home={"tool_pose": {"position_cm": [150, 0, 20]}}), "far.yaml"
    )
    with pytest.raises(
        RobotConfigError, match=r"far.yaml: key parts.arm.home.tool_pose: no joint configuration"
    ):
        load_robot(far)
    both = _variant(
        tmp_path, lambda r: _arm(r)["home"].update(tool_pose={"position_cm": [45, 0, 20]}), "both.yaml"
    )
    p = _cli("robots", str(both))
    assert (
        p.returncode == 2
        and "key parts.arm.home: Value error, give exactly one of joints_rad or tool_pose" in p.stdout
    )


def test_joint_friction_the_servos_cannot_overcome_fails_the_check(tmp_path: Path) -> None:
    """A maker's joint friction (30-60 N m in the file the issue met) overpowers the servos: the
    arm stalls. `parts.<part>.sim.frictionloss` sets it (tests/sim_adapters/test_scene.py: a file
    carrying 60 N m, stalled, then freed by the YAML); here the check names the stall."""
    raw = yaml.safe_load(KINOVA3.read_text())
    raw["parts"]["arm"]["sim"]["frictionloss"] = 60.0
    path = tmp_path / "stiff.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    p = _cli("robots", "--check", str(path))
    assert p.returncode == 1 and "Traceback" not in p.stdout + p.stderr, p.stdout + p.stderr
    assert "FAIL" in p.stdout and "arm: grasp-and-carry: blocked moving above the cube" in p.stdout


# -- what a user adding gym-aloha's ALOHA met ---------------------------------------------
RED_CUBE = (
    '<body name="stand"/><body name="box" pos="0.3 -0.2 -0.55"><freejoint/>'
    '<inertial pos="0 0 0" mass="0.05" diaginertia="1e-5 1e-5 1e-5"/>'
    '<geom type="box" size="0.02 0.02 0.02" rgba="1 0 0 1"/></body>'
)


def test_remove_bodies_takes_a_makers_task_object_out_of_every_scene(tmp_path: Path) -> None:
    """A maker's scene with its own task object (gym-aloha's red transfer cube, a free body): it
    stayed in every task, so a model told "the red cube" saw two. `model.remove_bodies` removes it
    (the kinematics and the sim see the same model); a name not in the model, or a body carrying
    the robot, is one keyed line."""
    from pear_agent.loop.registry import make_backend
    from pear_agent.robot.kinematics import Kinematics
    from pear_agent.robot.loader import load_robot

    stand = STAND.format(actuators="").replace('<body name="stand"/>', RED_CUBE)
    kept = load_robot(_stand_robot(tmp_path, stand))
    backend = make_backend("pick_cube", kept, render=False)
    assert mujoco_body_names(backend) >= {"box", "cube"}
    backend.close()
    path = _stand_robot(tmp_path, stand, lambda r: r["model"].update(remove_bodies=["box"]))
    robot = load_robot(path)
    backend = make_backend("pick_cube", robot, render=False)
    try:
        names = mujoco_body_names(backend)
        assert "box" not in names and {"cube", "panda_link7"} <= names
        Kinematics(robot)  # builds from the same spec
    finally:
        backend.close()
    p = _run(path, tmp_path)
    assert p.returncode == 0 and json.loads(p.stdout.strip().splitlines()[-1])["success"] is True, p.stderr
    for name, what in (("nope", "body 'nope' is not in the model"), ("stand", "carries part 'arm'")):
        bad = _stand_robot(tmp_path, stand, lambda r, n=name: r["model"].update(remove_bodies=[n]))
        p = _cli("robots", str(bad))
        line = p.stdout.strip()
        assert p.returncode == 2 and "Traceback" not in p.stdout + p.stderr, p.stdout + p.stderr
        assert "\n" not in line and "key model.remove_bodies.0: " in line and what in line, line


def mujoco_body_names(backend) -> set[str]:
    m = backend.model
    return {m.body(i).name for i in range(m.nbody)}


def test_finger_friction_and_joint_friction_are_yaml_keys(tmp_path: Path) -> None:
    """`gripper.sim.friction` (the fingers' contact friction, winning over the touched object's)
    and `gripper.sim.frictionloss` (the finger joints' dry friction) were refused as unknown keys."""
    from pear_agent.loop.registry import make_backend
    from pear_agent.robot.loader import load_robot
    from sim_adapters.mujoco.tasks.base import finger_geoms

    sim = {"friction": 0.4, "frictionloss": 0.25}
    path = _variant(tmp_path, lambda r: _arm(r)["gripper"].update(sim=sim), "friction.yaml")
    robot = load_robot(path)
    backend = make_backend("pick_cube", robot, render=False)
    try:
        m, g = backend.model, robot.parts["arm"].gripper
        colliding = [i for i in finger_geoms(m, g.joints) if m.geom_contype[i] or m.geom_conaffinity[i]]
        assert colliding
        for i in colliding:
            assert m.geom_friction[i][0] == pytest.approx(0.4) and m.geom_priority[i] >= 1
        for j in g.joints:
            assert m.joint(j).frictionloss[0] == pytest.approx(0.25)
    finally:
        backend.close()
    default = load_robot(PANDA)
    backend = make_backend("pick_cube", default, render=False)
    try:
        m = backend.model
        assert all(m.geom_priority[i] == 0 for i in finger_geoms(m, default.parts["arm"].gripper.joints))
    finally:
        backend.close()


def test_grasp_messages_say_weak_or_too_hard() -> None:
    """The check's grasp message named "too weak or slippery" whatever happened; a squeeze that
    sinks the fingers into the cube or presses it out of the grip is called too hard, and the
    weak case names the friction key."""
    from sim_adapters.mujoco.robot_check import Squeeze

    weak = Squeeze(sink_mm=0.3, force_n=4.0, rise_cm=0.0, off_tool_cm=0.1).why()
    assert "too weak or slippery" in weak and "gripper.sim.friction" in weak
    sunk = Squeeze(sink_mm=4.5, force_n=900.0, rise_cm=0.2, off_tool_cm=0.0).why()
    assert sunk.startswith("squeezed too hard for its contacts: the fingers sank 4.5 mm into it at 900 N")
    assert "gripper.sim.force_limit" in sunk and "weak" not in sunk
    popped = Squeeze(sink_mm=0.5, force_n=300.0, rise_cm=2.5, off_tool_cm=0.0).why()
    assert popped.startswith("squeezed too hard for its contacts: closing pressed it 2.5 cm out of the grip")


def test_the_yam_fingers_on_soft_contacts_are_called_too_hard_not_weak(tmp_path: Path) -> None:
    """The i2rt fingers at their 60 N force limit on MuJoCo's default (soft) contacts sink into the
    cube and press it out as it is lifted: the check said "too weak or slippery"; it says the
    squeeze was too hard now (the shipped YAML's stiff finger contacts make it hold)."""
    raw = yaml.safe_load((ROBOTS_DIR / "yam_bimanual.yaml").read_text())
    for part in raw["parts"].values():
        for key in ("armature", "contact_time_s"):
            part["gripper"]["sim"].pop(key, None)
    path = tmp_path / "yam_soft.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    p = _cli("robots", "--check", str(path))
    assert p.returncode == 1 and "Traceback" not in p.stdout + p.stderr, p.stdout + p.stderr
    assert "left_arm: grasp-and-carry: closed on the 4 cm cube but" in p.stdout
    assert "squeezed too hard for its contacts: the fingers sank" in p.stdout, p.stdout
    assert "weak" not in p.stdout
    p = _cli("robots", "--check", str(ROBOTS_DIR / "yam_bimanual.yaml"))
    assert p.returncode == 0 and "left_arm: grasp-and-carry ok" in p.stdout, p.stdout + p.stderr


def test_gym_alohas_own_red_cube_removed_and_its_finger_friction_overridden() -> None:
    """gym-aloha's transfer-cube scene as its wheel ships it (tests/robots/aloha.yaml): its red
    cube `box` (a free body, in the file's keyframe) is gone from every task's scene, which still
    compiles, and the finger slides carry the YAML's 0.5 N of dry friction, not the file's 30 N."""
    from pear_agent.loop.registry import make_backend
    from pear_agent.robot.loader import load_robot

    aloha = Path(__file__).resolve().parents[1] / "robots" / "aloha.yaml"
    robot = load_robot(aloha)
    for task in ("pick_cube", "align_blocks"):
        backend = make_backend(task, robot, render=False)
        try:
            backend.reset(0)
            names = mujoco_body_names(backend)
            assert "box" not in names and "vx300s_left/gripper_link" in names
            assert backend.model.nkey == 0  # the file's keyframe held the cube's pose
            m = backend.model
            assert m.joint("vx300s_left/left_finger").frictionloss[0] == pytest.approx(0.5)
            # the arm's joints keep the file's
            assert m.joint("vx300s_left/waist").frictionloss[0] == pytest.approx(50.0)
        finally:
            backend.close()
    p = _cli("robots", str(aloha))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "aloha: parts: left_arm (6 joints + gripper)" in p.stdout
