import numpy as np
import pytest

from pear_agent.robot.kinematics import Kinematics, matrix_to_rpy, rpy_to_matrix
from pear_agent.robot.loader import load_robot
from sim_adapters.mujoco.scene import build_robot_spec, compile_spec, ee_site_name


@pytest.mark.parametrize("name", ["panda", "ur5e_2f85"])
def test_fk_matches_mujoco_site(name: str) -> None:
    """Menagerie's UR5e turns its root body 180 deg about z, which Pinocchio 4.1's MJCF parser drops
    (stack-of-tasks/pinocchio#2782): the kinematics put it back, so FK agrees with MuJoCo."""
    import mujoco

    robot = load_robot(name)
    kin = Kinematics(robot)
    model = compile_spec(robot, build_robot_spec(robot))
    data = mujoco.MjData(model)
    lo, hi = kin.joint_limits("arm")
    lo, hi = np.maximum(lo, -np.pi), np.minimum(hi, np.pi)
    qadr = [model.joint(j).qposadr[0] for j in robot.parts["arm"].joints]
    rng = np.random.default_rng(1)
    for _ in range(100):
        q = rng.uniform(lo, hi)
        data.qpos[qadr] = q
        mujoco.mj_kinematics(model, data)
        site = data.site(ee_site_name("arm"))
        pose = kin.fk("arm", q)
        assert np.linalg.norm(pose.position_m - site.xpos) < 1e-3
        assert np.abs(pose.rotation - site.xmat.reshape(3, 3)).max() < 1e-6


def test_rpy_round_trip() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        rpy = rng.uniform([-3, -1.4, -3], [3, 1.4, 3])
        assert np.allclose(matrix_to_rpy(rpy_to_matrix(rpy)), rpy, atol=1e-9)


def test_ik_solves_500_small_delta_targets(panda_kin: Kinematics) -> None:
    lo, hi = panda_kin.joint_limits("arm")
    home = np.array(panda_kin.robot.parts["arm"].home.joints_rad)
    rng = np.random.default_rng(7)
    worst_p, worst_r = 0.0, 0.0
    for _ in range(500):
        q = np.clip(home + rng.uniform(-0.6, 0.6, 7), lo + 0.05, hi - 0.05)
        start = panda_kin.fk("arm", q)
        dp = rng.uniform(-1, 1, 3)
        dp *= rng.uniform(0, 0.02) / np.linalg.norm(dp)
        target_rot = rpy_to_matrix(start.rpy + rng.uniform(-0.1, 0.1, 3))
        res = panda_kin.ik("arm", start.position_m + dp, target_rot, seed_rad=q)
        assert res.success, res.reason
        assert np.all(res.joints_rad >= lo - 1e-9) and np.all(res.joints_rad <= hi + 1e-9)
        got = panda_kin.fk("arm", res.joints_rad)
        worst_p = max(worst_p, float(np.linalg.norm(got.position_m - start.position_m - dp)))
        rel = got.rotation.T @ target_rot
        worst_r = max(worst_r, float(np.arccos(np.clip((np.trace(rel) - 1) / 2, -1, 1))))
    assert worst_p < 1e-3 and worst_r < 0.01


def test_unreachable_target_reports_residual(panda_kin: Kinematics) -> None:
    home = np.array(panda_kin.robot.parts["arm"].home.joints_rad)
    res = panda_kin.ik("arm", np.array([1.5, 0.0, 0.3]), rpy_to_matrix([np.pi, 0, 0]), seed_rad=home)
    assert not res.success
    assert res.position_error_m > 0.3
    assert "cm" in res.reason and "joint limits" in res.reason


def test_unknown_joint_in_description_is_an_error(panda) -> None:
    arm = panda.parts["arm"].model_copy(update={"joints": ["nope", *panda.parts["arm"].joints[1:]]})
    robot = panda.model_copy(update={"parts": {"arm": arm}})
    with pytest.raises(ValueError, match="nope"):
        Kinematics(robot)


