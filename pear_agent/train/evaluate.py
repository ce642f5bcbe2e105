"""Fly a model (base, checkpoint) on fixed seeds through the ONE loop and write bench-style result
lines (`key` = task/s<seed>), so `pear-agent compare` pairs two evaluations; pick a checkpoint on
validation seeds."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from pear_agent.bench.report import end_reasons
from pear_agent.bench.runner import episode_key
from pear_agent.loop.registry import family_of
from pear_agent.train.batched import BatchedGenerator
from pear_agent.train.config import MixEntry, Recipe
from pear_agent.train.episodes import TrainJob, run_episodes
from pear_agent.train.local_model import make_local_policy
from pear_agent.train.mix import Draw, TaskMix
from pear_agent.train.model_files import load_model
from pear_agent.train.vision import is_processor, text_tokenizer


def eval_draws(recipe: Recipe, split: str, episodes: int | None = None) -> list[Draw]:
    """Validation: `eval.val_episodes` per task of `eval.val_tasks` (else `eval.tasks`, else the last
    stage's mix); test: `eval.test_episodes[band]` per roadster band, or `episodes` per task."""
    tasks = recipe.eval.tasks or [e.task for e in recipe.grpo.stages[-1].mix]
    if split == "val" and recipe.eval.val_tasks:
        tasks = recipe.eval.val_tasks
    entries: list[tuple[MixEntry, int]] = []
    for t in dict.fromkeys(tasks):
        if split == "test" and family_of(t).name == "roadster" and ":" not in t:  # per wind band
            for band, n in recipe.eval.test_episodes.items():
                entries.append((MixEntry(task=f"{t}:{band}"), episodes or n))
        else:
            entries.append((MixEntry(task=t), episodes or recipe.eval.val_episodes))
    out = []
    for entry, n in entries:
        out += TaskMix([entry], split).fixed(n)
    return out


def evaluate(
    model_name: str,
    draws: list[Draw],
    recipe: Recipe,
    results: Path,
    temperature: float = 0.0,
    log: Any = print,
    loaded: tuple[Any, Any] | None = None,
    append: bool = False,
    in_flight: int | None = None,
    sampling_seed: int | None = None,
) -> list[dict[str, Any]]:
    """Greedy episodes (temperature 0 by default) of a model; one result line per episode.
    `loaded`: the (model, tokenizer) already in memory; `append`: add to the results file;
    `in_flight`: episodes flown at once, their turns decoded together by one batched generator
    (`train.batched`, on the model's device: the GPU when there is one); None: all of them.
    `sampling_seed`: at a temperature above 0, every flight samples from (this seed, its episode
    seed, the turn), so two models, or two runs over ranges that share a seed, draw that seed's
    flight from the same stream; None: the seed is the flight's index in `draws`."""

    model, tok = loaded or load_model(model_name, dtype=recipe.model.dtype)
    model.eval()
    jobs = [TrainJob(d.task, d.seed, index_in_group=i) for i, d in enumerate(draws)]
    n_flight = max(1, min(in_flight or len(jobs), len(jobs)))
    # a vision-language model's turns carry pixels: its policies decode alone (no shared generator)
    gen = None if is_processor(tok) else BatchedGenerator(model, pad_id=text_tokenizer(tok).pad_token_id or 0)
    ended = [0]

    def live() -> None:
        """Lockstep: a batch starts once every episode in flight waits on the generator."""
        if gen is not None:
            gen.expect(min(n_flight, len(jobs) - ended[0]))

    def make(job: TrainJob) -> Any:
        return make_local_policy(
            model,
            tok,
            temperature=temperature,
            max_new_tokens=recipe.model.max_new_tokens,
            name=f"local:{model_name}",
            seed=job.index_in_group if sampling_seed is None else sampling_seed,
            generator=gen,
        )

    opts = recipe.episode_config()
    results = Path(results)
    results.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    with results.open("a" if append else "w", encoding="utf-8") as f:

        def write(job: TrainJob, rec: dict[str, Any]) -> None:
            ended[0] += 1
            live()
            line = {
                "key": episode_key(rec["task"], rec["seed"]),
                "task": rec["task"],
                "seed": rec["seed"],
                "policy": rec["policy"],
                "success": rec["success"],
                "reward": rec["shaped_reward"] if rec["shaped_reward"] is not None else rec["reward"],
                "end_reason": rec["end_reason"],
                "invalid_replies": rec["invalid_replies"],
                "robot": rec["robot"],
                "turns": rec["turns"],
                "latencies_s": rec["latencies_s"],
                "completion_tokens": rec["completion_tokens"],
                "wall_time_s": rec["wall_time_s"],
                "mode": rec["mode"],
            }
            f.write(json.dumps(line) + "\n")
            f.flush()
            lines.append(line | {"_job": job.index_in_group})  # returned in the draws' order
            log(
                f"  {line['key']}: {'success' if line['success'] else line['end_reason']} "
                f"reward {line['reward']:.3f}"
            )

        live()
        try:
            run_episodes(jobs, make, opts, on_record=write, concurrency=n_flight)
        finally:
            if gen is not None:
                gen.close()
    order = {id(x): i for i, x in enumerate(lines)}
    lines.sort(key=lambda x: (x["_job"], order[id(x)]))
    for x in lines:
        del x["_job"]
    return lines


def summarize(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """Success, mean reward, how the episodes ended (`end_reasons`, most frequent first), and the
    same success among the episodes in which every reply parsed (`all_valid`: control, not format;
    a line without `invalid_replies`, written before it was recorded, counts as unknown)."""
    if not lines:
        return {"episodes": 0}
    valid = [x for x in lines if x.get("invalid_replies") == 0]
    ok = int(sum(bool(x["success"]) for x in valid))
    return {
        "episodes": len(lines),
        "successes": int(sum(bool(x["success"]) for x in lines)),
        "success_rate": float(np.mean([bool(x["success"]) for x in lines])),
        "mean_reward": float(np.mean([x["reward"] for x in lines])),
        "end_reasons": end_reasons(lines),
        "all_valid": {
            "episodes": len(valid),
            "successes": ok,
            "success_rate": ok / len(valid) if valid else None,
            "unknown": sum(1 for x in lines if x.get("invalid_replies") is None),
        },
        "invalid_replies": int(sum(int(x.get("invalid_replies") or 0) for x in lines)),
        "mean_turns": float(np.mean([x["turns"] for x in lines])),
    }


def pick_checkpoint(run: Path, recipe: Recipe, log: Any = print) -> dict[str, Any]:
    """Fly every checkpoint of a run on the validation seeds; the best mean reward wins (ties: the
    earlier). Writes `pick.json` in the run folder."""
    run = Path(run)
    ckpts = sorted(p for p in run.glob("checkpoint-*") if p.is_dir())
    if not ckpts:
        raise ValueError(f"{run}: no checkpoint-* folders")
    draws = eval_draws(recipe, "val")
    scores = {}
    for c in ckpts:
        t0 = time.perf_counter()
        log(f"validation: {c.name} on {len(draws)} episodes")
        lines = evaluate(str(c), draws, recipe, c / "val_results.jsonl", log=log)
        scores[c.name] = summarize(lines) | {"seconds": time.perf_counter() - t0}
    best = max(ckpts, key=lambda c: (scores[c.name]["mean_reward"], -ckpts.index(c)))
    pick = {"picked": str(best), "scores": scores}
    (run / "pick.json").write_text(json.dumps(pick, indent=2), encoding="utf-8")
    return pick
