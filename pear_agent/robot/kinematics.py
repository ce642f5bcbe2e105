"""Forward and inverse kinematics with Pinocchio, built from the same model file MuJoCo loads.

Each arm part is solved on its own joint columns; every other joint (the other arm, the fingers)
keeps its current value. Poses are in the robot base frame, metres and rotation matrices inside;
the protocol converts to cm and roll/pitch/yaw at its edge.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pinocchio as pin

from pear_agent.robot.config import Part, RobotConfig, RobotConfigError
from pear_agent.robot.model import compile_robot, part_joint_limits, sample_range

if TYPE_CHECKING:
    import mujoco


def rpy_to_matrix(rpy: np.ndarray) -> np.ndarray:
    """R = Rz(yaw) Ry(pitch) Rx(roll): the convention stated in every robot's frame description."""
    return pin.rpy.rpyToMatrix(float(rpy[0]), float(rpy[1]), float(rpy[2]))


def matrix_to_rpy(rot: np.ndarray) -> np.ndarray:
    return np.asarray(pin.rpy.matrixToRpy(np.asarray(rot, dtype=float)))


def quat_wxyz_to_matrix(q: list[float]) -> np.ndarray:
    w, x, y, z = q
    return pin.Quaternion(w, x, y, z).normalized().toRotationMatrix()


@dataclass(frozen=True)
class Pose:
    position_m: np.ndarray
    rotation: np.ndarray

    @property
    def rpy(self) -> np.ndarray:
        return matrix_to_rpy(self.rotation)


@dataclass(frozen=True)
class IKResult:
    success: bool
    joints_rad: np.ndarray
    position_error_m: float
    rotation_error_rad: float
    iterations: int

    @property
    def reason(self) -> str:
        if self.success:
            return "solved"
        return (
            f"no joint configuration within the joint limits reaches the target: closest pose is "
            f"{self.position_error_m * 100:.1f} cm and {self.rotation_error_rad:.2f} rad away"
        )


class _PartChain:
    """One arm part on the Pinocchio model: its joint columns, limits and tool frame. Values cross
    the Pinocchio boundary shifted by MuJoCo's reference angle (`ref`), so callers see MuJoCo's."""

    def __init__(self, built: _Built, mj: mujoco.MjModel, part: Part, name: str, label: str) -> None:
        model = built.model
        self.name = name
        where = f"{label}: key parts.{name}"
        missing = [j for j in part.joints if j not in built.joints]
        if missing:
            raise RobotConfigError(
                f"{where}.joints: joints {missing} are not in the model (its joints: "
                f"{', '.join(n for n in built.joints if not n.startswith('pear/')) or 'none'})"
            )
        odd = [j for j in part.joints if mj.jnt_type[mj.joint(j).id] not in (_HINGE, _SLIDE)]
        if odd:
            raise RobotConfigError(
                f"{where}.joints: {odd} are ball or free joints; an arm joint turns or slides"
            )
        jids = [built.joints[j] for j in part.joints]
        self.idx_q = np.array([model.joints[j].idx_q for j in jids])
        self.idx_v = np.array([model.joints[j].idx_v for j in jids])
        self.ref = np.array([mj.qpos0[mj.joint(j).qposadr[0]] for j in part.joints])
        lo, hi = part_joint_limits(part, mj)
        self.lower, self.upper = lo - self.ref, hi - self.ref  # Pinocchio's coordinates
        self.sample_lo, self.sample_hi = sample_range(self.lower, self.upper)
        ee = part.end_effector
        body = built.bodies.get(ee.parent_body)
        if body is None:
            raise RobotConfigError(
                f"{where}.end_effector.parent_body: body {ee.parent_body!r} is not in the model"
            )
        parent = model.frames[body]
        offset = pin.SE3(quat_wxyz_to_matrix(ee.quat_wxyz), np.array(ee.pos_m, dtype=float))
        frame = pin.Frame(
            f"{name}_{ee.name}", parent.parentJoint, body, parent.placement * offset, pin.FrameType.OP_FRAME
        )
        self.frame_id = model.addFrame(frame)
        if part.home.joints_rad is not None:
            self.home = np.array(part.home.joints_rad, dtype=float) - self.ref
        else:  # a home still to solve: start from the middle of the joint ranges
            self.home = np.clip(0.0, self.lower, self.upper)
        self.table: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None


