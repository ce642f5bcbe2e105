"""What a MuJoCo task adds to a robot scene: objects, a seeded reset, a physics success check, and
privileged facts (in protocol units: cm, rad) for the scripted expert."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import mujoco
import numpy as np

from pear_agent.robot_config import ONE_ARM, TWO_ARMS, Requirement, RobotConfig

__all__ = ["ONE_ARM", "TWO_ARMS", "Requirement"]


class TaskArea:
    """Maps placements written for a reference task area (the robot the task was first tuned on)
    into this robot's `table.task_area_cm`, linearly per axis; heights are above its table top."""

    def __init__(
        self, robot: RobotConfig, ref_x_m: tuple[float, float], ref_y_m: tuple[float, float]
    ) -> None:
        t = robot.table_or_default()
        assert t.task_area_cm is not None and t.surface_z_cm is not None
        self.x_m = tuple(v / 100.0 for v in t.task_area_cm["x"])
        self.y_m = tuple(v / 100.0 for v in t.task_area_cm["y"])
        self.z_m = t.surface_z_cm / 100.0
        self._ref = (ref_x_m, ref_y_m)

    def _map(self, axis: int, v: float) -> float:
        ref = self._ref[axis]
        own = (self.x_m, self.y_m)[axis]
        return own[0] + (v - ref[0]) * (own[1] - own[0]) / (ref[1] - ref[0])

    def x(self, v: float) -> float:
        return self._map(0, v)

    def y(self, v: float) -> float:
        return self._map(1, v)

    def xr(self, lo: float, hi: float) -> tuple[float, float]:
        return self.x(lo), self.x(hi)

    def yr(self, lo: float, hi: float) -> tuple[float, float]:
        return self.y(lo), self.y(hi)

    def scale(self, axis: int) -> float:
        """How much bigger this area is than the reference along an axis (1 = the same)."""
        ref, own = self._ref[axis], (self.x_m, self.y_m)[axis]
        return (own[1] - own[0]) / (ref[1] - ref[0])


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
    """The gripper's geometry from the description, for the scripted experts (cm)."""
    g = robot.parts[part].gripper
    table = robot.table_or_default()
    return {
        "fingertip_below_tcp_cm": g.fingertip_below_tcp_cm if g else 0.0,
        "max_opening_cm": g.max_opening_cm if g else None,
        "table_z_cm": table.surface_z_cm,
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


def sample_xy(
    rng: np.random.Generator,
    x: tuple[float, float],
    y: tuple[float, float],
    avoid: list[np.ndarray],
    min_dist: float,
) -> np.ndarray:
    for _ in range(200):
        p = np.array([rng.uniform(*x), rng.uniform(*y)])
        if all(np.linalg.norm(p - a) >= min_dist for a in avoid):
            return p
    raise RuntimeError("could not place objects apart; the sampling region is too small")
