"""Does training move the needle? Base SmolLM2-135M vs warm-started vs warm-started + a few GRPO
steps, on paired held-out test seeds of the light ramp flip (the shortest roadster stunt), all on
CPU with the `roadster_study` recipe's `cpu` profile.

    nice -n 10 python benchmarks/train_signal.py --out runs/train-signal --teacher 12 --test 24 --grpo-steps 2

Phases (each writes its part of `<out>/train_signal.json` as soon as it ends, so a run cut short
still reports what it measured): teacher flights (scripted pilot, no jitter) -> warm start (LoRA,
one epoch, TRL) -> test flights of the warm start and of the base (greedy, paused) -> GRPO steps
from the warm start -> test flights of the GRPO checkpoint. Success, mean reward, exact paired
(McNemar) p-values, seconds per step, generated tokens per second, peak memory (max RSS).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from _common import emit, machine


def paired(a: list[dict], b: list[dict]) -> dict:
    from pear_agent.bench.stats import mcnemar_exact

    ka = {x["key"]: x for x in a}
    kb = {x["key"]: x for x in b}
    shared = sorted(set(ka) & set(kb))
    only_a = sum(1 for k in shared if ka[k]["success"] and not kb[k]["success"])
    only_b = sum(1 for k in shared if kb[k]["success"] and not ka[k]["success"])
    return {
        "shared": len(shared),
        "a_only": only_a,
        "b_only": only_b,
        "mcnemar_p": mcnemar_exact(only_a, only_b),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/train-signal")
    ap.add_argument("--teacher", type=int, default=12, help="teacher flights (train seeds)")
    ap.add_argument("--test", type=int, default=24, help="paired test seeds of the light ramp flip")
    ap.add_argument("--grpo-steps", type=int, default=2)
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--groups", type=int, default=1, help="groups per GRPO step")
    ap.add_argument("--max-new-tokens", type=int, default=64, help="the teacher's replies run to 54 tokens")
    ap.add_argument("--sft-checkpoint", default=None, help="reuse this warm start (skip teacher and SFT)")
    args = ap.parse_args()

    from pear_agent.train.config import load_recipe
    from pear_agent.train.evaluate import eval_draws, evaluate, summarize
    from pear_agent.train.grpo import GRPOTrainer
    from pear_agent.train.sft import peak_rss_mb, run_sft
    from pear_agent.train.teacher import collect_teacher

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report: dict = {"command": " ".join(sys.argv), "args": vars(args), "machine": machine()}
    path = out / "train_signal.json"

    def save() -> None:
        report["peak_rss_mb"] = peak_rss_mb()
        path.write_text(json.dumps(report, indent=2), encoding="utf-8")
        print(f"[train_signal] wrote {path}", file=sys.stderr, flush=True)

    def log(msg: str) -> None:
        print(f"[train_signal {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    sets = [
        f"model.max_new_tokens={args.max_new_tokens}",
        f"grpo.group_size={args.group_size}",
        f"grpo.groups_per_step={args.groups}",
        "grpo.reward=shaped",
    ]
    recipe = load_recipe("roadster_study", "cpu", sets)
    t0 = time.perf_counter()
    if not args.sft_checkpoint:
        teacher = collect_teacher(recipe, out / "teacher", episodes=args.teacher)
        report["teacher"] = teacher | {"seconds": time.perf_counter() - t0}
        log(f"teacher: {teacher}")
        save()

    if args.sft_checkpoint:  # a warm start already trained (e.g. by an earlier run of this script)
        sft_out = Path(args.sft_checkpoint)
        report["sft"] = json.loads((sft_out.parent / "sft_summary.json").read_text()) | {"reused": True}
    else:
        sft = run_sft(recipe, out / "sft", data=[str(out / "teacher")], log=log)
        sft_out = sft.out
        steps = max(1, len(sft.losses))
        report["sft"] = {
            "episodes": sft.episodes,
            "tokens": sft.tokens,
            "reply_tokens": sft.reply_tokens,
            "losses": sft.losses,
            "seconds": sft.seconds,
            "s_per_step": sft.seconds / steps,
            "checkpoint": str(sft.out),
        }
    log(f"sft: {report['sft']}")
    save()

    # paired: each test seed flown by the warm start and by the base, one after the other, so a run
    # cut short still holds pairs
    from pear_agent.train.model_files import load_model

    draws = eval_draws(recipe, "test", args.test)[: args.test]
    models = {"warm": (str(sft_out), load_model(str(sft_out))), "base": ("smollm2", load_model("smollm2"))}
    evals: dict[str, list] = {"warm": [], "base": []}
    spent = {"warm": 0.0, "base": 0.0}
    for i, draw in enumerate(draws):
        for label, (name, loaded) in models.items():
            t = time.perf_counter()
            evals[label] += evaluate(
                name, [draw], recipe, out / f"test_{label}.jsonl", log=log, loaded=loaded, append=i > 0
            )
            spent[label] += time.perf_counter() - t
            gen = sum(x["completion_tokens"] for x in evals[label])
            report[f"test_{label}"] = summarize(evals[label]) | {
                "seconds": spent[label],
                "generated_tokens": gen,
                "tokens_per_s": gen / spent[label] if spent[label] else None,
                "lines": evals[label],
            }
        report["warm_vs_base"] = paired(evals["warm"], evals["base"])
        save()

    if args.grpo_steps:
        trainer = GRPOTrainer(recipe, out / "grpo", init=str(sft_out), log=log)
        reps = trainer.train(steps=args.grpo_steps)
        report["grpo"] = [
            {
                k: getattr(r, k)
                for k in (
                    "step",
                    "groups_sampled",
                    "groups_kept",
                    "mean_reward",
                    "success_rate",
                    "loss",
                    "generated_tokens",
                    "trained_tokens",
                    "logprob_drift",
                    "rollout_s",
                    "update_s",
                    "step_s",
                    "tokens_per_s",
                    "peak_rss_mb",
                )
            }
            for r in reps
        ]
        save()
        ckpt = reps[-1].checkpoint
        t = time.perf_counter()
        lines = evaluate(ckpt, draws, recipe, out / "test_grpo.jsonl", log=log)
        report["test_grpo"] = summarize(lines) | {"seconds": time.perf_counter() - t}
        report["grpo_vs_warm"] = paired(lines, evals["warm"])
        report["grpo_vs_base"] = paired(lines, evals["base"])
        save()
    report["wall_s"] = time.perf_counter() - t0
    save()
    rows = []
    for label in ("base", "warm", "grpo"):
        s = report.get(f"test_{label}")
        if s:
            rows.append([label, f"{s.get('successes', 0)}/{s.get('episodes', 0)}", s.get("mean_reward", 0.0)])
    emit("train_signal", report, rows, ["model", "landed", "mean reward"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
