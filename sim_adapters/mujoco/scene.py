"""Builds a MuJoCo scene from a robot description: the robot (its model file and attachments, as a
child spec), position actuators, a table, cameras and lights. Tasks add their objects to the same
spec.

The world frame is the robot's base frame, so poses from Pinocchio and MuJoCo compare directly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import mujoco
import numpy as np

from pear_agent.robot.config import ArmSim, Gripper, GripperSim, Part, RobotConfig, RobotConfigError
from pear_agent.robot.kinematics import quat_wxyz_to_matrix
from pear_agent.robot.model import (
    CONTACT_OPTIONS,
    RUNTIME_PREFIX,
    apply_joint_overrides,
    camera_name,
    ee_site_name,
    find_actuator,
    load_robot_spec,
    one_line,
    quiet_mujoco,
)

if TYPE_CHECKING:
    from sim_adapters.mujoco.tasks.base import MujocoTask


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


@dataclass(frozen=True)
class PartDrive:
    """The scene's actuators of one part: the arm joints' servos in joint order, the gripper's."""

    arm: list[str]
    gripper: list[str]


def _is_servo(act: mujoco.MjsActuator) -> bool:
    return act.biastype != mujoco.mjtBias.mjBIAS_NONE


def _set_servo_gains(act: mujoco.MjsActuator, kp: float | None, kv: float | None) -> None:
    """A position servo: force = kp (ctrl - q) - kv qdot."""
    act.gaintype = mujoco.mjtGain.mjGAIN_FIXED
    act.biastype = mujoco.mjtBias.mjBIAS_AFFINE
    if kp is not None:
        act.gainprm[0] = kp
        act.biasprm[0], act.biasprm[1] = 0.0, -kp
    if kv is not None:
        act.biasprm[2] = -kv


def _arm_drive(label: str, key: str, part: Part, spec: mujoco.MjSpec) -> list[str]:
    """Which actuators servo the part's joints, in joint order, with the YAML's gains set.

    `sim.actuators`: the model's (any may be named by index or joint), each checked to drive its
    joint; `sim.kp`/`sim.kv` alone: servos the scene adds (`pear/<joint>`), refused where the model
    already servos a joint; neither: the model's own servo of each joint, found by the joint."""
    sim = part.sim or ArmSim()
    if sim.actuators:
        names = []
        for i, (joint, ref) in enumerate(zip(part.joints, sim.actuators, strict=True)):
            where = f"{label}: key {key}.sim.actuators.{i}"
            act = find_actuator(spec, ref, where)
            if act.trntype != mujoco.mjtTrn.mjTRN_JOINT or act.target != joint:
                raise RobotConfigError(
                    f"{where}: actuator {act.name!r} does not drive joint {joint!r} "
                    f"(it drives {act.target!r})"
                )
            if not _is_servo(act) and sim.kp is None:
                raise RobotConfigError(
                    f"{where}: actuator {act.name!r} is not a position servo (a motor: its ctrl is a force); "
                    "give sim.kp and sim.kv to make it one"
                )
            names.append(act.name)
        return names
    if sim.kp is not None:
        for act in spec.actuators:
            if act.trntype == mujoco.mjtTrn.mjTRN_JOINT and act.target in part.joints and _is_servo(act):
                raise RobotConfigError(
                    f"{label}: key {key}.sim.actuators: the model's actuator {act.name!r} already servos "
                    f"joint {act.target!r}; list the model's servos of the joints in sim.actuators (by "
                    "name, index or {joint: ...}), or leave out sim.kp and sim.kv to drive them as the "
                    "file tunes them"
                )
        return [f"{RUNTIME_PREFIX}{j}" for j in part.joints]
    names = []
    for joint in part.joints:
        servos = [
            a
            for a in spec.actuators
            if a.trntype == mujoco.mjtTrn.mjTRN_JOINT and a.target == joint and _is_servo(a)
        ]
        if len(servos) != 1:
            what = "no position servo" if not servos else f"{len(servos)} position servos"
            raise RobotConfigError(
                f"{label}: key {key}.sim: joint {joint!r} has {what} in the model; give sim.kp and sim.kv "
                "(one gain per joint) for the simulator to add servos, or name the model's in sim.actuators"
            )
        names.append(servos[0].name)
    return names