ROOT_MJCF = """<mujoco><compiler angle="radian"/><worldbody>
  <body name="base" pos="0.3 -0.2 0.1" quat="0.7071068 0 0 0.7071068">
    <body name="link1" pos="0 0 0.2"><joint name="j1" axis="0 0 1" range="-3 3"/><geom size="0.03"/>
      <body name="link2" pos="0.3 0 0"><joint name="j2" axis="0 1 0" range="-3 3"/><geom size="0.03"/>
      </body></body></body></worldbody></mujoco>"""

ROOT_YAML = """name: two_link
description: a two-joint arm whose root body is moved and turned
frame: {origin: world, x: forward, y: left, z: up}
model: {mjcf: arm.xml}
parts:
  arm:
    description: the arm
    joints: [j1, j2]
    end_effector: {name: tip, parent_body: link2, pos_m: [0.2, 0.0, 0.0]}
    home: {joints_rad: [0.0, 0.0]}
    limits:
      workspace_cm: {x: [-100, 100], y: [-100, 100], z: [-100, 100]}
      max_position_step_cm: 10
      max_rotation_step_rad: 0.5
      joint_velocity_rad_s: 1.0
"""


def test_root_body_pose_is_kept(tmp_path) -> None:
    import mujoco

    (tmp_path / "arm.xml").write_text(ROOT_MJCF)
    (tmp_path / "arm.yaml").write_text(ROOT_YAML)
    kin = Kinematics(load_robot(tmp_path / "arm.yaml"))
    model = mujoco.MjModel.from_xml_path(str(tmp_path / "arm.xml"))
    data = mujoco.MjData(model)
    for q in ([0.0, 0.0], [0.7, -1.1], [-2.0, 0.4]):
        data.qpos[:] = q
        mujoco.mj_kinematics(model, data)
        link2 = data.body("link2")
        tip = link2.xpos + link2.xmat.reshape(3, 3) @ np.array([0.2, 0.0, 0.0])
        pose = kin.fk("arm", np.array(q))
        assert np.linalg.norm(pose.position_m - tip) < 1e-9
        assert np.abs(pose.rotation - link2.xmat.reshape(3, 3)).max() < 1e-9


def test_root_body_turned_by_euler_now_loads(tmp_path) -> None:
    """Was refused while Pinocchio parsed the file itself (its parser dropped a root body's pose and
    read only quat); the kinematics are now built from what MuJoCo compiled, so any orientation
    MuJoCo reads is kept."""
    (tmp_path / "arm.xml").write_text(ROOT_MJCF.replace('quat="0.7071068 0 0 0.7071068"', 'euler="0 0 1.57"'))
    (tmp_path / "arm.yaml").write_text(ROOT_YAML)
    robot = load_robot(tmp_path / "arm.yaml")
    _assert_fk_matches_mujoco(robot, "arm", np.random.default_rng(3).uniform(-3, 3, (20, 2)))


def _assert_fk_matches_mujoco(robot, part: str, qs) -> None:
    """FK of the kinematics against MuJoCo's own forward kinematics of the robot's compiled model:
    the end effector (its body's pose composed with the YAML's offset) within 1 mm and 1e-6."""
    import mujoco

    from pear_agent.robot.kinematics import quat_wxyz_to_matrix
    from pear_agent.robot.model import compile_robot

    kin = Kinematics(robot)
    model = compile_robot(robot)
    data = mujoco.MjData(model)
    spec = robot.parts[part]
    adr = [model.joint(j).qposadr[0] for j in spec.joints]
    ee = spec.end_effector
    for q in qs:
        data.qpos[adr] = q
        mujoco.mj_kinematics(model, data)
        body = data.body(ee.parent_body)
        rot = body.xmat.reshape(3, 3)
        tip = body.xpos + rot @ np.array(ee.pos_m)
        pose = kin.fk(part, np.asarray(q))
        assert np.linalg.norm(pose.position_m - tip) < 1e-3, (q, pose.position_m, tip)
        assert np.abs(pose.rotation - rot @ quat_wxyz_to_matrix(ee.quat_wxyz)).max() < 1e-6


