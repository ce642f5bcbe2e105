"""Teacher flights for the warm start, as the study collected them: the scripted teacher at
"temperature 0" (no per-flight jitter), every flight flown once and kept (no group filter: a
teacher's single flights have no group), drawn from the recipe's teacher mix (bands, weights,
scenario filters such as slow approaches). Written as a trajectory folder `train sft` reads.

A second teacher is any model behind an OpenAI-compatible endpoint (`--base-url`, `--model`): it
flies the recipe's `teacher.served_mix` (the study: gale and storm kickflips, which the scripted
pilot's light-wind flights do not teach), paused, on training seeds, and only its landed flights are
kept. The recipe's `sft.data` names both folders, so the warm start mixes them as the study did."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pear_agent.loop.registry import PolicyAsk, family_of
from pear_agent.policies.model_settings import ModelSettings
from pear_agent.policies.openai_client import OpenAIPolicy
from pear_agent.policies.relative_pick import RelativePickPolicy
from pear_agent.rl.trajectories import TrajectoryWriter
from pear_agent.train.config import Recipe
from pear_agent.train.episodes import TrainJob, run_episodes
from pear_agent.train.mix import TaskMix


def teacher_policy(task: str, kind: str = "scripted") -> Any:
    """The task's family's scripted policy, without jitter; `relative_pick`: the rule that copies
    the relative line (`RelativePickPolicy`)."""
    if kind == "relative_pick":
        return RelativePickPolicy()
    return family_of(task).default_policy(task, ask=PolicyAsk(seed=0))


def served_policy(base_url: str, model: str, api_key_env: str | None = None) -> Any:
    """A model behind an endpoint as the teacher: greedy (temperature 0), as a teacher flies."""
    return OpenAIPolicy(
        ModelSettings(model=model, base_url=base_url, api_key_env=api_key_env, temperature=0.0)
    )


def collect_teacher(
    recipe: Recipe,
    out: Path,
    episodes: int | None = None,
    base_url: str | None = None,
    model: str | None = None,
    api_key_env: str | None = None,
) -> dict[str, Any]:
    """Teacher flights into `out`: the scripted teacher on `teacher.mix`, or, with `base_url` and
    `model`, the served model on `teacher.served_mix` (its landed flights only)."""
    t = recipe.teacher
    if (base_url is None) != (model is None):
        raise ValueError("a served teacher needs both --base-url and --model")
    if base_url is not None:
        mix_entries = t.served_mix or t.mix or recipe.grpo.stages[0].mix
        # other training seeds than the scripted teacher's draws (its mix starts at seed sft.seed)
        mix = TaskMix(mix_entries, "train", seed=recipe.sft.seed + 1)
        n = episodes or t.served_episodes
        served = served_policy(base_url, model, api_key_env)  # type: ignore[arg-type]

        def make(job: TrainJob) -> Any:
            return served
    else:
        mix_entries = t.mix or recipe.grpo.stages[0].mix
        mix = TaskMix(mix_entries, "train", seed=recipe.sft.seed)
        n = episodes or t.episodes

        def make(job: TrainJob) -> Any:
            return teacher_policy(job.task, t.policy)

    successes_only = t.successes_only or base_url is not None
    draws = [mix.draw() for _ in range(n)]
    opts = recipe.episode_config(teacher=True)
    written = 0
    per_task: dict[str, list[int]] = {}
    old = Path(out) / "trajectories.jsonl"
    if old.is_file():  # a collection replaces an earlier one in the same folder (never mixes with it)
        old.unlink()
    with TrajectoryWriter(Path(out)) as writer:

        def keep(job: TrainJob, rec: dict[str, Any]) -> None:
            nonlocal written
            s = per_task.setdefault(rec["task"], [0, 0])
            s[0] += 1
            s[1] += int(rec["success"])
            if rec["success"] or not successes_only:
                rec = dict(rec)
                rec.pop("completion_tokens", None)
                rec.pop("wall_time_s", None)
                if rec["shaped_reward"] is not None:
                    rec["reward"] = rec["shaped_reward"]
                writer.write(rec)
                written += 1

        jobs = [TrainJob(d.task, d.seed, group_id=f"teacher{i:04d}") for i, d in enumerate(draws)]
        run_episodes(jobs, make, opts, on_record=keep)
    summary = {
        "teacher": f"{model} at {base_url}" if base_url else t.policy,
        "flown": n,
        "written": written,
        "tasks": {k: {"flown": v[0], "landed": v[1]} for k, v in per_task.items()},
    }
    (Path(out) / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return summary
