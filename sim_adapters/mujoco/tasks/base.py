"""What a MuJoCo task adds to a robot scene: objects, a seeded reset, a physics success check, and
privileged facts (in protocol units: cm, rad) for the scripted expert."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from pear_agent.robot.config import ONE_ARM, TWO_ARMS, Requirement, RobotConfig
from sim_adapters.mujoco.lazy_mujoco import mujoco

__all__ = ["ONE_ARM", "TWO_ARMS", "Requirement"]


class MujocoTask(ABC):
    """One task, whole: what the registry, the perturbations and the scripted policy read of it are
    class attributes, and `register_task(MyTask)` (`sim_adapters.mujoco.tasks`) makes it a task."""

    name: ClassVar[str]
    """The task's name (`pear-agent run --task NAME`); a parametrised class's prefix (`names`)."""
    requires: ClassVar[Requirement] = ONE_ARM
    """What a robot must have for the task (checked before a scene is built)."""
    default_robot: ClassVar[str] = "panda"
    """The robot it runs on without `--robot` (a name in `robots/`)."""
    max_turns: ClassVar[int] = 30
    instruction: str = ""
    """What the model is told to do (a task whose wording depends on the scene sets it in `build`)."""
    paraphrases: ClassVar[tuple[str, ...]] = ()
    """The instruction in other words (the `instruction` perturbation draws one per seed)."""
    expert: ClassVar[str | Callable[..., Any] | None] = None
    """The scripted expert: a callable, or `"module:attr"` imported when first asked for (so listing
    tasks imports no expert)."""
    on_every_robot: ClassVar[bool] = True
    """Whether `robots --check --tasks` and the per-robot expert tables run it on every robot (the
    PEAR paper's station tasks are kept out)."""

    @classmethod
    def names(cls) -> list[str]:
        """The task names this class builds: its `name`; a parametrised class lists one per variant."""
        return [cls.name]

    @classmethod
    def claims(cls, name: str) -> bool:
        """Whether `name` is this class's (a parametrised class claims its whole prefix, so an unknown
        variant is refused by `check_name` with its own message)."""
        return name == cls.name

    @classmethod
    def check_name(cls, name: str) -> None:
        """Raise ValueError when `name`, claimed by this class, names no task it can build."""
        return None

    @classmethod
    def create(cls, name: str) -> MujocoTask:
        """A new task instance for one of its `names`."""
        return cls()

    def __init__(self) -> None:
        self.mirror_layout = False
        """Place objects mirrored across the region's centre line (the `layout` perturbation)."""

    @abstractmethod
    def build(self, spec: mujoco.MjSpec, robot: RobotConfig) -> None: ...

    def take_robot(self, spec: mujoco.MjSpec, robot: RobotConfig, *, hide_tcp_markers: bool = False) -> None:
        """What every `build` starts with: refuse a robot that lacks what the task needs (one line),
        keep the robot and its table top's height (`z0`, m); `hide_tcp_markers`: the i2rt model's
        tcp marker sites would show in the wrist images."""
        missing = self.requires.missing(robot)
        if missing:
            raise ValueError(f"task {self.name}: {missing}")
        self.robot = robot
        self.z0 = robot.table_or_default().surface_z_cm / 100.0
        self._finger_geoms: dict[str, set[int]] = {}
        if hide_tcp_markers:
            for site in spec.sites:
                if site.name.startswith("tcp_"):
                    site.rgba = [0, 0, 0, 0]

    def fingers_of(self, model: mujoco.MjModel, part: str) -> set[int]:
        """The finger geoms of gripper `part` (its joints and their mimics), looked up once a build."""
        if part not in self._finger_geoms:
            self._finger_geoms[part] = part_finger_geoms(model, self.robot, part)
        return self._finger_geoms[part]

    @abstractmethod
    def reset(self, model: mujoco.MjModel, data: mujoco.MjData, rng: np.random.Generator) -> None: ...

    @abstractmethod
    def success(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool: ...

    @abstractmethod
    def privileged(self, model: mujoco.MjModel, data: mujoco.MjData) -> dict[str, Any]: ...

    def shaped_reward(
        self, model: mujoco.MjModel, data: mujoco.MjData, tool_m: dict[str, np.ndarray]
    ) -> float | None:
        """A dense reward in [0, 1] for RL (1 on success), from the scene now and each part's tool
        point (`tool_m`, world frame, m); None: the task has none (binary success only)."""
        return None


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


BLOCK_NAMES = ("red_block", "green_block", "blue_block")
BLOCK_RGBA = ([0.85, 0.15, 0.12, 1], [0.15, 0.7, 0.2, 1], [0.15, 0.3, 0.9, 1])
"""The red, green and blue blocks the line tasks push (`align_blocks`, `align_with_ruler`)."""


def add_blocks(spec: mujoco.MjSpec, half_m: float, mass_kg: float, friction: float) -> None:
    """The three coloured cubes of `BLOCK_NAMES`, free to slide."""
    for name, rgba in zip(BLOCK_NAMES, BLOCK_RGBA, strict=True):
        add_free_box(spec, name, [half_m] * 3, rgba, mass_kg=mass_kg, friction=friction)


def to_cm(v: np.ndarray) -> list[float]:
    """A vector in metres as the privileged facts give it: cm, rounded to 0.1 mm."""
    return [round(float(x) * 100.0, 2) for x in v]


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
        "close_time_s": g.move_time_s if g else 0.0,
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


def part_finger_geoms(model: mujoco.MjModel, robot: RobotConfig, part: str) -> set[int]:
    """The finger geoms of one gripper part (its joints and their mimics)."""
    g = robot.parts[part].gripper
    assert g is not None
    return finger_geoms(model, list(g.joints) + list(g.mimic_joints))


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
