from pathlib import Path

import pytest
import yaml

from pear_agent.robot_config import ROBOTS_DIR, RobotConfigError, load_robot


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