_HINGE, _SLIDE, _BALL, _FREE = 3, 2, 1, 0  # mujoco.mjtJoint values


@dataclass
class _Built:
    model: pin.Model
    bodies: dict[str, int]  # MuJoCo body name -> Pinocchio frame id
    joints: dict[str, int]  # MuJoCo joint name -> Pinocchio joint id


def _se3(quat_wxyz: np.ndarray, pos: np.ndarray) -> pin.SE3:
    w, x, y, z = (float(v) for v in quat_wxyz)
    return pin.SE3(pin.Quaternion(w, x, y, z).normalized().toRotationMatrix(), np.array(pos, dtype=float))


def pinocchio_from_mujoco(mj: mujoco.MjModel) -> _Built:
    """A Pinocchio model of what MuJoCo compiled: every body with its pose, every joint at its
    anchor about its axis, every body's inertia. MuJoCo has resolved includes, defaults, frames,
    attachments and angle units, so nothing of the file is read twice. A body's joints compose in
    order about their anchors, as in MuJoCo; bodies and joints without a name get `pear/body<i>`,
    `pear/joint<i>`."""
    import mujoco  # heavy: mujoco

    model = pin.Model()
    model.name = mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_BODY, 0) or "world"
    joint_of = [0] * mj.nbody  # the Pinocchio joint each MuJoCo body hangs from
    place = [pin.SE3.Identity()] * mj.nbody  # the body's frame in that joint's frame
    frame_of = [0] * mj.nbody
    bodies: dict[str, int] = {}
    joints: dict[str, int] = {}
    for b in range(1, mj.nbody):
        p = int(mj.body_parentid[b])
        jid, prev = joint_of[p], frame_of[p]
        placement = place[p] * _se3(mj.body_quat[b], mj.body_pos[b])
        first = int(mj.body_jntadr[b])
        for j in range(first, first + int(mj.body_jntnum[b])) if first >= 0 else ():
            kind = int(mj.jnt_type[j])
            anchor = pin.SE3(np.eye(3), mj.jnt_pos[j].astype(float))
            axis = mj.jnt_axis[j].astype(float)
            if kind == _HINGE:
                jm = pin.JointModelRevoluteUnaligned(axis)
            elif kind == _SLIDE:
                jm = pin.JointModelPrismaticUnaligned(axis)
            elif kind == _BALL:
                jm = pin.JointModelSpherical()
            else:
                jm, anchor = pin.JointModelFreeFlyer(), pin.SE3.Identity()
            name = mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_JOINT, j) or f"pear/joint{j}"
            jid = model.addJoint(jid, jm, placement * anchor, name)
            prev = model.addJointFrame(jid, prev)
            joints[name] = jid
            placement = anchor.inverse()
        rot = pin.Quaternion(*(float(v) for v in mj.body_iquat[b])).normalized().toRotationMatrix()
        inertia = pin.Inertia(
            float(mj.body_mass[b]), mj.body_ipos[b].astype(float), rot @ np.diag(mj.body_inertia[b]) @ rot.T
        )
        model.appendBodyToJoint(jid, inertia, placement)
        name = mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_BODY, b) or f"pear/body{b}"
        frame_of[b] = model.addBodyFrame(name, jid, placement, prev)
        bodies[name] = frame_of[b]
        joint_of[b], place[b] = jid, placement
    return _Built(model, bodies, joints)


