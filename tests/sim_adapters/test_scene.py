"""The scene builder against real MuJoCo on MuJoCo Menagerie's UR5e + Robotiq 2F-85
(robots/ur5e_2f85.yaml): the model's own arm servos are driven, never doubled; a servo the YAML
does not claim is refused; an attached file's contact options apply."""

from pathlib import Path

import mujoco
import numpy as np
import pytest
import yaml

from pear_agent.robot_config import ROBOTS_DIR, RobotConfigError, load_robot
from sim_adapters.mujoco.scene import build_robot_spec, build_scene, compile_spec

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