def _gripper_drive(label: str, key: str, part: Part, spec: mujoco.MjSpec) -> list[str]:
    """The gripper's actuators (the model's, by name, index or joint; or the one the scene adds)."""
    g = part.gripper
    if g is None:
        return []
    if g.sim is not None:
        _add_pads(label, key, g.sim, spec)
    if g.create_actuator:
        if spec.actuator(str(g.actuator)) is not None:
            raise RobotConfigError(
                f"{label}: key {key}.gripper.create_actuator: the model already has an actuator "
                f"{g.actuator!r}; drop create_actuator to drive it"
            )
        return [str(g.actuator)]
    names = []
    for i, drive in enumerate(g.drives):
        field = "actuator" if g.actuator is not None else f"actuators.{i}.name"
        where = f"{label}: key {key}.gripper.{field}"
        try:
            act = find_actuator(spec, drive.name, where)
        except RobotConfigError as exc:
            raise RobotConfigError(f"{exc}; set create_actuator: true if the model has none") from None
        names.append(act.name)
    if g.sim is not None:
        for name in names:
            act = spec.actuator(name)
            if g.sim.kp is not None or g.sim.kv is not None:
                _set_servo_gains(act, g.sim.kp, g.sim.kv)
            if g.sim.force_limit is not None:
                act.forcelimited = 1
                act.forcerange = [-g.sim.force_limit, g.sim.force_limit]
    return names


def _add_pads(label: str, key: str, gains: GripperSim, spec: mujoco.MjSpec) -> None:
    """`gripper.sim.pads`: each finger body collides through its box only."""
    for i, pad in enumerate(gains.pads):
        body = spec.body(pad.body)
        if body is None:
            raise RobotConfigError(
                f"{label}: key {key}.gripper.sim.pads.{i}.body: body {pad.body!r} is not in the model"
            )
        for geom in body.geoms:
            geom.contype = 0
            geom.conaffinity = 0
        body.add_geom(
            name=f"{RUNTIME_PREFIX}{pad.body}_pad{i}",
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=list(pad.half_size_m),
            pos=list(pad.pos_m),
            rgba=[0.2, 0.2, 0.2, 0.0],
            friction=[pad.friction, 0.01, 0.001],
            condim=4,
            group=3,
        )


FINGER_SOLMIX = 1e4
"""The weight of a finger's contact parameters against a touched geom's (MuJoCo's default 1)."""


def _finger_dynamics(
    robot: RobotConfig, key: str, part: Part, spec: mujoco.MjSpec, timestep_s: float
) -> None:
    """`gripper.sim.armature` on the driven finger joints, `frictionloss` on every finger and mimic
    joint; `gripper.sim.contact_time_s` and `friction` on the contacts of every colliding geom the
    finger and mimic joints move (pads included)."""
    g = part.gripper
    if g is None or g.sim is None:
        return
    if g.sim.armature is not None:
        for j in g.joints:  # the driven joints: a passive linkage carries no motor
            spec.joint(j).armature = g.sim.armature
    if g.sim.frictionloss is not None:
        for j in [*g.joints, *g.mimic_joints]:
            spec.joint(j).frictionloss = g.sim.frictionloss
    if g.sim.friction is not None:
        for geom in _finger_collision_geoms(g, spec):
            geom.friction = [g.sim.friction, *list(geom.friction)[1:]]
            geom.priority = max(int(geom.priority), 1)  # its friction, not the larger of the two
    t = g.sim.contact_time_s
    if t is None:
        return
    if t < 2 * timestep_s - 1e-12:
        raise RobotConfigError(
            f"{robot.label}: key {key}.gripper.sim.contact_time_s: {t:g} s is stiffer than MuJoCo allows "
            f"at a {timestep_s:g} s physics step (at least two steps: {2 * timestep_s:g} s)"
        )
    for geom in _finger_collision_geoms(g, spec):
        geom.solref = [t, 1.0]
        geom.solmix = FINGER_SOLMIX


def _finger_collision_geoms(g: Gripper, spec: mujoco.MjSpec) -> list[mujoco.MjsGeom]:
    """Every colliding geom the finger and mimic joints move (pads included); a geom below two of
    them comes twice (it is set twice, to the same values)."""
    return [
        geom
        for j in [*g.joints, *g.mimic_joints]
        for geom in spec.joint(j).parent.find_all(mujoco.mjtObj.mjOBJ_GEOM)
        if geom.contype or geom.conaffinity
    ]


def check_names(robot: RobotConfig, spec: mujoco.MjSpec) -> None:
    """Every body and joint the description names exists in the (attached) model."""
    label = robot.label
    joints = {j.name for j in spec.joints}
    for name, part in robot.parts.items():
        key = f"parts.{name}"
        missing = [j for j in part.joints if j not in joints]
        if missing:
            raise RobotConfigError(f"{label}: key {key}.joints: {missing} not in the model")
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
    for cam_name, cam in robot.cameras.items():
        if cam.sim and cam.sim.mount_body and spec.body(cam.sim.mount_body) is None:
            raise RobotConfigError(
                f"{label}: key cameras.{cam_name}.sim.mount_body: "
                f"body {cam.sim.mount_body!r} is not in the model"
            )


