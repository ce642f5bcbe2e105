"""The MuJoCo backend: a robot description plus a task, stepped by a move-until-still controller.

`execute` follows a minimum-jerk joint trajectory at the speed cap, then waits until every joint
is at its target and still (reached), or reports which joints stalled short of it (blocked).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pear_agent.robot.backend import (
    TASK_SUCCESS,
    ControlFrame,
    FrameSink,
    Observation,
    Outcome,
    PartCommand,
    TaskInfo,
)
from pear_agent.robot.config import RobotConfig, RobotConfigError
from pear_agent.robot.gl import configure_gl
from pear_agent.robot.motion import SettleJudge
from pear_agent.settings import setting

configure_gl()  # before MuJoCo is imported

import mujoco  # noqa: E402

from pear_agent.robot.model import part_joint_limits  # noqa: E402
from sim_adapters.mujoco.perturb import Perturber, add_table_materials  # noqa: E402
from sim_adapters.mujoco.scene import (  # noqa: E402
    PartDrive,
    add_task,
    build_scene,
    camera_name,
    compile_spec,
    ee_site_name,
    scene_option,
)
from sim_adapters.mujoco.tasks.base import MujocoTask  # noqa: E402


def _time_at(fraction: float, duration_s: float) -> float:
    """When a minimum-jerk motion of `duration_s` has covered `fraction` of its path (bisection)."""
    lo, hi = 0.0, 1.0
    for _ in range(50):
        mid = (lo + hi) / 2
        if 10 * mid**3 - 15 * mid**4 + 6 * mid**5 < fraction:
            lo = mid
        else:
            hi = mid
    return lo * duration_s


@dataclass(frozen=True)
class ControllerSettings:
    """How the simulated arm judges a move's end (`SettleJudge`). The ROS backend's counterparts
    (`pear_agent.ros2.settings.RosSettings`) are looser where a real stack's state is coarser."""

    reach_tolerance_rad: float = setting(
        0.006,
        cli=False,
        help="a joint within this of its target has reached it (tighter than ROS's 0.01: the simulator's "
        "joint state is exact, read from the simulator)",
    )
    still_velocity_rad_s: float = setting(
        0.03, cli=False, help="a joint slower than this is still (the same on ROS)"
    )
    settle_timeout_s: float = setting(
        2.0,
        cli=False,
        help="time after the planned duration to settle before the move is judged not reached (ROS: 3.0, "
        "for a real controller's slower settling and joint states that arrive at 50 Hz)",
    )
    stall_tracking_error_rad: float = setting(
        0.25,
        cli=False,
        help="a tracking error above this during a move is a stall (ROS: 0.3, its measured state lags the "
        "command by the transport's delay)",
    )
    control_substeps: int = setting(5, cli=False, help="physics steps per control update")


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
        self._moving_bodies = self._robot_moving_bodies()
        self.render_enabled = render
        self._own_renderers = renderers is None
        self._renderers: dict[tuple[int, int], mujoco.Renderer] = {} if renderers is None else renderers
        self._scene_opt = scene_option(robot)
        self._sink: FrameSink | None = None
        self._sink_period_s = 0.1
        self._next_frame_t = 0.0
        self._video_camera = next(iter(robot.cameras), None)
        self._record_period_s = 0.0  # > 0: record control frames (start_recording)
        self._next_record_t = 0.0
        self._recorded: list[ControlFrame] = []
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
            self.perturber.place(d)
            instruction = self.perturber.instruction(instruction)
        self.task = TaskInfo(self.task_name, instruction, self._task.max_turns)
        mujoco.mj_forward(m, d)
        for _ in range(int(0.3 / m.opt.timestep)):  # let objects settle on the table
            mujoco.mj_step(m, d)
        d.time = 0.0
        self._next_frame_t = 0.0
        self._next_record_t = 0.0
        self._recorded = []
        self._stopped = False
        return self.observe()

    def shaped_reward(self) -> float | None:
        """The task's dense reward for RL now (`MujocoTask.shaped_reward`), None where it has none."""
        tool_m = {n: self.data.site(ee_site_name(n)).xpos.copy() for n in self.parts}
        return self._task.shaped_reward(self.model, self.data, tool_m)

    def observe(self, render: bool = True) -> Observation:
        d = self.data
        images = {}
        if render and self.render_enabled:
            images = {name: self.render(name) for name, c in self.robot.cameras.items() if c.sim}
            if self.perturber is not None:  # what the model is sent (sensor noise), not the video
                images = {name: self.perturber.image(img) for name, img in images.items()}
        success = bool(self._task.success(self.model, d))
        return Observation(
            joints_rad={n: d.qpos[io.qadr].copy() for n, io in self.parts.items()},
            gripper={n: io.gripper_opening(d) for n, io in self.parts.items() if io.gripper},
            images=images,
            time_s=float(d.time),
            success=success,
            # the task's own verdict beside its facts: an expert claims done only when it agrees
            privileged={**self._task.privileged(self.model, d), TASK_SUCCESS: success},
        )

    def set_frame_sink(self, sink: FrameSink | None, fps: float = 10.0) -> None:
        self._sink = sink
        self._sink_period_s = 1.0 / fps
        self._next_frame_t = float(self.data.time)

    def start_recording(self, fps: float | None) -> None:
        """Record a `ControlFrame` every 1/fps simulated seconds while the simulation steps (a
        move, a realtime wait), from the next step on; None or 0 stops. Off, a step costs one
        comparison more."""
        self._record_period_s = 1.0 / fps if fps else 0.0
        self._next_record_t = float(self.data.time)
        self._recorded = []

    def take_recording(self) -> list[ControlFrame]:
        """The frames recorded since the last call (emptied)."""
        out, self._recorded = self._recorded, []
        return out

    def _record_frame(self) -> None:
        d = self.data
        while self._next_record_t <= d.time + 1e-9:  # a step longer than the period records once
            self._next_record_t += self._record_period_s
        self._recorded.append(self.control_frame())

    def control_frame(self) -> ControlFrame:
        """The simulation now, as a recorded frame holds it (what a LeRobot policy is fed)."""
        d = self.data
        return ControlFrame(
            time_s=float(d.time),
            joints_rad={n: d.qpos[io.qadr].copy() for n, io in self.parts.items()},
            joint_velocity_rad_s={n: d.qvel[io.dadr].copy() for n, io in self.parts.items()},
            gripper={n: io.gripper_opening(d) for n, io in self.parts.items() if io.gripper},
            command_joints_rad={n: d.ctrl[io.act].copy() for n, io in self.parts.items()},
            command_gripper={n: io.gripper_command(d) for n, io in self.parts.items() if io.gripper},
            images=(
                {name: self.render(name) for name, c in self.robot.cameras.items() if c.sim}
                if self.render_enabled
                else {}
            ),
        )

    def execute_setpoint(self, commands: dict[str, PartCommand], duration_s: float) -> Outcome:
        """Hold `commands` as the controller's setpoint for `duration_s` simulated seconds: the joint
        targets (clipped to the joint limits) and the gripper commands straight into the actuators,
        as a recorded frame's `action` holds them (a LeRobot policy's action at its control rate)."""
        d = self.data
        if self._stopped:
            return Outcome("stopped", "the robot was stopped; no further motion")
        start_t = float(d.time)
        for name, cmd in commands.items():
            io = self.parts[name]
            if cmd.joints_rad is not None:
                d.ctrl[io.act] = np.clip(np.asarray(cmd.joints_rad, float), io.lower, io.upper)
            if cmd.gripper is not None:
                io.set_gripper(d, float(np.clip(cmd.gripper, 0.0, 1.0)))
        self.advance(duration_s)
        return Outcome("reached", "", float(d.time) - start_t)

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

    def set_joints(self, joints_rad: dict[str, np.ndarray], gripper: dict[str, float]) -> None:
        """Put the arms at rest at these joints and grippers (0 closed .. 1 open), setpoints with
        them: a twin of a real robot starts each of its actions where the real arm is."""
        m, d = self.model, self.data
        for name, q in joints_rad.items():
            io = self.parts[name]
            q = np.clip(np.asarray(q, float), io.lower, io.upper)
            d.qpos[io.qadr], d.qvel[io.dadr], d.ctrl[io.act] = q, 0.0, q
            if io.gripper is not None and name in gripper:
                g = float(np.clip(gripper[name], 0.0, 1.0))
                d.qpos[io.g_qadr], d.qvel[io.g_dadr] = io.gripper_joint_targets(g), 0.0
                io.set_gripper(d, g)
        mujoco.mj_forward(m, d)

    def execute(self, commands: dict[str, PartCommand]) -> Outcome:
        return self.execute_chunk([commands])[0]

    def execute_chunk(self, steps: list[dict[str, PartCommand]]) -> tuple[Outcome, int]:
        """Follow a chunk of joint targets as one motion; (outcome, how many steps were reached).

        Consecutive steps run as one continuous path through their waypoints (at rest only at its
        ends); a step that changes a gripper ends a path: its waypoint is reached, the gripper
        ramps (from the start of the leg into that step, as a single action's does) and settles,
        then the next path starts. A stall or a motion that never settles ends the chunk there."""
        d = self.data
        if self._stopped:
            return Outcome("stopped", "the robot was stopped; no further motion"), 0
        start_t = float(d.time)
        gripper_now = {n: io.gripper_command(d) for n, io in self.parts.items() if io.gripper is not None}
        reached, path = 0, []
        for i, step in enumerate(steps):
            path.append(step)
            changes = False
            for name, cmd in step.items():
                if cmd.gripper is not None and name in gripper_now:
                    changes = changes or abs(float(cmd.gripper) - gripper_now[name]) > 1e-3
                    gripper_now[name] = float(np.clip(cmd.gripper, 0.0, 1.0))
            if changes or i == len(steps) - 1:
                outcome, n = self._follow(path, start_t)
                reached += n
                if outcome.status != "reached":
                    return outcome, reached
                path = []
        return Outcome("reached", "", float(d.time) - start_t), reached

    def _follow(self, steps: list[dict[str, PartCommand]], start_t: float) -> tuple[Outcome, int]:
        """One continuous motion through the steps' waypoints (one minimum-jerk timing over the
        whole polyline, so every joint stays within its speed cap), grippers of the last step."""
        m, d, s = self.model, self.data, self.settings
        moving = [n for n in self.parts if any(st.get(n) and st[n].joints_rad is not None for st in steps)]
        q0 = {n: d.ctrl[self.parts[n].act].copy() for n in moving}
        waypoints: list[dict[str, np.ndarray]] = []
        prev = dict(q0)
        for st in steps:
            wp = dict(prev)
            for n in moving:
                cmd = st.get(n)
                if cmd is not None and cmd.joints_rad is not None:
                    io = self.parts[n]
                    wp[n] = np.clip(np.asarray(cmd.joints_rad, float), io.lower, io.upper)
            waypoints.append(wp)
            prev = wp
        qT = waypoints[-1] if moving else {}
        legs = []  # each leg's length in seconds at the speed cap
        prev = q0
        for wp in waypoints:
            legs.append(
                max(
                    (float(np.max(np.abs(wp[n] - prev[n]))) / self.parts[n].vmax for n in moving), default=0.0
                )
            )
            prev = wp
        total = float(sum(legs))
        cum = np.cumsum([0.0, *legs])
        # Minimum-jerk peak speed is 1.875x the mean: stretch so the peak respects the cap.
        duration = total * 1.875
        # the gripper of the last step starts with the leg into that step (a single action: at once)
        ramp_t0 = _time_at(cum[-2] / total, duration) if total > 0 and len(legs) > 1 else 0.0
        ramps: dict[str, tuple[float, float, float]] = {}  # part -> (from, to, seconds)
        for name, cmd in steps[-1].items():
            io = self.parts[name]
            if cmd.gripper is not None:
                target = float(np.clip(cmd.gripper, 0.0, 1.0))
                if io.gripper is not None and (io.g_ramp_s > 0 or ramp_t0 > 0):
                    start = io.gripper_command(d)
                    ramps[name] = (start, target, io.g_ramp_s * abs(target - start))
                else:
                    io.set_gripper(d, target)
        dt = m.opt.timestep * s.control_substeps
        t = 0.0
        ramp_s = max((r[2] for r in ramps.values()), default=0.0)
        judge = SettleJudge(max(duration, ramp_t0 + ramp_s), s.reach_tolerance_rad, s.settle_timeout_s)
        # a chunk (several steps) stops on touching the table or anything fixed, new since it began
        touching = self._static_contacts() if len(steps) > 1 else None
        while True:
            t += dt
            tr = t - ramp_t0
            for name, (g0, g1, T) in ramps.items():
                if tr > 0:
                    self.parts[name].set_gripper(d, g1 if tr >= T else g0 + (g1 - g0) * tr / T)
            if qT and t <= duration:
                tau = t / duration
                blend = 10 * tau**3 - 15 * tau**4 + 6 * tau**5
                if len(legs) == 1:
                    for name in qT:
                        d.ctrl[self.parts[name].act] = q0[name] + (qT[name] - q0[name]) * blend
                else:
                    at = total * blend
                    k = int(min(np.searchsorted(cum, at, side="right"), len(legs)))  # leg 1..n
                    frac = (at - cum[k - 1]) / legs[k - 1] if legs[k - 1] > 0 else 1.0
                    a = q0 if k == 1 else waypoints[k - 2]
                    b = waypoints[k - 1]
                    for name in qT:
                        d.ctrl[self.parts[name].act] = a[name] + (b[name] - a[name]) * min(frac, 1.0)
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
                    n = min(self._steps_passed(q0, waypoints, moving), len(steps) - 1)
                    return self._blocked(name, qT[name], start_t, "stalled during the motion"), n
            if touching is not None and t <= duration:
                new = self._static_contacts() - touching
                if new:
                    rg, og = next(iter(new))
                    part = self._moving_bodies[int(m.geom_bodyid[rg])]
                    what = m.geom(og).name or m.body(int(m.geom_bodyid[og])).name or "the table"
                    n = min(self._steps_passed(q0, waypoints, moving), len(steps) - 1)
                    return self._blocked(part, qT[part], start_t, f"touched {what} (contact)"), n
            errors = {n: float(np.max(np.abs(d.qpos[self.parts[n].qadr] - qT[n]))) for n in qT}
            verdict = judge.verdict(t, errors, self._is_still())
            if verdict is None:
                continue
            what, name = verdict
            if what == "reached":
                return Outcome("reached", "", float(d.time) - start_t), len(steps)
            n = min(self._steps_passed(q0, waypoints, moving), len(steps) - 1)  # the last was missed
            if name is None:
                return Outcome("timeout", "the robot did not come to rest", float(d.time) - start_t), n
            return self._blocked(name, qT[name], start_t, what), n

    def _robot_moving_bodies(self) -> dict[int, str]:
        """Body id -> part, for every body a part's joints move (the links, the hand, the fingers)."""
        m = self.model
        roots = {
            int(m.jnt_bodyid[m.joint(j).id]): name for name, io in self.parts.items() for j in io.joint_names
        }
        out: dict[int, str] = {}
        for b in range(m.nbody):
            a = b
            while a > 0 and a not in roots:
                a = int(m.body_parentid[a])
            if a in roots:
                out[b] = roots[a]
        return out

    def _static_contacts(self) -> set[tuple[int, int]]:
        """(robot geom, static geom) pairs in contact now: a moving part of the robot touching
        something fixed to the world (the table, a wall), not an object it may push or hold."""
        m, d = self.model, self.data
        out = set()
        for c in d.contact[: d.ncon]:
            g1, g2 = int(c.geom1), int(c.geom2)
            b1, b2 = int(m.geom_bodyid[g1]), int(m.geom_bodyid[g2])
            for rg, rb, og, ob in ((g1, b1, g2, b2), (g2, b2, g1, b1)):
                if rb in self._moving_bodies and ob not in self._moving_bodies and m.body_weldid[ob] == 0:
                    out.add((rg, og))
        return out

    def _steps_passed(
        self, q0: dict[str, np.ndarray], waypoints: list[dict[str, np.ndarray]], moving: list[str]
    ) -> int:
        """How many waypoints the MEASURED joints got to: the nearest point of the path to where
        the arm is (joint space, each part scaled by its speed cap), counted in whole legs."""
        if not moving or len(waypoints) < 2:
            return 0

        def vec(q: dict[str, np.ndarray]) -> np.ndarray:
            return np.concatenate([q[n] / self.parts[n].vmax for n in moving])

        here = vec({n: self.data.qpos[self.parts[n].qadr] for n in moving})
        pts = [vec(q0)] + [vec(w) for w in waypoints]
        best, best_pos = np.inf, 0.0
        for k in range(1, len(pts)):
            a, b = pts[k - 1], pts[k]
            ab = b - a
            den = float(ab @ ab)
            f = 1.0 if den == 0 else float(np.clip((here - a) @ ab / den, 0.0, 1.0))
            dist = float(np.linalg.norm(a + f * ab - here))
            if dist < best - 1e-12:
                best, best_pos = dist, (k - 1) + f
        here_rad = {n: self.data.qpos[self.parts[n].qadr] for n in moving}
        tol = 2 * self.settings.reach_tolerance_rad
        passed = 0
        for k, w in enumerate(waypoints, 1):
            near = max(float(np.max(np.abs(w[n] - here_rad[n]))) for n in moving) < tol
            if best_pos >= k - 1e-6 or near:
                passed = k
        return passed

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
        if self._record_period_s and self.data.time >= self._next_record_t - 1e-9:
            self._record_frame()
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
