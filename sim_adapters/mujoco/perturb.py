"""Seeded perturbations of a MuJoCo task, one dimension at a time: LIBERO-Plus's robustness axes
(camera, lighting, background, sensor noise, instruction wording, layout) on the main environment,
so a model's robustness can be measured without LIBERO.

A perturbation is drawn from the episode's seed (the same seed gives the same camera shift, the same
light, the same wording), applied at reset on top of the unperturbed scene (which it restores first),
and recorded with its drawn values in the episode's header and result. What each one changes:

- `camera`: every fixed camera moves 6-12 cm and turns 4-8 degrees; a mounted (wrist) camera turns
  3-6 degrees. Only what the model sees changes.
- `lighting`: the lights dim to 25-55% or brighten to 160-220%, take a colour tint and move.
- `table`: the table top gets another colour and one of three textures (checker, gradient, speckle).
- `noise`: Gaussian pixel noise (sigma 6-16 of 255) on every image the model is sent.
- `instruction`: the task's instruction in other words (its class's `paraphrases`).
- `layout`: the objects' placements mirrored across the task region (left becomes right), and
  their yaws with them. This changes the plan, not only the view.
- `physics`: small physical jitter of the task's loose objects (bodies on a free joint): each one's
  friction and mass scaled by up to +-`PHYSICS_JITTER` (5%) and its start position shifted by up to
  `START_SHIFT_CM` (3 mm) on the table. Not a new task, the same task on a slightly different
  table: a scripted expert that succeeds only on the exact floats of one CPU loses here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import mujoco
import numpy as np

from sim_adapters.mujoco.perturb_names import DIMENSIONS, VISUAL_ONLY, split_task
from sim_adapters.mujoco.scene import RUNTIME_PREFIX, TABLE_GEOM
from sim_adapters.mujoco.tasks import paraphrases, task_classes

__all__ = ["DIMENSIONS", "VISUAL_ONLY", "Perturber", "add_table_materials", "split_task"]

TABLE_TEXTURES: tuple[str, ...] = ("checker", "gradient", "speckle")
TABLE_MATERIAL = f"{RUNTIME_PREFIX}table_alt_"
PHYSICS_JITTER = 0.05
"""`physics`: the most a loose object's friction and mass are scaled up or down (a fraction)."""
START_SHIFT_CM = 0.3
"""`physics`: the most a loose object's start position moves on the table (cm, per axis x and y)."""
"""Materials added to every scene for the `table` perturbation (unused otherwise)."""


def paraphrases_by_task() -> dict[str, tuple[str, ...]]:
    """Task name -> its paraphrases, derived from the task classes."""
    return {n: c.paraphrases for c in task_classes() if c.paraphrases for n in c.names()}


def add_table_materials(spec: mujoco.MjSpec) -> None:
    """The textured table materials the `table` perturbation switches to (built into every scene so
    the perturbation is a choice at reset, not a new scene)."""
    builtins = {
        "checker": mujoco.mjtBuiltin.mjBUILTIN_CHECKER,
        "gradient": mujoco.mjtBuiltin.mjBUILTIN_GRADIENT,
        "speckle": mujoco.mjtBuiltin.mjBUILTIN_FLAT,
    }
    for name in TABLE_TEXTURES:
        tex = spec.add_texture(
            name=f"{TABLE_MATERIAL}{name}",
            type=mujoco.mjtTexture.mjTEXTURE_2D,
            builtin=builtins[name],
            rgb1=[0.85, 0.85, 0.85],
            rgb2=[0.35, 0.35, 0.35],
            width=64,
            height=64,
        )
        if name == "speckle":
            tex.mark = mujoco.mjtMark.mjMARK_RANDOM
            tex.random = 0.4
            tex.markrgb = [0.2, 0.2, 0.2]
        mat = spec.add_material(name=f"{TABLE_MATERIAL}{name}", texrepeat=[6, 6])
        mat.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = f"{TABLE_MATERIAL}{name}"


@dataclass
class _Baseline:
    """The unperturbed values of what a perturbation changes (restored before each reset)."""

    cam_pos: np.ndarray
    cam_quat: np.ndarray
    light_pos: np.ndarray
    light_dir: np.ndarray
    light_diffuse: np.ndarray
    headlight_ambient: np.ndarray
    table_rgba: np.ndarray
    table_matid: int
    geom_friction: np.ndarray
    body_mass: np.ndarray
    body_inertia: np.ndarray


