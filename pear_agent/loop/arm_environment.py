"""The arm as an environment of the turn loop: state JSON + camera images in, protocol actions
out, executed through safety clipping, IK and a `Backend` (MuJoCo, LIBERO or ROS 2).

`arm_episode(backend, kinematics, policy, config)` builds the arm's environment from the loop's
config and hands it to an `Episode` (the loop itself builds no environment)."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from pear_agent.loop.config import check_max_chunk, check_observation
from pear_agent.loop.environment import FrameSink, StepResult, TurnPrompt, environment_options
from pear_agent.loop.episode import Episode, EpisodeConfig, TurnRecord
from pear_agent.loop.safety import clip_target
from pear_agent.policies.base import Policy, TurnContext
from pear_agent.policies.lerobot.joint_chunks import ActionQueue, JointChunk, parse_chunk
from pear_agent.protocol.actions import Action, ActionError, parse_reply, response_schema
from pear_agent.protocol.prompts import (
    compact_turn_text,
    system_prompt,
    turn_text,
    user_message,
)
from pear_agent.protocol.state import (
    PartPose,
    compact_relative,
    compact_scene,
    compact_state,
    relative_json,
    relative_positions,
    robot_state,
    scene_facts,
    state_json,
)
from pear_agent.records.export_lerobot import action_size, split_action
from pear_agent.records.log import RunWriter
from pear_agent.robot.backend import (
    ActionPreview,
    Backend,
    ChunkExecution,
    ControlRecording,
    Observation,
    Outcome,
    PartCommand,
    Perturbed,
    PressAware,
    RunHeaderSource,
    SetpointControl,
    SimulationClock,
    SuccessJudge,
    TaskInfo,
)
from pear_agent.robot.images import encode_jpeg
from pear_agent.robot.kinematics import Kinematics, rpy_to_matrix


def _vec(v: np.ndarray, digits: int) -> list[float]:
    return [round(float(x), digits) + 0.0 for x in v]


def describe_executed(executed: dict[str, dict[str, Any]]) -> str:
    """One line for the console: what the robot was commanded to do after clipping."""
    parts = []
    for name, q in executed.items():
        bits = []
        if any(round(v, 1) for v in q.get("move_cm", ())):
            bits.append("move " + " ".join(f"{round(v, 1) + 0.0:+.1f}" for v in q["move_cm"]) + " cm")
        if any(round(v, 2) for v in q.get("turn_rad", ())):
            bits.append("turn " + " ".join(f"{round(v, 2) + 0.0:+.2f}" for v in q["turn_rad"]) + " rad")
        if "gripper" in q:
            bits.append(f"gripper {q['gripper']:.1f}")
        parts.append(f"{name} " + ", ".join(bits) if bits else f"{name} holds")
    return "; ".join(parts) or "nothing"


def _outcome_json(outcome: Outcome, notes: list[str], **more: Any) -> dict[str, Any]:
    """A turn's outcome as the episode log records it (a chunk adds its step counts)."""
    return {
        "status": outcome.status,
        "detail": outcome.detail,
        "duration_s": outcome.duration_s,
        "blocked_joints": outcome.blocked_joints,
        "notes": notes,
        **more,
    }


