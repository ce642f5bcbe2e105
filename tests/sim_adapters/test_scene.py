"""The scene builder against real MuJoCo on MuJoCo Menagerie's UR5e + Robotiq 2F-85
(robots/ur5e_2f85.yaml): the model's own arm servos are driven, never doubled; a servo the YAML
does not claim is refused; an attached file's contact options apply."""

from pathlib import Path

import mujoco
import numpy as np
import pytest
import yaml

from pear_agent.robot.backend import PartCommand
from pear_agent.robot.config import ROBOTS_DIR, RobotConfig, RobotConfigError
from pear_agent.robot.loader import load_robot
from sim_adapters.mujoco.scene import build_robot_spec, build_scene, compile_spec
from sim_adapters.mujoco.tasks.base import MujocoTask

UR5E_2F85 = ROBOTS_DIR / "ur5e_2f85.yaml"


def _variant(tmp_path: Path, mutate) -> Path:
    raw = yaml.safe_load(UR5E_2F85.read_text())
    mutate(raw["parts"]["arm"]["sim"])
    path = tmp_path / "variant.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def test_model_arm_servos_are_driven_with_the_yaml_gains() -> None:
    robot = load_robot(UR5E_2F85)
    part = robot.parts["arm"]
    model = compile_spec(robot, build_robot_spec(robot))
    # six arm servos and the gripper's one actuator, all the file's own: nothing added
    names = [model.actuator(i).name for i in range(model.nu)]
    assert names == [*part.sim.actuators, "gripper_fingers_actuator"]
    assert build_scene(robot)[1]["arm"].arm == part.sim.actuators
    for joint, act, kp, kv in zip(part.joints, part.sim.actuators, part.sim.kp, part.sim.kv, strict=True):
        a = model.actuator(act)
        assert model.joint(a.trnid[0]).name == joint
        assert a.gainprm[0] == kp and list(a.biasprm[:3]) == [0.0, -kp, -kv]
    # the file's torque limits stay as declared (the UR5e's wrist joints: 28 N m)
    assert np.allclose(model.actuator("wrist_1").forcerange, [-28, 28])


def test_unclaimed_model_servo_is_refused(tmp_path: Path) -> None:
    path = _variant(tmp_path, lambda sim: sim.pop("actuators"))
    with pytest.raises(RobotConfigError) as exc:
        build_robot_spec(load_robot(path))
    msg = str(exc.value)
    assert "\n" not in msg and str(path) in msg
    assert "key parts.arm.sim.actuators: the model's actuator 'shoulder_pan' already servos joint" in msg


def test_sim_actuator_of_another_joint_is_refused(tmp_path: Path) -> None:
    def swap(sim: dict) -> None:
        sim["actuators"][0], sim["actuators"][1] = sim["actuators"][1], sim["actuators"][0]

    with pytest.raises(
        RobotConfigError, match=r"key parts\.arm\.sim\.actuators\.0: actuator 'shoulder_lift' does "
    ):
        build_robot_spec(load_robot(_variant(tmp_path, swap)))
    path = _variant(tmp_path, lambda sim: sim["actuators"].__setitem__(2, "elbow_servo"))
    with pytest.raises(
        RobotConfigError, match=r"key parts\.arm\.sim\.actuators\.2: actuator 'elbow_servo' is not"
    ):
        build_robot_spec(load_robot(path))


def test_attached_file_contact_options_apply(panda) -> None:
    """Menagerie's 2F-85 file asks for elliptic friction cones and impratio 10; the UR5e file leaves
    MuJoCo's defaults, so the gripper's values hold. The Panda's files ask for none."""
    robot = load_robot(UR5E_2F85)
    model = compile_spec(robot, build_robot_spec(robot))
    assert model.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC and model.opt.impratio == 10
    plain = compile_spec(panda, build_robot_spec(panda))
    assert plain.opt.cone == mujoco.mjtCone.mjCONE_PYRAMIDAL and plain.opt.impratio == 1


