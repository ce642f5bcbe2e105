"""The robot as MuJoCo compiles it: the description's model file with its attachments and the YAML's
joint overrides. The kinematics and the simulator both start from this one spec, so a file MuJoCo
loads (includes, several top-level bodies, defaults, frames, attached files) is a file the
kinematics load, and IK solves for exactly what the simulator moves.

MuJoCo is imported lazily (inside the functions): importing this module costs nothing.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from pear_agent.robot_config import ActuatorRef, Part, RobotConfig, RobotConfigError

if TYPE_CHECKING:
    import mujoco

# names the runtime gives to what it adds, and to the model's unnamed actuators: MuJoCo names
# with this prefix are the runtime's, so they never clash with a model's own names
RUNTIME_PREFIX = "pear/"


def one_line(exc: BaseException) -> str:
    """MuJoCo's multi-line error text on one line."""
    return " ".join(str(exc).replace("Error:", "").split())


@contextlib.contextmanager
def quiet_mujoco() -> Iterator[list[str]]:
    """Collect MuJoCo's warnings (attach conflicts, the empty-prefix note) instead of letting them
    print: the runtime settles the options they are about itself. Yields the collected texts."""
    import mujoco

    got: list[str] = []
    getter = getattr(mujoco, "get_mju_user_warning", None)
    setter = getattr(mujoco, "set_mju_user_warning", None)
    old = getter() if getter else None
    if setter:
        setter(got.append)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield got
    finally:
        if setter:
            setter(old)


def load_spec(robot: RobotConfig, ref: str, key: str) -> mujoco.MjSpec:
    """One model file of the description as a MuJoCo spec; errors name the YAML and `key`."""
    import mujoco

    path = robot.resolve(ref, key)
    try:
        with quiet_mujoco():
            return mujoco.MjSpec.from_file(str(path))
    except Exception as exc:  # MuJoCo raises ValueError with its own multi-line text
        raise RobotConfigError(f"{robot.label}: key {key} ({path}): MuJoCo: {one_line(exc)}") from None


CONTACT_OPTIONS = ("cone", "impratio")


def _adopt_contact_options(spec: mujoco.MjSpec, child: mujoco.MjSpec) -> None:
    """An attached file's contact options (friction cone, impratio) apply where the main file
    leaves MuJoCo's default: a gripper tuned for elliptic cones (Menagerie's 2F-85) grasps as its
    file says. MuJoCo's attach would keep the parent's value and warn."""
    import mujoco

    default = mujoco.MjSpec().option
    for name in CONTACT_OPTIONS:
        base = getattr(default, name)
        if getattr(spec.option, name) == base and getattr(child.option, name) != base:
            setattr(spec.option, name, getattr(child.option, name))
        setattr(child.option, name, getattr(spec.option, name))


def load_robot_spec(robot: RobotConfig) -> mujoco.MjSpec:
    """The model file with its attachments (each keeps its own `<compiler>` settings), every
    unnamed actuator named `pear/actuator<i>`, and the YAML's joint overrides applied."""
    label = robot.label
    spec = load_spec(robot, robot.model.mjcf, "model.mjcf")
    for i, att in enumerate(robot.model.attachments):
        key = f"model.attachments.{i}"
        child = load_spec(robot, att.file, f"{key}.file")
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
            with quiet_mujoco():
                frame.attach_body(body, att.prefix, "")
        except Exception as exc:
            raise RobotConfigError(f"{label}: key {key}: MuJoCo cannot attach it: {one_line(exc)}") from None
    for i, act in enumerate(spec.actuators):
        if not act.name:
            act.name = f"{RUNTIME_PREFIX}actuator{i}"
    _apply_joint_overrides(robot, spec)
    return spec


def _apply_joint_overrides(robot: RobotConfig, spec: mujoco.MjSpec) -> None:
    """`parts.<p>.sim.frictionloss/damping/armature`: one value for every joint of the part, or
    one per joint; unset keeps the file's."""
    for name, part in robot.parts.items():
        if part.sim is None:
            continue
        missing = [j for j in part.joints if spec.joint(j) is None]
        if missing:
            raise RobotConfigError(f"{robot.label}: key parts.{name}.joints: {missing} not in the model")
        for attr in ("frictionloss", "damping", "armature"):
            values = part.sim.per_joint(attr, len(part.joints))
            if values is None:
                continue
            for joint, v in zip(part.joints, values, strict=True):
                _set_scalar(spec.joint(joint), attr, v)


