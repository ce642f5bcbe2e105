"""`pick_up_object/<name>`: pick up one everyday object (a YAML in `objects/`) and lift it 10 cm.

The object comes from its description (`pear_agent.robot.object_config`): a mesh of an installed package
or a few primitives, with its mass, scale, friction and resting pose. On a robot with several
gripper arms (the YAM station) the seed picks the arm whose side of the table the object lies on;
any gripper may lift it. Success: the object's lowest point at least 10 cm over the table and the
object touched by a gripper's fingers (so a thrown or balanced object does not count).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from pear_agent.robot.config import RobotConfig
from pear_agent.robot.object_config import ObjectConfig, load_object, object_names
from sim_adapters.mujoco.lazy_mujoco import mujoco
from sim_adapters.mujoco.tasks.base import (
    ONE_ARM,
    MujocoTask,
    body_yaw,
    geoms_touch,
    set_free_pose,
    to_cm,
    tool_facts,
)
from sim_adapters.mujoco.tasks.catalog import register_task
from sim_adapters.mujoco.tasks.layout import TableFrame, arm_places, single_arm_frame
from sim_adapters.mujoco.tasks.pick_place import REF_AREA

BODY = "object"
LIFT_M = 0.10
TORSION_FRICTION_M = 0.03
TASK_PREFIX = "pick_up_object/"


def _quat_mul(a: list[float], b: list[float]) -> list[float]:
    out = np.zeros(4)
    mujoco.mju_mulQuat(out, np.asarray(a, float), np.asarray(b, float))
    return [float(v) for v in out]


def _rotate(q: list[float], v: list[float]) -> list[float]:
    out = np.zeros(3)
    mujoco.mju_rotVecQuat(out, np.asarray(v, float), np.asarray(q, float))
    return [float(x) for x in out]


def _shape_volume(kind: str, size: list[float]) -> float:
    if kind == "box":
        return 8 * size[0] * size[1] * size[2]
    if kind in ("sphere", "ellipsoid"):
        s = size if kind == "ellipsoid" else [size[0]] * 3
        return 4 / 3 * np.pi * s[0] * s[1] * s[2]
    r, h = size[0], size[1]
    return np.pi * r * r * 2 * h + (4 / 3 * np.pi * r**3 if kind == "capsule" else 0.0)


def add_object(spec: mujoco.MjSpec, cfg: ObjectConfig) -> None:
    """The object as one free body `object` whose geoms are `object_0`, `object_1`, ..."""
    body = spec.worldbody.add_body(name=BODY, pos=[0.5, 0.0, 0.1])
    body.add_freejoint(name=f"{BODY}_free")
    # torsional friction: a two-finger grip on a cylinder or a mesh touches it at one point per
    # finger, and an object held off its centre pivots about the fingers' axis without it
    common = {"friction": [cfg.friction, TORSION_FRICTION_M, 0.001], "condim": 4}
    path = cfg.mesh_path()
    if path is not None:
        mesh = spec.add_mesh(name=f"{BODY}_mesh", file=str(path), scale=[cfg.scale] * 3)
        mesh.inertia = mujoco.mjtMeshInertia.mjMESH_INERTIA_CONVEX
        body.add_geom(
            name=f"{BODY}_0",
            type=mujoco.mjtGeom.mjGEOM_MESH,
            meshname=mesh.name,
            quat=list(cfg.quat_wxyz),
            rgba=list(cfg.rgba),
            mass=cfg.mass_kg,
            **common,
        )
        return
    vols = [_shape_volume(s.type, s.size_m) for s in cfg.shapes]
    for i, (s, vol) in enumerate(zip(cfg.shapes, vols, strict=True)):
        size = [*s.size_m, 0.0, 0.0][:3]
        kind: dict[str, Any] = {"type": getattr(mujoco.mjtGeom, f"mjGEOM_{s.type.upper()}"), "size": size}
        if s.type == "cylinder":
            kind = {
                "type": mujoco.mjtGeom.mjGEOM_MESH,
                "meshname": _prism(spec, f"{BODY}_{i}_prism", *s.size_m),
            }
        body.add_geom(
            name=f"{BODY}_{i}",
            **kind,
            pos=_rotate(cfg.quat_wxyz, s.pos_m),
            quat=_quat_mul(cfg.quat_wxyz, s.quat_wxyz),
            rgba=list(s.rgba or cfg.rgba),
            mass=cfg.mass_kg * vol / sum(vols),
            **common,
        )


PRISM_SIDES = 24


def _prism(spec: mujoco.MjSpec, name: str, radius_m: float, half_m: float) -> str:
    """A cylinder as a 24-sided prism mesh: squeezed between two finger pads, MuJoCo's primitive
    cylinder pops out sideways (its contacts with a box are one point that jumps round the rim),
    while a mesh gives several contacts per face, as robosuite's can does."""
    a = np.linspace(0, 2 * np.pi, PRISM_SIDES, endpoint=False)
    ring = np.column_stack([radius_m * np.cos(a), radius_m * np.sin(a)])
    verts = np.vstack([np.column_stack([ring, np.full(PRISM_SIDES, z)]) for z in (-half_m, half_m)])
    spec.add_mesh(name=name, uservert=verts.flatten().tolist())
    return name


