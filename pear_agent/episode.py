"""The turn loop: observe, prompt, reply, parse, clip, IK, execute, record; until the episode ends.

It knows backends only through `pear_agent.backend.Backend`: no simulator or ROS import here.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from pear_agent.backend import Backend, Observation, Outcome, PartCommand
from pear_agent.kinematics import Kinematics, rpy_to_matrix
from pear_agent.policies.base import Policy, PolicyReply, TurnContext
from pear_agent.protocol.actions import Action, ActionError, parse_reply
from pear_agent.protocol.prompts import Message, encode_jpeg, system_prompt, turn_text, user_message
from pear_agent.protocol.state import PartPose, robot_state, state_json
from pear_agent.records import RunWriter
from pear_agent.safety import clip_target

EndReason = Literal[
    "success", "turn_limit", "context_budget", "invalid_action", "policy_error", "stopped", "refused", "error"
]


@dataclass
class EpisodeConfig:
    max_turns: int | None = None
    """Overrides the task's own turn limit when set."""
    max_context_tokens: int = 64000
    jpeg_quality: int = 85
    mode: Literal["paused", "realtime"] = "paused"
    tokens_per_image_patch_px: int = 28
    latency_s: float | None = None
    """Realtime only: the decision latency simulated time advances by, instead of the measured one
    ("what would this model score at 2 s per decision"). The first decision is untimed either way."""

    def __post_init__(self) -> None:
        if self.mode not in ("paused", "realtime"):
            raise ValueError(f"mode must be 'paused' or 'realtime', not {self.mode!r}")
        if self.latency_s is not None and (self.mode != "realtime" or self.latency_s < 0):
            raise ValueError("an injected latency needs realtime mode and a value >= 0 s")


@dataclass
class TurnRecord:
    turn: int
    summary: str
    outcome: str
    sim_time_s: float
    success: bool