FRICTION_ARM = """<mujoco><compiler angle="radian"/>
  <!-- a maker's file tuned for torque control: joint friction far above what position servos give -->
  <default><joint frictionloss="60" damping="1" armature="0.05"/></default>
  <worldbody><body name="base">
    <body name="link1" pos="0 0 0.1"><joint name="j1" axis="0 0 1" range="-3 3"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="2"/>
      <body name="link2" pos="0.3 0 0"><joint name="j2" axis="0 1 0" range="-2 2"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="1"/>
      </body></body></body></worldbody></mujoco>"""

FRICTION_YAML = """name: friction_arm
description: a two-joint arm whose file carries joint friction of 60 N m
frame: {origin: base, x: forward, y: left, z: up}
model: {mjcf: arm.xml}
parts:
  arm:
    description: the arm
    joints: [j1, j2]
    end_effector: {name: tip, parent_body: link2, pos_m: [0.3, 0.0, 0.0]}
    home: {joints_rad: [0.0, 0.0]}
    limits:
      workspace_cm: {x: [-100, 100], y: [-100, 100], z: [-100, 100]}
      max_position_step_cm: 10
      max_rotation_step_rad: 0.5
      joint_velocity_rad_s: 1.0
    sim:
      kp: [1000, 1000]
      kv: [50, 50]
"""


class _Idle(MujocoTask):
    """No objects, never done: the backend on its own."""

    name = "idle"

    def build(self, spec: mujoco.MjSpec, robot: RobotConfig) -> None:
        pass

    def reset(self, model: mujoco.MjModel, data: mujoco.MjData, rng: np.random.Generator) -> None:
        pass

    def success(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        return False

    def privileged(self, model: mujoco.MjModel, data: mujoco.MjData) -> dict:
        return {}


def _friction_arm(tmp_path: Path, extra_sim: str = "") -> RobotConfig:
    (tmp_path / "arm.xml").write_text(FRICTION_ARM)
    (tmp_path / "arm.yaml").write_text(FRICTION_YAML + extra_sim)
    return load_robot(tmp_path / "arm.yaml")


def test_file_friction_stalls_the_servos_and_the_yaml_overrides_it(tmp_path: Path) -> None:
    from sim_adapters.mujoco.backend import MujocoBackend

    q = np.array([0.3, -0.2])
    stiff = MujocoBackend(_friction_arm(tmp_path), _Idle(), render=False)
    assert np.allclose(stiff.model.dof_frictionloss, [60, 60])  # the file's values by default
    stiff.reset(0)
    assert stiff.execute({"arm": PartCommand(joints_rad=q)}).status == "blocked"
    extra = "      frictionloss: 0.5\n      damping: [2.0, 3.0]\n      armature: 0.01\n"
    free = MujocoBackend(_friction_arm(tmp_path, extra), _Idle(), render=False)
    assert np.allclose(free.model.dof_frictionloss, [0.5, 0.5])
    assert np.allclose(free.model.dof_damping, [2.0, 3.0]) and np.allclose(
        free.model.dof_armature, [0.01, 0.01]
    )
    free.reset(0)
    out = free.execute({"arm": PartCommand(joints_rad=q)})
    assert out.status == "reached", out.detail


def test_yaml_sim_options_and_gripper_force_reach_the_model(tmp_path: Path) -> None:
    raw = yaml.safe_load(UR5E_2F85.read_text())
    raw["sim"] = {"timestep_s": 0.001, "cone": "pyramidal", "impratio": 3, "noslip_iterations": 0}
    raw["parts"]["arm"]["gripper"]["sim"] = {"force_limit": 9.0}
    path = tmp_path / "options.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    robot = load_robot(path)
    model = compile_spec(robot, build_robot_spec(robot))
    assert model.opt.timestep == pytest.approx(0.001) and model.opt.cone == mujoco.mjtCone.mjCONE_PYRAMIDAL
    assert model.opt.impratio == pytest.approx(3) and model.opt.noslip_iterations == 0
    assert np.allclose(model.actuator("gripper_fingers_actuator").forcerange, [-9, 9])
    # unset, the file's: Menagerie's 2F-85 limits its drive to 5 N
    default = compile_spec(load_robot(UR5E_2F85), build_robot_spec(load_robot(UR5E_2F85)))
    assert np.allclose(default.actuator("gripper_fingers_actuator").forcerange, [-5, 5])
