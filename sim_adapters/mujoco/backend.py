"""The MuJoCo backend: a robot description plus a task, stepped by a move-until-still controller.

`execute` follows a minimum-jerk joint trajectory at the speed cap, then waits until every joint
is at its target and still (reached), or reports which joints stalled short of it (blocked).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from pear_agent.backend import FrameSink, Observation, Outcome, PartCommand, TaskInfo
from pear_agent.motion import SettleJudge
from pear_agent.robot_config import RobotConfig, RobotConfigError


def configure_gl() -> str:
    """Headless rendering: EGL by default, OSMesa if EGL is missing. Must run before import."""
    if "MUJOCO_GL" not in os.environ:
        import ctypes.util

        has_egl = ctypes.util.find_library("EGL") is not None
        has_osmesa = ctypes.util.find_library("OSMesa") is not None
        os.environ["MUJOCO_GL"] = "osmesa" if (not has_egl and has_osmesa) else "egl"
    os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
    return os.environ["MUJOCO_GL"]


configure_gl()

import mujoco  # noqa: E402

from pear_agent.robot_model import part_joint_limits  # noqa: E402
from sim_adapters.mujoco.perturb import Perturber, add_table_materials  # noqa: E402
from sim_adapters.mujoco.scene import (  # noqa: E402
    PartDrive,
    add_task,
    build_scene,
    camera_name,
    compile_spec,
    scene_option,
)
from sim_adapters.mujoco.tasks.base import MujocoTask  # noqa: E402


@dataclass(frozen=True)
class ControllerSettings:
    reach_tolerance_rad: float = 0.006
    still_velocity_rad_s: float = 0.03
    settle_timeout_s: float = 2.0
    stall_tracking_error_rad: float = 0.25
    control_substeps: int = 5


class _PartIO:
    def __init__(self, model: mujoco.MjModel, robot: RobotConfig, name: str, drive: PartDrive) -> None:
        part = robot.parts[name]
        self.name = name
        self.joint_names = list(part.joints)
        self.qadr = np.array([model.joint(j).qposadr[0] for j in part.joints])
        self.dadr = np.array([model.joint(j).dofadr[0] for j in part.joints])
        self.act = np.array([model.actuator(a).id for a in drive.arm])
        self.home = np.array(part.home.joints_rad)
        self.home_gripper = part.home.gripper
        self.vmax = part.limits.joint_velocity_rad_s
        self.lower, self.upper = part_joint_limits(part, model)
        outside = [
            f"{j} = {q:g} not in [{a:.4g}, {b:.4g}]"
            for j, q, a, b in zip(part.joints, self.home, self.lower, self.upper, strict=True)
            if not a - 1e-9 <= q <= b + 1e-9
        ]
        if outside:
            raise RobotConfigError(
                f"{robot.label}: key parts.{name}.home.joints_rad: outside the joint limits: "
                + "; ".join(outside)
            )
        g = part.gripper
        self.gripper = g
        if g is not None:
            self.g_qadr = np.array([model.joint(j).qposadr[0] for j in g.joints])
            self.g_dadr = np.array([model.joint(j).dofadr[0] for j in g.joints])
            ranges = np.array([g.joint_range(j) for j in g.joints])
            self.g_closed, self.g_open = ranges[:, 0], ranges[:, 1]
            drives = g.drives
            self.g_act = np.array([model.actuator(a).id for a in drive.gripper], dtype=int)
            self.g_ctrl_closed = np.array([a.ctrl_closed for a in drives])
            self.g_ctrl_open = np.array([a.ctrl_open for a in drives])
            self.g_ramp_s = g.move_time_s
            self.g_still = g.still_velocity

    def gripper_opening(self, data: mujoco.MjData) -> float:
        """0 closed .. 1 open: the mean over the finger joints of where each sits between its own
        closed and open positions."""
        if self.gripper is None:
            return 0.0
        frac = (data.qpos[self.g_qadr] - self.g_closed) / (self.g_open - self.g_closed)
        return float(np.clip(np.mean(frac), 0, 1))

    def gripper_joint_targets(self, command: float) -> np.ndarray:
        return self.g_closed + command * (self.g_open - self.g_closed)

    def set_gripper(self, data: mujoco.MjData, command: float) -> None:
        if self.gripper is None or self.g_act.size == 0:
            return
        data.ctrl[self.g_act] = self.gripper_ctrl(command)

    def gripper_ctrl(self, command: float) -> np.ndarray:
        return self.g_ctrl_closed + command * (self.g_ctrl_open - self.g_ctrl_closed)

    def gripper_command(self, data: mujoco.MjData) -> float:
        """The command (0..1) the gripper's actuators are set to now."""
        if self.gripper is None or self.g_act.size == 0:
            return 0.0
        span = self.g_ctrl_open - self.g_ctrl_closed
        return float(np.mean((data.ctrl[self.g_act] - self.g_ctrl_closed) / span))


