"""The ONE turn loop: observe, decide, apply, record; until the episode ends.

It drives an environment (`pear_agent.loop.environment.Environment`) it is given: the arm
(`pear_agent.loop.arm_environment.ArmEnvironment`: clip + IK + a `Backend`) or any other world that
brings its own prompts, parser and execution. It builds none: no environment, simulator or ROS
import here (tests/test_imports.py fails on one).

A turn is four named steps, each a method: `observe()` (the environment renders the turn and the
conversation grows), `decide()` / `adecide()` (the policy answers), `apply(reply)` (accounting,
the realtime clock, parsing, execution, the episode's end) and `record(line)` (the log). `run(seed)`
drives them synchronously; `arun(seed)` is the same steps as a coroutine that awaits the model, so
one process keeps many episodes in flight against one server (`pear_agent.loop.runner`).

A reply without a valid action gets a correction turn (the parser's reason as the next turn's
outcome); it counts as a turn, and `max_invalid` consecutive invalid replies end the episode.
A model's `"done": true` ends it after that action (end_reason "done"; success is still the task's
check, or the backend's `judge_success` on hardware).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from pear_agent.loop.config import EpisodeConfig
from pear_agent.loop.environment import Environment, TurnPrompt
from pear_agent.loop.step_watch import env_step
from pear_agent.policies.base import Policy, PolicyReply, decide_async
from pear_agent.protocol.actions import PROTOCOL_VERSION, ActionError
from pear_agent.protocol.history import LINE_KEY, window
from pear_agent.protocol.prompts import Message
from pear_agent.records.log import RunWriter
from pear_agent.robot.backend import EpisodeAborted

EndReason = Literal[
    "success",
    "done",
    "turn_limit",
    "context_budget",
    "invalid_action",
    "policy_error",
    "endpoint_error",
    "stopped",
    "refused",
    "error",
    "env_hang",
]
END_REASONS: tuple[str, ...] = EndReason.__args__  # type: ignore[attr-defined]
INFRA_ENDINGS: tuple[str, ...] = ("endpoint_error", "env_hang")
"""Ends that are the infrastructure's, not the model's: the model endpoint failed (HTTP 5xx/429,
a cut or garbled stream, no answer in time) after every retry, or an environment step did not
return within `env_step_timeout_s` (env_hang: recorded by the runner's parent, which replaced the
worker; the loop never ends an episode so itself). A bench leaves them out of the success rate
and its interval (counted apart) and runs them again on a resume."""
NO_REPLY_ENDINGS: tuple[str, ...] = ("policy_error", "endpoint_error")
"""Ends where the policy gave no reply: the episode's reward says nothing about the model."""
JUDGED_ENDINGS: tuple[str, ...] = ("success", "done", "turn_limit")
"""The ends of a task attempt: only these are put to an outside judge (hardware: the operator), so
a verdict never turns a stop, a refusal or a failure of the loop (a policy error...) into success."""


@dataclass
class TurnRecord:
    turn: int
    summary: str
    """What was executed (after clipping), or why nothing was."""
    outcome: str
    sim_time_s: float
    success: bool


@dataclass
class EpisodeResult:
    success: bool
    turns: int
    """Turns whose action was executed or refused, plus correction turns (invalid replies)."""
    end_reason: EndReason
    detail: str = ""
    sim_time_s: float = 0.0
    wall_time_s: float = 0.0
    latencies_s: list[float] = field(default_factory=list)
    """Decision times of the replies that came back (failed requests are in failed_latencies_s)."""
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
    max_invalid: int = 3
    invalid_replies: int = 0
    """Replies without a valid action (each answered with a correction turn)."""
    policy_failures: int = 0
    failed_latencies_s: list[float] = field(default_factory=list)
    observation: str = "both"
    scene_facts: bool = False
    """True when the model was shown privileged simulator facts (object positions)."""
    judged: bool = False
    """True when the backend's judge_success decided `success` (hardware)."""
    reward: float | None = None
    """The last reward an environment gave with a step (None for the arm tasks)."""
    max_chunk: int = 1
    """The most steps (arm) or commands (roadster plan) one reply could carry."""
    history: int | None = None
    """Turns sent in full (`--history K`); None: every turn (append-only)."""
    history_older: str = "line"
    """What became of the turns older than the window: "line" (one line each) or "drop"."""

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