KINOVA3_YAML = """name: kinova3
description: robosuite's Kinova Gen3 as it ships; joints 1, 3, 5 and 7 have no range (continuous)
frame: {origin: base, x: forward, y: left, z: up}
model: {mjcf: pkg://robosuite/robosuite/models/assets/robots/kinova3/robot.xml}
parts:
  arm:
    description: the arm
    joints: [Actuator1, Actuator2, Actuator3, Actuator4, Actuator5, Actuator6, Actuator7]
    end_effector: {name: tcp, parent_body: right_hand, pos_m: [0.0, 0.0, 0.1]}
    home: {joints_rad: [0.0, 0.65, 0.0, 1.89, 0.0, 0.6, -1.5708]}
    limits:
      workspace_cm: {x: [20, 80], y: [-40, 40], z: [0.5, 60]}
      max_position_step_cm: 10
      max_rotation_step_rad: 0.5
      joint_velocity_rad_s: 1.0
"""


def _kinova(tmp_path, extra: str = "") -> object:
    path = tmp_path / "kinova3.yaml"
    path.write_text(KINOVA3_YAML + extra)
    return load_robot(path)


def test_continuous_joints_have_no_limits_and_ik_turns_past_pi(tmp_path) -> None:
    robot = _kinova(tmp_path)
    kin = Kinematics(robot)
    lo, hi = kin.joint_limits("arm")
    continuous = np.isinf(lo) & np.isinf(hi)
    assert continuous.tolist() == [True, False, True, False, True, False, True]
    assert np.allclose(lo[~continuous], [-2.41, -2.66, -2.23]) and np.allclose(
        hi[~continuous], [2.41, 2.66, 2.23]
    )
    # a target whose nearest solution has joint 1 at 3.5 rad (beyond pi) from a seed at 3.0 rad
    seed = np.array([3.0, 0.65, 0.0, 1.89, 0.0, 0.6, -1.5708])
    goal = seed + np.array([0.5, 0.1, 0.0, -0.1, 0.0, 0.1, 0.0])
    want = kin.fk("arm", goal)
    res = kin.ik("arm", want.position_m, want.rotation, seed)
    assert res.success, res.reason
    assert res.joints_rad[0] > np.pi
    got = kin.fk("arm", res.joints_rad)
    assert np.linalg.norm(got.position_m - want.position_m) < 1e-3
    qs = np.random.default_rng(0).uniform(-2.2, 2.2, (50, 7))
    qs[:, [0, 2, 4, 6]] *= 3.0  # continuous joints anywhere in -6.6 .. 6.6 rad
    _assert_fk_matches_mujoco(robot, "arm", qs)


def test_yaml_limits_bound_a_continuous_joint(tmp_path) -> None:
    robot = _kinova(tmp_path)
    arm = robot.parts["arm"]
    limits = arm.limits.model_copy(
        update={"joint_limits_rad": {"Actuator1": [-1.0, 1.0], "Actuator2": [-3, 1]}}
    )
    robot = robot.model_copy(update={"parts": {"arm": arm.model_copy(update={"limits": limits})}})
    kin = Kinematics(robot)
    lo, hi = kin.joint_limits("arm")
    assert lo[0] == pytest.approx(-1.0) and hi[0] == pytest.approx(1.0)
    assert lo[1] == pytest.approx(-2.41) and hi[1] == pytest.approx(1.0)  # the file's -2.41 is tighter
    far = kin.fk("arm", np.array([2.5, 0.65, 0.0, 1.89, 0.0, 0.6, -1.5708]))  # joint 1 outside [-1, 1]
    res = kin.ik("arm", far.position_m, far.rotation, np.array(arm.home.joints_rad))
    assert -1.0 - 1e-9 <= res.joints_rad[0] <= 1.0 + 1e-9


