"""The roadster's difficulty shape and what the clock does to it: the scripted pilot through the
real turn loop (Episode + RoadsterEnvironment + PilotPolicy), test-split seeds.

    .venv/bin/python benchmarks/roadster_difficulty.py [--flights 192] [--split test]
        [--winds light,gale,storm] [--latencies 0.1,1,3] [--realtime-winds light,storm]

Part 1: success per stunt and wind band (paused), with 95% Wilson intervals, against the issue's
targets (light ramp >= 95%, light kickflip >= 90%, storm kickflip 40-80%).
Part 2: the same flights in realtime with an injected decision latency (the first decision is
untimed), paired against paused: discordant pairs and the exact McNemar p-value.
Part 3 (`--serve-flights N`): N light kickflips on the clock through the real `pear-agent serve`
(uvicorn, HTTP, the openai client) with `--serve-latencies` added per reply; the measured reply
times move the world. Defaults (no part 3) take about 3-5 minutes on one core. A table goes to
stderr, one JSON object to stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import emit, machine, verdict
from pear_agent.bench.runner import split_seeds
from pear_agent.bench.stats import mcnemar_exact, wilson

TARGETS = {
    ("roadster_ramp_flip", "light"): (0.95, 1.0),
    ("roadster_kickflip", "light"): (0.90, 1.0),
    ("roadster_kickflip", "storm"): (0.40, 0.80),
}


def fly(
    task: str,
    wind: str,
    seeds: list[int],
    latency_s: float | None,
    url: str | None = None,
    realtime: bool = False,
) -> dict[int, dict[str, Any]]:
    """The pilot in process (an injected latency: realtime), or behind `pear-agent serve` at `url`
    (realtime: the measured reply times move the world)."""
    from pear_agent.loop.episode import Episode, EpisodeConfig
    from sim_adapters.roadster.environment import RoadsterEnvironment
    from sim_adapters.roadster.pilot import PilotPolicy

    mode = "realtime" if latency_s is not None or realtime else "paused"
    env = RoadsterEnvironment(task, wind, mode=mode, render=False)
    cfg = EpisodeConfig(mode=mode, latency_s=latency_s)
    policy: Any = PilotPolicy()
    if url is not None:
        from pear_agent.policies.model_settings import ModelSettings
        from pear_agent.policies.openai_client import OpenAIPolicy

        policy = OpenAIPolicy(ModelSettings(model="pear-scripted-expert", base_url=url, retry_timeouts=False))
    out = {}
    for seed in seeds:
        r = Episode(env, policy, cfg).run(seed)
        lat = sorted(r.latencies_s[1:]) or [0.0]
        out[seed] = {"success": r.success, "reward": env.reward()["total"], "end": r.end_reason, "lat": lat}
    return out


@contextlib.contextmanager
def serve(latency_s: float) -> Iterator[str]:
    """`pear-agent serve` (its real app under uvicorn) on a free port, in a thread."""
    import uvicorn

    from pear_agent.loop.expert_server import create_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(create_app(latency_s), host="127.0.0.1", port=port, log_level="error")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def summary(flights: dict[int, dict[str, Any]]) -> dict[str, Any]:
    n = len(flights)
    k = sum(f["success"] for f in flights.values())
    lo, hi = wilson(k, n)
    rewards = sorted(f["reward"] for f in flights.values())
    return {"successes": k, "n": n, "rate": k / n, "ci95": [lo, hi], "reward_median": rewards[n // 2]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flights", type=int, default=192, help="flights per stunt and wind band")
    ap.add_argument("--split", default="test")
    ap.add_argument("--stunts", default="roadster_ramp_flip,roadster_kickflip")
    ap.add_argument("--winds", default="light,gale,storm")
    ap.add_argument("--latencies", default="0.1,1,3", help="injected realtime latencies, seconds")
    ap.add_argument("--realtime-winds", default="light,storm", help="wind bands for the realtime part")
    ap.add_argument(
        "--serve-flights",
        type=int,
        default=0,
        help="part 3: this many light kickflips on the clock through `pear-agent serve` (real HTTP)",
    )
    ap.add_argument("--serve-latencies", default="0,1", help="part 3: serve's added latency per reply, s")
    args = ap.parse_args()
    seeds = split_seeds(args.split, args.flights)
    stunts = [s for s in args.stunts.split(",") if s]
    winds = [w for w in args.winds.split(",") if w]
    lats = [float(x) for x in args.latencies.split(",") if x]
    t0 = time.perf_counter()
    header = ["stunt", "wind", "clock", "landed", "rate", "95% CI", "target", "only paused", "only rt"]
    header.append("McNemar p")
    rows: list[list[Any]] = []
    result: dict[str, Any] = {"flights": args.flights, "split": args.split, "paused": {}, "realtime": {}}
    paused: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
    for task in stunts:
        for wind in winds:
            flights = fly(task, wind, seeds, None)
            paused[(task, wind)] = flights
            s = summary(flights)
            target = TARGETS.get((task, wind))
            ok = None if target is None else target[0] <= s["rate"] <= target[1]
            s["target"] = target
            s["meets_target"] = ok
            result["paused"][f"{task}/{wind}"] = s
            tgt = "" if target is None else f"{target[0]:.0%}-{target[1]:.0%} {verdict(bool(ok))}"
            rows.append(
                [task, wind, "paused", f"{s['successes']}/{s['n']}", s["rate"],
                 f"[{s['ci95'][0]:.2f}, {s['ci95'][1]:.2f}]", tgt, "", "", ""]
            )  # fmt: skip
    for task in stunts:
        for wind in [w for w in args.realtime_winds.split(",") if w]:
            base = paused.get((task, wind)) or fly(task, wind, seeds, None)
            for lat in lats:
                flights = fly(task, wind, seeds, lat)
                s = summary(flights)
                only_p = sum(1 for k in seeds if base[k]["success"] and not flights[k]["success"])
                only_r = sum(1 for k in seeds if flights[k]["success"] and not base[k]["success"])
                p_value = mcnemar_exact(only_p, only_r)
                s |= {"only_paused": only_p, "only_realtime": only_r, "mcnemar_p": p_value}
                result["realtime"][f"{task}/{wind}/{lat:g}s"] = s
                rows.append(
                    [task, wind, f"realtime +{lat:g}s", f"{s['successes']}/{s['n']}", s["rate"],
                     f"[{s['ci95'][0]:.2f}, {s['ci95'][1]:.2f}]", "", only_p, only_r, f"{s['mcnemar_p']:.3g}"]
                )  # fmt: skip
    if args.serve_flights:  # part 3: through `pear-agent serve` (real HTTP), the measured reply time
        sseeds = seeds[: args.serve_flights]
        task, wind = "roadster_kickflip", "light"
        base = {k: v for k, v in paused.get((task, wind), {}).items() if k in sseeds} or fly(
            task, wind, sseeds, None
        )
        result["serve"] = {}
        for lat in [float(x) for x in args.serve_latencies.split(",") if x]:
            with serve(lat) as url:
                flights = fly(task, wind, sseeds, None, url=url, realtime=True)
            s = summary(flights)
            only_p = sum(1 for k in sseeds if base[k]["success"] and not flights[k]["success"])
            only_r = sum(1 for k in sseeds if flights[k]["success"] and not base[k]["success"])
            med = sorted(x for f in flights.values() for x in f["lat"])
            s |= {"only_paused": only_p, "only_realtime": only_r, "mcnemar_p": mcnemar_exact(only_p, only_r)}
            s["reply_median_s"] = med[len(med) // 2]
            result["serve"][f"{task}/{wind}/serve+{lat:g}s"] = s
            clock = f"serve +{lat:g}s (median {s['reply_median_s']:.2f}s)"
            ci = f"[{s['ci95'][0]:.2f}, {s['ci95'][1]:.2f}]"
            landed = f"{s['successes']}/{s['n']}"
            rows.append(
                [task, wind, clock, landed, s["rate"], ci, "", only_p, only_r, f"{s['mcnemar_p']:.3g}"]
            )
    result["wall_s"] = time.perf_counter() - t0
    result["machine"] = machine()
    emit("roadster_difficulty", result, rows, header)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
