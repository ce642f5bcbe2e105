"""The robot as MuJoCo compiles it: the description's model file with its attachments. The
kinematics and the simulator both start from this one spec, so a file MuJoCo loads (includes,
several top-level bodies, defaults, frames, attached files) is a file the kinematics load, and IK
solves for exactly what the simulator moves. Also: joint limits (continuous joints), the YAML's
joint overrides, and finding an actuator by name, index or what it drives.

MuJoCo is imported lazily (inside the functions): importing this module costs nothing.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from pear_agent.robot.config import ActuatorRef, Part, RobotConfig, RobotConfigError

if TYPE_CHECKING:
    import mujoco

# names the runtime gives to what it adds, and to the model's unnamed actuators: MuJoCo names
# with this prefix are the runtime's, so they never clash with a model's own names
RUNTIME_PREFIX = "pear/"


def ee_site_name(part: str) -> str:
    return f"{RUNTIME_PREFIX}{part}_ee"


def camera_name(camera: str) -> str:
    """The MuJoCo name of a description's camera: the runtime's namespace, so a model's own
    camera of the same name never clashes with it."""
    return f"{RUNTIME_PREFIX}{camera}"


def one_line(exc: BaseException) -> str:
    """MuJoCo's multi-line error text on one line."""
    return " ".join(str(exc).replace("Error:", "").split())


@contextlib.contextmanager
def quiet_mujoco() -> Iterator[list[str]]:
    """Collect MuJoCo's warnings (attach conflicts, the empty-prefix note) instead of letting them
    print: the runtime settles the options they are about itself. Yields the collected texts."""
    import mujoco  # heavy: mujoco

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
    import mujoco  # heavy: mujoco

    path = robot.resolve(ref, key)
    try:
        with quiet_mujoco():
            return _spec_from_file(mujoco, str(path))
    except Exception as exc:  # MuJoCo raises ValueError with its own multi-line text
        raise RobotConfigError(f"{robot.label}: key {key} ({path}): MuJoCo: {one_line(exc)}") from None


def _spec_from_file(mujoco: object, path: str) -> mujoco.MjSpec:
    """`MjSpec.from_file`: a constructor since MuJoCo 3.3, a method of an empty spec before (the
    LIBERO environment pins 3.2.3)."""
    try:
        return mujoco.MjSpec.from_file(path)  # type: ignore[attr-defined]
    except TypeError:
        spec = mujoco.MjSpec()  # type: ignore[attr-defined]
        spec.from_file(path)
        return spec


def find_body(spec: mujoco.MjSpec, name: str) -> mujoco.MjsBody | None:
    """A body of a spec by name (`spec.body` since MuJoCo 3.3, `find_body` before)."""
    return spec.body(name) if hasattr(spec, "body") else spec.find_body(name)


CONTACT_OPTIONS = ("cone", "impratio")


def _adopt_contact_options(spec: mujoco.MjSpec, child: mujoco.MjSpec) -> None:
    """An attached file's contact options (friction cone, impratio) apply where the main file
    leaves MuJoCo's default: a gripper tuned for elliptic cones (Menagerie's 2F-85) grasps as its
    file says. MuJoCo's attach would keep the parent's value and warn."""
    import mujoco  # heavy: mujoco

    try:
        default = mujoco.MjSpec().option
    except TypeError:  # MuJoCo < 3.3 cannot read a spec's options from Python: attach as they are
        return
    for name in CONTACT_OPTIONS:
        base = getattr(default, name)
        if getattr(spec.option, name) == base and getattr(child.option, name) != base:
            setattr(spec.option, name, getattr(child.option, name))
        setattr(child.option, name, getattr(spec.option, name))