@dataclass
class EpisodeResult:
    success: bool
    turns: int
    end_reason: EndReason
    detail: str = ""
    sim_time_s: float = 0.0
    wall_time_s: float = 0.0
    latencies_s: list[float] = field(default_factory=list)
    run_dir: str | None = None
    task: str = ""
    robot: str = ""
    seed: int = 0
    policy: str = ""
    mode: str = "paused"
    latency_injected_s: float | None = None
    advanced_s: float = 0.0
    """Simulated time that passed while the policy decided (realtime mode)."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    last_total_tokens: int = 0
    """The server's token count for the latest request: the context's size."""
    retries: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def estimate_tokens(messages: list[Message], patch_px: int) -> int:
    """Rough context size when the server reports none: 4 characters a token, images by patch."""
    n = 0
    for m in messages:
        content = m["content"]
        if isinstance(content, str):
            n += len(content) // 4 + 4
            continue
        for c in content:
            if c["type"] == "text":
                n += len(c["text"]) // 4 + 1
            else:
                n += c.get("_tokens", 256)
    return n


def describe_action(action: Action) -> str:
    parts = []
    for name, pa in action.parts.items():
        bits = []
        if pa.position_cm is not None:
            bits.append("position " + " ".join(f"{v:+.1f}" for v in pa.position_cm) + " cm")
        if pa.orientation_rad is not None:
            bits.append("orientation " + " ".join(f"{v:+.2f}" for v in pa.orientation_rad) + " rad")
        if pa.gripper is not None:
            bits.append(f"gripper {pa.gripper:.1f}")
        parts.append(f"{name} " + ", ".join(bits) if bits else f"{name} (no change)")
    return "; ".join(parts) or "(no change)"


class Episode:
    def __init__(
        self,
        backend: Backend,
        kinematics: Kinematics,
        policy: Policy,
        config: EpisodeConfig | None = None,
        writer: RunWriter | None = None,
        on_turn: Callable[[TurnRecord], None] | None = None,
    ) -> None:
        self.backend = backend
        self.kin = kinematics
        self.robot = kinematics.robot
        self.policy = policy
        self.config = config or EpisodeConfig()
        self.writer = writer
        self.on_turn = on_turn
        self.messages: list[Message] = []

    # -- one turn's pieces ------------------------------------------------------------
    def _user_turn(
        self, turn: int, max_turns: int, obs: Observation, state: dict[str, PartPose], outcome: str | None
    ) -> tuple[Message, dict[str, str]]:
        jpegs = {name: encode_jpeg(img, self.config.jpeg_quality) for name, img in obs.images.items()}
        text = turn_text(turn, max_turns, state_json(state), outcome, list(jpegs))
        msg = user_message(text, jpegs)
        files = {}
        if self.writer is not None:
            files = {name: self.writer.save_image(turn, name, jpeg) for name, jpeg in jpegs.items()}
        return msg, files

    def _image_tokens(self, obs: Observation) -> int:
        p = self.config.tokens_per_image_patch_px
        return sum(math.ceil(i.shape[0] / p) * math.ceil(i.shape[1] / p) for i in obs.images.values())

    def plan(
        self,
        action: Action,
        state: dict[str, PartPose],
        joints_rad: dict[str, np.ndarray],
    ) -> tuple[dict[str, PartCommand], dict[str, Any], Outcome | None]:
        """Clip each part's target, solve IK; refuse the whole action if any part has no solution."""
        commands: dict[str, PartCommand] = {}
        info: dict[str, Any] = {"notes": [], "ik": {}}
        for name, pa in action.parts.items():
            part = self.robot.parts[name]
            target = clip_target(name, part, state[name], pa)
            info["notes"].extend(target.notes)
            cmd = PartCommand(gripper=target.gripper)
            if target.moves_arm:
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
                }
                if not res.success:
                    return {}, info, Outcome("ik_failed", f"{name}: {res.reason}; the robot did not move")
                cmd.joints_rad = res.joints_rad
            commands[name] = cmd
        return commands, info, None

    # -- the loop ---------------------------------------------------------------------
    def run(self, seed: int) -> EpisodeResult:
        cfg, backend = self.config, self.backend
        wall0 = time.perf_counter()
        self.policy.reset(seed)
        obs = backend.reset(seed)
        task = backend.task
        max_turns = cfg.max_turns or task.max_turns
        sys_prompt = system_prompt(self.robot, task)
        self.messages = [{"role": "system", "content": sys_prompt}]
        result = EpisodeResult(
            False,
            0,
            "turn_limit",
            task=task.name,
            robot=self.robot.name,
            seed=seed,
            policy=self.policy.name,
            mode=cfg.mode,
            latency_injected_s=cfg.latency_s,
        )
        if self.writer is not None:
            self.writer.write_text("system_prompt.txt", sys_prompt)
            self.writer.log(
                {
                    "kind": "header",
                    "task": task.name,
                    "instruction": task.instruction,
                    "robot": self.robot.name,
                    "seed": seed,
                    "policy": self.policy.name,
                    "mode": cfg.mode,
                    "latency_injected_s": cfg.latency_s,
                    "max_turns": max_turns,
                    "system_prompt": sys_prompt,
                }
            )
            if self.writer.video is not None:  # rendering video frames costs more than physics
                backend.set_frame_sink(self.writer.add_frame)
            if obs.images:
                self.writer.add_frame(next(iter(obs.images.values())))
        outcome_text: str | None = None
        context_tokens = estimate_tokens(self.messages, cfg.tokens_per_image_patch_px)
        try:
            for turn in range(1, max_turns + 1):
                state = robot_state(obs, self.kin)
                msg, image_files = self._user_turn(turn, max_turns, obs, state, outcome_text)
                img_tokens = self._image_tokens(obs)
                self.messages.append(msg)
                context_tokens += len(msg["content"][0]["text"]) // 4 + img_tokens + 8
                record: dict[str, Any] = {
                    "kind": "turn",
                    "turn": turn,
                    "prompt": msg["content"][0]["text"],
                    "images": image_files,
                    "state": {k: v.to_json() for k, v in state.items()},
                }
                if context_tokens > cfg.max_context_tokens:
                    result = self._end(
                        result,
                        turn - 1,
                        "context_budget",
                        f"context of ~{context_tokens} tokens exceeds {cfg.max_context_tokens}",
                    )
                    self._log(record | {"end": result.end_reason})
                    break
                ctx = TurnContext(turn, task.name, {k: v.to_json() for k, v in state.items()}, obs)
                reply: PolicyReply = self.policy.act(self.messages, ctx)
                result.latencies_s.append(reply.latency_s)
                record.update(
                    reply=reply.text,
                    latency_s=reply.latency_s,
                    usage=reply.usage,
                    policy_info=reply.info or None,
                )
                if reply.usage:
                    result.prompt_tokens += int(reply.usage.get("prompt_tokens", 0))
                    result.completion_tokens += int(reply.usage.get("completion_tokens", 0))
                    if reply.usage.get("total_tokens"):
                        context_tokens = int(reply.usage["total_tokens"])
                        result.last_total_tokens = context_tokens
                result.retries += max(0, len((reply.info or {}).get("attempts", [])) - 1)
                record["context_tokens"] = context_tokens
                if reply.error:
                    result = self._end(result, turn, "policy_error", reply.error)
                    self._log(record | {"error": reply.error, "end": result.end_reason})
                    break
                self.messages.append({"role": "assistant", "content": reply.text})
                context_tokens += len(reply.text) // 4 if not reply.usage else 0
                try:
                    action = parse_reply(reply.text, self.robot)
                except ActionError as exc:
                    result = self._end(result, turn, "invalid_action", str(exc))
                    self._log(record | {"error": str(exc), "end": result.end_reason})
                    self._report(turn, "no valid action", f"invalid: {exc}", obs, False)
                    break
                record["action"] = action.to_json()
                if cfg.mode == "realtime" and turn > 1:
                    # the world moved on while the policy decided; the last command stayed in force
                    lag = reply.latency_s if cfg.latency_s is None else cfg.latency_s
                    backend.advance(lag)
                    result.advanced_s += lag
                    record["advanced_s"] = lag
                commands, plan_info, refused = self.plan(action, state, obs.joints_rad)
                record["plan"] = plan_info
                outcome = refused if refused is not None else backend.execute(commands)
                obs = backend.observe()
                notes = "; ".join(plan_info["notes"])
                outcome_text = outcome.describe() + (f" (note: {notes})" if notes else "")
                record.update(
                    outcome={
                        "status": outcome.status,
                        "detail": outcome.detail,
                        "duration_s": outcome.duration_s,
                        "blocked_joints": outcome.blocked_joints,
                        "notes": plan_info["notes"],
                    },
                    sim_time_s=obs.time_s,
                    success=obs.success,
                )
                result.turns = turn
                result.sim_time_s = obs.time_s
                self._report(turn, describe_action(action), outcome.status, obs, obs.success)
                if outcome.status in ("stopped", "refused"):
                    # e-stop, or the backend would not command (stale joint states...): end, say why
                    result = self._end(result, turn, outcome.status, outcome.detail)
                    self._log(record | {"end": result.end_reason})
                    break
                if obs.success:
                    result = self._end(result, turn, "success", "the task's success check passed")
                    result.success = True
                    self._log(record | {"end": result.end_reason})
                    break
                if turn == max_turns:
                    result = self._end(result, turn, "turn_limit", f"no success within {max_turns} turns")
                    self._log(record | {"end": result.end_reason})
                    break
                self._log(record)
        finally:
            backend.set_frame_sink(None)
        result.wall_time_s = time.perf_counter() - wall0
        result.sim_time_s = obs.time_s
        if self.writer is not None:
            result.run_dir = str(self.writer.run_dir)
            self.writer.finish(result.to_json() | self._latency_stats(result.latencies_s))
        return result

    @staticmethod
    def _latency_stats(lat: list[float]) -> dict[str, float | None]:
        if not lat:
            return {"latency_median_s": None, "latency_p90_s": None}
        return {"latency_median_s": float(np.median(lat)), "latency_p90_s": float(np.percentile(lat, 90))}

    def _end(self, result: EpisodeResult, turns: int, reason: EndReason, detail: str) -> EpisodeResult:
        result.turns = max(result.turns, turns)
        result.end_reason = reason
        result.detail = detail
        return result

    def _log(self, record: dict[str, Any]) -> None:
        if self.writer is not None:
            self.writer.log(record)

    def _report(self, turn: int, summary: str, outcome: str, obs: Observation, success: bool) -> None:
        if self.on_turn is not None:
            self.on_turn(TurnRecord(turn, summary, outcome, obs.time_s, success))
