"""`pear-agent train sft|grpo|collect|pick|eval|serve|recipes`: one subcommand per job."""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pear_agent.policies.model_settings import ModelSettings
from pear_agent.settings import add_arguments
from pear_agent.train.config import Recipe, _set, load_recipe, recipe_names
from pear_agent.train.evaluate import eval_draws, evaluate, pick_checkpoint, summarize
from pear_agent.train.grpo import GRPOTrainer
from pear_agent.train.sft import run_sft
from pear_agent.train.teacher import collect_teacher


def _recipe_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--recipe", default="roadster_study", help="a recipe name (see `train recipes`) or a YAML path"
    )
    p.add_argument("--profile", default=None, help="a profile of the recipe, e.g. cpu (SmolLM2-135M)")
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a field, e.g. grpo.steps=3"
    )
    p.add_argument("--out", default=None, help="output folder (default runs/train-<kind>-<stamp>)")


def _training_args(p: argparse.ArgumentParser, init_help: str, merge_help: str) -> None:
    """The options of a job that trains: the recipe's, where it starts and how it saves."""
    _recipe_args(p)
    p.add_argument("--init", default=None, help=init_help)
    p.add_argument("--merge", action="store_true", help=merge_help)
    p.add_argument(
        "--resume",
        default=None,
        metavar="RUN",
        help="continue RUN exactly from its newest checkpoint (its recipe.json; --set applies on top)",
    )


def _recipe(args: argparse.Namespace) -> Any:
    return load_recipe(args.recipe, args.profile, args.set)


def _out(args: argparse.Namespace, kind: str) -> Path:
    return Path(args.out or f"runs/train-{kind}-{time.strftime('%Y%m%d-%H%M%S')}")


def _need_train_extra() -> None:
    missing = [
        m
        for m in ("torch", "transformers", "peft", "trl", "accelerate")
        if importlib.util.find_spec(m) is None
    ]
    if missing:
        raise ValueError(
            f"training needs {', '.join(missing)}: bash scripts/setup.sh --train (CPU torch on a CPU machine)"
        )


def cmd_sft(args: argparse.Namespace) -> int:
    _need_train_extra()

    if args.resume and args.init:
        raise ValueError("--resume continues a run from its own checkpoint: leave --init out")
    recipe = _resumed_recipe(args) if args.resume else _recipe(args)
    res = run_sft(
        recipe,
        Path(args.resume) if args.resume else _out(args, "sft"),
        data=args.data or None,
        init=args.init,
        max_steps=args.max_steps,
        merge=args.merge,
        resume=bool(args.resume),
    )
    print(
        f"sft: {res.episodes} episodes ({res.tokens} tokens, {res.reply_tokens} in replies) "
        f"in {res.seconds:.0f} s; "
        f"loss {res.losses[0]:.3f} -> {res.losses[-1]:.3f}; checkpoint: {res.out}"
        if res.losses
        else f"sft: checkpoint {res.out}"
    )
    return 0


def _resumed_recipe(args: argparse.Namespace) -> Any:
    """The recipe a run was started with (RUN/recipe.json), `--set` applied on top (e.g. more steps)."""

    path = Path(args.resume) / "recipe.json"
    if not path.is_file():
        raise ValueError(f"--resume {args.resume}: no recipe.json there (not a pear-agent training run)")
    doc = json.loads(path.read_text(encoding="utf-8"))
    for s in args.set:
        _set(doc, s)
    try:
        return Recipe.model_validate(doc)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ValueError(f"{path}: {'.'.join(str(x) for x in err['loc'])}: {err['msg']}") from None


def cmd_grpo(args: argparse.Namespace) -> int:
    _need_train_extra()

    if args.resume:
        if args.init:
            raise ValueError("--resume continues a run from its own checkpoint: leave --init out")
        trainer = GRPOTrainer(_resumed_recipe(args), Path(args.resume), resume=True)
        print(f"grpo: resuming {args.resume} at step {trainer.start_step + 1}")
    else:
        trainer = GRPOTrainer(_recipe(args), _out(args, "grpo"), init=args.init)
    reports = trainer.train(steps=args.steps, merge=args.merge)
    print(f"grpo: {len(reports)} steps; metrics: {trainer.out / 'metrics.jsonl'}")
    return 0


def cmd_collect(args: argparse.Namespace) -> int:
    """Teacher flights for the warm start: temperature 0 (the scripted teacher without jitter), every
    flight kept (no group filter), the mix's bands, weights and scenario filters."""

    recipe = _recipe(args)
    out = _out(args, "teacher")
    summary = collect_teacher(
        recipe,
        out,
        episodes=args.episodes,
        base_url=args.base_url,
        model=args.model,
        api_key_env=args.api_key_env,
    )
    print(
        json.dumps(summary)
        if args.json
        else f"teacher: {summary['written']} of {summary['flown']} flights written to {out}"
    )
    return 0


