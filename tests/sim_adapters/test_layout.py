"""Task placement from the robot's geometry: the frame of one arm's region and the frame between two
arms, for the reference robots (identity) and for other layouts and headings."""

from pathlib import Path

import numpy as np
import pytest

from pear_agent.robot.loader import load_robot
from sim_adapters.mujoco.tasks import bimanual, pick_place
from sim_adapters.mujoco.tasks.layout import ArmPlace, single_arm_frame, two_arm_layout

FACING = Path(__file__).resolve().parents[1] / "robots" / "yam_facing.yaml"


def place(part: str, base_xy, ws_cm, yaw: float = 0.0) -> ArmPlace:
    ws = np.array([ws_cm["x"], ws_cm["y"], ws_cm.get("z", [0, 50])], float) / 100
    return ArmPlace(part, np.array(base_xy, float), np.zeros(3), yaw, ws)


def test_panda_region_maps_its_own_placements_unchanged(panda) -> None:
    places = {"arm": place("arm", [0, 0], panda.parts["arm"].limits.workspace_cm)}
    f = single_arm_frame(panda, places, "arm", pick_place.REF_AREA)
    for x, y in ((0.40, -0.22), (0.62, 0.22), (0.5, 0.1)):
        assert f.place(x, y) == pytest.approx([x, y], abs=1e-12)
    assert f.yaw(0.3) == pytest.approx(0.3, abs=1e-12)


def test_an_arm_facing_left_gets_the_same_placements_turned(tmp_path, panda) -> None:
    """A single arm whose task area lies to its left (+y): forward is +y, its left is -x; the
    reference's far-left corner lands far along +y and towards -x."""
    raw = panda.model_dump(exclude={"source"})
    raw["table"]["task_area_cm"] = {"x": [-22, 22], "y": [40, 62]}
    raw["parts"]["arm"]["limits"]["workspace_cm"] = {"x": [-40, 40], "y": [20, 80], "z": [0.5, 60]}
    robot = type(panda).model_validate(raw)
    places = {"arm": place("arm", [0, 0], raw["parts"]["arm"]["limits"]["workspace_cm"])}
    f = single_arm_frame(robot, places, "arm", pick_place.REF_AREA)
    assert f.forward == pytest.approx([0, 1]) and f.left == pytest.approx([-1, 0])
    assert f.place(0.62, 0.22) == pytest.approx([-0.22, 0.62])
    assert f.place(0.40, -0.22) == pytest.approx([0.22, 0.40])
    assert f.yaw(0.0) == pytest.approx(np.pi / 2)


def test_one_arm_of_two_works_on_its_own_side(yam) -> None:
    """A single-arm task on the YAM station keeps the left arm's objects nearer its base than the
    right arm's (y > -30.5 cm) and inside its workspace box."""
    places = {
        "left_arm": place("left_arm", [0, 0], yam.parts["left_arm"].limits.workspace_cm),
        "right_arm": place("right_arm", [0, -0.61], yam.parts["right_arm"].limits.workspace_cm),
    }
    f = single_arm_frame(yam, places, "left_arm", pick_place.REF_AREA)
    corners = [f.place(x, y) for x in pick_place.REF_X_M for y in pick_place.REF_Y_M]
    ys = [c[1] for c in corners]
    assert min(ys) == pytest.approx(-0.305) and max(ys) == pytest.approx(-0.06)
    assert f.forward == pytest.approx([1, 0])


def test_yam_station_frame_is_the_reference(yam) -> None:
    places = {
        "left_arm": place("left_arm", [0, 0], yam.parts["left_arm"].limits.workspace_cm),
        "right_arm": place("right_arm", [0, -0.61], yam.parts["right_arm"].limits.workspace_cm),
    }
    lay = two_arm_layout(yam, places, bimanual.REF_AREA)
    assert lay.roles == {"left_arm": "left_arm", "right_arm": "right_arm"}
    assert lay.frame.place(0.2, -0.5) == pytest.approx([0.2, -0.5], abs=1e-12)


@pytest.mark.parametrize("turn_deg", [90, 180, -45])
def test_two_arm_frame_turns_with_the_station(yam, turn_deg: float) -> None:
    """The YAM station turned about the left base: the frame turns with it, and a reference point
    lands where the turned station would put it."""
    a = np.radians(turn_deg)
    rot = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    raw = yam.model_dump(exclude={"source"})
    area = np.array([[0.16, -0.55], [0.32, -0.06], [0.16, -0.06], [0.32, -0.55]]) @ rot.T
    raw["table"]["task_area_cm"] = {
        "x": [area[:, 0].min() * 100, area[:, 0].max() * 100],
        "y": [area[:, 1].min() * 100, area[:, 1].max() * 100],
    }
    robot = type(yam).model_validate(raw)
    ws = {"x": [-100, 100], "y": [-100, 100]}
    places = {
        "right_arm": place("right_arm", rot @ [0, -0.61], ws),  # listed first: roles come from geometry
        "left_arm": place("left_arm", [0, 0], ws),
    }
    lay = two_arm_layout(robot, places, bimanual.REF_AREA)
    assert lay.roles == {"left_arm": "left_arm", "right_arm": "right_arm"}
    assert lay.frame.forward == pytest.approx(rot @ [1, 0], abs=1e-9)
    if turn_deg % 90 == 0:  # an axis-aligned area keeps its depth and width
        assert lay.frame.place(0.2, -0.5) == pytest.approx(rot @ [0.2, -0.5], abs=1e-9)


def test_facing_arms_put_the_work_between_them() -> None:
    robot = load_robot(FACING)
    places = {
        "arm_a": place("arm_a", [0, 0], robot.parts["arm_a"].limits.workspace_cm),
        "arm_b": place("arm_b", [0.8, 0], robot.parts["arm_b"].limits.workspace_cm),
    }
    lay = two_arm_layout(robot, places, bimanual.REF_AREA)
    # the line between the bases runs through the middle of the task area
    assert lay.frame.centre_m == pytest.approx([0.4, 0.0])
    assert abs(lay.frame.left @ [1, 0]) == pytest.approx(1.0)
    # the left arm's side of the line is towards its own base
    left_base = places[lay.roles["left_arm"]].base_xy_m
    assert (left_base - lay.frame.centre_m) @ lay.frame.left > 0