# the runtime's physics defaults (the move-until-still controller is tuned on them)
TIMESTEP_S = 0.002
NOSLIP_ITERATIONS = 2


def _scene_options(robot: RobotConfig, scene: mujoco.MjSpec, robot_spec: mujoco.MjSpec) -> None:
    """The runtime's defaults; the robot files' friction cone and impratio where they set them;
    then the YAML's `sim` section. The robot spec is given the same values (no attach conflict)."""
    opt = scene.option
    opt.timestep = TIMESTEP_S
    opt.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    opt.noslip_iterations = NOSLIP_ITERATIONS
    for name in CONTACT_OPTIONS:
        setattr(opt, name, getattr(robot_spec.option, name))
    s = robot.sim
    if s.timestep_s is not None:
        opt.timestep = s.timestep_s
    if s.integrator is not None:
        opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{s.integrator.upper()}")
    if s.cone is not None:
        opt.cone = getattr(mujoco.mjtCone, f"mjCONE_{s.cone.upper()}")
    if s.impratio is not None:
        opt.impratio = s.impratio
    if s.noslip_iterations is not None:
        opt.noslip_iterations = s.noslip_iterations
    if s.iterations is not None:
        opt.iterations = s.iterations
    for name in ("timestep", "integrator", "noslip_iterations", "iterations", *CONTACT_OPTIONS):
        setattr(robot_spec.option, name, getattr(opt, name))
    for i, (a, b) in enumerate(s.exclude_contacts):
        missing = [n for n in (a, b) if robot_spec.body(n) is None]
        if missing:
            raise RobotConfigError(
                f"{robot.label}: key sim.exclude_contacts.{i}: body {missing[0]!r} is not in the model"
            )
        robot_spec.add_exclude(bodyname1=a, bodyname2=b)