INCLUDE_MAIN = """<mujoco model="two_arms">
  <include file="defaults.xml"/>
  <worldbody>
    <body name="left_base" pos="0 0.3 0">
      <include file="arm_left.xml"/>
    </body>
    <frame pos="0 -0.3 0" euler="0 0 30">
      <body name="right_base" childclass="arm">
        <body name="right_link1" pos="0 0 0.1">
          <joint name="right_j1" axis="0 0 1"/><geom size="0.03"/>
          <body name="right_link2" pos="0.25 0 0" euler="90 0 0">
            <joint name="right_j2" axis="0 0 1" ref="20"/><geom size="0.03"/>
            <body name="right_tool" pos="0.2 0 0"><geom size="0.02"/></body>
          </body>
        </body>
      </body>
    </frame>
  </worldbody>
</mujoco>"""
INCLUDE_DEFAULTS = """<mujoco><compiler angle="degree"/>
  <default><default class="arm"><joint range="-170 170" damping="1"/><geom type="sphere"/></default></default>
</mujoco>"""
INCLUDE_LEFT = """<mujoco>
  <body name="left_link1" pos="0 0 0.1" childclass="arm">
    <joint name="left_j1" axis="0 0 1"/><geom size="0.03"/>
    <body name="left_link2" pos="0.25 0 0" quat="0.7071068 0.7071068 0 0">
      <joint name="left_j2" axis="0 0 1" pos="0.02 0 0"/><geom size="0.03"/>
      <body name="left_tool" pos="0.2 0 0"><geom size="0.02"/></body>
    </body>
  </body>
</mujoco>"""
TWO_ARMS_YAML = """name: two_arms
description: two 2-joint arms from one file with includes, defaults and a frame
frame: {origin: world, x: forward, y: left, z: up}
model: {mjcf: two_arms.xml}
parts:
"""
TWO_ARMS_PART = """  {side}:
    description: the {side} arm
    joints: [{side}_j1, {side}_j2]
    end_effector: {{name: tip, parent_body: {side}_tool, pos_m: [0.05, 0.0, 0.0]}}
    home: {{joints_rad: [0.0, 0.3]}}
    limits:
      workspace_cm: {{x: [-100, 100], y: [-100, 100], z: [-100, 100]}}
      max_position_step_cm: 10
      max_rotation_step_rad: 0.5
      joint_velocity_rad_s: 1.0
"""


def test_includes_frames_defaults_and_two_top_level_arms(tmp_path) -> None:
    """A file MuJoCo loads is a file the kinematics load: `<include>` (at the top and inside a
    body), default classes, a `<frame>` turned in degrees, two top-level arm bodies and a joint
    `ref`. Pinocchio's own MJCF parser reads only the first top-level body and skips includes."""
    (tmp_path / "two_arms.xml").write_text(INCLUDE_MAIN)
    (tmp_path / "defaults.xml").write_text(INCLUDE_DEFAULTS)
    (tmp_path / "arm_left.xml").write_text(INCLUDE_LEFT)
    text = TWO_ARMS_YAML + TWO_ARMS_PART.format(side="left") + TWO_ARMS_PART.format(side="right")
    (tmp_path / "two_arms.yaml").write_text(text)
    robot = load_robot(tmp_path / "two_arms.yaml")
    kin = Kinematics(robot)
    lo, hi = kin.joint_limits("right")
    assert np.allclose(lo, np.radians([-170, -170])) and np.allclose(hi, np.radians([170, 170]))
    qs = np.random.default_rng(5).uniform(-2.5, 2.5, (30, 2))
    for side in ("left", "right"):
        _assert_fk_matches_mujoco(robot, side, qs)