def latency_summary(result: EpisodeResult) -> dict[str, float | int | None]:
    """Median / p90 over decisions that returned a reply; failed ones counted apart."""
    lat = result.latencies_s
    out: dict[str, float | int | None] = {"latency_median_s": None, "latency_p90_s": None}
    if lat:
        out = {"latency_median_s": float(np.median(lat)), "latency_p90_s": float(np.percentile(lat, 90))}
    out["decisions"] = len(lat)
    out["failed_decisions"] = len(result.failed_latencies_s)
    return out


def correction_text(reason: str, run: int, max_invalid: int) -> str:
    """The next turn's outcome after an invalid reply. Never contains a valid action."""
    left = max_invalid - run
    return (
        f"invalid reply ({run} in a row; the episode ends after {max_invalid}, {left} left): {reason}. "
        "The robot did not move."
    )


class Episode:
    """One episode of a policy in an environment: `Episode(environment, policy, config, writer,
    on_turn)`. The environment is built where environments are built (the arm's:
    `pear_agent.loop.arm_environment.arm_episode` or `ArmEnvironment`; any task's:
    `pear_agent.loop.registry.make_environment`); the loop only drives it.

    `run(seed)` / `await arun(seed)` play a whole episode; the steps they drive are public so a
    caller (or a test) can step a turn at a time: `begin(seed)`, then while `observe()` returns a
    prompt, `apply(decide())`; then `finish()`."""

    def __init__(
        self,
        environment: Environment,
        policy: Policy,
        config: EpisodeConfig | None = None,
        writer: RunWriter | None = None,
        on_turn: Callable[[TurnRecord], None] | None = None,
    ) -> None:
        self.env = environment
        self.policy = policy
        self.config = config or EpisodeConfig()
        self.writer = writer
        self.on_turn = on_turn
        self.messages: list[Message] = []
        self.result: EpisodeResult | None = None
        self.turn = 0
        """The turn in progress (0 before the first)."""
        self.prompt: TurnPrompt | None = None
        """The turn in progress's observation, once `observe()` returned it."""
        self.over = True
        self._line: dict[str, Any] = {}
        self._feedback: str | None = None
        self._invalid_run = 0
        self._context_tokens = 0
        self._max_turns = 0
        self._wall0 = 0.0
        self._sink_set = False
        self._recording = False
        self._finished = False

    # -- whole episodes ---------------------------------------------------------------------
    def run(self, seed: int) -> EpisodeResult:
        """The episode, synchronously: the policy's blocking `act` decides each turn."""
        try:
            if self.begin(seed):
                while self.observe() is not None:
                    self.apply(self.decide())
        finally:
            self._release_sink()
        return self.finish()

    async def arun(self, seed: int) -> EpisodeResult:
        """The same episode as a coroutine: deciding awaits the model (`aact`), a blocking policy runs
        in a thread, a cheap one inline; other episodes of this event loop move meanwhile."""
        try:
            if self.begin(seed):
                while self.observe() is not None:
                    reply = await self.adecide()
                    self.apply(reply)
                    await asyncio.sleep(0)  # a turn of every other episode in flight, then ours
        finally:
            self._release_sink()
        return await self.afinish()

    # -- the steps ----------------------------------------------------------------------------
    def begin(self, seed: int) -> bool:
        """Reset the policy and the environment, write the header. False when the environment
        refused to start (the result is then final: `finish()` returns it)."""
        cfg, env = self.config, self.env
        self._wall0 = time.perf_counter()
        self.turn, self.prompt, self.over, self._finished = 0, None, True, False
        self.policy.reset(seed)
        try:
            with env_step("reset"):
                env.reset(seed)
        except EpisodeAborted as exc:  # the robot could not start (e.g. its home move was stopped)
            self.result = self._aborted(seed, exc)
            self._finished = True
            return False
        task = env.task
        self._max_turns = cfg.max_turns or task.max_turns
        sys_prompt = env.system_prompt()
        header = dict(env.header())
        self.messages = [{"role": "system", "content": sys_prompt}]
        self.result = self._new_result(
            seed,
            "turn_limit",
            task=task.name,
            observation=str(header.get("observation", "")),
            scene_facts=bool(header.get("scene_facts", False)),
            max_chunk=int(header.get("max_chunk") or 1),
            history=cfg.history,
            history_older=cfg.history_older,
        )
        if self.writer is not None:
            self.writer.write_text("system_prompt.txt", sys_prompt)
            self.writer.log(
                {
                    "kind": "header",
                    "protocol": PROTOCOL_VERSION,
                    "task": task.name,
                    "instruction": task.instruction,
                    "robot": env.name,
                    "seed": seed,
                    "policy": self.policy.name,
                    "mode": cfg.mode,
                    "latency_injected_s": cfg.latency_s,
                    "max_turns": self._max_turns,
                    "max_invalid": cfg.max_invalid,
                    "history": cfg.history,
                    "history_older": cfg.history_older,
                    **header,
                    **({"record_fps": cfg.record_fps} if cfg.record_fps else {}),
                    "system_prompt": sys_prompt,
                }
            )
            if cfg.record_fps:
                start = getattr(env, "start_recording", None)
                if start is None:
                    raise ValueError(f"--record-fps: {env.name} does not record at the control rate")
                start(cfg.record_fps)
                self._recording = True
            if self.writer.video is not None:  # rendering video frames costs more than physics
                env.set_frame_sink(self.writer.add_frame)
                self._sink_set = True
        self._feedback = None
        self._invalid_run = 0
        self._context_tokens = estimate_tokens(self.messages, cfg.tokens_per_image_patch_px)
        self.over = False
        return True

    def observe(self) -> TurnPrompt | None:
        """The next turn's observation, appended to the conversation; None when the episode is over
        (it may end here: the context budget is checked with the new turn in it)."""
        if self.over or self.turn >= self._max_turns:
            self.over = True
            return None
        cfg, env = self.config, self.env
        self.turn = turn = self.turn + 1
        with env_step("observe", turn):
            prompt = env.observe(turn, self._max_turns, self._feedback)
        message = dict(prompt.message)
        windowed = cfg.history is not None and prompt.line is not None
        if windowed:  # its one-line form, once it is older than --history K (kept in the records)
            message[LINE_KEY] = prompt.line
        self.messages.append(message)
        self._context_tokens += prompt.tokens
        if cfg.history is not None:  # the window is what the model gets
            self._context_tokens = estimate_tokens(self.view(), cfg.tokens_per_image_patch_px)
        files = {}
        if self.writer is not None:
            files = {n: self.writer.save_image(turn, n, j) for n, j in prompt.images.items()}
        self._line = {"kind": "turn", "turn": turn, "prompt": prompt.text, "images": files} | prompt.record
        if windowed:
            self._line["line"] = prompt.line
        if self._context_tokens > cfg.max_context_tokens:
            detail = f"context of ~{self._context_tokens} tokens exceeds {cfg.max_context_tokens}"
            self._end("context_budget", detail)
            self.record(self._line | {"end": self._result.end_reason})
            return None
        self.prompt = prompt
        return prompt

    def view(self) -> list[Message]:
        """What the model is sent this turn: the conversation through the history window
        (`pear_agent.protocol.history.window`; the whole conversation without --history)."""
        return window(self.messages, self.config.history, self.config.history_older)

    def decide(self) -> PolicyReply:
        """The policy's reply to the conversation so far (blocking)."""
        assert self.prompt is not None, "decide() needs a turn: call observe() first"
        return self.policy.act(self.view(), self.prompt.context)

    async def adecide(self) -> PolicyReply:
        """The policy's reply, awaited (`pear_agent.policies.base.decide_async`)."""
        assert self.prompt is not None, "adecide() needs a turn: call observe() first"
        return await decide_async(self.policy, self.view(), self.prompt.context)

    def apply(self, reply: PolicyReply) -> None:
        """Account for the reply (tokens, latency, failures), let the realtime world move on, parse
        it, execute the action (or answer with a correction turn), decide whether the episode ends,
        and record the turn."""
        assert self.prompt is not None and not self.over, "apply() needs a turn: call observe() first"
        cfg, env, result, record = self.config, self.env, self._result, self._line
        turn = self.turn
        self.prompt = None
        record.update(
            reply=reply.text,
            latency_s=reply.latency_s,
            usage=reply.usage,
            policy_info=reply.info or None,
        )
        if reply.tokens is not None:
            record["tokens"] = reply.tokens.to_json()
        if reply.usage:
            result.prompt_tokens += int(reply.usage.get("prompt_tokens", 0))
            result.completion_tokens += int(reply.usage.get("completion_tokens", 0))
            if reply.usage.get("total_tokens"):
                self._context_tokens = int(reply.usage["total_tokens"])
                result.last_total_tokens = self._context_tokens
        info = reply.info or {}
        result.retries += int(info.get("retries", max(0, len(info.get("attempts", [])) - 1)))
        record["context_tokens"] = self._context_tokens
        if reply.error:  # no reply: not a turn, and not a decision time
            result.policy_failures += 1
            result.failed_latencies_s.append(float(info.get("decision_s", reply.latency_s)))
            # the client says "context_budget" when the server's context is full
            reason = info.get("end_reason") if info.get("end_reason") in END_REASONS else "policy_error"
            self._end(reason, reply.error)
            self.record(record | {"error": reply.error, "end": result.end_reason})
            return
        result.latencies_s.append(reply.latency_s)
        answer: Message = {"role": "assistant", "content": reply.text}
        self.messages.append(answer)
        self._context_tokens += len(reply.text) // 4 if not reply.usage else 0
        if cfg.mode == "realtime" and turn > 1:
            # the world moved on while the policy decided; the last command stayed in force
            # the whole decision, failed attempts and backoff included: the world did not wait
            measured = float(info.get("decision_s", reply.latency_s))
            lag = measured if cfg.latency_s is None else cfg.latency_s
            with env_step("advance", turn):
                env.advance(lag)
            result.advanced_s += lag
            record["advanced_s"] = lag
        result.turns = turn
        reason = None
        try:
            if reply.command is None:
                action = env.parse(reply.text)
            else:  # a policy that speaks setpoints (LeRobot): only an environment that takes them
                parse_command = getattr(env, "parse_command", None)
                if parse_command is None:
                    raise ActionError(f"this environment takes no setpoint commands ({type(env).__name__})")
                action = parse_command(reply.command)
        except ActionError as exc:
            reason = str(exc)
        except Exception as exc:  # a parser bug: the reply stays in the log, the run goes on
            reason = f"the reply could not be read ({type(exc).__name__}); end it with one JSON action"
            record["parser_exception"] = f"{type(exc).__name__}: {exc}"[:500]
        if reason is not None:  # a correction turn
            self._invalid_run += 1
            result.invalid_replies += 1
            self._feedback = correction_text(reason, self._invalid_run, cfg.max_invalid)
            record.update(
                error=reason,
                outcome={"status": "invalid", "detail": reason, "invalid_in_a_row": self._invalid_run},
                sim_time_s=env.time_s(),
                success=False,
            )
            self._report(turn, "nothing (no valid action)", "invalid", env.time_s(), False)
            if self._invalid_run >= cfg.max_invalid:
                last = f"{self._invalid_run} invalid replies in a row; last: {reason}"
                self._end("invalid_action", last)
            elif turn == self._max_turns:
                self._end("turn_limit", f"no success within {self._max_turns} turns")
            self.record(record | {"end": result.end_reason} if self.over else record)
            return
        self._invalid_run = 0
        record["action"] = action.to_json()
        if cfg.history is not None:  # its one-line form, once it is older than the window
            answer[LINE_KEY] = json.dumps(record["action"], separators=(",", ":"))
        with env_step("execute", turn):
            step = env.execute(action)
        record |= step.record
        if step.reward is not None:
            record["reward"] = result.reward = step.reward
        self._feedback = step.feedback
        result.sim_time_s = env.time_s()
        self._report(turn, step.executed, step.status, env.time_s(), step.success)
        if step.end:
            self._end(step.status, step.detail or step.feedback)  # type: ignore[arg-type]
        elif action.done:
            self._end("done", "the model declared the task done")
            result.success = step.success
        elif step.success:
            self._end("success", "the task's success check passed")
            result.success = True
        elif turn == self._max_turns:
            self._end("turn_limit", f"no success within {self._max_turns} turns")
        self.record(record | {"end": result.end_reason} if self.over else record)

    def record(self, line: dict[str, Any]) -> None:
        """One line of the episode's log (flushed at once), with the turn's control-rate recording
        (`--record-fps`: the frames since the previous line) saved beside it as `control`."""
        if self.writer is not None:
            if self._recording:
                arrays = self.env.take_recording()  # type: ignore[attr-defined]
                if arrays:
                    line = line | {
                        "control": self.writer.save_control(int(line.get("turn", self.turn)), arrays)
                    }
            self.writer.log(line)

    def finish(self) -> EpisodeResult:
        """The result: the environment's own verdict where it has one (hardware), wall and sim time,
        the summary written."""
        summary = self._conclude()
        if summary is not None:
            self.writer.finish(summary)  # type: ignore[union-attr]
        return self._result

    async def afinish(self) -> EpisodeResult:
        """`finish()`, with the video encoded in a thread (other episodes keep deciding meanwhile)."""
        summary = self._conclude()
        if summary is not None:
            writer = self.writer
            if writer is not None and writer.video is not None and writer.video.frames:
                await asyncio.to_thread(writer.finish, summary)
            elif writer is not None:
                writer.finish(summary)
        return self._result

    # -- helpers ---------------------------------------------------------------------------
    @property
    def _result(self) -> EpisodeResult:
        assert self.result is not None, "the episode has not begun: call begin(seed) first"
        return self.result

    def _conclude(self) -> dict[str, Any] | None:
        """Final fields of the result; the summary to write (None: nothing to write)."""
        result = self._result
        self.over = True
        if self._finished:  # aborted in begin(), or finished already
            return None
        self._finished = True
        verdict = None
        if result.end_reason in JUDGED_ENDINGS:
            verdict = self.env.judge_success(result.end_reason, result.detail)
        if verdict is not None:
            result.success, result.judged = bool(verdict), True
        result.wall_time_s = time.perf_counter() - self._wall0
        result.sim_time_s = self.env.time_s()
        if self.writer is None:
            return None
        result.run_dir = str(self.writer.run_dir)
        return result.to_json() | latency_summary(result)

    def _release_sink(self) -> None:
        if self._recording:
            self._recording = False
            self.env.start_recording(None)  # type: ignore[attr-defined]
        if self._sink_set:
            self._sink_set = False
            self.env.set_frame_sink(None)

    def _aborted(self, seed: int, exc: EpisodeAborted) -> EpisodeResult:
        """The episode ended in the backend's reset: no decision was asked for."""
        cfg, env = self.config, self.env
        try:
            task_name = env.task.name
        except Exception:  # the task may not be known when the reset failed
            task_name = ""
        status = exc.status if exc.status in END_REASONS else "refused"
        result = self._new_result(
            seed,
            status,
            detail=exc.detail or str(exc),
            task=task_name,
            wall_time_s=time.perf_counter() - self._wall0,
        )
        if self.writer is not None:
            self.writer.log(
                {"kind": "header", "protocol": PROTOCOL_VERSION, "task": task_name, "robot": env.name}
                | {"seed": seed, "policy": self.policy.name, "mode": cfg.mode, "aborted": result.end_reason}
            )
            result.run_dir = str(self.writer.run_dir)
            self.writer.finish(result.to_json() | latency_summary(result))
        return result

    def _new_result(self, seed: int, end_reason: str, **fields: Any) -> EpisodeResult:
        """A result not yet successful, with what the loop's own config and the policy say."""
        cfg = self.config
        return EpisodeResult(
            False,
            0,
            end_reason,  # type: ignore[arg-type]
            robot=self.env.name,
            seed=seed,
            policy=self.policy.name,
            mode=cfg.mode,
            latency_injected_s=cfg.latency_s,
            max_invalid=cfg.max_invalid,
            **fields,
        )

    def _end(self, reason: str, detail: str) -> None:
        self.over = True
        self._result.end_reason = reason  # type: ignore[assignment]
        self._result.detail = detail

    def _report(self, turn: int, summary: str, outcome: str, sim_time_s: float, success: bool) -> None:
        if self.on_turn is not None:
            self.on_turn(TurnRecord(turn, summary, outcome, sim_time_s, success))
