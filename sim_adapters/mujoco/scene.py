"""Builds a MuJoCo scene from a robot description: the robot's own model file, its attachments,
position actuators, a table, cameras and lights. Tasks add their objects to the same spec.

The world frame is the robot's base frame, so poses from Pinocchio and MuJoCo compare directly.
"""

from __future__ import annotations

import mujoco
import numpy as np

from pear_agent.kinematics import quat_wxyz_to_matrix
from pear_agent.robot_config import RobotConfig

TABLE_TOP_Z_M = 0.0


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


def build_robot_spec(
    robot: RobotConfig,
    table_size_m: tuple[float, float] = (0.6, 0.7),
    table_center_m: tuple[float, float] = (0.45, 0.0),
) -> mujoco.MjSpec:
    spec = mujoco.MjSpec.from_file(str(robot.resolve(robot.model.mjcf)))
    spec.option.timestep = 0.002
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    spec.option.noslip_iterations = 2
    for att in robot.model.attachments:
        child = mujoco.MjSpec.from_file(str(robot.resolve(att.file)))
        parent = spec.body(att.parent_body)
        if parent is None:
            raise ValueError(f"attachment parent_body {att.parent_body!r} is not in {robot.model.mjcf}")
        frame = parent.add_frame(pos=att.pos_m, quat=att.quat_wxyz)
        frame.attach_body(child.body(att.body), att.prefix, "")

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
            for joint, kp, kv in zip(part.joints, part.sim.kp, part.sim.kv, strict=True):
                act = spec.add_actuator(name=f"{joint}_pos", target=joint, trntype=mujoco.mjtTrn.mjTRN_JOINT)
                act.gaintype = mujoco.mjtGain.mjGAIN_FIXED
                act.biastype = mujoco.mjtBias.mjBIAS_AFFINE
                act.gainprm[0] = kp
                act.biasprm[:3] = [0.0, -kp, -kv]
        g = part.gripper
        if g is not None and g.actuator and spec.actuator(g.actuator) is None:
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
    hx, hy = table_size_m
    world.add_geom(
        name="table",
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=[hx, hy, 0.02],
        pos=[table_center_m[0], table_center_m[1], TABLE_TOP_Z_M - 0.02],
        rgba=[0.62, 0.52, 0.42, 1],
        friction=[1.0, 0.005, 0.0001],
    )
    world.add_geom(
        name="floor",
        type=mujoco.mjtGeom.mjGEOM_PLANE,
        size=[3, 3, 0.1],
        pos=[0, 0, -0.75],
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
        if body is None:
            raise ValueError(f"camera {cam_name}: mount_body {s.mount_body!r} is not in the model")
        quat = look_at_quat(np.array(s.pos_m), np.array(s.look_at_m)) if s.look_at_m else s.quat_wxyz
        body.add_camera(name=cam_name, pos=s.pos_m, quat=list(quat), fovy=s.fovy_deg)
        max_w, max_h = max(max_w, cam.width), max(max_h, cam.height)
    spec.visual.global_.offwidth = max_w
    spec.visual.global_.offheight = max_h
    return spec


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
