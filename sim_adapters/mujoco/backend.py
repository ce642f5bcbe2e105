"""The MuJoCo backend: a robot description plus a task, stepped by a move-until-still controller.

`execute` follows a minimum-jerk joint trajectory at the speed cap, then waits until every joint
is at its target and still (reached), or reports which joints stalled short of it (blocked).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from pear_agent.backend import FrameSink, Observation, Outcome, PartCommand, TaskInfo
from pear_agent.motion import SettleJudge
from pear_agent.robot_config import RobotConfig


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

from sim_adapters.mujoco.scene import build_robot_spec  # noqa: E402
from sim_adapters.mujoco.tasks.base import MujocoTask  # noqa: E402


@dataclass(frozen=True)
class ControllerSettings:
    reach_tolerance_rad: float = 0.006
    still_velocity_rad_s: float = 0.03
    gripper_still_m_s: float = 0.004
    settle_timeout_s: float = 2.0
    stall_tracking_error_rad: float = 0.25
    control_substeps: int = 5


class _PartIO:
    def __init__(self, model: mujoco.MjModel, robot: RobotConfig, name: str) -> None:
        part = robot.parts[name]
        self.name = name
        self.joint_names = list(part.joints)
        self.qadr = np.array([model.joint(j).qposadr[0] for j in part.joints])
        self.dadr = np.array([model.joint(j).dofadr[0] for j in part.joints])
        self.act = np.array([model.actuator(f"{j}_pos").id for j in part.joints])
        self.home = np.array(part.home.joints_rad)
        self.home_gripper = part.home.gripper
        self.vmax = part.limits.joint_velocity_rad_s
        jnt_range = model.jnt_range[[model.joint(j).id for j in part.joints]]
        lo, hi = part.tighten_limits(jnt_range[:, 0], jnt_range[:, 1])
        self.lower, self.upper = np.array(lo), np.array(hi)
        g = part.gripper
        self.gripper = g
        if g is not None:
            self.g_qadr = np.array([model.joint(j).qposadr[0] for j in g.joints])
            self.g_dadr = np.array([model.joint(j).dofadr[0] for j in g.joints])
            self.g_act = model.actuator(g.actuator).id if g.actuator else None

    def gripper_opening(self, data: mujoco.MjData) -> float:
        g = self.gripper
        if g is None:
            return 0.0
        pos = float(np.mean(data.qpos[self.g_qadr]))
        return float(np.clip((pos - g.closed_joint_pos) / (g.open_joint_pos - g.closed_joint_pos), 0, 1))

    def set_gripper(self, data: mujoco.MjData, command: float) -> None:
        g = self.gripper
        if g is None or self.g_act is None:
            return
        data.ctrl[self.g_act] = g.ctrl_closed + command * (g.ctrl_open - g.ctrl_closed)


class MujocoBackend:
    """Backend protocol implementation over a MuJoCo scene built from a robot + task."""

    def __init__(
        self,
        robot: RobotConfig,
        task: MujocoTask,
        render: bool = True,
        settings: ControllerSettings | None = None,
    ) -> None:
        self.robot = robot
        self._task = task
        self.settings = settings or ControllerSettings()
        spec = build_robot_spec(robot, **task.table_kwargs())
        task.build(spec, robot)
        self.model = spec.compile()
        self.data = mujoco.MjData(self.model)
        self.parts = {name: _PartIO(self.model, robot, name) for name in robot.parts}
        self.render_enabled = render
        self._renderers: dict[tuple[int, int], mujoco.Renderer] = {}
        self._scene_opt = mujoco.MjvOption()
        self._sink: FrameSink | None = None
        self._sink_period_s = 0.1
        self._next_frame_t = 0.0
        self._video_camera = next(iter(robot.cameras), None)
        self._stopped = False
        self.task = TaskInfo(task.name, task.instruction, task.max_turns)

    # -- Backend protocol -------------------------------------------------------------
    def reset(self, seed: int) -> Observation:
        m, d = self.model, self.data
        mujoco.mj_resetData(m, d)
        for io in self.parts.values():
            d.qpos[io.qadr] = io.home
            d.ctrl[io.act] = io.home
            if io.gripper is not None:
                g = io.gripper
                d.qpos[io.g_qadr] = g.closed_joint_pos + io.home_gripper * (
                    g.open_joint_pos - g.closed_joint_pos
                )
                io.set_gripper(d, io.home_gripper)
        rng = np.random.default_rng(seed)
        self._task.reset(m, d, rng)
        self.task = TaskInfo(self._task.name, self._task.instruction, self._task.max_turns)
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
        for r in self._renderers.values():
            r.close()
        self._renderers.clear()

    def execute(self, commands: dict[str, PartCommand]) -> Outcome:
        m, d, s = self.model, self.data, self.settings
        if self._stopped:
            return Outcome("stopped", "the robot was stopped; no further motion")
        start_t = float(d.time)
        q0, qT = {}, {}
        duration = 0.0
        for name, cmd in commands.items():
            io = self.parts[name]
            if cmd.gripper is not None:
                io.set_gripper(d, float(np.clip(cmd.gripper, 0.0, 1.0)))
            if cmd.joints_rad is not None:
                q0[name] = d.ctrl[io.act].copy()
                qT[name] = np.clip(np.asarray(cmd.joints_rad, float), io.lower, io.upper)
                duration = max(duration, float(np.max(np.abs(qT[name] - q0[name]))) / io.vmax)
        # Minimum-jerk peak speed is 1.875x the mean: stretch so the peak respects the cap.
        duration *= 1.875
        dt = m.opt.timestep * s.control_substeps
        t = 0.0
        judge = SettleJudge(duration, s.reach_tolerance_rad, s.settle_timeout_s)
        while True:
            t += dt
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
            if io.gripper is not None and np.max(np.abs(d.qvel[io.g_dadr])) > s.gripper_still_m_s:
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
        renderer.update_scene(self.data, camera=camera, scene_option=self._scene_opt)
        return renderer.render().copy()
