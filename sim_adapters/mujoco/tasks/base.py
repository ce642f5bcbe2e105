"""What a MuJoCo task adds to a robot scene: objects, a seeded reset, a physics success check, and
privileged facts (in protocol units: cm, rad) for the scripted expert."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

import mujoco
import numpy as np

from pear_agent.robot_config import ONE_ARM, TWO_ARMS, Requirement, RobotConfig

__all__ = ["ONE_ARM", "TWO_ARMS", "Requirement"]


class MujocoTask(ABC):
    name: ClassVar[str]
    requires: ClassVar[Requirement] = ONE_ARM
    max_turns: ClassVar[int] = 30

    def __init__(self) -> None:
        self.instruction = ""

    @abstractmethod
    def build(self, spec: mujoco.MjSpec, robot: RobotConfig) -> None: ...

    @abstractmethod
    def reset(self, model: mujoco.MjModel, data: mujoco.MjData, rng: np.random.Generator) -> None: ...

    @abstractmethod
    def success(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool: ...

    @abstractmethod
    def privileged(self, model: mujoco.MjModel, data: mujoco.MjData) -> dict[str, Any]: ...


def add_free_box(
    spec: mujoco.MjSpec,
    name: str,
    half_m: list[float],
    rgba: list[float],
    mass_kg: float,
    friction: float = 1.0,
) -> None:
    body = spec.worldbody.add_body(name=name, pos=[0.5, 0.0, half_m[2]])
    body.add_freejoint(name=f"{name}_free")
    body.add_geom(
        name=name,
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=half_m,
        rgba=rgba,
        mass=mass_kg,
        friction=[friction, 0.01, 0.001],
        condim=4,
    )


def set_free_pose(model: mujoco.MjModel, data: mujoco.MjData, name: str, pos: np.ndarray, yaw: float) -> None:
    adr = model.joint(f"{name}_free").qposadr[0]
    data.qpos[adr : adr + 3] = pos
    data.qpos[adr + 3 : adr + 7] = [np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)]
    dadr = model.joint(f"{name}_free").dofadr[0]
    data.qvel[dadr : dadr + 6] = 0.0


def body_yaw(data: mujoco.MjData, name: str) -> float:
    xmat = data.body(name).xmat.reshape(3, 3)
    return float(np.arctan2(xmat[1, 0], xmat[0, 0]))


def body_speed(model: mujoco.MjModel, data: mujoco.MjData, name: str) -> float:
    dadr = model.joint(f"{name}_free").dofadr[0]
    return float(np.linalg.norm(data.qvel[dadr : dadr + 3]))


def geoms_touch(model: mujoco.MjModel, data: mujoco.MjData, a: set[int], b: set[int]) -> bool:
    for i in range(data.ncon):
        c = data.contact[i]
        if (c.geom1 in a and c.geom2 in b) or (c.geom1 in b and c.geom2 in a):
            return True
    return False


def tool_facts(robot: RobotConfig, part: str) -> dict[str, Any]:
    """What a scripted expert must honour of one arm (cm, rad): the gripper's geometry, the table
    top, the per-turn caps and the workspace box its targets are clipped to."""
    p = robot.parts[part]
    g = p.gripper
    table = robot.table_or_default()
    return {
        "fingertip_below_tcp_cm": g.fingertip_below_tcp_cm if g else 0.0,
        "max_opening_cm": g.max_opening_cm if g else None,
        "table_z_cm": table.surface_z_cm,
        "max_step_cm": p.limits.max_position_step_cm,
        "max_turn_rad": p.limits.max_rotation_step_rad,
        "workspace_cm": {a: list(r) for a, r in p.limits.workspace_cm.items()},
    }


def finger_geoms(model: mujoco.MjModel, joints: list[str]) -> set[int]:
    """Geoms on the bodies the finger joints move, and on every body below them."""
    bodies = {int(model.joint(j).bodyid[0]) for j in joints}
    out = set()
    for g in range(model.ngeom):
        b = int(model.geom_bodyid[g])
        while b != 0:
            if b in bodies:
                out.add(g)
                break
            b = int(model.body_parentid[b])
    return out


def robot_geoms(model: mujoco.MjModel, root_body: str) -> set[int]:
    """Geoms of a body and all bodies below it (e.g. the robot's fingers)."""
    root = model.body(root_body).id
    ids = set()
    for g in range(model.ngeom):
        b = model.geom_bodyid[g]
        while b != 0 and b != root:
            b = model.body_parentid[b]
        if b == root:
            ids.add(g)
    return ids


def sample_apart(
    draw: Callable[[], np.ndarray], avoid: list[np.ndarray], min_dist: float, tries: int = 200
) -> np.ndarray:
    """A point from `draw` at least `min_dist` from every point in `avoid`."""
    for _ in range(tries):
        p = draw()
        if all(np.linalg.norm(p - a) >= min_dist for a in avoid):
            return p
    raise PlacementError(f"could not place objects {min_dist * 100:.0f} cm apart in {tries} tries")


class PlacementError(RuntimeError):
    """The task's region on this robot is too small to place its objects apart."""


def first_body_pairs(robot: RobotConfig, spec: mujoco.MjSpec) -> list[tuple[str, str]]:
    """(parent, body) of each arm's first moving body where the parent is welded to the world.

    MuJoCo does not filter contacts between a body and its parent when the parent is welded to
    the world, so an arm's first link and its base (whose meshes' hulls overlap at every pose)
    would push each other apart."""
    pairs = []
    for part in robot.parts.values():
        joint = spec.joint(part.joints[0])
        if joint is None:
            continue
        body = joint.parent
        parent = body.parent
        if parent is None or parent.name in ("", "world"):
            continue
        welded, b = True, parent
        while b is not None and b.name != "world":
            welded &= not b.joints
            b = b.parent
        if welded:
            pairs.append((parent.name, body.name))
    return pairs


# The i2rt YAM's finger meshes are L-shaped; MuJoCo collides their convex hulls, which fill the
# space between the pads and wedge a held object out. A finger body whose collision mesh is one of
# i2rt's tip meshes collides through a box on its pad instead (measured from the tip meshes, in
# the tip body's frame; mirrored for the right tip); the mesh stays visual.
I2RT_TIP_MESHES = {"tip_left.stl": 1.0, "tip_right.stl": -1.0}
I2RT_PAD_CENTER_M = (0.024, -0.0495, -0.0731)
I2RT_PAD_HALF_M = (0.02, 0.005, 0.017)


def pad_i2rt_fingers(spec: mujoco.MjSpec, robot: RobotConfig) -> None:
    for part in robot.parts.values():
        g = part.gripper
        if g is None:
            continue
        for joint_name in list(g.joints) + list(g.mimic_joints):
            joint = spec.joint(joint_name)
            if joint is None:
                continue
            body = joint.parent
            sign = None
            for geom in body.geoms:
                mesh = spec.mesh(geom.meshname) if geom.type == mujoco.mjtGeom.mjGEOM_MESH else None
                if mesh is not None and mesh.file.rsplit("/", 1)[-1] in I2RT_TIP_MESHES:
                    sign = I2RT_TIP_MESHES[mesh.file.rsplit("/", 1)[-1]]
            if sign is None:
                continue
            for geom in body.geoms:
                geom.contype = 0
                geom.conaffinity = 0
            c = I2RT_PAD_CENTER_M
            body.add_geom(
                name=f"{body.name}_pad",
                type=mujoco.mjtGeom.mjGEOM_BOX,
                size=list(I2RT_PAD_HALF_M),
                pos=[sign * c[0], sign * c[1], c[2]],
                rgba=[0.2, 0.2, 0.2, 0.0],
                friction=[1.5, 0.01, 0.001],
                condim=4,
                group=3,
            )


def prepare_robot(spec: mujoco.MjSpec, robot: RobotConfig) -> None:
    """What every task does to the robot's part of the scene: no contacts between an arm's first
    link and its world-welded base, and the i2rt finger pads."""
    for parent, body in first_body_pairs(robot, spec):
        spec.add_exclude(bodyname1=parent, bodyname2=body)
    pad_i2rt_fingers(spec, robot)