class MujocoBackend:
    """Backend protocol implementation over a MuJoCo scene built from a robot + task."""

    def __init__(
        self,
        robot: RobotConfig,
        task: MujocoTask,
        render: bool = True,
        settings: ControllerSettings | None = None,
        perturbation: str | None = None,
        renderers: dict[tuple[int, int], mujoco.Renderer] | None = None,
    ) -> None:
        """`renderers`: a cache shared by the backends of one scene (same robot and task) in a
        process, so episodes in flight together hold one renderer (~64 MB) instead of one each; None:
        this backend's own. A renderer draws whatever MjData it is given for the scene it was built
        for (its own MjModel: a perturbed backend, whose model changes per episode, keeps its own);
        rendering stays on one thread."""
        self.robot = robot
        self._task = task
        self.settings = settings or ControllerSettings()
        spec, drives = build_scene(robot)
        add_task(robot, spec, task)
        if perturbation == "table":
            add_table_materials(spec)
        self.model = compile_spec(robot, spec, task.name)
        self.perturber = Perturber(perturbation, self.model) if perturbation else None
        self.perturbation: dict[str, Any] | None = None
        """The drawn values of this episode's perturbation (recorded), or None."""
        self.data = mujoco.MjData(self.model)
        self.parts = {name: _PartIO(self.model, robot, name, drives[name]) for name in robot.parts}
        self.render_enabled = render
        self._own_renderers = renderers is None
        self._renderers: dict[tuple[int, int], mujoco.Renderer] = {} if renderers is None else renderers
        self._scene_opt = scene_option(robot)
        self._sink: FrameSink | None = None
        self._sink_period_s = 0.1
        self._next_frame_t = 0.0
        self._video_camera = next(iter(robot.cameras), None)
        self._stopped = False
        self.task_name = f"{task.name}~{perturbation}" if perturbation else task.name
        """The task as named to the runtime and in records: the perturbation is part of it."""
        self.task = TaskInfo(self.task_name, task.instruction, task.max_turns)

    # -- Backend protocol -------------------------------------------------------------
    def reset(self, seed: int) -> Observation:
        m, d = self.model, self.data
        mujoco.mj_resetData(m, d)
        for io in self.parts.values():
            d.qpos[io.qadr] = io.home
            d.ctrl[io.act] = io.home
            if io.gripper is not None:
                d.qpos[io.g_qadr] = io.gripper_joint_targets(io.home_gripper)
                io.set_gripper(d, io.home_gripper)
        rng = np.random.default_rng(seed)
        if self.perturber is not None:
            self.perturbation = self.perturber.reset(seed, self._task.name)
            self._task.mirror_layout = self.perturber.mirrored
        seed_scene = getattr(self._task, "seed_scene", None)
        if callable(seed_scene):  # a task of fixed scenes picks one by the seed (align_with_ruler)
            seed_scene(seed)
        self._task.reset(m, d, rng)
        instruction = self._task.instruction
        if self.perturber is not None:
            instruction = self.perturber.instruction(instruction)
        self.task = TaskInfo(self.task_name, instruction, self._task.max_turns)
        mujoco.mj_forward(m, d)
        for _ in range(int(0.3 / m.opt.timestep)):  # let objects settle on the table
            mujoco.mj_step(m, d)
        d.time = 0.0
        self._next_frame_t = 0.0
        self._stopped = False
        return self.observe()

    def observe(self, render: bool = True) -> Observation:
        d = self.data
        images = {}
        if render and self.render_enabled:
            images = {name: self.render(name) for name, c in self.robot.cameras.items() if c.sim}
            if self.perturber is not None:  # what the model is sent (sensor noise), not the video
                images = {name: self.perturber.image(img) for name, img in images.items()}
        return Observation(
            joints_rad={n: d.qpos[io.qadr].copy() for n, io in self.parts.items()},
            gripper={n: io.gripper_opening(d) for n, io in self.parts.items() if io.gripper},
            images=images,
            time_s=float(d.time),
            success=bool(self._task.success(self.model, d)),
            privileged=self._task.privileged(self.model, d),
        )

    def set_frame_sink(self, sink: FrameSink | None, fps: float = 10.0) -> None:
        self._sink = sink
        self._sink_period_s = 1.0 / fps
        self._next_frame_t = float(self.data.time)

    def stop(self) -> None:
        """Hold the current pose: setpoints become the measured joints."""
        self._stopped = True
        for io in self.parts.values():
            self.data.ctrl[io.act] = self.data.qpos[io.qadr]

    def close(self) -> None:
        if not self._own_renderers:  # shared: the owner of the cache closes them
            return
        for r in self._renderers.values():
            r.close()
        self._renderers.clear()

    def execute(self, commands: dict[str, PartCommand]) -> Outcome:
        m, d, s = self.model, self.data, self.settings
        if self._stopped:
            return Outcome("stopped", "the robot was stopped; no further motion")
        start_t = float(d.time)
        q0, qT = {}, {}
        ramps: dict[str, tuple[float, float, float]] = {}  # part -> (from, to, seconds)
        duration = 0.0
        for name, cmd in commands.items():
            io = self.parts[name]
            if cmd.gripper is not None:
                target = float(np.clip(cmd.gripper, 0.0, 1.0))
                if io.gripper is not None and io.g_ramp_s > 0:
                    start = io.gripper_command(d)
                    ramps[name] = (start, target, io.g_ramp_s * abs(target - start))
                else:
                    io.set_gripper(d, target)
            if cmd.joints_rad is not None:
                q0[name] = d.ctrl[io.act].copy()
                qT[name] = np.clip(np.asarray(cmd.joints_rad, float), io.lower, io.upper)
                duration = max(duration, float(np.max(np.abs(qT[name] - q0[name]))) / io.vmax)
        # Minimum-jerk peak speed is 1.875x the mean: stretch so the peak respects the cap.
        duration *= 1.875
        dt = m.opt.timestep * s.control_substeps
        t = 0.0
        ramp_s = max((r[2] for r in ramps.values()), default=0.0)
        judge = SettleJudge(max(duration, ramp_s), s.reach_tolerance_rad, s.settle_timeout_s)
        while True:
            t += dt
            for name, (g0, g1, T) in ramps.items():
                self.parts[name].set_gripper(d, g1 if t >= T else g0 + (g1 - g0) * t / T)
            if qT and t <= duration:
                tau = t / duration
                blend = 10 * tau**3 - 15 * tau**4 + 6 * tau**5
                for name in qT:
                    d.ctrl[self.parts[name].act] = q0[name] + (qT[name] - q0[name]) * blend
            elif qT:
                for name in qT:
                    d.ctrl[self.parts[name].act] = qT[name]
            mujoco.mj_step(m, d, nstep=s.control_substeps)
            self._maybe_emit_frame()
            # stall during motion: tracking error far beyond what the gains allow
            for name in qT:
                io = self.parts[name]
                err = np.abs(d.qpos[io.qadr] - d.ctrl[io.act])
                if t <= duration and np.max(err) > s.stall_tracking_error_rad:
                    return self._blocked(name, qT[name], start_t, "stalled during the motion")
            errors = {n: float(np.max(np.abs(d.qpos[self.parts[n].qadr] - qT[n]))) for n in qT}
            verdict = judge.verdict(t, errors, self._is_still())
            if verdict is None:
                continue
            what, name = verdict
            if what == "reached":
                return Outcome("reached", "", float(d.time) - start_t)
            if name is None:
                return Outcome("timeout", "the robot did not come to rest", float(d.time) - start_t)
            return self._blocked(name, qT[name], start_t, what)

    def advance(self, duration_s: float) -> None:
        m, d = self.model, self.data
        n = round(duration_s / m.opt.timestep)
        sub = self.settings.control_substeps
        while n > 0:
            k = min(sub, n)
            mujoco.mj_step(m, d, nstep=k)
            self._maybe_emit_frame()
            n -= k

    # -- helpers ----------------------------------------------------------------------
    def _is_still(self) -> bool:
        d, s = self.data, self.settings
        for io in self.parts.values():
            if np.max(np.abs(d.qvel[io.dadr])) > s.still_velocity_rad_s:
                return False
            if io.gripper is not None and np.max(np.abs(d.qvel[io.g_dadr])) > io.g_still:
                return False
        return True

    def _blocked(self, name: str, target: np.ndarray, start_t: float, why: str) -> Outcome:
        io = self.parts[name]
        err = target - self.data.qpos[io.qadr]
        bad = [io.joint_names[i] for i in np.flatnonzero(np.abs(err) >= self.settings.reach_tolerance_rad)]
        self.data.ctrl[io.act] = self.data.qpos[io.qadr]  # hold where it is
        for _ in range(25):
            mujoco.mj_step(self.model, self.data, nstep=self.settings.control_substeps)
            self._maybe_emit_frame()
        detail = f"{name} {why}; joints short of target: {', '.join(bad)} (max {np.max(np.abs(err)):.3f} rad)"
        return Outcome("blocked", detail, float(self.data.time) - start_t, bad)

    def _maybe_emit_frame(self) -> None:
        if self._sink is None or self._video_camera is None or self.data.time < self._next_frame_t:
            return
        self._next_frame_t += self._sink_period_s
        self._sink(self.render(self._video_camera))

    def render(self, camera: str) -> np.ndarray:
        cam = self.robot.cameras[camera]
        key = (cam.width, cam.height)
        renderer = self._renderers.get(key)
        if renderer is None:
            renderer = mujoco.Renderer(self.model, height=cam.height, width=cam.width)
            self._renderers[key] = renderer
        renderer.update_scene(self.data, camera=camera_name(camera), scene_option=self._scene_opt)
        return renderer.render().copy()
