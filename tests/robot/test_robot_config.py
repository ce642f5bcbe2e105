from pathlib import Path

import pytest
import yaml

from pear_agent.robot.config import ROBOTS_DIR, RobotConfigError
from pear_agent.robot.loader import load_robot


def _write(tmp_path: Path, mutate) -> Path:
    raw = yaml.safe_load((ROBOTS_DIR / "panda.yaml").read_text())
    mutate(raw)
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_panda_loads_with_parts_cameras_and_frames(panda) -> None:
    assert list(panda.parts) == ["arm"]
    arm = panda.parts["arm"]
    assert len(arm.joints) == 7 and arm.gripper is not None
    assert set(arm.quantities) == {"position", "orientation", "gripper"}
    assert set(panda.cameras) == {"front", "wrist"}
    assert panda.resolve(panda.model.mjcf).is_file()


def test_wrong_type_names_file_and_key(tmp_path: Path) -> None:
    path = _write(tmp_path, lambda r: r["parts"]["arm"]["limits"].update(max_position_step_cm="far"))
    with pytest.raises(RobotConfigError) as exc:
        load_robot(path)
    msg = str(exc.value)
    assert str(path) in msg and "parts.arm.limits.max_position_step_cm" in msg


def test_unknown_key_is_rejected(tmp_path: Path) -> None:
    path = _write(tmp_path, lambda r: r["parts"]["arm"].update(gripr={}))
    with pytest.raises(RobotConfigError, match=r"parts\.arm\.gripr"):
        load_robot(path)


def test_home_pose_length_must_match_joints(tmp_path: Path) -> None:
    path = _write(tmp_path, lambda r: r["parts"]["arm"]["home"].update(joints_rad=[0.0, 0.0]))
    with pytest.raises(RobotConfigError, match=r"home\.joints_rad has 2 values for 7 joints"):
        load_robot(path)


def test_inverted_workspace_is_rejected(tmp_path: Path) -> None:
    path = _write(tmp_path, lambda r: r["parts"]["arm"]["limits"]["workspace_cm"].update(z=[10, 5]))
    with pytest.raises(RobotConfigError, match="workspace_cm"):
        load_robot(path)


def test_missing_model_package_says_how_to_install(tmp_path: Path) -> None:
    path = _write(tmp_path, lambda r: r["model"].update(mjcf="pkg://no-such-dist/x.xml"))
    robot = load_robot(path)
    with pytest.raises(RobotConfigError, match=r"no-such-dist.*not installed"):
        robot.resolve(robot.model.mjcf)


