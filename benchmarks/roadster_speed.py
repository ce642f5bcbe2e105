"""What a simulated roadster second costs: 500 Hz MuJoCo physics, the 50 Hz flight computer, wind and
drag, crash checks and a telemetry row every 0.2 s, no rendering, one core.

    .venv/bin/python benchmarks/roadster_speed.py [--flights 20] [--seconds 4]

Flies a kickflip scene in a storm climbing over the truck for `--seconds` of simulated time (so no
flight ends early), a telemetry row every 0.2 s, and reports wall time per simulated second.
Target: <= 5% of real time, i.e. a 4 s flight in < 0.2 s. Also the whole loop (prompt, parse,
step) with the scripted pilot.
A table goes to stderr, one JSON object to stdout.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import emit, machine, stats_ms, verdict


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flights", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=4.0, help="simulated seconds per flight")
    args = ap.parse_args()
    from pear_agent.loop.episode import Episode, EpisodeConfig
    from sim_adapters.roadster.commands import parse_command
    from sim_adapters.roadster.environment import RoadsterEnvironment
    from sim_adapters.roadster.pilot import PilotPolicy
    from sim_adapters.roadster.sim import RoadsterSim

    climb = parse_command('{"mode": "hold", "roll": 5, "pitch": 0, "vz": 3.5}')
    walls, physics_steps = [], 0
    sim = RoadsterSim("kickflip", "storm", 20000)
    for i in range(args.flights):
        sim.reset(20000 + i, "storm")
        sim.air0_kg = 1e6  # the tank never empties (its mass stays the seed's): a full-length flight
        sim.set_command(climb)
        t0 = time.perf_counter()
        while sim.t_s < args.seconds - 1e-9 and not sim.status.over:
            sim.step_row()
            sim.row()
        walls.append(time.perf_counter() - t0)
        physics_steps += round(sim.t_s * 500)
        assert not sim.status.over, sim.status.reason
    per_sim_s = sum(walls) / (args.flights * args.seconds)
    # the whole loop: briefing, rows as text, the pilot's reply parsed, steps, records off
    env = RoadsterEnvironment("roadster_kickflip", "storm", render=False)
    loop_walls, loop_sim = [], 0.0
    for i in range(args.flights):
        t0 = time.perf_counter()
        r = Episode(env, PilotPolicy(), EpisodeConfig()).run(20000 + i)
        loop_walls.append(time.perf_counter() - t0)
        loop_sim += r.sim_time_s
    loop_per_sim_s = sum(loop_walls) / loop_sim
    ok = per_sim_s <= 0.05
    result = {
        "flights": args.flights,
        "seconds": args.seconds,
        "flight_wall": stats_ms(walls),
        "wall_per_sim_s": per_sim_s,
        "physics_step_us": 1e6 * sum(walls) / physics_steps,
        "meets_5pct": ok,
        "loop_wall_per_sim_s": loop_per_sim_s,
        "loop_flight_wall": stats_ms(loop_walls),
        "machine": machine(),
    }
    med = sorted(walls)[len(walls) // 2]
    loop_med = sorted(loop_walls)[len(loop_walls) // 2]
    rows = [
        [
            f"physics+flight computer, {args.seconds:g} s flight",
            f"{1000 * med:.1f} ms",
            f"{100 * per_sim_s:.2f}% of real time",
            f"{result['physics_step_us']:.1f} us",
            verdict(ok) + " (<= 5%)",
        ],
        [
            "whole loop, pilot kickflip (storm)",
            f"{1000 * loop_med:.1f} ms",
            f"{100 * loop_per_sim_s:.2f}% of real time",
            "",
            "",
        ],
    ]
    header = ["what", "median wall per flight", "cost", "per 500 Hz step", "target"]
    emit("roadster_speed", result, rows, header)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