def test_end_effector_on_an_attached_body(panda) -> None:
    """The Panda's hand is an attached file; the tool point can now hang from it (it used to be
    refused: the kinematics read the main file only)."""
    arm = panda.parts["arm"]
    ee = arm.end_effector.model_copy(update={"parent_body": "hand_panda_hand", "quat_wxyz": [1.0, 0, 0, 0]})
    robot = panda.model_copy(update={"parts": {"arm": arm.model_copy(update={"end_effector": ee})}})
    qs = np.random.default_rng(2).uniform(-1.5, 1.5, (30, 7))
    qs[:, 3] = np.clip(qs[:, 3], -3.0, -0.1)
    _assert_fk_matches_mujoco(robot, "arm", qs)


def test_kinematics_need_no_mesh_files(tmp_path) -> None:
    """The kinematics compile the robot with stand-ins for its meshes: a model whose mesh file is
    missing (LIBERO's generated Panda points into another environment) still has kinematics, and
    they agree with MuJoCo's once the mesh is there."""
    import mujoco

    mjcf = ROOT_MJCF.replace("<worldbody>", '<asset><mesh name="m" file="link.stl"/></asset><worldbody>')
    mjcf = mjcf.replace('<geom size="0.03"/>\n      </body>', '<geom type="mesh" mesh="m"/>\n      </body>')
    assert 'mesh="m"' in mjcf
    (tmp_path / "arm.xml").write_text(mjcf)
    (tmp_path / "arm.yaml").write_text(ROOT_YAML)
    with pytest.raises(ValueError, match=r"link\.stl"):
        mujoco.MjModel.from_xml_path(str(tmp_path / "arm.xml"))
    robot = load_robot(tmp_path / "arm.yaml")
    kin = Kinematics(robot)
    (tmp_path / "link.stl").write_bytes(_box_stl(0.05))  # now MuJoCo itself can compile it
    _assert_fk_matches_mujoco(robot, "arm", np.random.default_rng(4).uniform(-3, 3, (20, 2)))
    assert kin.joint_limits("arm")[1].tolist() == pytest.approx([3.0, 3.0])


def _box_stl(half_m: float) -> bytes:
    """A binary STL of a cube (12 triangles)."""
    import struct

    h = half_m
    v = [[x, y, z] for x in (-h, h) for y in (-h, h) for z in (-h, h)]
    faces = [(0, 1, 3), (0, 3, 2), (4, 6, 7), (4, 7, 5), (0, 4, 5), (0, 5, 1)]
    faces += [(2, 3, 7), (2, 7, 6), (0, 2, 6), (0, 6, 4), (1, 5, 7), (1, 7, 3)]
    out = b"\0" * 80 + struct.pack("<I", len(faces))
    for a, b, c in faces:
        out += struct.pack("<3f", 0, 0, 0) + b"".join(struct.pack("<3f", *v[i]) for i in (a, b, c)) + b"\0\0"
    return out


def test_libero_panda_kinematics_build_in_the_core_environment() -> None:
    """sim_adapters/libero/libero_panda.yaml: its model is robosuite's Panda as LIBERO mounts it;
    the core environment loads the YAML and builds its kinematics (FK, IK round trip)."""
    from sim_adapters.libero.config import ROBOT_MODEL, write_robot_model
    from sim_adapters.libero.family import LIBERO_ROBOT

    # the model file is generated from an installed robosuite's Panda (setup_libero.sh writes it
    # from .venv-libero's; the core environment has robosuite too), so git holds no machine's
    # absolute paths; one already written (by setup_libero.sh) is kept
    if not ROBOT_MODEL.is_file():
        assert write_robot_model() == ROBOT_MODEL
    assert ROBOT_MODEL.is_file()
    robot = load_robot(LIBERO_ROBOT)
    kin = Kinematics(robot)
    home = np.array(robot.parts["arm"].home.joints_rad)
    pose = kin.fk("arm", home)
    target = pose.position_m + np.array([0.03, -0.02, 0.02])
    res = kin.ik("arm", target, pose.rotation, home)
    assert res.success, res.reason
    assert np.linalg.norm(kin.fk("arm", res.joints_rad).position_m - target) < 1e-3