def _set_scalar(element: object, attr: str, value: float) -> None:
    """Set a joint's damping/frictionloss/armature; MuJoCo >= 3.4 holds damping as a polynomial
    (its first coefficient is the linear damping, the others stay the file's)."""
    current = getattr(element, attr)
    if np.ndim(current) == 0:
        setattr(element, attr, float(value))
    else:
        arr = np.array(current, dtype=float)
        arr[0] = float(value)
        setattr(element, attr, arr)


def compile_model(robot: RobotConfig, spec: mujoco.MjSpec, what: str = "the robot") -> mujoco.MjModel:
    try:
        with quiet_mujoco():
            return spec.compile()
    except Exception as exc:
        raise RobotConfigError(
            f"{robot.label}: key model: MuJoCo cannot compile {what}: {one_line(exc)}"
        ) from None


def compile_robot(robot: RobotConfig) -> mujoco.MjModel:
    """The robot alone (no table, no task), compiled: what the kinematics are built from."""
    return compile_model(robot, load_robot_spec(robot))


def model_joint_limits(model: mujoco.MjModel, joints: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Each joint's range as MuJoCo compiled it, -inf/+inf where the joint is not limited (no
    `range` in the file, or `limited="false"`): a continuous joint turns without end."""
    ids = [model.joint(j).id for j in joints]
    limited = model.jnt_limited[ids].astype(bool)
    lo = np.where(limited, model.jnt_range[ids, 0], -np.inf)
    hi = np.where(limited, model.jnt_range[ids, 1], np.inf)
    return lo, hi


def part_joint_limits(part: Part, model: mujoco.MjModel) -> tuple[np.ndarray, np.ndarray]:
    """The model's limits narrowed by the YAML's `limits.joint_limits_rad` (which also bounds a
    continuous joint)."""
    lo, hi = model_joint_limits(model, part.joints)
    a, b = part.tighten_limits(lo, hi)
    return np.array(a), np.array(b)


def sample_range(lower: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A finite range to draw joint values from: the limits, or one full turn where a side is open."""
    lo = np.where(np.isfinite(lower), lower, np.where(np.isfinite(upper), upper - 2 * math.pi, -math.pi))
    hi = np.where(np.isfinite(upper), upper, lo + 2 * math.pi)
    return lo, hi


def describe_ref(ref: ActuatorRef) -> str:
    if isinstance(ref, (str, int)):
        return repr(ref)
    return f"{{joint: {ref.joint}}}" if ref.joint is not None else f"{{tendon: {ref.tendon}}}"


def find_actuator(spec: mujoco.MjSpec, ref: ActuatorRef, where: str) -> mujoco.MjsActuator:
    """The model's actuator a YAML entry refers to: by name, by index (0-based, in the order MuJoCo
    compiles them: the main file's, then each attachment's), or by the joint or tendon it drives.
    `where` is the error's prefix (file and key)."""
    import mujoco

    acts = list(spec.actuators)
    if isinstance(ref, bool):
        raise RobotConfigError(f"{where}: {ref!r} is not an actuator name or index")
    if isinstance(ref, int):
        if not 0 <= ref < len(acts):
            raise RobotConfigError(
                f"{where}: actuator index {ref} is out of range (the model has {len(acts)} actuators)"
            )
        return acts[ref]
    if isinstance(ref, str):
        act = spec.actuator(ref)
        if act is None:
            raise RobotConfigError(
                f"{where}: actuator {ref!r} is not in the model (its actuators: {_listing(acts)})"
            )
        return act
    kind = mujoco.mjtTrn.mjTRN_JOINT if ref.joint is not None else mujoco.mjtTrn.mjTRN_TENDON
    target = ref.joint if ref.joint is not None else ref.tendon
    hits = [a for a in acts if a.trntype == kind and a.target == target]
    if len(hits) > 1:  # a motor and a servo on one joint: the servo is the one to drive
        servos = [a for a in hits if a.biastype != mujoco.mjtBias.mjBIAS_NONE]
        hits = servos if len(servos) == 1 else hits
    what = "joint" if ref.joint is not None else "tendon"
    if not hits:
        raise RobotConfigError(f"{where}: no actuator of the model drives {what} {target!r}")
    if len(hits) > 1:
        raise RobotConfigError(
            f"{where}: {len(hits)} actuators drive {what} {target!r} ({_listing(hits)}); "
            "give one by name or index"
        )
    return hits[0]


def _listing(acts: Sequence[mujoco.MjsActuator]) -> str:
    if not acts:
        return "none"
    names = [f"{a.name} ({a.target})" for a in acts]
    return ", ".join(names[:20]) + (f", ... ({len(names)} in all)" if len(names) > 20 else "")
