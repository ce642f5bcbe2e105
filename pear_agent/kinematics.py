"""Forward and inverse kinematics with Pinocchio, built from the same model file MuJoCo loads.

Each arm part is solved on its own joint columns; every other joint (the other arm, the fingers)
keeps its current value. Poses are in the robot base frame, metres and rotation matrices inside;
the protocol converts to cm and roll/pitch/yaw at its edge.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pinocchio as pin

from pear_agent.robot_config import Part, RobotConfig, RobotConfigError


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
    def __init__(self, model: pin.Model, part: Part, name: str, label: str = "") -> None:
        self.name = name
        where = f"{label}: key parts.{name}" if label else f"part {name}"
        missing = [j for j in part.joints if not model.existJointName(j)]
        if missing:
            raise RobotConfigError(f"{where}.joints: joints {missing} are not in the model file")
        jids = [model.getJointId(j) for j in part.joints]
        self.idx_q = np.array([model.joints[j].idx_q for j in jids])
        self.idx_v = np.array([model.joints[j].idx_v for j in jids])
        lo, hi = part.tighten_limits(
            model.lowerPositionLimit[self.idx_q], model.upperPositionLimit[self.idx_q]
        )
        self.lower, self.upper = np.array(lo), np.array(hi)
        ee = part.end_effector
        if not model.existFrame(ee.parent_body):
            raise RobotConfigError(
                f"{where}.end_effector.parent_body: body {ee.parent_body!r} is not in model.mjcf (the "
                "kinematics load only the main model file, not the attachments: name a body of the main "
                "file, e.g. the attachment's parent_body, and put the offset in pos_m/quat_wxyz)"
            )
        parent = model.frames[model.getFrameId(ee.parent_body)]
        offset = pin.SE3(quat_wxyz_to_matrix(ee.quat_wxyz), np.array(ee.pos_m, dtype=float))
        frame = pin.Frame(
            f"{name}_{ee.name}",
            parent.parentJoint,
            model.getFrameId(ee.parent_body),
            parent.placement * offset,
            pin.FrameType.OP_FRAME,
        )
        self.frame_id = model.addFrame(frame)
        self.home = np.array(part.home.joints_rad, dtype=float)
        self.table: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None


def _root_body_poses(path: Path, label: str) -> dict[str, pin.SE3]:
    """The pose (`pos`, `quat`) of each jointless body directly under `<worldbody>` of an MJCF file."""
    import xml.etree.ElementTree as ET

    try:
        world = ET.parse(path).getroot().find("worldbody")
    except (ET.ParseError, OSError) as exc:
        raise RobotConfigError(f"{label}: key model.mjcf ({path}): not readable XML: {exc}") from None
    poses: dict[str, pin.SE3] = {}
    for body in [] if world is None else world.findall("body"):
        if body.find("joint") is not None or body.find("freejoint") is not None:
            continue
        odd = [a for a in ("euler", "axisangle", "xyaxes", "zaxes") if body.get(a) is not None]
        name = body.get("name", "")
        if odd:
            raise RobotConfigError(
                f"{label}: key model.mjcf ({path}): root body {name!r} is oriented by {odd[0]}; the "
                "kinematics read a root body's orientation from quat only"
            )
        pos = [float(v) for v in (body.get("pos") or "0 0 0").split()]
        quat = [float(v) for v in (body.get("quat") or "1 0 0 0").split()]
        poses[name] = pin.SE3(quat_wxyz_to_matrix(quat), np.array(pos))
    return poses


def _place_root_bodies(model: pin.Model, path: Path, label: str) -> None:
    """Pinocchio's MJCF parser (4.1) drops the pose of a jointless root body (a robot base turned
    about z, as in MuJoCo Menagerie's UR5e: stack-of-tasks/pinocchio#2782), so FK would disagree
    with MuJoCo. Compose it back onto what hangs from the universe, unless the parser kept it."""
    poses = {n: p for n, p in _root_body_poses(path, label).items() if not p.isIdentity(1e-12)}
    if not poses:
        return

    def root_of(frame_id: int) -> str | None:
        while frame_id > 0:
            frame = model.frames[frame_id]
            if frame.parentJoint == 0 and frame.name in poses and frame.type == pin.FrameType.BODY:
                return frame.name
            frame_id = frame.parentFrame
        return None

    kept = [
        n
        for n in poses
        if model.existBodyName(n) and not model.frames[model.getBodyId(n)].placement.isIdentity()
    ]
    if kept:  # a Pinocchio that places root bodies itself
        return
    for fid in range(1, len(model.frames)):
        frame = model.frames[fid]
        root = root_of(fid)
        if frame.parentJoint == 0 and root is not None:
            frame.placement = poses[root] * frame.placement
            model.frames[fid] = frame
    for jid in range(1, model.njoints):
        if model.parents[jid] != 0:
            continue
        root = root_of(model.getFrameId(model.names[jid], pin.FrameType.JOINT))
        if root is not None:
            model.jointPlacements[jid] = poses[root] * model.jointPlacements[jid]


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
        path = robot.resolve(robot.model.mjcf)
        try:
            self.model = pin.buildModelFromMJCF(str(path))
        except Exception as exc:  # Pinocchio raises ValueError/RuntimeError with its parser's text
            raise RobotConfigError(
                f"{robot.label}: key model.mjcf ({path}): Pinocchio: {' '.join(str(exc).split())}"
            ) from None
        _place_root_bodies(self.model, path, robot.label)
        self.chains = {
            name: _PartChain(self.model, part, name, robot.label) for name, part in robot.parts.items()
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
        c = self.chains[part]
        return c.lower.copy(), c.upper.copy()

    def fk(self, part: str, joints_rad: np.ndarray) -> Pose:
        chain = self.chains[part]
        self._q[chain.idx_q] = joints_rad
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
            qs = rng.uniform(chain.lower, chain.upper, size=(self.table_size, chain.lower.size))
            poses = [self.fk(chain.name, q) for q in qs]
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
        seed = np.clip(np.asarray(seed_rad, dtype=float), chain.lower, chain.upper)
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
                span = (chain.upper - chain.lower) * min(1.0, 0.1 * attempt)
                lo, hi = np.maximum(chain.lower, seed - span), np.minimum(chain.upper, seed + span)
                start, patience = self._rng.uniform(lo, hi), self.patience
            q, pe, re, it = self._dls(chain, target, start, patience)
            total_it += it
            if best is None or pe + 0.1 * re < best[1] + 0.1 * best[2]:
                best = (q, pe, re, it)
            if pe < self.position_tolerance_m and re < self.rotation_tolerance_rad:
                return IKResult(True, q, pe, re, total_it)
        assert best is not None
        return IKResult(False, best[0], best[1], best[2], total_it)