def test_invalid_yaml_and_unknown_robot(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(RobotConfigError, match="not valid YAML"):
        load_robot(bad)
    with pytest.raises(RobotConfigError, match=r"known robots: .*panda"):
        load_robot("no_such_robot")


def test_table_defaults_derive_from_the_workspace_box(tmp_path: Path) -> None:
    path = _write(tmp_path, lambda r: r.pop("table"))
    t = load_robot(path).table_or_default()
    # workspace x [20, 80], y [-40, 40], z [0.5, 60]
    assert t.task_area_cm == {"x": [41.0, 65.0], "y": [-22.0, 22.0]}
    assert t.surface_z_cm == 0.0 and t.center_cm == [50.0, 0.0]


def test_gripper_with_one_actuator_or_several(panda) -> None:
    g = panda.parts["arm"].gripper
    assert [(a.name, a.ctrl_closed, a.ctrl_open) for a in g.drives] == [
        ("hand_panda_hand_actuator", 0.0, 1.0)
    ]
    assert g.joint_range("hand_panda_finger_joint2") == (0.0, 0.04)
    ur5e = load_robot("ur5e").parts["arm"].gripper
    assert len(ur5e.drives) == 2 and ur5e.joint_range("gripper_finger_joint2") == (0.0, -0.04)


def test_gripper_inconsistencies_are_refused(tmp_path: Path) -> None:
    def both(r: dict) -> None:
        r["parts"]["arm"]["gripper"]["actuators"] = [{"name": "a", "ctrl_closed": 0, "ctrl_open": 1}]

    for mutate, msg in (
        (both, "either actuator"),
        (
            lambda r: r["parts"]["arm"]["gripper"].update(actuator=None, create_actuator=True),
            "create_actuator",
        ),
        (lambda r: r["parts"]["arm"]["gripper"].update(mimic_joints=["hand_panda_finger_joint1"]), "both"),
        (
            lambda r: r["parts"]["arm"]["gripper"].update(joint_positions={"nope": {"closed": 0, "open": 1}}),
            "joint_positions",
        ),
    ):
        with pytest.raises(RobotConfigError, match=msg):
            load_robot(_write(tmp_path, mutate))


def test_model_paths_stay_inside_the_yaml_folder_or_a_wheel(tmp_path: Path) -> None:
    (tmp_path / "m.xml").write_text("<mujoco/>")
    for ref, msg in (
        ("../m.xml", "climbs out"),
        (str(tmp_path / "m.xml"), "absolute paths are not allowed"),
        ("pkg://dm-robotics-panda/../x", "without '..'"),
        ("pkg://dm-robotics-panda/dm_robotics/panda/assets/panda/nope.xml", "has no file"),
    ):
        robot = load_robot(_write(tmp_path, lambda r, ref=ref: r["model"].update(mjcf=ref)))
        with pytest.raises(RobotConfigError, match=msg):
            robot.resolve(robot.model.mjcf)
    robot = load_robot(_write(tmp_path, lambda r: r["model"].update(mjcf="m.xml")))
    assert robot.resolve(robot.model.mjcf) == (tmp_path / "m.xml").resolve()


def test_sim_actuators_need_one_per_joint(tmp_path: Path) -> None:
    path = _write(tmp_path, lambda r: r["parts"]["arm"]["sim"].update(actuators=["a1", "a2"]))
    with pytest.raises(
        RobotConfigError, match=r"parts\.arm: .*sim\.actuators needs one actuator per joint \(7\)"
    ):
        load_robot(path)


@pytest.mark.parametrize(
    ("mutate", "line"),
    [
        (
            lambda r: r["parts"]["arm"]["limits"].update(joint_limit_rad={}),
            "key parts.arm.limits.joint_limit_rad: unknown key 'joint_limit_rad' in parts.arm.limits; "
            "allowed: workspace_cm, max_position_step_cm, max_rotation_step_rad, joint_velocity_rad_s, "
            "joint_limits_rad",
        ),
        (
            lambda r: r.update(simulator={}),
            "key simulator: unknown key 'simulator' in the top level; allowed: name, description, frame, "
            "model, parts, cameras, table, render, sim, max_chunk",
        ),
        (
            lambda r: r["cameras"]["front"]["sim"].update(fov=40),
            "key cameras.front.sim.fov: unknown key 'fov' in cameras.front.sim; allowed: pos_m, look_at_m, "
            "mount_body, quat_wxyz, fovy_deg",
        ),
        (
            lambda r: r["parts"]["arm"]["sim"].update(actuators=[{"jiont": "panda_joint1"}] + [0] * 6),
            "key parts.arm.sim.actuators.0.jiont: unknown key 'jiont' in parts.arm.sim.actuators.0; "
            "allowed: joint, tendon",
        ),
    ],
    ids=["limits", "top level", "camera sim", "actuator by joint"],
)
def test_unknown_key_lists_the_keys_allowed_there(tmp_path: Path, mutate, line: str) -> None:
    with pytest.raises(RobotConfigError) as exc:
        load_robot(_write(tmp_path, mutate))
    assert str(exc.value) == f"{tmp_path / 'broken.yaml'}: {line}"


def test_actuator_references_by_name_index_or_joint(tmp_path: Path) -> None:
    refs = ["a", 3, {"joint": "panda_joint3"}, {"tendon": "split"}, 0, 1, 2]
    robot = load_robot(_write(tmp_path, lambda r: r["parts"]["arm"]["sim"].update(actuators=refs)))
    got = robot.parts["arm"].sim.actuators
    assert got[:2] == ["a", 3] and got[2].joint == "panda_joint3" and got[3].tendon == "split"
    with pytest.raises(RobotConfigError, match=r"parts.arm.sim.actuators.0: Input should be a valid"):
        load_robot(_write(tmp_path, lambda r: r["parts"]["arm"]["sim"].update(actuators=[True, *refs[1:]])))
