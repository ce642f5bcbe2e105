"""A LIBERO task (or a LIBERO-Pro / LIBERO-Plus one) as a pear-agent backend: the benchmark's scene,
fixed init states and success check; our frame, IK targets and move-until-still semantics.

The arm runs robosuite's JOINT_POSITION controller: each 20 Hz control step moves the joint goal
towards the IK target by at most the joint speed cap, until every joint is at its target and the
robot is still (`reached`), or it stops making progress (`blocked`). Success is the benchmark's own
`_check_success()` (the BDDL goal), checked after every control step and latched, as LIBERO's
evaluation stops at the first success. Cameras render only when an observation is taken.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pear_agent.robot.backend import FrameSink, Observation, Outcome, PartCommand, TaskInfo
from pear_agent.robot.config import RobotConfig
from pear_agent.robot.loader import load_robot
from pear_agent.settings import setting
from sim_adapters.libero import MAX_TURNS, plus
from sim_adapters.libero.config import LiberoUnavailableError, import_libero
from sim_adapters.libero.naming import TaskRef, parse
from sim_adapters.libero.plus import corrupt

ROBOT_YAML = Path(__file__).with_name("libero_panda.yaml")
CAMERAS = {"agentview": "agentview", "wrist": "robot0_eye_in_hand"}
"""Our camera name -> LIBERO's."""
CONTROL_DT = 0.05
"""LIBERO steps its controller at 20 Hz (LIBERO's own rate, not ours to tune)."""


@dataclass(frozen=True)
class LiberoControllerSettings:
    """How the LIBERO arm runs and judges a move (its MuJoCo counterpart:
    `sim_adapters.mujoco.backend.ControllerSettings`)."""

    settle_steps: int = setting(
        10, cli=False, help="steps held after loading an init state, as LIBERO's own evaluation does, so "
        "objects settle"
    )  # fmt: skip
    joint_kp: float = setting(
        150.0, cli=False, help="the JOINT_POSITION controller's stiffness on every arm joint"
    )
    reach_tolerance_rad: float = setting(
        0.004,
        cli=False,
        help="a move has reached when every joint is this close to its target and the robot is still "
        "(the MuJoCo arm's: 0.006)",
    )
    max_move_steps: int = setting(
        200, cli=False, help="control steps (10 s at 20 Hz) a move may take before it ends as timeout"
    )
    still_velocity_rad_s: float = setting(0.05, cli=False, help="an arm joint slower than this is still")
    fingers_still_velocity: float = setting(
        0.01, cli=False, help="the fingers are still below this speed (their joints' units per second)"
    )
    grip_min_steps: int = setting(
        8, cli=False, help="a move that changes the grip runs at least this many control steps (0.4 s)"
    )
    stall_steps: int = setting(
        20,
        cli=False,
        help="a still arm whose error has not fallen by 1 mrad for this many control steps (1 s) is blocked",
    )


CONTROLLER = LiberoControllerSettings()
"""The settings every LIBERO backend runs with."""
BDDL_INSTRUCTION = {"task", "language"}
"""LIBERO-Pro types whose instruction is the BDDL file's own (a new task, a rewording); the others
keep LIBERO's instruction for the task, so only the perturbation differs from the LIBERO episode."""


def parse_task(name: str) -> tuple[str, int]:
    """`libero_spatial/3` -> ("libero_spatial", 3), with a one-line error naming the problem."""
    ref = parse(name)
    if ref.benchmark != "libero":
        raise ValueError(f"{name!r} is a {ref.benchmark} task, not a LIBERO one")
    return ref.suite, ref.index


def load_libero_robot() -> RobotConfig:
    return load_robot(ROBOT_YAML)


def _quiet() -> contextlib.AbstractContextManager:
    """LIBERO prints task orders and config notes on stdout; the CLI's stdout is ours."""
    return contextlib.redirect_stdout(io.StringIO())


def libero_instruction(suite: str, index: int) -> str:
    """LIBERO's instruction for one of its tasks, as its evaluation gives it to a policy."""
    import_libero()
    from libero.libero import benchmark  # optional: libero

    with _quiet():
        return benchmark.get_benchmark_dict()[suite]().get_task(index).language