class ArmEnvironment:
    """The arm path of the loop. `observation`: "both" (state JSON + images), "images" or "state"
    (no image parts, plain-string user content); `scene_facts` adds the objects' positions from the
    simulator's privileged facts (recorded as privileged); `scene_relative` (with `scene_facts`) adds
    each object's position relative to each part's tool point."""

    def __init__(
        self,
        backend: Backend,
        kinematics: Kinematics,
        *,
        observation: str = "both",
        scene_facts: bool = False,
        scene_relative: bool = False,
        jpeg_quality: int = 85,
        tokens_per_image_patch_px: int = 28,
        max_invalid: int = 3,
        max_chunk: int | None = None,
        max_turns: int | None = None,
    ) -> None:
        check_observation(observation)
        self.backend = backend
        self.kin = kinematics
        self.robot = kinematics.robot
        self.name = self.robot.name
        self.observation = observation
        self.scene_facts = scene_facts
        self.scene_relative = scene_relative
        self.jpeg_quality = jpeg_quality
        self.patch_px = tokens_per_image_patch_px
        self.max_invalid = max_invalid
        self.max_chunk = int(max_chunk if max_chunk is not None else self.robot.max_chunk)
        """The most steps one reply may carry (`--max-chunk`, else the robot YAML's, else 1)."""
        check_max_chunk(self.max_chunk)
        self.max_turns = max_turns
        """The episode's turn limit where it overrides the task's: the briefing states the one flown."""
        self.press = isinstance(backend, PressAware) and bool(backend.honours_press)
        """Whether a move may carry `press` (the backend honours it); refused by the parser otherwise."""
        self._schema = response_schema(self.robot, self.max_chunk, self.press)
        self._press_moves = 0
        self._obs: Any = None
        self._state: dict[str, PartPose] = {}
        self._queue = ActionQueue()
        """Joint-target actions still to run (a LeRobot policy's chunks:
        `pear_agent.policies.lerobot.joint_chunks`)."""
        self._chunk_fps: float | None = None
        self._next_action_t = 0.0
        self._obs_step = 0

    @property
    def task(self) -> TaskInfo:
        return self.backend.task

    def reset(self, seed: int) -> None:
        self._obs = self.backend.reset(seed)
        self._queue, self._chunk_fps, self._next_action_t, self._obs_step = ActionQueue(), None, 0.0, 0
        self._press_moves = 0

    def system_prompt(self) -> str:
        return system_prompt(
            self.robot,
            self.task,
            observation=self.observation,
            scene_facts=self.scene_facts,
            scene_relative=self.scene_relative,
            max_invalid=self.max_invalid,
            max_chunk=self.max_chunk,
            press=self.press,
            max_turns=self.max_turns,
        )

    def header(self) -> dict[str, Any]:
        # a real robot's arm mode and speed
        extra = self.backend.run_header() if isinstance(self.backend, RunHeaderSource) else {}
        header = {"observation": self.observation, "scene_facts": self.scene_facts}
        return header | extra | self.result_fields()

    def _preview(self, steps: list[dict[str, Any]], executed: list[dict[str, Any]], notes: list[str]) -> None:
        """Tell a backend that shows each motion before it moves (a real robot's step mode) what
        the model asked and what is left of it after clipping."""
        if not isinstance(self.backend, ActionPreview):
            return
        asked = [{n: pa.to_json() for n, pa in st.items()} for st in steps]
        clipped = " | ".join(describe_executed(e) for e in executed)
        self.backend.preview_action(json.dumps(asked[0] if len(asked) == 1 else asked), clipped, notes)

    def result_fields(self) -> dict[str, Any]:
        """The episode's perturbation and its drawn values, where the backend applied one."""
        drawn = self.backend.perturbation if isinstance(self.backend, Perturbed) else None
        relative = {"scene_relative": True} if self.scene_relative else {}  # privileged, like scene_facts
        out = ({"perturbation": drawn} if drawn else {}) | {"max_chunk": self.max_chunk} | relative
        if self.press:  # where a move may press: how many did (0: the episode never pressed)
            out["press_moves"] = self._press_moves
        return out

    def response_schema(self) -> dict[str, Any]:
        return self._schema

    def observe(self, turn: int, max_turns: int, feedback: str | None) -> TurnPrompt:
        obs = self._obs
        self._state = robot_state(obs, self.kin)
        state = {k: v.to_json() for k, v in self._state.items()}
        compact = self.observation == "compact"
        images = obs.images if self.observation in ("both", "images") else {}
        jpegs = {name: encode_jpeg(img, self.jpeg_quality) for name, img in images.items()}
        line = compact_state(self._state)
        rel = relative_positions(obs.privileged, self._state) if self.scene_relative else None
        relative = None
        if compact:
            scene = compact_scene(obs.privileged) if self.scene_facts else None
            relative = compact_relative(rel) if rel is not None else None
            text = compact_turn_text(line, feedback, scene, relative)
        else:
            scene = scene_facts(obs.privileged) if self.scene_facts else None
            relative = relative_json(rel) if rel is not None else None
            text = turn_text(
                turn,
                max_turns,
                state_json(self._state),
                feedback,
                list(jpegs),
                observation=self.observation,
                scene=scene,
                relative=relative,
            )
        msg = user_message(text, jpegs, as_string=self.observation in ("state", "compact"))
        p = self.patch_px
        img_tokens = sum(math.ceil(i.shape[0] / p) * math.ceil(i.shape[1] / p) for i in images.values())
        record: dict[str, Any] = {
            "state": state,
            "joints_rad": {k: [round(float(v), 5) for v in q] for k, q in obs.joints_rad.items()},
        }
        if scene is not None:
            record["scene"] = scene
        if relative is not None:
            record["scene_relative"] = relative
        self._obs_step = self._queue.executed
        takes_setpoints = isinstance(self.backend, SetpointControl)
        ctx = TurnContext(
            turn,
            self.task.name,
            state,
            obs,
            response_schema=self._schema,
            max_chunk=self.max_chunk,
            bare_json=compact,
            control=self.current_control if takes_setpoints else None,
            instruction=self.task.instruction,
        )
        return TurnPrompt(msg, text, ctx, len(text) // 4 + img_tokens + 8, jpegs, record, line=line)

    def parse(self, reply: str) -> Action:
        return parse_reply(reply, self.robot, self.max_chunk, self.press)

    def vector_layout(self) -> dict[str, Any]:
        """Parts (sorted), joints per part and grippers: the order of the dataset's vectors
        (`pear_agent.records.export_lerobot.arrays_layout` of this robot's recordings)."""
        parts = sorted(self.robot.parts)
        return {
            "parts": parts,
            "joints": {p: len(self.robot.parts[p].joints) for p in parts},
            "gripper": {p: self.robot.parts[p].gripper is not None for p in parts},
        }

    def parse_command(self, command: Any) -> JointChunk:
        """A policy's joint-target chunk (a LeRobot policy's `PolicyReply.command`), stamped with the
        control step of this turn's observation; ActionError naming what is wrong."""
        try:
            chunk = parse_chunk(command, action_size(self.vector_layout()))
        except ValueError as exc:
            raise ActionError(str(exc)) from None
        chunk.timestep = self._obs_step
        return chunk

    def current_control(self) -> dict[str, np.ndarray]:
        """The simulation now in a recording's layout (`take_recording`, one frame): what a LeRobot
        policy is fed, through the export's own feature mapping."""
        return self.control_arrays([self.backend.control_frame()])  # type: ignore[attr-defined]

    def plan(
        self,
        action: Action,
        state: dict[str, PartPose],
        joints_rad: dict[str, np.ndarray],
        parts: dict[str, Any] | None = None,
    ) -> tuple[dict[str, PartCommand], dict[str, Any], Outcome | None]:
        """Clip each part's target, solve IK; refuse the whole action if any part has no solution.
        `parts`: the step to plan (default: the action's first)."""
        commands: dict[str, PartCommand] = {}
        info: dict[str, Any] = {"notes": [], "ik": {}, "executed": {}}
        for name, pa in (action.parts if parts is None else parts).items():
            part = self.robot.parts[name]
            target = clip_target(name, part, state[name], pa)
            info["notes"].extend(target.notes)
            cmd = PartCommand(gripper=target.gripper, press=pa.press and target.moves_arm)
            executed: dict[str, Any] = {}
            if target.moves_arm:
                executed["move_cm"] = _vec(target.position_cm - state[name].position_cm, 2)
                executed["turn_rad"] = _vec(target.orientation_rad - state[name].orientation_rad, 3)
                t0 = time.perf_counter()
                res = self.kin.ik(
                    name,
                    target.position_cm / 100.0,
                    rpy_to_matrix(target.orientation_rad),
                    seed_rad=joints_rad[name],
                )
                info["ik"][name] = {
                    "success": res.success,
                    "position_error_cm": res.position_error_m * 100,
                    "rotation_error_rad": res.rotation_error_rad,
                    "iterations": res.iterations,
                    "ik_ms": (time.perf_counter() - t0) * 1000,
                    "target_position_cm": target.position_cm,
                    "target_orientation_rad": target.orientation_rad,
                    "target_joints_rad": np.round(res.joints_rad, 5) if res.success else None,
                }
                if not res.success:
                    info["executed"] = {}
                    return {}, info, Outcome("ik_failed", f"{name}: {res.reason}; the robot did not move")
                cmd.joints_rad = res.joints_rad
            if target.gripper is not None:
                executed["gripper"] = target.gripper
            if cmd.press:
                executed["press"] = True
            info["executed"][name] = executed
            commands[name] = cmd
        return commands, info, None

    def plan_chunk(
        self, action: Action, state: dict[str, PartPose], joints_rad: dict[str, np.ndarray]
    ) -> tuple[list[dict[str, PartCommand]], list[dict[str, Any]], Outcome | None]:
        """Every step of a chunk planned before anything moves: each clipped from the previous
        step's target and IK-solved from the previous step's solution. The first refused step
        refuses the whole chunk ("step 3: ..."), nothing moves."""
        state, joints = dict(state), dict(joints_rad)
        commands: list[dict[str, PartCommand]] = []
        infos: list[dict[str, Any]] = []
        for i, parts in enumerate(action.chunk, 1):
            cmds, info, refused = self.plan(action, state, joints, parts)
            infos.append(info)
            if refused is not None:
                why = refused.detail.removesuffix("; the robot did not move")
                return [], infos, Outcome(refused.status, f"step {i}: {why}; nothing moved")
            for name, cmd in cmds.items():
                ik = info["ik"].get(name)
                if ik is not None:
                    pose = state[name]
                    state[name] = PartPose(
                        np.asarray(ik["target_position_cm"], float),
                        np.asarray(ik["target_orientation_rad"], float),
                        pose.gripper if cmd.gripper is None else cmd.gripper,
                        pose.pose,
                    )
                if cmd.joints_rad is not None:
                    joints[name] = cmd.joints_rad
            commands.append(cmds)
        return commands, infos, None

    def execute(self, action: Action | JointChunk) -> StepResult:  # type: ignore[override]
        if isinstance(action, JointChunk):
            return self._execute_joint_chunk(action)
        if len(action.chunk) > 1:
            return self._execute_chunk(action)
        commands, info, refused = self.plan(action, self._state, self._obs.joints_rad)
        if refused is None:
            self._preview([action.parts], [info["executed"]], info["notes"])
        outcome = refused if refused is not None else self.backend.execute(commands)
        if refused is None:
            self._press_moves += sum(c.press for c in commands.values())
        self._obs = obs = self.backend.observe()
        notes = list(action.notes) + info["notes"]
        feedback = outcome.describe() + (f" (note: {'; '.join(notes)})" if notes else "")
        executed = info.pop("executed")
        record = {
            "plan": info,
            "executed": executed,
            "outcome": _outcome_json(outcome, notes),
            "sim_time_s": obs.time_s,
            "success": obs.success,
        }
        summary = describe_executed(executed) if refused is None else "nothing (refused)"
        return StepResult(
            status=outcome.status,
            feedback=feedback,
            executed=summary,
            success=bool(obs.success),
            record=record,
            end=outcome.status in ("stopped", "refused"),  # e-stop, or the backend would not command
            detail=outcome.detail,
        )

    def _execute_chunk(self, action: Action) -> StepResult:
        """A chunk: planned whole, then run as one motion (`execute_chunk` where the backend has
        it, else step by step); the feedback says which step was reached and why it stopped."""
        n = len(action.chunk)
        commands, infos, refused = self.plan_chunk(action, self._state, self._obs.joints_rad)
        reached = 0
        if refused is not None:
            outcome = refused
        else:
            notes = [x for inf in infos for x in inf["notes"]]
            self._preview(action.chunk, [inf.get("executed", {}) for inf in infos], notes)
            if isinstance(self.backend, ChunkExecution):
                outcome, reached = self.backend.execute_chunk(commands)
            else:  # a backend without it: the steps one after another, stopping at the first miss
                outcome = Outcome("reached")
                for cmds in commands:
                    outcome = self.backend.execute(cmds)
                    if outcome.status != "reached":
                        break
                    reached += 1
        if refused is None:  # the steps that ran: those reached and the one that stopped
            ran = commands[: min(reached + 1, n)]
            self._press_moves += sum(c.press for cmds in ran for c in cmds.values())
        self._obs = obs = self.backend.observe()
        notes = list(action.notes) + [
            f"step {i}: {x}" for i, inf in enumerate(infos, 1) for x in inf["notes"]
        ]
        if refused is not None:
            said = outcome.describe()
        elif outcome.status == "reached":
            said = f"reached: all {n} steps of the chunk"
        else:
            where = f"step {reached} of {n} reached" if reached else f"no step of {n} reached"
            said = f"{outcome.status} during step {min(reached + 1, n)} ({where}): {outcome.detail}"
        feedback = said + (f" (note: {'; '.join(notes)})" if notes else "")
        executed = [inf.get("executed", {}) for inf in infos] if refused is None else []
        steps = []
        for i, inf in enumerate(infos, 1):
            status = (
                "refused"
                if refused is not None and i == len(infos)
                else "not run"
                if refused is not None
                else "reached"
                if i <= reached
                else outcome.status
                if i == reached + 1
                else "not run"
            )
            steps.append(
                {
                    "step": i,
                    "executed": inf.get("executed", {}),
                    "ik": inf["ik"],
                    "notes": inf["notes"],
                    "status": status,
                }
            )
        record = {
            "plan": {
                "notes": [x for inf in infos for x in inf["notes"]],
                "ik": infos[-1]["ik"] if infos else {},
            },
            "executed": executed,
            "steps": steps,
            "outcome": _outcome_json(outcome, notes, steps=n, steps_reached=reached),
            "sim_time_s": obs.time_s,
            "success": obs.success,
        }
        summary = (
            " | ".join(describe_executed(e) for e in executed[: reached + 1])
            if refused is None
            else "nothing (refused)"
        )
        return StepResult(
            status=outcome.status,
            feedback=feedback,
            executed=f"chunk {reached}/{n}: {summary}",
            success=bool(obs.success),
            record=record,
            end=outcome.status in ("stopped", "refused"),
            detail=outcome.detail,
        )

    def _run_action(self) -> Outcome:
        """The next queued joint-target action held for one control step (1/fps simulated s, on a
        fixed schedule); with the queue empty the setpoint in force is held."""
        fps = float(self._chunk_fps or 1.0)
        now = self.time_s_now()
        start = max(self._next_action_t, now)
        self._next_action_t = start + 1.0 / fps
        item = self._queue.pop()
        if item is None:
            self.backend.advance(self._next_action_t - now)
            return Outcome("reached", "the queue was empty: the setpoint held")
        commands = {
            part: PartCommand(joints_rad=np.asarray(q, float), gripper=g)
            for part, (q, g) in split_action(item[1], self.vector_layout()).items()
        }
        return self.backend.execute_setpoint(commands, self._next_action_t - now)  # type: ignore[attr-defined]

    def _execute_joint_chunk(self, chunk: JointChunk) -> StepResult:
        """Merge the chunk into the queue, then run queued actions until the queue is at or under
        `chunk_size_threshold` x the chunk size (at least one): LeRobot's `RobotClient` loop, the
        next observation going out at that point."""
        self._chunk_fps = chunk.fps
        dropped = self._queue.merge(chunk)
        first = self._queue.executed
        outcome, ran = Outcome("reached"), 0
        while True:
            outcome = self._run_action()
            ran += 1
            if outcome.status != "reached" or self._queue.ready_to_send(chunk.chunk_size_threshold):
                break
            if chunk.time_limit_s is not None and self.time_s_now() >= chunk.time_limit_s - 1e-9:
                break  # the episode's time is up: the rest of the queue is not run
        self._obs = obs = self.backend.observe()
        late = chunk.time_limit_s is not None and obs.time_s >= chunk.time_limit_s - 1e-9 and not obs.success
        executed = {
            "actions": ran,
            "steps": [first, first + ran - 1],
            "fps": chunk.fps,
            "dropped": dropped,
            "queued": len(self._queue),
        }
        what = f"{ran} action{'s' if ran != 1 else ''} at {chunk.fps:g} Hz"
        summary = f"{what} (steps {first}-{first + ran - 1}), {len(self._queue)} queued"
        feedback = outcome.describe()
        status: str = outcome.status
        detail = outcome.detail
        if late:
            status, detail = "turn_limit", f"no success within {chunk.time_limit_s:g} simulated s"
        return StepResult(
            status=status,
            feedback=feedback,
            executed=summary,
            success=bool(obs.success),
            record={
                "executed": executed,
                "outcome": _outcome_json(outcome, [], steps=ran),
                "sim_time_s": obs.time_s,
                "success": obs.success,
            },
            end=late or outcome.status in ("stopped", "refused"),
            detail=detail,
        )

    def advance(self, duration_s: float) -> None:
        """Realtime: time passes while the policy decides. Joint-target actions still queued keep
        running at their rate meanwhile (LeRobot's client does not wait for the server); otherwise
        the last command stays in force."""
        if self._chunk_fps is None:
            self.backend.advance(duration_s)
            return
        fps, end = self._chunk_fps, self.time_s_now() + duration_s
        while max(self._next_action_t, self.time_s_now()) + 1.0 / fps <= end + 1e-9:
            if self._run_action().status != "reached":
                break
        rest = end - self.time_s_now()
        if rest > 1e-9:
            self.backend.advance(rest)

    def time_s_now(self) -> float:
        """The simulation's clock now (the last observation's may be older)."""
        data = self.backend.data if isinstance(self.backend, SimulationClock) else None
        return float(data.time) if data is not None else self.time_s()

    def start_recording(self, fps: float | None) -> None:
        """Record the simulation at `fps` during every move (`--record-fps`); None stops."""
        if not isinstance(self.backend, ControlRecording):
            raise ValueError(
                f"--record-fps: the {type(self.backend).__name__} backend does not record at the control "
                "rate (the MuJoCo backend does)"
            )
        self.backend.start_recording(fps)

    def take_recording(self) -> dict[str, np.ndarray]:
        """The frames recorded since the last call as arrays (`RunWriter.save_control`'s layout):
        `time_s`; per part `<part>.joints_rad`, `.velocity_rad_s`, `.command_joints_rad`,
        `.tool_pose` (x y z cm, roll pitch yaw rad: the state's, by the same FK), and with a gripper
        `.gripper`, `.command_gripper`; per camera `jpeg.<camera>` (the JPEGs, quality 95, joined)
        and `jpeg_end.<camera>` (where each ends). Empty when nothing was recorded."""
        return self.control_arrays(self.backend.take_recording())  # type: ignore[attr-defined]

    def control_arrays(self, frames: list[Any]) -> dict[str, np.ndarray]:
        """`ControlFrame`s in `take_recording`'s layout (empty for no frames)."""
        if not frames:
            return {}
        out: dict[str, np.ndarray] = {"time_s": np.array([f.time_s for f in frames])}
        for name in self.robot.parts:
            out[f"{name}.joints_rad"] = np.array([f.joints_rad[name] for f in frames])
            out[f"{name}.velocity_rad_s"] = np.array([f.joint_velocity_rad_s[name] for f in frames])
            out[f"{name}.command_joints_rad"] = np.array([f.command_joints_rad[name] for f in frames])
            if name in frames[0].gripper:
                out[f"{name}.gripper"] = np.array([f.gripper[name] for f in frames])
                out[f"{name}.command_gripper"] = np.array([f.command_gripper[name] for f in frames])
        poses = [robot_state(Observation(f.joints_rad, f.gripper, {}, f.time_s), self.kin) for f in frames]
        for name in self.robot.parts:
            out[f"{name}.tool_pose"] = np.array(
                [np.concatenate([p[name].position_cm, p[name].orientation_rad]) for p in poses]
            )
        for cam in frames[0].images:
            jpegs = [encode_jpeg(f.images[cam], 95) for f in frames]
            out[f"jpeg.{cam}"] = np.frombuffer(b"".join(jpegs), dtype=np.uint8)
            out[f"jpeg_end.{cam}"] = np.cumsum([len(j) for j in jpegs])
        return out

    def time_s(self) -> float:
        return float(self._obs.time_s) if self._obs is not None else 0.0

    def set_frame_sink(self, sink: FrameSink | None) -> None:
        self.backend.set_frame_sink(sink)
        if sink is not None and self._obs is not None and self._obs.images:
            sink(next(iter(self._obs.images.values())))

    def judge_success(self, end_reason: str, detail: str) -> bool | None:
        if not isinstance(self.backend, SuccessJudge):
            return None
        verdict = self.backend.judge_success(end_reason, detail)
        return None if verdict is None else bool(verdict)

    def close(self) -> None:
        """Release the backend (simulator, renderers)."""
        self.backend.close()


def arm_episode(
    backend: Backend,
    kinematics: Kinematics,
    policy: Policy,
    config: EpisodeConfig | None = None,
    writer: RunWriter | None = None,
    on_turn: Callable[[TurnRecord], None] | None = None,
) -> Episode:
    """An `Episode` of `policy` on the arm: the `ArmEnvironment` of `backend` and `kinematics`,
    built with `config`'s environment options (observation, scene facts, chunk size...)."""
    cfg = config or EpisodeConfig()
    env = ArmEnvironment(backend, kinematics, **environment_options(cfg))
    return Episode(env, policy, cfg, writer, on_turn)
