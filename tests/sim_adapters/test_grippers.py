"""Grippers as built, in real MuJoCo: the sim drives the actuators the model file declares (two
per gripper on robosuite's Robotiq 2F-140 and Franka hand), measures the opening from the finger
joints, and adds an actuator only where the description says the model has none."""

from pathlib import Path

import mujoco
import numpy as np
import pytest

from pear_agent.loop.registry import make_backend
from pear_agent.robot.backend import PartCommand
from pear_agent.robot.loader import load_robot

ROBOTIQ = Path(__file__).resolve().parents[1] / "robots" / "ur5e_robotiq140.yaml"


@pytest.mark.parametrize("robot_ref", [str(ROBOTIQ), "ur5e"])
def test_two_actuator_grippers_close_and_open_both_fingers(robot_ref: str) -> None:
    robot = load_robot(robot_ref)
    g = robot.parts["arm"].gripper
    assert g is not None and len(g.actuators) == 2
    backend = make_backend("pick_cube", robot, render=False)
    try:
        backend.reset(0)
        io, d, m = backend.parts["arm"], backend.data, backend.model
        # the model's own actuators are driven; none is invented
        assert sorted(m.actuator(int(i)).name for i in io.g_act) == sorted(a.name for a in g.actuators)
        assert not any(m.actuator(i).name.endswith("_split") for i in range(m.nu))
        q_open = d.qpos[io.g_qadr].copy()
        assert backend.execute({"arm": PartCommand(gripper=0.0)}).status == "reached"
        q_closed = d.qpos[io.g_qadr].copy()
        assert io.gripper_opening(d) < 0.2
        # each finger moved towards its own closed position (they move in opposite directions)
        towards = np.sign(io.g_closed - io.g_open)
        assert np.all((q_closed - q_open) * towards > 0.5 * np.abs(io.g_closed - io.g_open))
        mimic = [m.joint(j).qposadr[0] for j in g.mimic_joints]
        if mimic:  # the linkage joints follow through the model's couplings
            assert np.max(np.abs(d.qpos[mimic])) > 0.1
        assert backend.execute({"arm": PartCommand(gripper=1.0)}).status in ("reached", "timeout")
        assert io.gripper_opening(d) > 0.8
    finally:
        backend.close()


def test_created_actuator_only_where_the_description_says_so(yam) -> None:
    backend = make_backend("bimanual_pickup", yam, render=False)
    try:
        names = [backend.model.actuator(i).name for i in range(backend.model.nu)]
        assert "left_gripper_pos" in names and "right_gripper_pos" in names
    finally:
        backend.close()


def test_one_tendon_actuator_with_linkage_drives_both_fingers() -> None:
    """Menagerie's Robotiq 2F-85 (robots/ur5e_2f85.yaml): one actuator pulls a tendon split between
    the two driver joints; equalities couple the other side and the four-bar linkages. The sim sets
    that actuator's ctrl (0 open .. 255 closed) and measures the opening from the driver joints."""
    robot = load_robot("ur5e_2f85")
    g = robot.parts["arm"].gripper
    assert g is not None and g.actuator == "gripper_fingers_actuator" and not g.create_actuator
    backend = make_backend("pick_cube", robot, render=False)
    try:
        backend.reset(0)
        io, d, m = backend.parts["arm"], backend.data, backend.model
        assert [m.actuator(int(i)).name for i in io.g_act] == ["gripper_fingers_actuator"]
        act = m.actuator("gripper_fingers_actuator")
        assert act.trntype[0] == mujoco.mjtTrn.mjTRN_TENDON  # the file's own "split" tendon
        assert m.tendon(act.trnid[0]).name == "gripper_split"
        assert io.gripper_opening(d) > 0.95
        assert backend.execute({"arm": PartCommand(gripper=0.0)}).status == "reached"
        assert d.ctrl[io.g_act[0]] == 255.0
        right, left = d.qpos[io.g_qadr]
        assert right > 0.7 and abs(right - left) < 0.01  # both drivers closed, equality-coupled
        mimic = np.array([d.qpos[m.joint(j).qposadr[0]] for j in g.mimic_joints])
        assert np.max(np.abs(mimic)) > 0.3  # the linkages followed
        assert io.gripper_opening(d) < 0.1
        assert backend.execute({"arm": PartCommand(gripper=1.0)}).status == "reached"
        assert d.ctrl[io.g_act[0]] == 0.0 and io.gripper_opening(d) > 0.95
    finally:
        backend.close()