def load_robot_spec(robot: RobotConfig) -> mujoco.MjSpec:
    """The model file with its attachments (each keeps its own `<compiler>` settings) and every
    unnamed actuator named `pear/actuator<i>`. The simulator then applies the YAML's joint
    overrides (`apply_joint_overrides`); the kinematics need none of them."""
    label = robot.label
    spec = load_spec(robot, robot.model.mjcf, "model.mjcf")
    for i, att in enumerate(robot.model.attachments):
        key = f"model.attachments.{i}"
        child = load_spec(robot, att.file, f"{key}.file")
        if att.angle_unit != "file":
            getattr(child, "compiler", child).degree = att.angle_unit == "degree"  # MuJoCo < 3.3: on the spec
        _adopt_contact_options(spec, child)
        parent = find_body(spec, att.parent_body)
        if parent is None:
            raise RobotConfigError(
                f"{label}: key {key}.parent_body: body {att.parent_body!r} is not in the model"
            )
        body = find_body(child, att.body)
        if body is None:
            raise RobotConfigError(f"{label}: key {key}.body: body {att.body!r} is not in {att.file}")
        frame = parent.add_frame()
        frame.pos, frame.quat = att.pos_m, att.quat_wxyz
        try:
            with quiet_mujoco():
                frame.attach_body(body, att.prefix, "")
        except Exception as exc:
            raise RobotConfigError(f"{label}: key {key}: MuJoCo cannot attach it: {one_line(exc)}") from None
    _remove_bodies(robot, spec)
    for i, act in enumerate(spec.actuators):
        if not act.name:
            act.name = f"{RUNTIME_PREFIX}actuator{i}"
    return spec


def _remove_bodies(robot: RobotConfig, spec: mujoco.MjSpec) -> None:
    """`model.remove_bodies`: each body and its subtree leave the spec (the kinematics and the
    simulator both see the model without them). A keyframe of the file holds a value per joint of
    the whole model, so one that no longer fits is dropped too (the runtime sets home itself)."""
    import mujoco  # heavy: mujoco

    if not robot.model.remove_bodies:
        return
    nq = _nq(spec)
    for i, name in enumerate(robot.model.remove_bodies):
        key = f"model.remove_bodies.{i}"
        body = find_body(spec, name)
        if body is None:
            raise RobotConfigError(f"{robot.label}: key {key}: body {name!r} is not in the model")
        if name == "world":
            raise RobotConfigError(f"{robot.label}: key {key}: the world body cannot be removed")
        joints = {j.name for j in body.find_all(mujoco.mjtObj.mjOBJ_JOINT)}
        bodies = {name, *(b.name for b in body.find_all(mujoco.mjtObj.mjOBJ_BODY))}
        for part_name, part in robot.parts.items():
            moved = joints & {*part.joints, *(part.gripper.joints if part.gripper else [])}
            if moved or part.end_effector.parent_body in bodies:
                raise RobotConfigError(
                    f"{robot.label}: key {key}: body {name!r} carries part {part_name!r} "
                    "(its joints or tool point); remove only what is not the robot"
                )
        spec.delete(body)
    if _nq(spec) != nq:
        for k in list(spec.keys):
            spec.delete(k)


def _nq(spec: mujoco.MjSpec) -> int:
    """Generalized coordinates of the spec's joints (free 7, ball 4, else 1)."""
    import mujoco  # heavy: mujoco

    size = {mujoco.mjtJoint.mjJNT_FREE: 7, mujoco.mjtJoint.mjJNT_BALL: 4}
    return sum(size.get(j.type, 1) for j in spec.joints)


def apply_joint_overrides(robot: RobotConfig, spec: mujoco.MjSpec) -> None:
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
    """The robot alone (no table, no task), compiled without its mesh and texture files: what the
    kinematics are built from. Bodies, joints and their poses are exactly what MuJoCo simulates;
    only the shapes are stand-ins, so the kinematics build where a file's meshes are missing (the
    LIBERO Panda's generated file points into another environment) and skip reading them."""
    return compile_model(robot, _without_asset_files(load_robot_spec(robot)))


_TETRA = [0.0, 0.0, 0.0, 0.01, 0.0, 0.0, 0.0, 0.01, 0.0, 0.0, 0.0, 0.01]


def _without_asset_files(spec: mujoco.MjSpec) -> mujoco.MjSpec:
    """Every mesh a 1 cm tetrahedron (unscaled), every texture a flat colour: nothing read from disk. Geoms
    keep their bodies and poses (a body's frame never depends on its geoms' shapes). MuJoCo < 3.3
    cannot list a spec's assets: its spec is returned as it is."""
    import mujoco  # heavy: mujoco

    if not hasattr(spec, "meshes"):
        return spec
    for mesh in spec.meshes:
        mesh.file = ""
        mesh.uservert = _TETRA
        mesh.userface = []
        mesh.scale = [1.0, 1.0, 1.0]
    for tex in spec.textures:
        tex.file = ""
        tex.cubefiles = [""] * len(tex.cubefiles)
        tex.builtin = mujoco.mjtBuiltin.mjBUILTIN_FLAT
        tex.width = tex.height = 2
    for skin in list(spec.skins):
        spec.delete(skin)
    return spec


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
    import mujoco  # heavy: mujoco

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
