"""What a GRPO step works on and reports (`pear_agent.train.grpo`): a sampled group of episodes,
one step's rollouts, the step's report line, an episode's reward."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pear_agent.train.mix import Draw


@dataclass
class TrainingGroup:
    """A group the trainer drew from its mix and flew: its rewards, the filter's verdict and the
    advantages the update weighs its replies by."""

    draw: Draw
    records: list[dict[str, Any]]
    rewards: list[float]
    verdict: str
    advantages: list[float] = field(default_factory=list)


@dataclass
class Collected:
    """One step's rollouts: which weights sampled them and when they flew."""

    step: int
    version: int
    kept: list[TrainingGroup]
    sampled: list[TrainingGroup]
    t0: float
    t1: float


@dataclass
class StepReport:
    step: int
    version: int
    stage: str
    groups_sampled: int
    groups_kept: int
    dropped: dict[str, int]
    mean_reward: float
    """Over every episode the step flew (kept and dropped groups): the policy's own groups."""
    success_rate: float
    loss: float
    generated_tokens: int
    trained_tokens: int
    logprob_drift: float | None
    """max |log p - log mu| over every generated token with a recorded log mu (on-policy ones
    against the trained weights, stale ones against the snapshot that sampled them): float noise
    when the trainer sees exactly the tokens and distribution that sampled them; None when no token
    could be compared."""
    drift_tokens: int
    rollout_s: float
    update_s: float
    step_s: float
    tokens_per_s: float
    """Generated tokens per second of rollout."""
    peak_rss_mb: float
    sampler_version: int = 0
    """The weights that sampled this step's rollouts (version - rollout_lag or newer)."""
    overlapped_s: float = 0.0
    """Seconds of this step's rollouts that ran while an update trained (rollout_lag > 0)."""
    grad_norm: float | None = None
    """The gradient's norm before clipping (`grpo.max_grad_norm`); None when nothing was trained."""
    learning_rate: float | None = None
    """The rate this step's update used (the schedule after its warmup)."""
    entropy: float | None = None
    """Mean entropy of the trained policy at the generated tokens (nats)."""
    kl: float | None = None
    """Mean k3 estimate of KL(pi || initial policy) at the generated tokens, before the update."""
    clipped_fraction: float | None = None
    """Generated tokens whose ratio pi/mu left [1 - clip_eps, 1 + clip_eps] (`grpo.clip_eps` set)."""
    reply_tokens_mean: float = 0.0
    reply_tokens_max: int = 0
    task_success: dict[str, float] = field(default_factory=dict)
    """Success rate per task over every episode the step flew."""
    val_success: dict[str, float] | None = None
    """Validation success per task (`grpo.eval_every` steps), greedy, every flight in flight at once."""
    episodes: str | None = None
    """The folder holding the episodes this step kept (`grpo.keep_episodes`)."""
    checkpoint: str | None = None


def reward_of(record: dict[str, Any], kind: str) -> float:
    if kind == "shaped" and record.get("shaped_reward") is not None:
        return float(record["shaped_reward"])
    return 1.0 if record["success"] else 0.0
