"""pear-agent as a skyrl-gym text environment (`skyrl_gym.make("pear_agent", ...)`), for SkyRL.

SkyRL's rollout loop calls `init(prompt)` for the first chat messages, then `step(model_text)`
each turn until `done`, then `close()`. Here the episode is the real turn loop
(`pear_agent.loop.episode.Episode`, the same code as `pear-agent run`) running in a thread that owns its
simulator; its policy is a channel: each `act` hands the conversation to `step`'s caller and waits
for the model's reply. So parsing, clipping, IK, physics, termination and success are exactly
those of `pear-agent run`, and the final reward equals its success for the same seed.

Configuration (env_config, and per-sample `extras` / `extras["extra_info"]`, later ones win):
`task` (default pick_cube), `seed` (0), `robot`, `max_turns`, `render` (True), `mode` (paused),
`text_only` (False: user messages carry OpenAI image parts with JPEG data URLs; True: the text
parts joined into one string, for text-only models), `timeout_s` (600, a step's wait limit).
SkyRL's generator puts its `max_turns` into `extras`: it caps the episode below the task's limit.
Reward: 0.0 on every turn, then 1.0 on the final step if the task succeeded, else 0.0.
"""

from __future__ import annotations

import copy
import queue
import threading
import time
from typing import Any

from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

from pear_agent.loop import family_parts
from pear_agent.loop.episode import Episode, EpisodeConfig
from pear_agent.loop.registry import close_environment, family_of, make_environment, resolve
from pear_agent.policies.base import PolicyReply, TurnContext
from pear_agent.protocol.prompts import Message

ENV_ID = "pear_agent"
_CLOSE = object()
KEYS = ("task", "seed", "robot", "max_turns", "render", "mode", "text_only", "timeout_s")


def _as_dict(obj: Any) -> dict[str, Any]:
    if obj is None:
        return {}
    if isinstance(obj, dict):
        return obj
    try:  # an OmegaConf DictConfig (SkyRL's config) or any mapping
        return dict(obj)
    except (TypeError, ValueError):
        return {}


class _ChannelPolicy:
    """The episode's policy: hands each turn to `step`'s caller and waits for the model's reply."""

    name = "skyrl"

    def __init__(self, events: queue.Queue, replies: queue.Queue) -> None:
        self.events, self.replies = events, replies

    def reset(self, seed: int) -> None:
        pass

    def act(self, messages: list[Message], ctx: TurnContext) -> PolicyReply:
        t0 = time.perf_counter()
        self.events.put(("act", len(messages), ctx))
        reply = self.replies.get()
        if reply is _CLOSE:
            return PolicyReply("", error="the environment was closed before the episode ended")
        return PolicyReply(str(reply), latency_s=time.perf_counter() - t0)