def object_geoms(model: mujoco.MjModel) -> list[int]:
    body = model.body(BODY).id
    return [g for g in range(model.ngeom) if model.geom_bodyid[g] == body]


def body_corners(model: mujoco.MjModel) -> np.ndarray:
    """The 8 corners of the object's bounding box in its body frame (from each geom's own box)."""
    pts = []
    for g in object_geoms(model):
        c, h = model.geom_aabb[g][:3], model.geom_aabb[g][3:]
        rot = model.geom_quat[g]
        for sx in (-1, 1):
            for sy in (-1, 1):
                for sz in (-1, 1):
                    local = c + h * np.array([sx, sy, sz])
                    out = np.zeros(3)
                    mujoco.mju_rotVecQuat(out, local, rot)
                    pts.append(out + model.geom_pos[g])
    pts_arr = np.array(pts)
    lo, hi = pts_arr.min(0), pts_arr.max(0)
    return np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])


class PickUpObject(MujocoTask):
    """Pick up one object from `objects/` (`pick_up_object/<name>`) and lift it 10 cm."""

    name = "pick_up_object"
    requires = ONE_ARM
    max_turns = 25
    default_robot = "yam_bimanual"
    expert = "sim_adapters.mujoco.experts.objects:OBJECT_EXPERT"
    on_every_robot = False  # a PEAR paper station task

    @classmethod
    def names(cls) -> list[str]:
        return [f"{TASK_PREFIX}{n}" for n in object_names()]

    @classmethod
    def claims(cls, name: str) -> bool:
        return name.startswith(TASK_PREFIX)

    @classmethod
    def check_name(cls, name: str) -> None:
        if name not in cls.names():
            raise ValueError(
                f"unknown object {name[len(TASK_PREFIX) :]!r} in task {name!r}; objects are: "
                f"{', '.join(object_names())} (an object is one YAML in objects/ or a folder named by "
                "PEAR_OBJECT_DIRS)"
            )

    @classmethod
    def create(cls, name: str) -> PickUpObject:
        return cls(name[len(TASK_PREFIX) :])

    def __init__(self, object_name: str) -> None:
        super().__init__()
        self.object = load_object(object_name)
        self.name = f"{TASK_PREFIX}{self.object.name}"  # type: ignore[misc]

    def build(self, spec: mujoco.MjSpec, robot: RobotConfig) -> None:
        self.take_robot(spec, robot, hide_tcp_markers=True)
        self.parts = robot.gripper_parts()
        self.part = self.parts[0]
        add_object(spec, self.object)
        self._frames: dict[str, TableFrame] = {}
        self._corners: np.ndarray | None = None
        self.instruction = f"Pick up {self.object.description} and lift it 10 cm above the table."

    def corners(self, model: mujoco.MjModel) -> np.ndarray:
        if self._corners is None:
            self._corners = body_corners(model)
        return self._corners

    def frame(self, model: mujoco.MjModel, data: mujoco.MjData, part: str) -> TableFrame:
        if part not in self._frames:
            self._frames[part] = single_arm_frame(
                self.robot, arm_places(model, data, self.robot), part, REF_AREA
            )
        f = self._frames[part]
        return replace(f, mirrored=True) if self.mirror_layout else f

    def fingers(self, model: mujoco.MjModel) -> dict[str, set[int]]:
        return {part: self.fingers_of(model, part) for part in self.parts}

    def reset(self, model: mujoco.MjModel, data: mujoco.MjData, rng: np.random.Generator) -> None:
        # the arm first (one draw), so a one-arm robot's placements draw as a two-arm robot's do
        self.part = self.parts[int(rng.integers(len(self.parts)))] if len(self.parts) > 1 else self.parts[0]
        f = self.frame(model, data, self.part)
        xy = f.sample(rng, (0.42, 0.58), (-0.15, 0.15))
        bottom = float(self.corners(model)[:, 2].min())
        yaw = f.yaw(rng.uniform(-np.pi / 2, np.pi / 2))
        set_free_pose(model, data, BODY, np.array([xy[0], xy[1], self.z0 - bottom + 0.001]), yaw)

    def _world_corners(self, model: mujoco.MjModel, data: mujoco.MjData) -> np.ndarray:
        b = data.body(BODY)
        return self.corners(model) @ b.xmat.reshape(3, 3).T + b.xpos

    def bottom_height_m(self, model: mujoco.MjModel, data: mujoco.MjData) -> float:
        """How far the object's lowest point is above the table top."""
        return float(self._world_corners(model, data)[:, 2].min() - self.z0)

    def held_by(self, model: mujoco.MjModel, data: mujoco.MjData) -> dict[str, bool]:
        geoms = set(object_geoms(model))
        return {p: geoms_touch(model, data, geoms, f) for p, f in self.fingers(model).items()}

    def success(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        return self.bottom_height_m(model, data) >= LIFT_M and any(self.held_by(model, data).values())

    def privileged(self, model: mujoco.MjModel, data: mujoco.MjData) -> dict[str, Any]:
        c = self.corners(model)
        lo, hi = c.min(0), c.max(0)
        b = data.body(BODY)
        rot = b.xmat.reshape(3, 3)
        centre = b.xpos + rot @ ((lo + hi) / 2)
        size = hi - lo
        g = self.object.grasp
        yaw = body_yaw(data, BODY)
        across = g.across if g.across != "narrow" else ("x" if size[0] <= size[1] else "y")
        # the direction the fingers close along (in the table plane), and the width they close on
        close_yaw = yaw if across == "x" else yaw + np.pi / 2
        width = size[0] if across == "x" else size[1]
        bottom = float(self._world_corners(model, data)[:, 2].min())
        height = float(size[2])
        grasp_h = g.height_cm / 100 if g.height_cm is not None else default_grasp_height_m(size)
        grasp_h = float(np.clip(grasp_h, 0.005, height))
        return {
            "task": self.name,
            "part": self.part,
            "tool": tool_facts(self.robot, self.part),
            "object": {
                "name": self.object.name,
                "position_cm": to_cm(centre),
                "yaw_rad": round(yaw, 4),
                "size_cm": to_cm(size),
                "bottom_cm": round(bottom * 100, 2),
                "grasp": {  # over the object's own origin (a mug's: its body, not its handle)
                    "position_cm": [*to_cm(b.xpos[:2]), round((bottom + grasp_h) * 100, 2)],
                    "close_yaw_rad": round(float(close_yaw), 4),
                    "width_cm": round(float(width) * 100, 2),
                },
            },
            "table_z_cm": round(self.z0 * 100, 2),
            "lift_cm": LIFT_M * 100,
            "touching": self.held_by(model, data),
        }


def default_grasp_height_m(size_m: np.ndarray) -> float:
    """Where the fingers close when the object's YAML does not say (over its bottom): at the middle
    of a squat object (no taller than it is wide: a ball, a lemon, a block), where a round one is
    widest (5 mm above a ball's equator, the closing fingers squeezed it out and it rolled
    off the table); on a taller one 2 cm below its top, at most its middle height + 3 cm."""
    height = float(size_m[2])
    if height <= float(min(size_m[0], size_m[1])) + 1e-6:
        return height / 2
    return min(height - 0.02, height / 2 + 0.03)


register_task(PickUpObject)