def build_scene(robot: RobotConfig) -> tuple[mujoco.MjSpec, dict[str, PartDrive]]:
    """The robot's scene and, per part, the actuators that drive it.

    The robot (its model file with attachments, see `robot_model.load_robot_spec`) is attached as a
    child spec, so its `<compiler>` settings (angle unit, inertiafromgeom, boundmass, ...) stay its
    own and never reach the table or a task's objects; everything the runtime adds (servos, the
    tool-point sites, table, floor, lights, cameras) is named `pear/...`, apart from the model's
    names. Errors name the YAML file and key."""
    label = robot.label
    robot_spec = load_robot_spec(robot)
    check_names(robot, robot_spec)
    apply_joint_overrides(robot, robot_spec)
    drives: dict[str, PartDrive] = {}
    for name, part in robot.parts.items():
        key = f"parts.{name}"
        arm = _arm_drive(label, key, part, robot_spec)
        if part.sim is not None and part.sim.kp is not None and part.sim.actuators:
            for act_name, kp, kv in zip(arm, part.sim.kp, part.sim.kv or [], strict=True):
                _set_servo_gains(robot_spec.actuator(act_name), kp, kv)
        drives[name] = PartDrive(arm, _gripper_drive(label, key, part, robot_spec))
        _finger_dynamics(robot, key, part, robot_spec, robot.sim.timestep_s or TIMESTEP_S)

    spec = mujoco.MjSpec()
    spec.modelname = robot.name
    spec.compiler.degree = False
    _scene_options(robot, spec, robot_spec)
    with quiet_mujoco():
        try:
            spec.attach(robot_spec, prefix="", frame=spec.worldbody.add_frame())
        except Exception as exc:
            raise RobotConfigError(
                f"{label}: key model: MuJoCo cannot place the robot: {one_line(exc)}"
            ) from None

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
        if part.sim is not None and part.sim.kp is not None and not part.sim.actuators:
            for joint, act_name, kp, kv in zip(
                part.joints, drives[name].arm, part.sim.kp, part.sim.kv or [], strict=True
            ):
                act = spec.add_actuator(name=act_name, target=joint, trntype=mujoco.mjtTrn.mjTRN_JOINT)
                _set_servo_gains(act, kp, kv)
        g = part.gripper
        if g is not None and g.create_actuator:
            _add_gripper_actuator(spec, str(g.actuator), g.joints, g.ctrl_closed, g.ctrl_open, g.sim)

    spec.add_texture(
        name=f"{RUNTIME_PREFIX}sky",
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
        name=TABLE_GEOM,
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=[hx, hy, 0.02],
        pos=[table.center_cm[0] / 100.0, table.center_cm[1] / 100.0, top_z - 0.02],
        rgba=[0.62, 0.52, 0.42, 1],
        friction=[1.0, 0.005, 0.0001],
    )
    world.add_geom(
        name=f"{RUNTIME_PREFIX}floor",
        type=mujoco.mjtGeom.mjGEOM_PLANE,
        size=[3, 3, 0.1],
        pos=[0, 0, top_z - 0.75],
        rgba=[0.3, 0.32, 0.35, 1],
        contype=0,
        conaffinity=0,
    )
    world.add_light(
        name=f"{RUNTIME_PREFIX}key",
        pos=[0.6, -0.4, 1.6],
        dir=[-0.1, 0.25, -1],
        castshadow=False,
        diffuse=[0.8, 0.8, 0.8],
    )
    world.add_light(
        name=f"{RUNTIME_PREFIX}fill",
        pos=[-0.5, 0.6, 1.2],
        dir=[0.5, -0.4, -1],
        castshadow=False,
        diffuse=[0.35, 0.35, 0.35],
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
        body.add_camera(name=camera_name(cam_name), pos=s.pos_m, quat=list(quat), fovy=s.fovy_deg)
        max_w, max_h = max(max_w, cam.width), max(max_h, cam.height)
    spec.visual.global_.offwidth = max_w
    spec.visual.global_.offheight = max_h
    return spec, drives


def build_robot_spec(robot: RobotConfig) -> mujoco.MjSpec:
    """The robot's scene (see `build_scene`), without the actuator map."""
    return build_scene(robot)[0]


TABLE_GEOM = f"{RUNTIME_PREFIX}table"

_REPEATED = re.compile(r"repeated name '([^']*)' in (\w+)")


def clash_error(robot: RobotConfig, exc: BaseException, task: str | None) -> RobotConfigError | None:
    """A name the model and a task's objects share (MuJoCo: `repeated name`), as one keyed line."""
    text = one_line(exc)
    clash = _REPEATED.search(text)
    if clash is None:
        return None
    who = f"the task {task!r}" if task else "a task"
    return RobotConfigError(
        f"{robot.label}: key model.mjcf: the model has a {clash[2]} named {clash[1]!r}, and {who} "
        f"adds one of that name too (MuJoCo: {text})"
    )


def add_task(robot: RobotConfig, spec: mujoco.MjSpec, task: MujocoTask) -> None:
    """Let the task add its objects; a name it shares with the model is one keyed line."""
    try:
        task.build(spec, robot)
    except ValueError as exc:
        err = clash_error(robot, exc, task.name)
        if err is None:
            raise
        raise err from None


def compile_spec(robot: RobotConfig, spec: mujoco.MjSpec, task: str | None = None) -> mujoco.MjModel:
    """Compile the scene; a name the model and a task's objects share is one line naming both."""
    try:
        with quiet_mujoco():
            return spec.compile()
    except Exception as exc:
        err = clash_error(robot, exc, task)
        if err is not None:
            raise err from None
        raise RobotConfigError(
            f"{robot.label}: key model: MuJoCo cannot compile the scene: {one_line(exc)}"
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
GRIPPER_KV = 150.0
GRIPPER_FORCE_N = 60.0


def _add_gripper_actuator(
    spec: mujoco.MjSpec,
    name: str,
    joints: list[str],
    ctrl_closed: float,
    ctrl_open: float,
    gains: GripperSim | None = None,
) -> None:
    """A force-limited position servo for models that ship none (e.g. the i2rt YAM: fingers
    coupled by an equality, no actuators). It pulls on a tendon that averages the finger joints,
    so every finger is driven (an equality alone is too soft to carry the grip force) and ctrl
    is in finger-joint units."""
    gains = gains or GripperSim()
    kp = gains.kp if gains.kp is not None else GRIPPER_KP_N_M
    kv = gains.kv if gains.kv is not None else GRIPPER_KV
    force = gains.force_limit if gains.force_limit is not None else GRIPPER_FORCE_N
    tendon = spec.add_tendon(name=f"{RUNTIME_PREFIX}{name}_split")
    for j in joints:
        tendon.wrap_joint(j, 1.0 / len(joints))
    act = spec.add_actuator(name=name, target=tendon.name, trntype=mujoco.mjtTrn.mjTRN_TENDON)
    _set_servo_gains(act, kp, kv)
    act.ctrllimited = 1
    act.ctrlrange = sorted([ctrl_closed, ctrl_open])
    act.forcelimited = 1
    act.forcerange = [-force, force]


def rot_z_quat(yaw: float) -> list[float]:
    return [float(np.cos(yaw / 2)), 0.0, 0.0, float(np.sin(yaw / 2))]


def quat_yaw(quat_wxyz: np.ndarray) -> float:
    rot = quat_wxyz_to_matrix(list(quat_wxyz))
    return float(np.arctan2(rot[1, 0], rot[0, 0]))