class Kinematics:
    """FK and damped-least-squares IK for every arm part of a robot description."""

    def __init__(
        self,
        robot: RobotConfig,
        position_tolerance_m: float = 5e-4,
        rotation_tolerance_rad: float = 5e-3,
        max_iterations: int = 200,
        restarts: int = 20,
        patience: int = 10,
        table_seeds: int = 4,
        table_size: int = 2000,
    ) -> None:
        self.robot = robot
        mj = compile_robot(robot)
        built = pinocchio_from_mujoco(mj)
        self.model = built.model
        self.chains = {
            name: _PartChain(built, mj, part, name, robot.label) for name, part in robot.parts.items()
        }
        self.data = self.model.createData()
        self.position_tolerance_m = position_tolerance_m
        self.rotation_tolerance_rad = rotation_tolerance_rad
        self.max_iterations = max_iterations
        self.restarts = restarts
        # a restart gives up after `patience` iterations without a 5% better residual (the warm
        # start after twice as many): stuck attempts end early, so many cheap restarts fit the time
        self.patience = patience
        # restarts 2.. start from the table configurations whose poses are nearest the target
        self.table_seeds, self.table_size = table_seeds, table_size
        self._q = pin.neutral(self.model)
        for chain in self.chains.values():
            self._q[chain.idx_q] = chain.home
        self._rng = np.random.default_rng(0)
        self._damping = np.eye(6) * 1e-4

    def joint_limits(self, part: str) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper limits of a part's joints (-inf/+inf for a continuous joint)."""
        c = self.chains[part]
        return c.lower + c.ref, c.upper + c.ref

    def fk(self, part: str, joints_rad: np.ndarray) -> Pose:
        chain = self.chains[part]
        self._q[chain.idx_q] = np.asarray(joints_rad, dtype=float) - chain.ref
        return self._fk_pin(chain)

    def _fk_pin(self, chain: _PartChain) -> Pose:
        pin.forwardKinematics(self.model, self.data, self._q)
        m = pin.updateFramePlacement(self.model, self.data, chain.frame_id)
        return Pose(m.translation.copy(), m.rotation.copy())

    def _dls(
        self, chain: _PartChain, target: pin.SE3, q_arm: np.ndarray, patience: int
    ) -> tuple[np.ndarray, float, float, int]:
        """Damped least squares from `q_arm`, projected onto the joint limits each step.

        One Pinocchio call per iteration (`computeFrameJacobian` also places the frame); the loop
        stops early when the residual has not improved by 5% for `patience` iterations.
        """
        model, data, q, fid = self.model, self.data, self._q, chain.frame_id
        idx_q, idx_v, lower, upper = chain.idx_q, chain.idx_v, chain.lower, chain.upper
        p_target, r_target = target.translation, target.rotation
        tol_p, tol_r = self.position_tolerance_m, self.rotation_tolerance_rad
        q[idx_q] = q_arm
        err = np.zeros(6)
        best, since = math.inf, 0
        pos_err = rot_err = math.inf
        for it in range(1, self.max_iterations + 1):
            jac = pin.computeFrameJacobian(model, data, q, fid, pin.LOCAL_WORLD_ALIGNED)[:, idx_v]
            cur = data.oMf[fid]
            err[:3] = p_target - cur.translation
            err[3:] = pin.log3(r_target @ cur.rotation.T)
            pos_err = math.sqrt(err[0] * err[0] + err[1] * err[1] + err[2] * err[2])
            rot_err = math.sqrt(err[3] * err[3] + err[4] * err[4] + err[5] * err[5])
            if pos_err < tol_p and rot_err < tol_r:
                return q[idx_q].copy(), pos_err, rot_err, it
            score = pos_err + 0.1 * rot_err
            if score < 0.95 * best:
                best, since = score, 0
            else:
                since += 1
                if since >= patience:
                    return q[idx_q].copy(), pos_err, rot_err, it
            dq = jac.T @ np.linalg.solve(jac @ jac.T + self._damping, err)
            step = float(np.max(np.abs(dq)))
            if step > 0.5:
                dq *= 0.5 / step
            q[idx_q] = np.clip(q[idx_q] + dq, lower, upper)
        return q[idx_q].copy(), pos_err, rot_err, self.max_iterations

    def _table_seeds(self, chain: _PartChain, target: pin.SE3, k: int) -> list[np.ndarray]:
        """The k configurations of a fixed random table whose tool poses are nearest the target:
        good seeds for far targets (the warm start only knows the way to nearby ones). Built on
        first use, deterministic."""
        if k <= 0:
            return []
        if chain.table is None:
            rng = np.random.default_rng(1)
            qs = rng.uniform(chain.sample_lo, chain.sample_hi, size=(self.table_size, chain.lower.size))
            poses = []
            for q in qs:
                self._q[chain.idx_q] = q
                poses.append(self._fk_pin(chain))
            chain.table = (
                qs,
                np.array([p.position_m for p in poses]),
                np.array([p.rotation for p in poses]),
            )
        qs, pos, rot = chain.table
        cos = (np.einsum("kij,ij->k", rot, target.rotation) - 1.0) / 2.0
        dist = np.linalg.norm(pos - target.translation, axis=1) + 0.1 * np.arccos(np.clip(cos, -1, 1))
        return [qs[i].copy() for i in np.argsort(dist)[:k]]

    def ik(self, part: str, position_m: np.ndarray, rotation: np.ndarray, seed_rad: np.ndarray) -> IKResult:
        """Joint targets for a tool pose, warm-started from `seed_rad` (usually the current joints).

        If the warm start does not converge, restarts from seeds drawn ever farther around it (up
        to the whole joint range) are tried, so a nearby solution is preferred; the result is
        refused (success False, with the residual) rather than returned approximate.
        """
        chain = self.chains[part]
        target = pin.SE3(np.asarray(rotation, dtype=float), np.asarray(position_m, dtype=float))
        seed = np.clip(np.asarray(seed_rad, dtype=float) - chain.ref, chain.lower, chain.upper)
        best: tuple[np.ndarray, float, float, int] | None = None
        total_it = 0
        near: list[np.ndarray] | None = None
        for attempt in range(self.restarts + 1):
            if attempt == 0:
                start, patience = seed, 2 * self.patience
            elif 1 < attempt <= 1 + self.table_seeds:
                if near is None:
                    near = self._table_seeds(chain, target, self.table_seeds)
                start, patience = near[attempt - 2], self.patience
            else:
                span = (chain.sample_hi - chain.sample_lo) * min(1.0, 0.1 * attempt)
                lo, hi = np.maximum(chain.lower, seed - span), np.minimum(chain.upper, seed + span)
                start, patience = self._rng.uniform(lo, hi), self.patience
            q, pe, re, it = self._dls(chain, target, start, patience)
            total_it += it
            if best is None or pe + 0.1 * re < best[1] + 0.1 * best[2]:
                best = (q, pe, re, it)
            if pe < self.position_tolerance_m and re < self.rotation_tolerance_rad:
                return IKResult(True, q + chain.ref, pe, re, total_it)
        assert best is not None
        return IKResult(False, best[0] + chain.ref, best[1], best[2], total_it)


def solve_homes(robot: RobotConfig) -> RobotConfig:
    """The description with every `home.tool_pose` solved into `home.joints_rad` (IK from the
    middle of the joint ranges); a pose no joint values reach is one keyed line."""
    kin = Kinematics(robot)
    parts = dict(robot.parts)
    for name, part in robot.parts.items():
        pose = part.home.tool_pose
        if part.home.joints_rad is not None or pose is None:
            continue
        res = kin.ik(
            name,
            np.array(pose.position_cm) / 100.0,
            rpy_to_matrix(np.array(pose.orientation_rad)),
            kin.chains[name].home + kin.chains[name].ref,
        )
        if not res.success:
            raise RobotConfigError(f"{robot.label}: key parts.{name}.home.tool_pose: {res.reason}")
        home = part.home.model_copy(update={"joints_rad": [round(float(q), 4) for q in res.joints_rad]})
        parts[name] = part.model_copy(update={"home": home})
    return robot.model_copy(update={"parts": parts})