class PearAgentEnv(BaseTextEnv):
    """One pear-agent episode per instance (SkyRL makes an environment per trajectory)."""

    def __init__(self, env_config: Any = None, extras: dict[str, Any] | None = None) -> None:
        super().__init__()
        extras = _as_dict(extras)
        cfg: dict[str, Any] = {}
        for src in (_as_dict(env_config), extras, _as_dict(extras.get("extra_info"))):
            cfg.update({k: v for k, v in src.items() if k in KEYS and v is not None})

        self.task = str(cfg.get("task", "pick_cube"))
        resolve(self.task)  # unknown task (or wind band): a one-line error now, not in the thread
        self.seed = int(cfg.get("seed", 0))
        self.robot = cfg.get("robot")
        self.max_turns_override = int(cfg["max_turns"]) if cfg.get("max_turns") else None
        self.render = bool(cfg.get("render", True))
        self.mode = str(cfg.get("mode", "paused"))
        self.text_only = bool(cfg.get("text_only", False))
        self.timeout_s = float(cfg.get("timeout_s", 600.0))
        self._events: queue.Queue = queue.Queue()
        self._replies: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._episode: Any = None
        self._sent = 0
        self.context: TurnContext | None = None
        """The current turn's facts, privileged ones included (for a teacher such as the scripted
        expert; never part of the observations)."""
        self.result: Any = None
        self._env: Any = None
        self.done = False

    # -- the episode thread -----------------------------------------------------------
    def _run(self) -> None:
        env = None
        try:
            policy = _ChannelPolicy(self._events, self._replies)
            config = EpisodeConfig(max_turns=self.max_turns_override, mode=self.mode)  # type: ignore[arg-type]
            options = {"robot": self.robot} if self.robot else {}
            env = self._env = make_environment(
                self.task, mode=self.mode, render=self.render, config=config, **options
            )
            self._episode = Episode(env, policy, config)
            self._events.put(("done", self._episode.run(self.seed)))
        except BaseException as exc:  # reported to the caller of init/step
            self._events.put(("error", exc))
        finally:
            if env is not None:
                close_environment(env)

    def _next(self) -> tuple[Any, ...]:
        try:
            event = self._events.get(timeout=self.timeout_s)
        except queue.Empty:
            raise TimeoutError(
                f"pear-agent episode gave no observation within {self.timeout_s:.0f} s"
            ) from None
        if event[0] == "error":
            raise RuntimeError(f"pear-agent episode failed: {event[1]}") from event[1]
        return event

    def _render(self, messages: list[Message]) -> list[Message]:
        out = copy.deepcopy(messages)
        if self.text_only:
            for m in out:
                if isinstance(m["content"], list):
                    m["content"] = "\n".join(c["text"] for c in m["content"] if c.get("type") == "text")
        return out

    # -- skyrl-gym contract -----------------------------------------------------------
    def init(self, prompt: list[Message] | None = None) -> tuple[list[Message], dict[str, Any]]:
        """Start the episode; the dataset's prompt is replaced by the system prompt and turn 1."""
        self._thread = threading.Thread(
            target=self._run, name=f"pear-agent-{self.task}-s{self.seed}", daemon=True
        )
        self._thread.start()
        event = self._next()
        if event[0] == "done":  # ended before the first decision (e.g. a tiny context budget)
            self._finish(event[1])
            return self._render(self._episode.messages), self._metadata()
        _, n, self.context = event
        self._sent = n
        self.max_turns = self.max_turns_override or self._episode.env.task.max_turns
        return self._render(self._episode.messages[:n]), {"task": self.task, "seed": self.seed}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        if self.done or self._thread is None:
            return BaseTextEnvStepOutput(observations=[], reward=0.0, done=True, metadata=self._metadata())
        self.turns += 1
        self._replies.put(action)
        event = self._next()
        if event[0] == "done":
            self._finish(event[1])

            # the family's reward: success for the arm tasks, the roadster's shaped one in [0, 1]
            reward, _ = family_parts.rewards(family_of(self.task), self._env, self.result)
            return BaseTextEnvStepOutput(observations=[], reward=reward, done=True, metadata=self._metadata())
        _, n, self.context = event
        # the loop appended our reply (assistant) and the next user turn: return what follows the reply
        new = self._episode.messages[self._sent + 1 : n]
        self._sent = n
        return BaseTextEnvStepOutput(observations=self._render(new), reward=0.0, done=False, metadata={})

    def _finish(self, result: Any) -> None:
        self.result, self.done = result, True
        if self._thread is not None:
            self._thread.join(timeout=60)

    def _metadata(self) -> dict[str, Any]:
        r = self.result
        if r is None:
            return {}
        return {"success": r.success, "end_reason": r.end_reason, "detail": r.detail, "turns": r.turns}

    def get_metrics(self) -> dict[str, Any]:
        r = self.result
        return {} if r is None else {"success": float(r.success), "turns": r.turns}

    def close(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            self._replies.put(_CLOSE)
            self._thread.join(timeout=60)
        self._thread = None


def register_env() -> None:
    """Register `pear_agent` with skyrl-gym's registry (idempotent; done on import)."""
    import skyrl_gym  # optional: skyrl_gym

    if ENV_ID not in skyrl_gym.registry:
        skyrl_gym.register(id=ENV_ID, entry_point="pear_agent.rl.skyrl_env:PearAgentEnv")


register_env()
