"""Roadster plans: the kickflip flown by the scripted pilot in realtime at 0.5 s and 1.0 s
per decision, light / gale / storm, plans of 5 and 10 intervals against single commands, on the same
test-split seeds (paired: exact McNemar test per band and decision time).

    PEAR_BENCH_TAG=issue29 nice -n 10 .venv/bin/python benchmarks/roadster_plans.py --flights 48

Variants: `single` (one command per reply: today's pilot), `single+lead` (one command, chosen for
the row the reply will land on: the pilot plans for its own decision time), `plan5` / `plan10`
(`--max-chunk 5` / `10`, with the same lead: while the next decision is made, the rest of the plan
flies). Realtime, the study's interval clock, injected latency (`--latency`), no rendering.
"""

from __future__ import annotations

import argparse
from typing import Any

import _common  # noqa: F401  (sets sys.path and MUJOCO_GL)
from _common import emit, machine

from pear_agent.bench.stats import mcnemar_exact, wilson
from pear_agent.loop.episode import Episode, EpisodeConfig
from pear_agent.loop.registry import EnvSpec, resolve
from sim_adapters.roadster.pilot import PilotPolicy

VARIANTS = {"single": (1, False), "single+lead": (1, True), "plan5": (5, True), "plan10": (10, True)}
TEST_SEED0 = 20_000


def fly(band: str, latency_s: float, variant: str, seeds: list[int]) -> list[dict[str, Any]]:
    k, lead = VARIANTS[variant]
    fam, task = resolve(f"roadster_kickflip:{band}", {})
    cfg = EpisodeConfig(mode="realtime", latency_s=latency_s, max_chunk=k)
    env = fam.make(EnvSpec.of(task, {}, mode="realtime", render=False, config=cfg))
    out = []
    try:
        for seed in seeds:
            res = Episode(env, PilotPolicy(lead_s=latency_s if lead else 0.0), cfg).run(seed)
            fields = env.result_fields()
            out.append(
                {
                    "seed": seed,
                    "landed": bool(res.success),
                    "turns": res.turns,
                    "sim_time_s": round(res.sim_time_s, 2),
                    "end_reason": res.end_reason,
                    "detail": res.detail,
                    "late_intervals": fields["clock"]["late_intervals"],
                    "plan": fields["plan"],
                }
            )
    finally:
        env.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flights", type=int, default=48, help=f"test seeds {TEST_SEED0}.. per cell")
    ap.add_argument("--bands", default="light,gale,storm")
    ap.add_argument("--latencies", default="0.5,1.0")
    args = ap.parse_args()
    seeds = list(range(TEST_SEED0, TEST_SEED0 + args.flights))
    cells, rows, tests = [], [], []
    for band in args.bands.split(","):
        for lat in (float(x) for x in args.latencies.split(",")):
            flights = {v: fly(band, lat, v, seeds) for v in VARIANTS}
            for v, fl in flights.items():
                n_ok = sum(f["landed"] for f in fl)
                lo, hi = wilson(n_ok, len(fl))
                cells.append({"band": band, "latency_s": lat, "variant": v, "landed": n_ok, "flights": fl})
                rows.append((band, lat, v, f"{n_ok}/{len(fl)}", f"[{lo:.2f}, {hi:.2f}]", "", ""))
            for plan in ("plan5", "plan10"):
                for base in ("single", "single+lead"):
                    b = sum(
                        p["landed"] and not s["landed"]
                        for p, s in zip(flights[plan], flights[base], strict=True)
                    )
                    c = sum(
                        s["landed"] and not p["landed"]
                        for p, s in zip(flights[plan], flights[base], strict=True)
                    )
                    p_value = mcnemar_exact(b, c)
                    tests.append(
                        {
                            "band": band,
                            "latency_s": lat,
                            "plan": plan,
                            "vs": base,
                            "plan_only": b,
                            "base_only": c,
                            "p_exact": p_value,
                        }
                    )
                    rows.append((band, lat, f"{plan} vs {base}", "", "", f"{b}:{c}", f"{p_value:.2g}"))
    header = ("band", "latency s", "variant", "landed", "95% Wilson", "discordant", "McNemar p")
    emit(
        "roadster_plans",
        {"machine": machine(), "seeds": seeds, "variants": VARIANTS, "cells": cells, "tests": tests},
        rows,
        header,
    )


if __name__ == "__main__":
    main()
