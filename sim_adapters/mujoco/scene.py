"""Builds a MuJoCo scene from a robot description: the robot's own model file, its attachments,
position actuators, a table, cameras and lights. Tasks add their objects to the same spec.

The world frame is the robot's base frame, so poses from Pinocchio and MuJoCo compare directly.
"""

from __future__ import annotations

import mujoco
import numpy as np

from pear_agent.kinematics import quat_wxyz_to_matrix
from pear_agent.robot_config import Part, RobotConfig, RobotConfigError


def look_at_quat(pos: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Quaternion (wxyz) of a MuJoCo camera at `pos` looking at `target` with +z world up."""
    fwd = np.asarray(target, float) - np.asarray(pos, float)
    fwd /= np.linalg.norm(fwd)
    right = np.cross(fwd, [0.0, 0.0, 1.0])
    if np.linalg.norm(right) < 1e-6:
        right = np.array([0.0, -1.0, 0.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, fwd)
    mat = np.column_stack([right, up, -fwd])
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, mat.flatten())
    return quat


def ee_site_name(part: str) -> str:
    return f"{part}_ee"


def _load_spec(robot: RobotConfig, ref: str, key: str) -> mujoco.MjSpec:
    path = robot.resolve(ref, key)
    try:
        return mujoco.MjSpec.from_file(str(path))
    except Exception as exc:  # MuJoCo raises ValueError with its own multi-line text
        raise RobotConfigError(f"{robot.label}: key {key} ({path}): MuJoCo: {_one_line(exc)}") from None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).replace("Error:", "").split())


def arm_actuator_names(part: Part) -> list[str]:
    """The actuators that servo an arm part's joints: the model's own (`sim.actuators`) or the ones
    the scene adds (`<joint>_pos`)."""
    if part.sim is not None and part.sim.actuators:
        return list(part.sim.actuators)
    return [f"{j}_pos" for j in part.joints]


def _check_arm_actuators(label: str, key: str, part: Part, spec: mujoco.MjSpec) -> None:
    """`sim.actuators` are the model's joint actuators of the part's joints, in order; without
    them no model actuator may already servo an arm joint (it would fight the added servo)."""
    if part.sim is None:
        return
    named = set(part.sim.actuators)
    for i, (joint, act_name) in enumerate(zip(part.joints, part.sim.actuators, strict=False)):
        act = spec.actuator(act_name)
        if act is None:
            raise RobotConfigError(
                f"{label}: key {key}.sim.actuators.{i}: actuator {act_name!r} is not in the model"
            )
        if act.trntype != mujoco.mjtTrn.mjTRN_JOINT or act.target != joint:
            raise RobotConfigError(
                f"{label}: key {key}.sim.actuators.{i}: actuator {act_name!r} does not drive joint {joint!r}"
            )
    for act in spec.actuators:
        if (
            act.name not in named
            and act.trntype == mujoco.mjtTrn.mjTRN_JOINT
            and act.target in part.joints
            and act.biastype != mujoco.mjtBias.mjBIAS_NONE
        ):
            raise RobotConfigError(
                f"{label}: key {key}.sim.actuators: the model's actuator {act.name!r} already servos joint "
                f"{act.target!r}; list the model's actuators of the joints in sim.actuators to drive them"
            )


def check_names(robot: RobotConfig, spec: mujoco.MjSpec) -> None:
    """Every body, joint and actuator the description names exists in the (attached) model."""
    label = robot.label
    joints = {j.name for j in spec.joints}
    actuators = {a.name for a in spec.actuators}
    for name, part in robot.parts.items():
        key = f"parts.{name}"
        missing = [j for j in part.joints if j not in joints]
        if missing:
            raise RobotConfigError(f"{label}: key {key}.joints: {missing} not in the model")
        _check_arm_actuators(label, key, part, spec)
        if spec.body(part.end_effector.parent_body) is None:
            raise RobotConfigError(
                f"{label}: key {key}.end_effector.parent_body: body {part.end_effector.parent_body!r} "
                "is not in the model"
            )
        g = part.gripper
        if g is None:
            continue
        for field, names in (("joints", g.joints), ("mimic_joints", g.mimic_joints)):
            missing = [j for j in names if j not in joints]
            if missing:
                raise RobotConfigError(f"{label}: key {key}.gripper.{field}: {missing} not in the model")
        arm_overlap = set(g.joints) & set(part.joints)
        if arm_overlap:
            raise RobotConfigError(
                f"{label}: key {key}.gripper.joints: {sorted(arm_overlap)} are also arm joints"
            )
        if g.create_actuator:
            if g.actuator in actuators:
                raise RobotConfigError(
                    f"{label}: key {key}.gripper.create_actuator: the model already has an actuator "
                    f"{g.actuator!r}; drop create_actuator to drive it"
                )
            continue
        for i, drive in enumerate(g.drives):
            if drive.name not in actuators:
                field = "actuator" if g.actuator else f"actuators.{i}.name"
                hint = sorted(a for a in actuators if not a.startswith(tuple(part.joints)))
                raise RobotConfigError(
                    f"{label}: key {key}.gripper.{field}: actuator {drive.name!r} is not in the model "
                    f"(its actuators: {hint or 'none'}; set create_actuator: true if it has none)"
                )
    for cam_name, cam in robot.cameras.items():
        if cam.sim and cam.sim.mount_body and spec.body(cam.sim.mount_body) is None:
            raise RobotConfigError(
                f"{label}: key cameras.{cam_name}.sim.mount_body: "
                f"body {cam.sim.mount_body!r} is not in the model"
            )


def build_robot_spec(robot: RobotConfig) -> mujoco.MjSpec:
    """The robot's scene: its model file with attachments, position servos for the arm joints, the
    gripper drive, the table of its `table` section, cameras and lights. Errors name the YAML file
    and key."""
    label = robot.label
    spec = _load_spec(robot, robot.model.mjcf, "model.mjcf")
    spec.option.timestep = 0.002
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    spec.option.noslip_iterations = 2
    for i, att in enumerate(robot.model.attachments):
        key = f"model.attachments.{i}"
        child = _load_spec(robot, att.file, f"{key}.file")
        if att.angle_unit != "file":
            child.compiler.degree = att.angle_unit == "degree"
        _adopt_contact_options(spec, child)
        parent = spec.body(att.parent_body)
        if parent is None:
            raise RobotConfigError(
                f"{label}: key {key}.parent_body: body {att.parent_body!r} is not in the model"
            )
        body = child.body(att.body)
        if body is None:
            raise RobotConfigError(f"{label}: key {key}.body: body {att.body!r} is not in {att.file}")
        frame = parent.add_frame(pos=att.pos_m, quat=att.quat_wxyz)
        try:
            frame.attach_body(body, att.prefix, "")
        except Exception as exc:
            raise RobotConfigError(f"{label}: key {key}: MuJoCo cannot attach it: {_one_line(exc)}") from None
    check_names(robot, spec)

    for name, part in robot.parts.items():
        ee = part.end_effector
        spec.body(ee.parent_body).add_site(
            name=ee_site_name(name),
            pos=ee.pos_m,
            quat=ee.quat_wxyz,
            size=[0.005, 0, 0],
            rgba=[1, 0, 0, 0.0],
            group=4,
        )
        if part.sim is not None:
            for joint, act_name, kp, kv in zip(
                part.joints, arm_actuator_names(part), part.sim.kp, part.sim.kv, strict=True
            ):
                act = spec.actuator(act_name) if part.sim.actuators else None
                if act is None:
                    act = spec.add_actuator(name=act_name, target=joint, trntype=mujoco.mjtTrn.mjTRN_JOINT)
                act.gaintype = mujoco.mjtGain.mjGAIN_FIXED
                act.biastype = mujoco.mjtBias.mjBIAS_AFFINE
                act.gainprm[0] = kp
                act.biasprm[:3] = [0.0, -kp, -kv]
        g = part.gripper
        if g is not None and g.create_actuator and g.actuator:
            _add_gripper_actuator(spec, g.actuator, g.joints, g.ctrl_closed, g.ctrl_open)

    spec.add_texture(
        name="sky",
        type=mujoco.mjtTexture.mjTEXTURE_SKYBOX,
        builtin=mujoco.mjtBuiltin.mjBUILTIN_GRADIENT,
        rgb1=[0.55, 0.62, 0.72],
        rgb2=[0.12, 0.14, 0.18],
        width=64,
        height=64,
    )
    world = spec.worldbody
    table = robot.table_or_default()
    top_z = table_top_z_m(robot)
    hx, hy = (v / 100.0 for v in table.half_size_cm)
    world.add_geom(
        name="table",
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=[hx, hy, 0.02],
        pos=[table.center_cm[0] / 100.0, table.center_cm[1] / 100.0, top_z - 0.02],
        rgba=[0.62, 0.52, 0.42, 1],
        friction=[1.0, 0.005, 0.0001],
    )
    world.add_geom(
        name="floor",
        type=mujoco.mjtGeom.mjGEOM_PLANE,
        size=[3, 3, 0.1],
        pos=[0, 0, top_z - 0.75],
        rgba=[0.3, 0.32, 0.35, 1],
        contype=0,
        conaffinity=0,
    )
    world.add_light(
        name="key", pos=[0.6, -0.4, 1.6], dir=[-0.1, 0.25, -1], castshadow=False, diffuse=[0.8, 0.8, 0.8]
    )
    world.add_light(
        name="fill", pos=[-0.5, 0.6, 1.2], dir=[0.5, -0.4, -1], castshadow=False, diffuse=[0.35, 0.35, 0.35]
    )
    spec.visual.headlight.ambient = [0.35, 0.35, 0.35]
    spec.visual.quality.shadowsize = 0
    spec.visual.quality.offsamples = 0

    max_w, max_h = 640, 480
    for cam_name, cam in robot.cameras.items():
        if cam.sim is None:
            continue
        s = cam.sim
        body = world if s.mount_body is None else spec.body(s.mount_body)
        quat = look_at_quat(np.array(s.pos_m), np.array(s.look_at_m)) if s.look_at_m else s.quat_wxyz
        body.add_camera(name=cam_name, pos=s.pos_m, quat=list(quat), fovy=s.fovy_deg)
        max_w, max_h = max(max_w, cam.width), max(max_h, cam.height)
    spec.visual.global_.offwidth = max_w
    spec.visual.global_.offheight = max_h
    return spec


_CONTACT_OPTIONS = ("cone", "impratio")


def _adopt_contact_options(spec: mujoco.MjSpec, child: mujoco.MjSpec) -> None:
    """An attached file's contact options (friction cone, impratio) apply where the main file
    leaves MuJoCo's default: a gripper tuned for elliptic cones (Menagerie's 2F-85) grasps as its
    file says. MuJoCo's attach would keep the parent's value and warn."""
    default = mujoco.MjSpec().option
    for name in _CONTACT_OPTIONS:
        base = getattr(default, name)
        if getattr(spec.option, name) == base and getattr(child.option, name) != base:
            setattr(spec.option, name, getattr(child.option, name))


def compile_spec(robot: RobotConfig, spec: mujoco.MjSpec) -> mujoco.MjModel:
    try:
        return spec.compile()
    except Exception as exc:
        raise RobotConfigError(
            f"{robot.label}: key model: MuJoCo cannot compile the scene: {_one_line(exc)}"
        ) from None


def table_top_z_m(robot: RobotConfig) -> float:
    return float(robot.table_or_default().surface_z_cm) / 100.0


def scene_option(robot: RobotConfig) -> mujoco.MjvOption:
    """Rendering options: the description's hidden geom and site groups (and the ee site, group 4)."""
    opt = mujoco.MjvOption()
    for g in robot.render.hide_geom_groups:
        opt.geomgroup[g] = 0
    for g in robot.render.hide_site_groups:
        opt.sitegroup[g] = 0
    return opt


