"""A Meta-World task as a pear-agent backend: Meta-World's scene, task sampling and success check;
the protocol's frame, end-effector state and move-until-still semantics over its own `step()`.

Meta-World moves the Sawyer's hand through a mocap body: each `step(action)` adds `action[:3]`
(clipped to [-1, 1]) x 1 cm to the mocap position (clipped into the task's mocap box) and runs 5
physics steps (12.5 ms) with the grip effort `action[3]` (-1 opens, +1 closes). A protocol move is
a target for the tool point (Meta-World's `tcp_center`): every control step asks `step()` for the
bounded delta that brings the mocap to where the tool point should be, until the tool point is
within `reach_tolerance_m` of the target and still (`reached`), or it stops making progress with the
mocap already there (`blocked`: something is in the way; the mocap stays where it was driven, so
the hand keeps pressing, as it does under Meta-World's own controller). Success is `info["success"]`
of any control step, latched (Meta-World's evaluation counts an episode that succeeded at any
step). No inverse kinematics: `ToolKinematics` passes the tool point through.

Frame: Meta-World's world frame turned so that x points away from the robot (Meta-World's +y) and y
to the robot's left (Meta-World's -x); z up; origin on the table top below the robot.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pear_agent.robot.backend import FrameSink, Observation, Outcome, PartCommand, TaskInfo
from pear_agent.robot.config import RobotConfig
from pear_agent.robot.kinematics import IKResult, Pose, rpy_to_matrix
from pear_agent.robot.loader import load_robot
from pear_agent.settings import setting
from sim_adapters.metaworld import INSTRUCTIONS, MAX_TURNS, env_name

ROBOT_YAML = Path(__file__).with_name("metaworld_sawyer.yaml")
CAMERAS: dict[str, tuple[str, bool]] = {"scene": ("corner2", True), "gripper": ("gripperPOV", False)}
"""Our camera -> (Meta-World's camera, turned 180 degrees): `corner2` is mounted upside down in
Meta-World's scene (its image has the table above the robot), so it is turned right side up."""
TASKS_PER_BENCH_SEED = 50
"""Meta-World samples 50 variations (goal and object positions) per task and benchmark seed."""
DOWN_RPY = np.array([math.pi, 0.0, 0.0])
"""The gripper's fixed orientation (Meta-World's mocap quaternion [1, 0, 1, 0]: pointing down)."""


@dataclass(frozen=True)
class MetaWorldControllerSettings:
    """How a move through the protocol drives Meta-World's mocap and judges its end (its MuJoCo
    counterpart: `sim_adapters.mujoco.backend.ControllerSettings`)."""

    gain: float = setting(
        25.0,
        cli=False,
        help="each control step asks `step()` for gain x (target - tool point) in metres, clipped to [-1, 1] "
        "(1 = 1 cm): the proportional move Meta-World's own scripted policies make (most use 25, the rest "
        "4-15), so the mocap leads the hand, and presses on when the hand is held, as under them",
    )
    reach_tolerance_m: float = setting(
        0.005,
        cli=False,
        help="a move has reached when the tool point is this close to its target (and still)",
    )
    pass_tolerance_m: float = setting(
        0.015, cli=False, help="a chunk's waypoint (not its last) is passed this close"
    )
    max_move_steps: int = setting(
        240,
        cli=False,
        help="control steps a move may take before it ends as timeout (a press move's budget too)",
    )
    stall_steps: int = setting(
        15, cli=False, help="a plain move ends blocked after this many control steps without progress"
    )


CONTROLLER = MetaWorldControllerSettings()
"""The settings every Meta-World backend runs with."""
SIM_STATE = "metaworld_sim"
"""The privileged fact with the simulation's exact state (`sim_state`), for the look-ahead expert."""
_STATE_SPEC = 0x1FFF
"""`mujoco.mjtState.mjSTATE_INTEGRATION`: everything `mj_step` reads (time, qpos, qvel, act,
warm start, controls, applied forces, equality flags, mocap poses, user data)."""


def sim_state(env: Any, obs: np.ndarray, seed: int) -> dict[str, Any]:
    """The simulation's exact state: MuJoCo's integration state, Meta-World's last observation and
    the episode's seed (a copy of the task reset to that seed, then `restore_state`, steps on as
    this one would)."""
    import mujoco  # optional: .venv-metaworld's mujoco 3.3.0

    state = np.zeros(mujoco.mj_stateSize(env.model, _STATE_SPEC))
    mujoco.mj_getState(env.model, env.data, state, _STATE_SPEC)
    return {"seed": int(seed), "state": state.tolist(), "obs": np.asarray(obs, float).tolist()}


def restore_state(env: Any, sim: dict[str, Any]) -> None:
    """Set `env` (the same task, reset to `sim["seed"]`'s variation) to the state `sim_state` took."""
    import mujoco  # optional: .venv-metaworld's mujoco 3.3.0

    mujoco.mj_setState(env.model, env.data, np.asarray(sim["state"], dtype=float), _STATE_SPEC)
    mujoco.mj_forward(env.model, env.data)
    env._prev_obs = np.asarray(sim["obs"], dtype=float)[:18].copy()  # the next observation's "previous"


def to_ours(p: Any) -> np.ndarray:
    """Meta-World world frame -> the protocol's base frame (same units)."""
    p = np.asarray(p, dtype=float)
    return np.array([p[1], -p[0], p[2]])


def to_metaworld(q: Any) -> np.ndarray:
    """The protocol's base frame -> Meta-World's world frame (same units)."""
    q = np.asarray(q, dtype=float)
    return np.array([-q[1], q[0], q[2]])


def load_metaworld_robot() -> RobotConfig:
    return load_robot(ROBOT_YAML)


@functools.lru_cache(maxsize=16)
def _mt1_tasks(name: str, bench_seed: int) -> tuple[Any, ...]:
    import metaworld  # optional: .venv-metaworld

    return tuple(metaworld.MT1(name, seed=bench_seed).train_tasks)


def sampled_task(name: str, seed: int) -> Any:
    """Meta-World's own variation for an episode seed: task `seed % 50` of the 50 that
    `metaworld.MT1(name, seed=seed // 50)` samples (seeds 0-49: MT1 with benchmark seed 0)."""
    if seed < 0:
        raise ValueError(f"seed {seed} is negative; Meta-World variations are numbered from 0")
    return _mt1_tasks(name, seed // TASKS_PER_BENCH_SEED)[seed % TASKS_PER_BENCH_SEED]


def make_env(name: str) -> Any:
    """A bare Meta-World environment of one v3 task (no task set yet)."""
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS  # optional: .venv-metaworld

    env = ALL_V3_ENVIRONMENTS[name]()
    env.max_path_length = 10**9  # pear-agent's limit is the task's turns, not 500 steps
    return env


class ToolKinematics:
    """The `Kinematics` an `ArmEnvironment` asks for, for a robot whose "joints" are its tool
    point's coordinates (m): forward kinematics is the identity with the fixed orientation, and
    every target within the workspace is its own solution."""

    def __init__(self, robot: RobotConfig) -> None:
        self.robot = robot
        self._rot = rpy_to_matrix(DOWN_RPY)

    def fk(self, part: str, joints_rad: np.ndarray) -> Pose:
        return Pose(np.asarray(joints_rad, dtype=float)[:3].copy(), self._rot)

    def ik(self, part: str, position_m: np.ndarray, rotation: np.ndarray, seed_rad: np.ndarray) -> IKResult:
        return IKResult(True, np.asarray(position_m, dtype=float).copy(), 0.0, 0.0, 0)


class MetaWorldBackend:
    """One Meta-World v3 task; `reset(seed)` sets Meta-World's sampled variation `seed`."""

    honours_press = True
    """A move may ask to press (`PartCommand.press`): driven on through contact until reached or
    its time budget, never ended `blocked` by a stall."""

    def __init__(self, robot: RobotConfig, task: str, render: bool = True) -> None:
        self.name = env_name(task)
        self.robot = robot
        self.render = render
        self.task = TaskInfo(task, INSTRUCTIONS[self.name], MAX_TURNS)
        self.env = make_env(self.name)
        self._gripped = False
        """Whether a move has set the grip since the reset (until then the grip is the reset's)."""
        self.dt = float(self.env.dt)
        self._cams = {n: robot.cameras[n] for n in CAMERAS if n in robot.cameras}
        self._renderer: Any = None
        self._sink: FrameSink | None = None
        self._fps = 10.0
        self._obs = np.zeros(39)
        self._effort = -1.0
        self._goal = np.zeros(3)
        self._driving = False
        self._press = False
        self._offset = np.zeros(3)
        self._rest_m = 0.0
        """The path still to go after the current goal (a chunk's later waypoints), m: the move does
        not slow down for a waypoint it only passes."""
        self._steps = 0
        self._success = False
        self._seed = 0

    # -- state ----------------------------------------------------------------------------
    def tcp(self) -> np.ndarray:
        """The tool point (Meta-World's `tcp_center`), Meta-World frame, m."""
        return np.asarray(self.env.tcp_center, dtype=float).copy()

    def mocap(self) -> np.ndarray:
        return np.asarray(self.env.data.mocap_pos[0], dtype=float).copy()

    @property
    def steps(self) -> int:
        """Meta-World control steps (`step()` calls) since the reset."""
        return self._steps

    # -- contract ---------------------------------------------------------------------------
    def reset(self, seed: int) -> Observation:
        self.env.set_task(sampled_task(self.name, seed))
        obs, _ = self.env.reset()
        self._obs = np.asarray(obs, dtype=float)
        self._seed = seed
        self._steps = 0
        self._success = False
        self._effort = -1.0  # Meta-World's reset leaves the gripper opened (effort -1)
        self._gripped = False
        self._goal = self.tcp()
        self._driving = False
        self._offset = self.mocap() - self.tcp()  # mocap minus tool point at rest
        return self.observe()

    def _step(self) -> None:
        err = self._goal - self.tcp() if self._driving else np.zeros(3)
        dist = float(np.linalg.norm(err))
        if self._rest_m > 0.0 and dist > 1e-9:  # a waypoint passed on the way: straight at it, at the
            # speed the whole path's rest asks for (1 cm per step at most), not slowing down for it
            delta = err / dist * min(1.0, (dist + self._rest_m) * CONTROLLER.gain)
        else:
            delta = np.clip(err * CONTROLLER.gain, -1.0, 1.0)
        obs, _, _, _, info = self.env.step(np.append(delta, self._effort).astype(np.float32))
        self._obs = np.asarray(obs, dtype=float)
        self._steps += 1
        if bool(info.get("success")):
            self._success = True
        if self._sink is not None and self._steps % max(1, round(1 / (self.dt * self._fps))) == 0:
            self._sink(self._render("scene"))

    def _inside(self, goal: np.ndarray) -> bool:
        """Whether the mocap can bring the tool point to `goal` within this task's mocap box."""
        lo, hi = np.asarray(self.env.mocap_low, float), np.asarray(self.env.mocap_high, float)
        at = goal + self._offset
        return bool(np.all(at >= lo - 1e-6) and np.all(at <= hi + 1e-6))

    def _run(self, goal: np.ndarray, *, final: bool, grip_changed: bool, inside: bool) -> Outcome:
        """Control steps towards `goal` (tool point, Meta-World frame) until reached and still (or,
        for a chunk's waypoint, passed within `pass_tolerance_m`), blocked, or `max_move_steps`
        (`CONTROLLER`)."""
        best, since_best = np.inf, 0
        prev_tcp, prev_grip = self.tcp(), float(self._obs[3])
        for n in range(1, CONTROLLER.max_move_steps + 1):
            self._step()
            tcp, grip = self.tcp(), float(self._obs[3])
            err = float(np.linalg.norm(goal - tcp))
            still = float(np.linalg.norm(tcp - prev_tcp)) / self.dt < 0.01
            fingers_still = abs(grip - prev_grip) < 1e-3
            prev_tcp, prev_grip = tcp, grip
            settled = fingers_still and (not grip_changed or n >= 6)
            if not self._driving and settled:  # the gripper alone: done when the fingers stop
                return Outcome("reached", duration_s=n * self.dt)
            if not final and err < CONTROLLER.pass_tolerance_m and settled:
                return Outcome("reached", duration_s=n * self.dt)
            if err < CONTROLLER.reach_tolerance_m and still and settled:
                return Outcome("reached", duration_s=n * self.dt)
            if err < best - 5e-4:
                best, since_best = err, 0
            else:
                since_best += 1
            if since_best >= CONTROLLER.stall_steps and still and settled and not self._press:
                if err < CONTROLLER.reach_tolerance_m:
                    return Outcome("reached", duration_s=n * self.dt)
                why = (
                    "the target is outside this task's hand limits"
                    if not inside
                    else "something is in the way (the hand keeps pressing)"
                )
                return Outcome(
                    "blocked",
                    f"stopped {err * 100:.1f} cm short of the target: {why}",
                    n * self.dt,
                    ["tool_x", "tool_y", "tool_z"],
                )
        budget_s = CONTROLLER.max_move_steps * self.dt
        if self._press:
            short = float(np.linalg.norm(goal - self.tcp())) * 100
            return Outcome(
                "timeout", f"pressed for {budget_s:.1f} s, {short:.1f} cm short of the target", budget_s
            )
        return Outcome(
            "timeout",
            f"not reached within {budget_s:.1f} s",
            budget_s,
        )

    def _command(self, cmd: PartCommand) -> tuple[np.ndarray, bool, bool]:
        grip_changed = False
        if cmd.gripper is not None:
            effort = 1.0 - 2.0 * float(np.clip(cmd.gripper, 0.0, 1.0))
            grip_changed = effort != self._effort
            self._effort = effort
            self._gripped = True
        self._press = bool(cmd.press) and cmd.joints_rad is not None
        if cmd.joints_rad is not None:
            self._goal = to_metaworld(np.asarray(cmd.joints_rad, dtype=float)[:3])
            self._driving = True
        else:  # the gripper alone: the hand holds (the mocap stays where it is)
            self._goal = self.tcp()
            self._driving = False
        return self._goal, grip_changed, self._inside(self._goal)

    def execute(self, commands: dict[str, PartCommand]) -> Outcome:
        cmd = commands.get("arm")
        if cmd is None:
            return Outcome("reached", "nothing to move")
        goal, grip_changed, inside = self._command(cmd)
        return self._run(goal, final=True, grip_changed=grip_changed, inside=inside)

    def execute_chunk(self, steps: list[dict[str, PartCommand]]) -> tuple[Outcome, int]:
        """A chunk as one motion: each waypoint passed within `pass_tolerance_m` without slowing down
        for it (the hand is driven at the speed the rest of the path asks for, as one move of the
        whole length would be; a step that works the gripper waits for the fingers and ends the
        path there), the last reached and still; (outcome, steps reached)."""
        total = 0.0
        try:
            for i, commands in enumerate(steps):
                cmd = commands.get("arm")
                if cmd is None:
                    continue
                self._rest_m = self._rest_after(steps, i)
                goal, grip_changed, inside = self._command(cmd)
                out = self._run(goal, final=i == len(steps) - 1, grip_changed=grip_changed, inside=inside)
                total += out.duration_s
                if out.status != "reached":
                    out.duration_s = total
                    return out, i
        finally:
            self._rest_m = 0.0
        return Outcome("reached", duration_s=total), len(steps)

    def _rest_after(self, steps: list[dict[str, PartCommand]], i: int) -> float:
        """The path length (m) from step `i`'s target through the later steps' targets, up to the
        first step that works the gripper or does not move the hand (the path ends there)."""
        cmd = steps[i]["arm"]
        if cmd.joints_rad is None or (cmd.gripper is not None and self._grip_changes(cmd)):
            return 0.0
        rest, at = 0.0, np.asarray(cmd.joints_rad, float)[:3]
        effort = self._effort_of(cmd)
        for later in steps[i + 1 :]:
            nxt = later.get("arm")
            if nxt is None or nxt.joints_rad is None:
                break
            if nxt.gripper is not None and self._effort_of(nxt) != effort:
                break
            p = np.asarray(nxt.joints_rad, float)[:3]
            rest, at = rest + float(np.linalg.norm(p - at)), p
        return rest

    def _effort_of(self, cmd: PartCommand) -> float:
        if cmd.gripper is None:
            return self._effort
        return 1.0 - 2.0 * float(np.clip(cmd.gripper, 0.0, 1.0))

    def _grip_changes(self, cmd: PartCommand) -> bool:
        return self._effort_of(cmd) != self._effort

    def advance(self, duration_s: float) -> None:
        for _ in range(round(duration_s / self.dt)):
            self._step()

    def _render(self, name: str) -> np.ndarray:
        import mujoco  # optional: .venv-metaworld's mujoco 3.3.0

        cam = self._cams[name]
        if self._renderer is None:
            self._renderer = mujoco.Renderer(self.env.model, cam.height, cam.width)
        mw_name, turn = CAMERAS[name]
        self._renderer.update_scene(self.env.data, camera=mw_name)
        img = self._renderer.render()
        return np.ascontiguousarray(img[::-1, ::-1] if turn else img)

    def observe(self, render: bool = True) -> Observation:
        images = {n: self._render(n) for n in self._cams} if (render and self.render) else {}
        return Observation(
            joints_rad={"arm": to_ours(self.tcp())},
            gripper={"arm": float(self._obs[3])},
            images=images,
            time_s=self._steps * self.dt,
            success=self._success,
            privileged=self.privileged(),
        )

    def set_frame_sink(self, sink: FrameSink | None, fps: float = 10.0) -> None:
        self._sink, self._fps = sink, fps
        if sink is not None and "scene" not in self._cams:
            self._sink = None

    def stop(self) -> None:
        self._driving = False

    def close(self) -> None:
        renderer, self._renderer = self._renderer, None
        if renderer is not None:
            renderer.close()
        env, self.env = self.env, None
        if env is not None:
            env.close()

    # -- privileged facts (the expert; never shown to a model) ----------------------------
    def privileged(self) -> dict[str, Any]:
        """Meta-World's own 39-number observation (what its scripted policies read), the tool
        point's offset from the hand body (which that observation gives), and the objects and goal
        in the protocol's frame (cm), with the per-turn caps the expert honours."""
        obs = self._obs
        lim = self.robot.parts["arm"].limits
        hand = np.asarray(self.env.get_endeff_pos(), dtype=float)
        objects: dict[str, Any] = {"object": {"position_cm": (to_ours(obs[4:7]) * 100).round(2).tolist()}}
        if np.any(obs[11:14]):
            objects["object2"] = {"position_cm": (to_ours(obs[11:14]) * 100).round(2).tolist()}
        return {
            "task": self.name,
            "part": "arm",
            "tool": {"max_step_cm": lim.max_position_step_cm, "workspace_cm": dict(lim.workspace_cm)},
            "metaworld_obs": [round(float(v), 6) for v in obs],
            "hand_minus_tool": (hand - self.tcp()).round(6).tolist(),
            "objects": objects,
            "goal": {"position_cm": (to_ours(obs[36:39]) * 100).round(2).tolist()},
            # the grip a move set (None before any: the reset's open fingers were nobody's choice)
            SIM_STATE: sim_state(self.env, obs, self._seed)
            | {"effort": self._effort if self._gripped else None},
        }

    def project(self, name: str, point_metaworld: Any) -> tuple[float, float]:
        """(column, row) in our image of camera `name` where a world point appears (pinhole model
        from the camera's pose and field of view, with our turn applied): what the right-side-up
        test compares with the rendered image."""
        cam = self._cams[name]
        mw_name, turn = CAMERAS[name]
        m, d = self.env.model, self.env.data
        cid = m.camera(mw_name).id
        rot = d.cam_xmat[cid].reshape(3, 3)
        pc = rot.T @ (np.asarray(point_metaworld, float) - d.cam_xpos[cid])
        f = (cam.height / 2) / math.tan(math.radians(float(m.cam_fovy[cid])) / 2)
        u = cam.width / 2 + f * pc[0] / -pc[2]
        v = cam.height / 2 - f * pc[1] / -pc[2]
        return (cam.width - u, cam.height - v) if turn else (u, v)