def cmd_pick(args: argparse.Namespace) -> int:
    _need_train_extra()

    pick = pick_checkpoint(Path(args.run), _recipe(args))
    print(f"picked {pick['picked']} (validation: {json.dumps(pick['scores'][Path(pick['picked']).name])})")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    _need_train_extra()

    recipe = _recipe(args)
    draws = eval_draws(recipe, args.split, args.episodes)
    out = Path(args.results)
    lines = evaluate(args.model, draws, recipe, out, temperature=args.temperature)
    print(f"{args.model} on {args.split}: {json.dumps(summarize(lines))}; results: {out}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    _need_train_extra()
    from pear_agent.train.serve_model import serve_checkpoint  # heavy: fastapi

    serve_checkpoint(
        args.model,
        host=args.host,
        port=args.port,
        max_new_tokens=args.max_new_tokens,
        max_lora_rank=args.max_lora_rank,
    )
    return 0


def cmd_recipes(args: argparse.Namespace) -> int:
    for name in recipe_names():
        r = load_recipe(name)
        print(f"{name}: {r.description} (model {r.model.name}; profiles: {', '.join(r.profiles) or 'none'})")
    return 0


def add_parser(sub: Any) -> None:
    """The `train` subcommand (one line in pear_agent.cli hooks it in)."""
    p = sub.add_parser("train", help="train a model: warm start (sft) and GRPO over whole episodes")
    tsub = p.add_subparsers(dest="train_command", required=True)

    s = tsub.add_parser("sft", help="warm start on recorded episodes (loss on the model's replies only)")
    _training_args(s, "continue from a checkpoint", "save the adapter merged into the base model")
    s.add_argument(
        "--data", nargs="*", default=None, help="run / bench / rollout folders (default: the recipe's)"
    )
    s.add_argument("--max-steps", type=int, default=None, help="stop after N optimizer steps")
    s.set_defaults(func=cmd_sft)

    g = tsub.add_parser("grpo", help="GRPO over whole episodes, rollouts through the episode loop")
    _training_args(
        g, "start from a checkpoint (e.g. the warm start's)", "save checkpoints merged into the base model"
    )
    g.add_argument("--steps", type=int, default=None, help="override grpo.steps")
    g.set_defaults(func=cmd_grpo)

    c = tsub.add_parser("collect", help="teacher flights for the warm start (temperature 0, no group filter)")
    _recipe_args(c)
    c.add_argument("--episodes", type=int, default=None, help="override teacher.episodes")

    add_arguments(  # a second teacher: the served model flies teacher.served_mix, its landings are kept
        c.add_argument_group("second teacher (the study: gale and storm kickflips a served model landed)"),
        ModelSettings,
        only=("model", "base_url", "api_key_env"),
    )
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_collect)

    k = tsub.add_parser("pick", help="fly every checkpoint of a run on validation seeds and pick one")
    _recipe_args(k)
    k.add_argument("--run", required=True, help="the grpo output folder")
    k.set_defaults(func=cmd_pick)

    e = tsub.add_parser("eval", help="fly a model or checkpoint on val/test seeds (bench-style results)")
    _recipe_args(e)
    e.add_argument("--model", required=True, help="a checkpoint folder, smollm2, or a model folder")
    e.add_argument("--split", default="test", choices=["val", "test"])
    e.add_argument("--episodes", type=int, default=None, help="per task and band (default: the recipe's)")
    e.add_argument("--temperature", type=float, default=0.0)
    e.add_argument("--results", required=True, help="results.jsonl to write (pear-agent compare reads it)")
    e.set_defaults(func=cmd_eval)

    v = tsub.add_parser("serve", help="serve a checkpoint as an OpenAI-compatible endpoint for run/bench")
    v.add_argument("model", help="a checkpoint folder (adapter or merged), smollm2, or a model folder")
    v.add_argument("--host", default="127.0.0.1")
    v.add_argument("--port", type=int, default=8000)
    v.add_argument("--max-new-tokens", type=int, default=64)
    v.add_argument("--max-lora-rank", type=int, default=16, help="refuse adapters of a higher rank (vLLM's)")
    v.set_defaults(func=cmd_serve)

    r = tsub.add_parser("recipes", help="list the packaged recipes")
    r.set_defaults(func=cmd_recipes)