def _rotation_quat(axis: np.ndarray, angle_rad: float) -> np.ndarray:
    axis = axis / np.linalg.norm(axis)
    return np.concatenate([[np.cos(angle_rad / 2)], np.sin(angle_rad / 2) * axis])


def _random_axis(rng: np.random.Generator) -> np.ndarray:
    v = rng.normal(size=3)
    return v / np.linalg.norm(v)


@dataclass
class Perturber:
    """Applies one dimension to a compiled scene. `reset` returns the drawn values (recorded)."""

    dimension: str
    model: mujoco.MjModel
    base: _Baseline = field(init=False)
    params: dict[str, Any] = field(default_factory=dict)
    _noise_rng: np.random.Generator | None = None

    def __post_init__(self) -> None:
        if self.dimension not in DIMENSIONS:
            raise ValueError(
                f"unknown perturbation {self.dimension!r}; perturbations are: {', '.join(DIMENSIONS)}"
            )
        m = self.model
        table = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, TABLE_GEOM)
        self._table_geom = table
        self.base = _Baseline(
            m.cam_pos.copy(),
            m.cam_quat.copy(),
            m.light_pos.copy(),
            m.light_dir.copy(),
            m.light_diffuse.copy(),
            np.array(m.vis.headlight.ambient, dtype=float),
            m.geom_rgba[table].copy(),
            int(m.geom_matid[table]),
            m.geom_friction.copy(),
            m.body_mass.copy(),
            m.body_inertia.copy(),
        )
        self._shift_cm: dict[str, list[float]] = {}

    def rng(self, seed: int) -> np.random.Generator:
        """The dimension's own stream: independent of the task's placement draws for the seed."""
        return np.random.default_rng([seed, DIMENSIONS.index(self.dimension), 0x5EED])

    def restore(self) -> None:
        m, b = self.model, self.base
        m.cam_pos[:] = b.cam_pos
        m.cam_quat[:] = b.cam_quat
        m.light_pos[:] = b.light_pos
        m.light_dir[:] = b.light_dir
        m.light_diffuse[:] = b.light_diffuse
        m.vis.headlight.ambient[:] = b.headlight_ambient
        m.geom_rgba[self._table_geom] = b.table_rgba
        m.geom_matid[self._table_geom] = b.table_matid
        m.geom_friction[:] = b.geom_friction
        m.body_mass[:] = b.body_mass
        m.body_inertia[:] = b.body_inertia
        self._shift_cm = {}

    def reset(self, seed: int, task: str) -> dict[str, Any]:
        """Restore the scene, then draw and apply this seed's perturbation; the drawn values."""
        self.restore()
        rng = self.rng(seed)
        params: dict[str, Any] = {"dimension": self.dimension}
        params |= getattr(self, f"_{self.dimension}")(rng, task)
        self.params = params
        return params

    # -- the dimensions ---------------------------------------------------------------------
    def _camera(self, rng: np.random.Generator, task: str) -> dict[str, Any]:
        m = self.model
        moved = {}
        for cam in range(m.ncam):
            mounted = m.cam_bodyid[cam] != 0
            if mounted:
                shift = np.zeros(3)
                angle = np.deg2rad(rng.uniform(3, 6))
            else:
                shift = _random_axis(rng) * rng.uniform(0.06, 0.12)
                angle = np.deg2rad(rng.uniform(4, 8))
            turn = _rotation_quat(_random_axis(rng), angle)
            q = np.zeros(4)
            mujoco.mju_mulQuat(q, turn, m.cam_quat[cam])
            m.cam_pos[cam] = m.cam_pos[cam] + shift
            m.cam_quat[cam] = q / np.linalg.norm(q)
            name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_CAMERA, cam) or str(cam)
            moved[name.removeprefix(RUNTIME_PREFIX)] = {
                "shift_cm": [round(float(v) * 100, 2) for v in shift],
                "turn_deg": round(float(np.rad2deg(angle)), 2),
            }
        return {"cameras": moved}

    def _lighting(self, rng: np.random.Generator, task: str) -> dict[str, Any]:
        m = self.model
        scale = rng.uniform(0.25, 0.55) if rng.random() < 0.5 else rng.uniform(1.6, 2.2)
        tint = rng.uniform(0.7, 1.0, size=3)
        tint /= tint.max()
        m.light_diffuse[:] = np.clip(m.light_diffuse * scale * tint, 0, 1)
        m.light_pos[:] = m.light_pos + rng.uniform(-0.4, 0.4, size=m.light_pos.shape)
        d = m.light_dir + rng.uniform(-0.3, 0.3, size=m.light_dir.shape)
        m.light_dir[:] = d / np.linalg.norm(d, axis=1, keepdims=True)
        m.vis.headlight.ambient[:] = np.clip(np.asarray(m.vis.headlight.ambient) * scale * tint, 0, 1)
        return {"intensity": round(float(scale), 3), "tint": [round(float(v), 3) for v in tint]}

    def _table(self, rng: np.random.Generator, task: str) -> dict[str, Any]:
        m = self.model
        texture = TABLE_TEXTURES[int(rng.integers(len(TABLE_TEXTURES)))]
        mat = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_MATERIAL, f"{TABLE_MATERIAL}{texture}")
        if mat < 0:
            raise RuntimeError(f"no material {TABLE_MATERIAL}{texture} in the scene (add_table_materials)")
        rgba = np.concatenate([rng.uniform(0.15, 0.95, size=3), [1.0]])
        m.geom_matid[self._table_geom] = mat
        m.geom_rgba[self._table_geom] = rgba
        return {"texture": texture, "rgba": [round(float(v), 3) for v in rgba]}

    def _noise(self, rng: np.random.Generator, task: str) -> dict[str, Any]:
        sigma = float(rng.uniform(6, 16))
        self._noise_rng = np.random.default_rng(rng.integers(2**63))
        return {"sigma": round(sigma, 2)}

    def _instruction(self, rng: np.random.Generator, task: str) -> dict[str, Any]:
        options = paraphrases(task)
        if not options:
            raise ValueError(f"no paraphrases of task {task!r} for the instruction perturbation")
        return {"instruction": options[int(rng.integers(len(options)))]}

    def _layout(self, rng: np.random.Generator, task: str) -> dict[str, Any]:
        return {"mirrored": True}

    def _loose_bodies(self) -> list[int]:
        """The bodies on a free joint (the task's loose objects; a robot's bodies never are)."""
        m = self.model
        return [int(m.jnt_bodyid[j]) for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]

    def _physics(self, rng: np.random.Generator, task: str) -> dict[str, Any]:
        m = self.model
        drawn: dict[str, Any] = {}
        for body in self._loose_bodies():
            name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, body) or str(body)
            # rounded as recorded, so the record replays exactly
            friction = round(float(rng.uniform(1 - PHYSICS_JITTER, 1 + PHYSICS_JITTER)), 4)
            mass = round(float(rng.uniform(1 - PHYSICS_JITTER, 1 + PHYSICS_JITTER)), 4)
            shift = rng.uniform(-START_SHIFT_CM, START_SHIFT_CM, size=2)
            geoms = m.geom_bodyid == body
            m.geom_friction[geoms] = m.geom_friction[geoms] * friction
            m.body_mass[body] = m.body_mass[body] * mass
            m.body_inertia[body] = m.body_inertia[body] * mass
            self._shift_cm[name] = [round(float(v), 3) for v in shift]
            drawn[name] = {
                "friction_scale": friction,
                "mass_scale": mass,
                "shift_cm": self._shift_cm[name],
            }
        return {"objects": drawn}

    # -- what the backend asks -------------------------------------------------------------
    def image(self, image: np.ndarray) -> np.ndarray:
        """An image as the model is sent it (pixel noise for `noise`; others unchanged)."""
        if self.dimension != "noise" or self._noise_rng is None:
            return image
        noisy = image.astype(np.float32) + self._noise_rng.normal(0, self.params["sigma"], image.shape)
        return np.clip(noisy, 0, 255).astype(np.uint8)

    def place(self, data: mujoco.MjData) -> None:
        """After the task placed its objects: move each loose object by its drawn start shift
        (`physics`; nothing for the other dimensions)."""
        m = self.model
        for name, shift in self._shift_cm.items():
            body = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, name)
            joint = int(m.body_jntadr[body])
            adr = int(m.jnt_qposadr[joint])
            data.qpos[adr : adr + 2] += np.asarray(shift, float) / 100.0

    def instruction(self, text: str) -> str:
        return str(self.params.get("instruction", text))

    @property
    def mirrored(self) -> bool:
        return bool(self.params.get("mirrored", False))
