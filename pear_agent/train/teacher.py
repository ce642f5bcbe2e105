"""Teacher flights for the warm start, as the study collected them: the scripted teacher at
"temperature 0" (no per-flight jitter), every flight flown once and kept (no group filter: a
teacher's single flights have no group), drawn from the recipe's teacher mix (bands, weights,
scenario filters such as slow approaches). Written as a trajectory folder `train sft` reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pear_agent.train.config import Recipe
from pear_agent.train.mix import TaskMix
from pear_agent.train.rollout import LoopOptions, TrainJob, run_episodes


def teacher_policy(task: str) -> Any:
    """The task's family's scripted policy, without jitter."""
    from pear_agent.registry import family_of

    return family_of(task).default_policy(task, seed=0, action_noise_cm=0.0, pilot_noise=0.0)


def collect_teacher(recipe: Recipe, out: Path, episodes: int | None = None) -> dict[str, Any]:
    from pear_agent.rl.trajectories import TrajectoryWriter

    t = recipe.teacher
    mix_entries = t.mix or recipe.grpo.stages[0].mix
    mix = TaskMix(mix_entries, "train", seed=recipe.sft.seed)
    n = episodes or t.episodes
    draws = [mix.draw() for _ in range(n)]
    opts = LoopOptions(observation=recipe.observation, scene_facts=recipe.scene_facts)
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
            if rec["success"] or not t.successes_only:
                rec = dict(rec)
                rec.pop("completion_tokens", None)
                rec.pop("wall_time_s", None)
                if rec["shaped_reward"] is not None:
                    rec["reward"] = rec["shaped_reward"]
                writer.write(rec)
                written += 1

        jobs = [TrainJob(d.task, d.seed, group_id=f"teacher{i:04d}") for i, d in enumerate(draws)]
        run_episodes(jobs, lambda job: teacher_policy(job.task), opts, on_record=keep)
    summary = {
        "flown": n,
        "written": written,
        "tasks": {k: {"flown": v[0], "landed": v[1]} for k, v in per_task.items()},
    }
    (Path(out) / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return summary
