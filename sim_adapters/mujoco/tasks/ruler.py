"""`align_with_ruler`: the PEAR paper's tool-use task. Three blocks lie scattered on the table and
a triangle ruler (a flat set square with a grip fin on top) lies behind them; use the ruler to push
the blocks into one straight line, let go of the ruler, and return the arms home.

Success (all at once):
- the three blocks' centres lie on one straight line: each within `LINE_TOL_M` (1 cm) of the
  best-fit line through the three, and every block rests on the table;
- no gripper finger touches the ruler (it is released);
- every arm's tool point is within `HOME_TOL_M` (3 cm) of where it was at the start (home).

The five scenes (`SCENES`, seed % 5) are fixed arrangements an operator can also set on a real
table (`pear-agent ros protocol pear_real` prints them); the seed adds a few millimetres of jitter
and, on a robot with several gripper arms, picks the arm whose side of the table they are on
((seed // 5) % arms: seeds 0-4 one arm, 5-9 the other).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from pear_agent.robot.config import RobotConfig
from pear_agent.robot.model import ee_site_name
from sim_adapters.mujoco.lazy_mujoco import mujoco
from sim_adapters.mujoco.tasks.base import (
    BLOCK_NAMES,
    ONE_ARM,
    MujocoTask,
    add_blocks,
    body_speed,
    body_yaw,
    geoms_touch,
    set_free_pose,
    to_cm,
    tool_facts,
)
from sim_adapters.mujoco.tasks.catalog import register_task
from sim_adapters.mujoco.tasks.layout import TableFrame, arm_places, single_arm_frame
from sim_adapters.mujoco.tasks.pick_place import REF_AREA

BLOCK_HALF_M = 0.015
LINE_TOL_M = 0.01
HOME_TOL_M = 0.03
RULER = "ruler"
RULER_EDGE_M = 0.16
"""The straight edge that pushes (the set square's long leg), along the ruler's own y."""
RULER_DEPTH_M = 0.08
"""The other leg, behind the edge (the ruler's -x)."""
RULER_THICK_M = 0.005
FIN_HALF_M = (0.006, 0.025, 0.0125)
"""The grip fin on top: thin along the ruler's x, so the fingers close along the push."""
FIN_POS_M = (-0.04, -0.03)

# (u ahead, v left) in metres from the centre of the arm's side of the table, and yaw (rad):
# each scene's three blocks, then the ruler's edge midpoint and yaw off square
SCENES: tuple[dict[str, Any], ...] = (
    {"blocks": ((0.0, -0.05, 0.2), (0.045, 0.0, -0.1), (0.01, 0.05, 0.3)), "ruler": (-0.05, 0.01, 0.2)},
    {"blocks": ((0.05, -0.055, -0.3), (0.0, 0.005, 0.1), (0.04, 0.06, 0.0)), "ruler": (-0.055, -0.01, -0.25)},
    {"blocks": ((0.01, -0.06, 0.0), (0.05, -0.01, 0.4), (0.0, 0.05, -0.2)), "ruler": (-0.05, 0.02, 0.1)},
    {"blocks": ((0.06, -0.045, 0.25), (0.0, 0.0, -0.3), (0.055, 0.055, 0.1)), "ruler": (-0.05, -0.02, -0.15)},
    {"blocks": ((0.0, -0.05, 0.1), (0.05, 0.005, 0.2), (0.0, 0.06, -0.35)), "ruler": (-0.055, 0.0, 0.3)},
)
"""Every scene's blocks start 2.6 to 3.8 cm off one line (tests/sim_adapters/test_ruler.py)."""
JITTER_M, JITTER_RAD = 0.004, 0.05


def line_deviation_m(points_xy: np.ndarray) -> float:
    """The largest distance of the points from their best-fit (total least squares) line."""
    c = points_xy - points_xy.mean(0)
    _, _, vt = np.linalg.svd(c)
    normal = vt[-1]
    return float(np.max(np.abs(c @ normal)))


def add_ruler(spec: mujoco.MjSpec) -> None:
    """A right-triangle plate (a prism mesh) with a grip fin; slides easily on the table."""
    e, d, t = RULER_EDGE_M / 2, RULER_DEPTH_M, RULER_THICK_M
    tri = [(0.0, -e), (0.0, e), (-d, -e)]
    verts = [[x, y, z] for z in (0.0, t) for x, y in tri]
    spec.add_mesh(name=f"{RULER}_plate", uservert=np.array(verts).flatten().tolist())
    body = spec.worldbody.add_body(name=RULER, pos=[0.3, 0.0, 0.1])
    body.add_freejoint(name=f"{RULER}_free")
    body.add_geom(
        name=f"{RULER}_plate",
        type=mujoco.mjtGeom.mjGEOM_MESH,
        meshname=f"{RULER}_plate",
        rgba=[0.95, 0.9, 0.55, 1],
        mass=0.03,  # a plastic set square
        friction=[0.15, 0.01, 0.001],
        condim=3,
    )
    body.add_geom(
        name=f"{RULER}_fin",
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=list(FIN_HALF_M),
        pos=[FIN_POS_M[0], FIN_POS_M[1], t + FIN_HALF_M[2]],
        rgba=[0.2, 0.2, 0.25, 1],
        mass=0.01,
        friction=[1.5, 0.05, 0.001],
        condim=4,
    )


class AlignWithRuler(MujocoTask):
    name = "align_with_ruler"
    requires = ONE_ARM
    max_turns = 25
    instruction = (
        "Use the triangle ruler to push the red, green and blue blocks into one aligned straight "
        "line, then let go of the ruler and return the arms to their home positions."
    )
    default_robot = "yam_bimanual"
    expert = "sim_adapters.mujoco.experts.ruler:ALIGN_WITH_RULER"
    on_every_robot = False  # a PEAR paper station task

    def build(self, spec: mujoco.MjSpec, robot: RobotConfig) -> None:
        self.take_robot(spec, robot, hide_tcp_markers=True)
        self.parts = robot.gripper_parts()
        self.part = self.parts[0]
        add_blocks(spec, BLOCK_HALF_M, mass_kg=0.05, friction=0.4)
        add_ruler(spec)
        self._frames: dict[str, TableFrame] = {}
        self._home: dict[str, np.ndarray] = {}
        self._home_yaw: dict[str, float] = {}
        self.scene = 0

    def frame(self, model: mujoco.MjModel, data: mujoco.MjData, part: str) -> TableFrame:
        if part not in self._frames:
            places = arm_places(model, data, self.robot)
            for p, place in places.items():
                if p in self.parts:
                    self._home.setdefault(p, place.home_tool_m.copy())
                    self._home_yaw.setdefault(p, place.home_yaw_rad)
            self._frames[part] = single_arm_frame(self.robot, places, part, REF_AREA)
        f = self._frames[part]
        return replace(f, mirrored=True) if self.mirror_layout else f

    def scene_layout(self, model: mujoco.MjModel, data: mujoco.MjData, seed_scene: int, part: str) -> dict:
        """A scene's nominal poses in the world (m, rad): what an operator places on a real table."""
        f = self.frame(model, data, part)
        s = SCENES[seed_scene % len(SCENES)]
        blocks = {n: (f.at(u, v), f.yaw(y)) for n, (u, v, y) in zip(BLOCK_NAMES, s["blocks"], strict=True)}
        u, v, y = s["ruler"]
        return {"blocks": blocks, "ruler": (f.at(u, v), f.yaw(y)), "part": part}

    def reset(self, model: mujoco.MjModel, data: mujoco.MjData, rng: np.random.Generator) -> None:
        scene, arm = self._next  # from the episode's seed (`seed_scene`, called by the backend)
        self.scene = scene
        self.part = self.parts[arm % len(self.parts)]
        for p in self.parts:
            self.frame(model, data, p)
        layout = self.scene_layout(model, data, scene, self.part)
        for name, (xy, yaw) in layout["blocks"].items():
            xy = xy + rng.uniform(-JITTER_M, JITTER_M, 2)
            pos = np.array([*xy, self.z0 + BLOCK_HALF_M])
            set_free_pose(model, data, name, pos, yaw + rng.uniform(-JITTER_RAD, JITTER_RAD))
        xy, yaw = layout["ruler"]
        xy = xy + rng.uniform(-JITTER_M, JITTER_M, 2)
        set_free_pose(model, data, RULER, np.array([*xy, self.z0 + 0.0005]), yaw)

    _next: tuple[int, int] = (0, 0)

    def seed_scene(self, seed: int) -> None:
        """Which scene (seed % 5) and arm ((seed // 5) % arms) the next reset sets."""
        self._next = (seed % len(SCENES), seed // len(SCENES))

    def fingers(self, model: mujoco.MjModel) -> set[int]:
        return set().union(*(self.fingers_of(model, part) for part in self.parts))

    def ruler_geoms(self, model: mujoco.MjModel) -> set[int]:
        return {model.geom(f"{RULER}_plate").id, model.geom(f"{RULER}_fin").id}

    def deviation_m(self, data: mujoco.MjData) -> float:
        return line_deviation_m(np.array([data.body(n).xpos[:2] for n in BLOCK_NAMES]))

    def aligned(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        on_table = all(data.body(n).xpos[2] < self.z0 + BLOCK_HALF_M + 0.01 for n in BLOCK_NAMES)
        still = all(body_speed(model, data, n) < 0.05 for n in BLOCK_NAMES)
        return on_table and still and self.deviation_m(data) <= LINE_TOL_M

    def released(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        return not geoms_touch(model, data, self.ruler_geoms(model), self.fingers(model))

    def arms_home(self, data: mujoco.MjData) -> bool:
        return all(
            np.linalg.norm(data.site(ee_site_name(p)).xpos - home) <= HOME_TOL_M
            for p, home in self._home.items()
        )

    def success(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        return self.aligned(model, data) and self.released(model, data) and self.arms_home(data)

    def privileged(self, model: mujoco.MjModel, data: mujoco.MjData) -> dict[str, Any]:
        f = self.frame(model, data, self.part)
        r = data.body(RULER)
        rot = r.xmat.reshape(3, 3)
        normal = rot[:2, 0] / np.linalg.norm(rot[:2, 0])  # the ruler's +x: from its body to its edge
        fin = r.xpos + rot @ np.array([FIN_POS_M[0], FIN_POS_M[1], RULER_THICK_M + FIN_HALF_M[2]])
        return {
            "task": self.name,
            "part": self.part,
            "tool": tool_facts(self.robot, self.part),
            "scene": self.scene,
            "blocks": {n: {"position_cm": to_cm(data.body(n).xpos)} for n in BLOCK_NAMES},
            "block_size_cm": BLOCK_HALF_M * 200,
            "ruler": {
                "edge_mid_cm": to_cm(r.xpos),
                "normal": [round(float(v), 4) for v in normal],
                "yaw_rad": round(body_yaw(data, RULER), 4),
                "fin_cm": to_cm(fin),
                "fin_height_cm": FIN_HALF_M[2] * 200,
                "held": not self.released(model, data),
                "edge_length_cm": RULER_EDGE_M * 100,
            },
            "sweep_direction": [round(float(v), 4) for v in f.forward],
            "line_deviation_cm": round(self.deviation_m(data) * 100, 2),
            "line_tolerance_cm": LINE_TOL_M * 100,
            "aligned": self.aligned(model, data),
            "home_cm": {p: to_cm(h) for p, h in self._home.items()},
            "home_yaw_rad": {p: round(y, 4) for p, y in self._home_yaw.items()},
            "table_z_cm": round(self.z0 * 100, 2),
        }


register_task(AlignWithRuler)