GRIPPER_KP_N_M = 3000.0
GRIPPER_FORCE_N = 60.0


def _add_gripper_actuator(
    spec: mujoco.MjSpec, name: str, joints: list[str], ctrl_closed: float, ctrl_open: float
) -> None:
    """A force-limited position servo for models that ship none (e.g. the i2rt YAM: fingers
    coupled by an equality, no actuators). It pulls on a tendon that averages the finger joints,
    so every finger is driven (an equality alone is too soft to carry the grip force) and ctrl
    is in finger-joint units."""
    tendon = spec.add_tendon(name=f"{name}_split")
    for j in joints:
        tendon.wrap_joint(j, 1.0 / len(joints))
    act = spec.add_actuator(name=name, target=tendon.name, trntype=mujoco.mjtTrn.mjTRN_TENDON)
    act.gaintype = mujoco.mjtGain.mjGAIN_FIXED
    act.biastype = mujoco.mjtBias.mjBIAS_AFFINE
    act.gainprm[0] = GRIPPER_KP_N_M
    act.biasprm[:3] = [0.0, -GRIPPER_KP_N_M, -0.05 * GRIPPER_KP_N_M]
    act.ctrllimited = 1
    act.ctrlrange = sorted([ctrl_closed, ctrl_open])
    act.forcelimited = 1
    act.forcerange = [-GRIPPER_FORCE_N, GRIPPER_FORCE_N]


def rot_z_quat(yaw: float) -> list[float]:
    return [float(np.cos(yaw / 2)), 0.0, 0.0, float(np.sin(yaw / 2))]


def quat_yaw(quat_wxyz: np.ndarray) -> float:
    rot = quat_wxyz_to_matrix(list(quat_wxyz))
    return float(np.arctan2(rot[1, 0], rot[0, 0]))