class LiberoBackend:
    """One LIBERO, LIBERO-Pro or LIBERO-Plus task (`naming`). `reset(seed)` loads the benchmark's
    init state `seed` (LIBERO and LIBERO-Pro: 0-49; LIBERO-Plus: its task's states, one for a
    layout task)."""

    def __init__(self, robot: RobotConfig, task: str, render: bool = True) -> None:
        self.ref: TaskRef = parse(task)
        self.robot = robot
        self.part = robot.parts["arm"]
        self.render = render
        cams = {n: robot.cameras[n] for n in CAMERAS if n in robot.cameras}
        size = next(iter(cams.values())) if cams else None
        env_kwargs = {
            "controller": "JOINT_POSITION",
            "camera_heights": size.height if size else 128,
            "camera_widths": size.width if size else 128,
            "use_camera_obs": False,  # we render ourselves, only when an observation is taken
            "horizon": 10**9,
        }
        self._noise = 0
        self._robot_start: np.ndarray | None = None
        if self.ref.benchmark == "libero_plus":
            reason = plus.unavailable_reason(self.ref)
            if reason:
                raise LiberoUnavailableError(reason)
            envs = plus.import_liberoplus()
            self.init_states = plus.init_states(self.ref)
            with _quiet():
                self.env = envs.OffScreenRenderEnv(bddl_file_name=plus.env_bddl_name(self.ref), **env_kwargs)
            self._noise = plus.noise_level(self.ref)
            self.env.noise = 0  # its wrapper would corrupt camera observations we do not take
            if self.ref.perturbation == "robot":  # LIBERO-Plus's start pose for this variant
                self._robot_start = np.asarray(self.env.env.robots[0].robot_model.init_qpos, dtype=float)
            instruction = (
                self.env.language_instruction
                if self.ref.perturbation == "language"
                else libero_instruction(self.ref.suite, self.ref.index)
            )
        else:
            import_libero()
            from libero.libero import benchmark, get_libero_path  # optional: libero
            from libero.libero.envs import OffScreenRenderEnv  # optional: libero

            with _quiet():
                bench = benchmark.get_benchmark_dict()[self.ref.source]()
            ltask = bench.get_task(self.ref.index)
            self.init_states = np.asarray(bench.get_task_init_states(self.ref.index))
            bddl = Path(get_libero_path("bddl_files")) / ltask.problem_folder / ltask.bddl_file
            with _quiet():
                self.env = OffScreenRenderEnv(bddl_file_name=str(bddl), **env_kwargs)
            instruction = (
                self.env.language_instruction if self.ref.perturbation in BDDL_INSTRUCTION else ltask.language
            )
        self.task = TaskInfo(task, instruction, MAX_TURNS[self.ref.suite])
        self._cams = cams
        self.inner = self.env.env
        self._qi = np.array(self.rb._ref_joint_pos_indexes)
        self._vi = np.array(self.rb._ref_joint_vel_indexes)
        self._gi = np.array(self.rb._ref_gripper_joint_pos_indexes)
        self._gvi = np.array(self.rb._ref_gripper_joint_vel_indexes)
        self.step_cap = self.part.limits.joint_velocity_rad_s * CONTROL_DT
        self.out_max = float(self.rb.controller.output_max[0])
        self.goal = self.inner.parsed_problem["goal_state"]
        self._sink: FrameSink | None = None
        self._target = self.joints()
        self._grip_action = -1.0
        self._grip_target = 1.0
        self._steps = 0
        self._success = False
        self._rest_bottom: dict[str, float] = {}
        self._rest_height: dict[str, float] = {}
        self._seed = 0

    # -- state ------------------------------------------------------------------------
    @property
    def sim(self) -> Any:
        return self.inner.sim  # a hard reset builds a new one

    @property
    def rb(self) -> Any:
        return self.inner.robots[0]

    def joints(self) -> np.ndarray:
        return self.sim.data.qpos[self._qi].copy()

    def base_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """World position and rotation of the robot base: our frame's origin and axes."""
        bid = self.sim.model.body_name2id(self.rb.robot_model.root_body)
        return self.sim.data.body_xpos[bid].copy(), self.sim.data.body_xmat[bid].reshape(3, 3).copy()

    def to_base(self, p_world: np.ndarray) -> np.ndarray:
        origin, rot = self.base_pose()
        return rot.T @ (np.asarray(p_world) - origin)

    def gripper_opening(self) -> float:
        g = self.part.gripper
        assert g is not None
        q = self.sim.data.qpos[self._gi]
        width = (abs(q[0]) + abs(q[1])) / 2
        return float(np.clip((width - g.closed_joint_pos) / (g.open_joint_pos - g.closed_joint_pos), 0, 1))

    # -- contract ---------------------------------------------------------------------
    def reset(self, seed: int) -> Observation:
        if not 0 <= seed < len(self.init_states):
            raise ValueError(
                f"{self.task.name}: init state {seed} does not exist "
                f"(LIBERO has 0-{len(self.init_states) - 1})"
            )
        # LIBERO appends one set of property samplers (door open/closed, ...) to this list at every
        # (hard) reset and never clears it, so the n-th reset draws n sets from the random stream
        # before it places the fixtures (microwave, cabinet: model body positions, which the init
        # state does not restore). Cleared, every reset draws the same: the scene is a function of
        # the init state alone, whatever this environment ran before.
        initializers = getattr(self.inner, "object_property_initializers", None)
        if isinstance(initializers, list):
            initializers.clear()
        with _quiet():
            self.env.seed(seed)  # LIBERO's reset samples a placement before the init state replaces it
            self.env.reset()
        self.env.set_init_state(self.init_states[seed])
        if self._robot_start is not None:  # LIBERO-Plus robot dimension: its start pose, not LIBERO's
            self.sim.data.qpos[self._qi] = self._robot_start
            self.sim.data.qvel[self._vi] = 0.0
            self.sim.forward()
        self._seed = seed
        self.rb.controller.kp = np.full(7, CONTROLLER.joint_kp)
        self.rb.controller.kd = 2 * np.sqrt(self.rb.controller.kp)  # critically damped
        self._steps = 0
        self._success = False
        self._target = self.joints()
        self._grip_action = -1.0
        self._grip_target = 1.0
        for _ in range(CONTROLLER.settle_steps):
            self._step()
        self._steps = 0
        self._rest_bottom, self._rest_height = {}, {}
        at_rest = {n: o for n, o in self.privileged()["objects"].items() if "min_cm" in o}
        self._rest_bottom = {n: o["min_cm"][2] for n, o in at_rest.items()}
        self._rest_height = {n: round(o["max_cm"][2] - o["min_cm"][2], 2) for n, o in at_rest.items()}
        return self.observe()

    def _step(self) -> None:
        err = self._target - self.joints()
        scale = max(1.0, float(np.max(np.abs(err))) / self.step_cap)
        delta = err / scale  # a straight line in joint space at the speed cap
        action = np.append(np.clip(delta / self.out_max, -1, 1), self._grip_action)
        _, _, done, _ = self.env.step(action)
        self._steps += 1
        if done or self.env.check_success():
            self._success = True
        if self._sink is not None and self._steps % max(1, round(1 / (CONTROL_DT * self._fps))) == 0:
            self._sink(self._render("agentview"))

    def execute(self, commands: dict[str, PartCommand]) -> Outcome:
        cmd = commands.get("arm")
        if cmd is None:
            return Outcome("reached", "nothing to move")
        if cmd.joints_rad is not None:
            self._target = np.asarray(cmd.joints_rad, dtype=float).copy()
        grip_changed = False
        if cmd.gripper is not None:
            g = float(np.clip(cmd.gripper, 0.0, 1.0))
            grip_changed = g != self._grip_target
            self._grip_target = g
            if 0.0 < g < 1.0:
                # robosuite's Panda gripper takes only the sign of its action and ramps an internal
                # finger target; an absolute opening sets that target and holds it (action 0)
                self.rb.gripper.current_action = np.array([2 * g - 1, 1 - 2 * g])
                self._grip_action = 0.0
            else:
                self._grip_action = 1.0 - 2.0 * g  # -1 opens fully, +1 closes (and keeps squeezing)
        best, since_best = np.inf, 0
        for n in range(1, CONTROLLER.max_move_steps + 1):
            self._step()
            err = np.abs(self._target - self.joints())
            still = float(np.max(np.abs(self.sim.data.qvel[self._vi]))) < CONTROLLER.still_velocity_rad_s
            fingers_still = (
                float(np.max(np.abs(self.sim.data.qvel[self._gvi]))) < CONTROLLER.fingers_still_velocity
            )
            if (
                float(np.max(err)) < CONTROLLER.reach_tolerance_rad
                and still
                and fingers_still
                and (not grip_changed or n >= CONTROLLER.grip_min_steps)
            ):
                return Outcome("reached", duration_s=n * CONTROL_DT)
            if float(np.max(err)) < best - 1e-3:
                best, since_best = float(np.max(err)), 0
            else:
                since_best += 1
            if since_best >= CONTROLLER.stall_steps and still:
                stalled = [
                    j
                    for j, e in zip(self.part.joints, err, strict=True)
                    if e >= CONTROLLER.reach_tolerance_rad
                ]
                self._target = self.joints()  # hold where it stopped
                return Outcome(
                    "blocked",
                    f"stopped before the target; joints {', '.join(stalled)} did not reach it",
                    n * CONTROL_DT,
                    stalled,
                )
        return Outcome(
            "timeout",
            f"not reached within {CONTROLLER.max_move_steps * CONTROL_DT:.0f} s",
            CONTROLLER.max_move_steps * CONTROL_DT,
        )

    def advance(self, duration_s: float) -> None:
        for _ in range(round(duration_s / CONTROL_DT)):
            self._step()

    def _render(self, name: str) -> np.ndarray:
        cam = self._cams[name]
        img = self.sim.render(width=cam.width, height=cam.height, camera_name=CAMERAS[name])
        img = np.ascontiguousarray(img[::-1, ::-1])  # robosuite renders upside down
        if self._noise and name == "agentview":  # LIBERO-Plus sensor noise: the agentview camera only
            img = corrupt(img, self._noise, seed=self._seed * 100_003 + self._steps)
        return img

    def observe(self, render: bool = True) -> Observation:
        images = {n: self._render(n) for n in self._cams} if (render and self.render) else {}
        return Observation(
            joints_rad={"arm": self.joints()},
            gripper={"arm": self.gripper_opening()},
            images=images,
            time_s=self._steps * CONTROL_DT,
            success=self._success,
            privileged=self.privileged(),
        )

    def set_frame_sink(self, sink: FrameSink | None, fps: float = 10.0) -> None:
        self._sink, self._fps = sink, fps

    def stop(self) -> None:
        self._target = self.joints()

    def close(self) -> None:
        env, self.env = self.env, None
        if env is not None:
            env.close()

    # -- privileged facts for scripted experts (never shown to a model) ----------------
    def _body_ids(self, name: str) -> list[int]:
        objs = {**self.inner.objects_dict, **self.inner.fixtures_dict}
        root = self.sim.model.body_name2id(objs[name].root_body)
        parent = self.sim.model.body_parentid
        return [b for b in range(self.sim.model.nbody) if b == root or self._descends(b, root, parent)]

    @staticmethod
    def _descends(b: int, root: int, parent: np.ndarray) -> bool:
        while b > 0:
            b = int(parent[b])
            if b == root:
                return True
        return False

    def _bodies_box(self, bodies: set[int]) -> tuple[np.ndarray, np.ndarray] | None:
        """Base-frame bounds (cm) of the collision geoms of some bodies; None if they have none."""
        m = self.sim.model
        lo, hi = np.full(3, np.inf), np.full(3, -np.inf)
        for g in range(m.ngeom):
            if m.geom_bodyid[g] not in bodies or (m.geom_contype[g] == 0 and m.geom_conaffinity[g] == 0):
                continue
            g_lo, g_hi = self._geom_box(g)
            lo, hi = np.minimum(lo, g_lo), np.maximum(hi, g_hi)
        if not np.all(np.isfinite(lo)):
            return None
        lo_b, hi_b = self.to_base(lo) * 100, self.to_base(hi) * 100
        return np.minimum(lo_b, hi_b), np.maximum(lo_b, hi_b)

    def object_box(self, name: str) -> dict[str, Any]:
        """Axis-aligned bounds (base frame, cm) of an object's collision geoms, and its yaw."""
        d = self.sim.data
        bodies = set(self._body_ids(name))
        box = self._bodies_box(bodies)
        lo_b, hi_b = box if box is not None else (np.zeros(3), np.zeros(3))
        root = min(bodies)
        xmat = d.body_xmat[root].reshape(3, 3)
        return {
            "position_cm": ((lo_b + hi_b) / 2).round(2).tolist(),
            "min_cm": lo_b.round(2).tolist(),
            "max_cm": hi_b.round(2).tolist(),
            "yaw_rad": float(np.arctan2(xmat[1, 0], xmat[0, 0])),
        }

    def rim(self, name: str) -> dict[str, Any] | None:
        """The ring of an object's topmost collision geoms (within 1.5 cm of its top): its centre
        and mid-wall radius in the base frame (cm). A mug's cup, not its handle; a bowl's wall; a
        lidded pot's knob."""
        m, d = self.sim.model, self.sim.data
        bodies = set(self._body_ids(name))
        geoms = [
            g
            for g in range(m.ngeom)
            if m.geom_bodyid[g] in bodies and (m.geom_contype[g] or m.geom_conaffinity[g])
        ]
        if not geoms:
            return None
        tops = {g: self._geom_box(g) for g in geoms}
        top = max(float(hi[2]) for _, hi in tops.values())
        ring = [g for g, (_, hi) in tops.items() if float(hi[2]) > top - 0.015]
        centers = np.array([self.to_base(d.geom_xpos[g])[:2] for g in ring]) * 100
        c = centers.mean(0)
        radius = float(np.mean(np.linalg.norm(centers - c, axis=1))) if len(ring) > 2 else 0.0
        out: dict[str, Any] = {"center_cm": c.round(2).tolist(), "radius_cm": round(radius, 2)}
        if len(geoms) == 1 and int(m.geom_type[geoms[0]]) == 6:  # one box (a book): its thin side
            _, rot = self.base_pose()
            axes = rot.T @ d.geom_xmat[geoms[0]].reshape(3, 3)  # the box's axes in the base frame
            half = m.geom_size[geoms[0]] * 100
            up = int(np.argmax(np.abs(axes[2])))
            flat = [i for i in range(3) if i != up]
            thin = min(flat, key=lambda i: half[i])
            wide = max(flat, key=lambda i: half[i])
            out["box_half_cm"] = [
                round(float(half[thin]), 2),
                round(float(half[wide]), 2),
                round(float(half[up]), 2),
            ]
            out["thin_yaw_rad"] = round(float(np.arctan2(axes[1, thin], axes[0, thin])), 4)
        return out

    def part_boxes(self, name: str) -> dict[str, dict[str, list[float]]]:
        """An object's bounds split where it moves: its fixed part under its own name and each
        drawer or door (what a joint moves) as `name/joint`, so an open drawer is an obstacle of
        its own shape, not a box reaching down to the table."""
        m = self.sim.model
        bodies = set(self._body_ids(name))
        moving: dict[str, set[int]] = {}
        for j in range(m.njnt):
            b = int(m.jnt_bodyid[j])
            if b in bodies and m.jnt_type[j] in (2, 3) and b != min(bodies):
                moving[m.joint(j).name] = {
                    x for x in bodies if x == b or self._descends(x, b, m.body_parentid)
                }
        groups = {name: bodies - set().union(*moving.values())} | {
            f"{name}/{j}": bs for j, bs in moving.items()
        }
        out = {}
        for label, bs in groups.items():
            box = self._bodies_box(bs)
            if box is not None:
                out[label] = {"min_cm": box[0].round(2).tolist(), "max_cm": box[1].round(2).tolist()}
        return out

    def fixed_geom_boxes(self, name: str) -> list[dict[str, list[float]]]:
        """The bounds (base frame, cm) of each collision geom of an object's fixed part (not what a
        joint moves): a microwave's floor, ceiling and walls one by one, so a skill can find the
        opening they leave."""
        m = self.sim.model
        bodies = set(self._body_ids(name))
        moving = {
            x
            for j in range(m.njnt)
            if m.jnt_type[j] in (2, 3)
            and int(m.jnt_bodyid[j]) in bodies
            and int(m.jnt_bodyid[j]) != min(bodies)
            for x in bodies
            if x == int(m.jnt_bodyid[j]) or self._descends(x, int(m.jnt_bodyid[j]), m.body_parentid)
        }
        out = []
        for g in range(m.ngeom):
            if m.geom_bodyid[g] not in bodies - moving or not (m.geom_contype[g] or m.geom_conaffinity[g]):
                continue
            lo, hi = self._geom_box(g)
            lo_b, hi_b = self.to_base(lo) * 100, self.to_base(hi) * 100
            out.append(
                {
                    "min_cm": np.minimum(lo_b, hi_b).round(2).tolist(),
                    "max_cm": np.maximum(lo_b, hi_b).round(2).tolist(),
                }
            )
        return out

    def site_position(self, name: str) -> list[float]:
        site = self.inner.object_sites_dict[name]
        sid = self.sim.model.site_name2id(site.name if hasattr(site, "name") else name)
        return (self.to_base(self.sim.data.site_xpos[sid]) * 100).round(2).tolist()

    def _geom_box(self, g: int) -> tuple[np.ndarray, np.ndarray]:
        """World-axis bounds of one geom (its bounding box, turned with it)."""
        m, d = self.sim.model, self.sim.data
        center, half = m.geom_aabb[g][:3], m.geom_aabb[g][3:]
        rot = d.geom_xmat[g].reshape(3, 3)
        corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]) * half
        pts = d.geom_xpos[g] + (corners + center) @ rot.T
        return pts.min(0), pts.max(0)

    def articulation(self, owner: str, joints: list[str]) -> list[dict[str, Any]]:
        """The joints a goal predicate reads (a drawer's slide, a door's or knob's hinge): their
        value, the owner's open/closed/on/off ranges, axis and anchor, and the handle: the
        collision geom that moves furthest when the joint opens (slide) or lies furthest from the
        axis (hinge)."""
        m, d = self.sim.model, self.sim.data
        _, rot = self.base_pose()
        props = self.inner.get_object(owner).object_properties.get("articulation", {})
        ranges = {k.removeprefix("default_").removesuffix("_ranges"): v for k, v in props.items() if v}
        out = []
        for name in joints:
            j = m.joint(name).id
            body = int(m.jnt_bodyid[j])
            axis = rot.T @ (d.xmat[body].reshape(3, 3) @ m.jnt_axis[j])
            anchor = self.to_base(d.xanchor[j])
            moving = {b for b in range(m.nbody) if b == body or self._descends(b, body, m.body_parentid)}
            geoms = [
                g
                for g in range(m.ngeom)
                if m.geom_bodyid[g] in moving and (m.geom_contype[g] or m.geom_conaffinity[g])
            ]
            slide = int(m.jnt_type[j]) == 2
            opening = float(np.sign(np.mean(ranges.get("open", [1.0])) - np.mean(ranges.get("close", [0.0]))))

            def reach(
                g: int,
                slide: bool = slide,
                axis: np.ndarray = axis,
                opening: float = opening,
                anchor: np.ndarray = anchor,
            ) -> float:
                c = self.to_base(d.geom_xpos[g])
                if slide:
                    return float(c @ axis * opening)
                r = c - anchor
                return float(np.linalg.norm(r - (r @ axis) * axis))

            info: dict[str, Any] = {
                "joint": name,
                "kind": "slide" if slide else "hinge",
                "value": float(d.qpos[m.jnt_qposadr[j]]),
                "ranges": ranges,
                "axis": axis.round(4).tolist(),
                "anchor_cm": (anchor * 100).round(2).tolist(),
            }
            part = self._bodies_box(moving)
            if part is not None:
                info["part_min_cm"], info["part_max_cm"] = (
                    part[0].round(2).tolist(),
                    part[1].round(2).tolist(),
                )
            if geoms:
                lo, hi = self._geom_box(max(geoms, key=reach))
                lo_b, hi_b = self.to_base(lo) * 100, self.to_base(hi) * 100
                info["handle_min_cm"] = np.minimum(lo_b, hi_b).round(2).tolist()
                info["handle_max_cm"] = np.maximum(lo_b, hi_b).round(2).tolist()
            out.append(info)
        return out

    def _site_facts(self, name: str, objs: dict[str, Any]) -> dict[str, Any]:
        site = self.inner.object_sites_dict[name]
        _, rot = self.base_pose()
        sid = self.sim.model.site_name2id(site.name if hasattr(site, "name") else name)
        xmat = self.sim.data.site_xmat[sid].reshape(3, 3)
        size = np.asarray(site.size if site.size is not None else [0, 0, 0], dtype=float)
        half = np.abs(rot.T @ xmat) @ size
        facts: dict[str, Any] = {
            "position_cm": self.site_position(name),
            "half_size_cm": (half * 100).round(2).tolist(),
            "site": True,
        }
        parent = site.parent_name
        if parent in objs:
            facts["parent"] = self.object_box(parent)
            facts["parent_name"] = parent
            facts["parent_parts"] = self.fixed_geom_boxes(parent)
            m = self.sim.model
            bodies = set(self._body_ids(parent))
            doors = [
                m.joint(j).name
                for j in range(m.njnt)
                if m.jnt_bodyid[j] in bodies and m.jnt_type[j] in (2, 3)
            ]
            if doors:
                facts["parent_articulation"] = self.articulation(parent, doors)
        if getattr(site, "joints", None):
            facts["articulation"] = self.articulation(parent, list(site.joints))
        return facts

    def privileged(self) -> dict[str, Any]:
        """What the scripted experts read: the BDDL goal and which of its predicates hold now
        (LIBERO's own evaluation), every goal object's bounds and body origin (what LIBERO's `On`
        compares), goal regions with their extent and joints, and the bounds of everything else
        on the table (to carry over it)."""
        objs = {**self.inner.objects_dict, **self.inner.fixtures_dict}
        m, d = self.sim.model, self.sim.data
        facts: dict[str, Any] = {
            "goal": [list(g) for g in self.goal],
            "goal_done": [bool(self.inner._eval_predicate(g)) for g in self.goal],
            "objects": {},
            "others": {},
        }
        for pred in self.goal:
            for name in pred[1:]:
                if name in objs:
                    box = self.object_box(name)
                    root = self.sim.model.body_name2id(objs[name].root_body)
                    box["body_cm"] = (self.to_base(d.xpos[root]) * 100).round(2).tolist()
                    if name in self._rest_bottom:  # where it rested at reset: how high to lift it
                        box["rest_bottom_cm"] = self._rest_bottom[name]
                        box["rest_height_cm"] = self._rest_height[name]
                    rim = self.rim(name) if name in self.inner.objects_dict else None
                    if rim is not None:
                        box["rim_center_cm"], box["rim_radius_cm"] = rim["center_cm"], rim["radius_cm"]
                        if "box_half_cm" in rim:
                            box["box_half_cm"], box["thin_yaw_rad"] = rim["box_half_cm"], rim["thin_yaw_rad"]
                    joints = [
                        m.joint(j).name
                        for j in range(m.njnt)
                        if m.jnt_bodyid[j] in self._body_ids(name) and m.jnt_type[j] in (2, 3)
                    ]
                    if joints and pred[0] in ("open", "close", "turnon", "turnoff"):
                        box["articulation"] = self.articulation(name, joints)
                    facts["objects"][name] = box
                elif name in self.inner.object_sites_dict:
                    facts["objects"][name] = self._site_facts(name, objs)
        for name in objs:
            if name not in facts["objects"]:
                facts["others"].update(self.part_boxes(name))
        return facts
