"""IK speed and success: small warm-started deltas (measure 2) and random reachable targets from
home (measure 3), for every robot description that loads (Panda; YAM when robots/ has it).

    .venv/bin/python benchmarks/ik.py [--small 2000] [--random 1000] [--robots panda,yam_bimanual]
"""

from __future__ import annotations

import argparse
import time

import _common  # noqa: F401  (sets sys.path and MUJOCO_GL)
import numpy as np
import pinocchio as pin
from _common import emit, machine, stats_ms, verdict

from pear_agent.robot.kinematics import Kinematics, matrix_to_rpy, rpy_to_matrix
from pear_agent.robot.loader import list_robots, load_robot
from pear_agent.robot.model import sample_range

SMALL_POS_M = 0.02
SMALL_ROT_RAD = 0.1
TARGET_SMALL_MEDIAN_MS = 0.150
TARGET_RANDOM_P90_MS = 5.0


def _sample_q(rng: np.random.Generator, lo: np.ndarray, hi: np.ndarray, margin: float) -> np.ndarray:
    span = hi - lo
    return rng.uniform(lo + margin * span, hi - margin * span)


def bench_part(kin: Kinematics, part: str, n_small: int, n_random: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    lo, hi = sample_range(*kin.joint_limits(part))  # a continuous joint: one turn
    home = kin.chains[part].home.copy()
    # warm up (first calls allocate)
    p = kin.fk(part, home)
    kin.ik(part, p.position_m, p.rotation, home)
    kin._table_seeds(kin.chains[part], pin.SE3(p.rotation, p.position_m), 1)  # build the seed table

    # measure 2: small deltas from a random interior configuration, warm-started from it. The
    # target is the pose of a nearby configuration (so it is reachable: a witness exists), scaled
    # until the tool moves <= 2 cm and turns <= 0.1 rad.
    times, cpu, ok, iters = [], [], 0, []
    for _ in range(n_small):
        q = _sample_q(rng, lo, hi, 0.05)
        pose = kin.fk(part, q)
        dq = rng.normal(size=q.size) * 0.05
        while True:
            q2 = np.clip(q + dq, lo, hi)
            p2 = kin.fk(part, q2)
            dpos = float(np.linalg.norm(p2.position_m - pose.position_m))
            drot = float(np.linalg.norm(pin.log3(p2.rotation @ pose.rotation.T)))
            if dpos <= SMALL_POS_M and drot <= SMALL_ROT_RAD:
                break
            dq *= 0.5
        # as the turn loop does it: the target arrives as roll/pitch/yaw
        rot = rpy_to_matrix(matrix_to_rpy(p2.rotation))
        t0, c0 = time.perf_counter(), time.thread_time()
        res = kin.ik(part, p2.position_m, rot, q)
        times.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
        ok += res.success
        iters.append(res.iterations)
    small = stats_ms(times) | {
        "cpu": stats_ms(cpu),
        "solved": ok / n_small,
        "iterations_median": float(np.median(iters)),
        "iterations_max": int(np.max(iters)),
    }

    # measure 3: random reachable targets (FK of random joints within limits), solved from home
    times, cpu, ok, iters = [], [], 0, []
    for _ in range(n_random):
        pose = kin.fk(part, _sample_q(rng, lo, hi, 0.0))
        t0, c0 = time.perf_counter(), time.thread_time()
        res = kin.ik(part, pose.position_m, pose.rotation, home)
        times.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
        ok += res.success
        iters.append(res.iterations)
    rand = stats_ms(times) | {
        "cpu": stats_ms(cpu),
        "solved": ok / n_random,
        "iterations_median": float(np.median(iters)),
        "iterations_p90": float(np.percentile(iters, 90)),
    }
    return {"small_delta": small, "random_from_home": rand}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--small", type=int, default=2000, help="small-delta trials per part")
    ap.add_argument("--random", type=int, default=1000, help="random-target trials per part")
    ap.add_argument("--robots", default=None, help="comma list (default: every robot in robots/)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    names = args.robots.split(",") if args.robots else [p.stem for p in list_robots()]
    results: dict = {}
    skipped: dict = {}
    rows = []
    for name in names:
        try:
            robot = load_robot(name)
            kin = Kinematics(robot)
        except Exception as exc:  # a description being written right now: report, do not fail
            skipped[name] = f"{type(exc).__name__}: {exc}"
            continue
        for part in robot.parts:
            r = bench_part(kin, part, args.small, args.random, args.seed)
            results[f"{name}/{part}"] = r
            s, q = r["small_delta"], r["random_from_home"]
            rows.append(
                (
                    f"{name}/{part}",
                    "small delta, warm",
                    f"{s['median_ms'] * 1000:.0f} us",
                    f"{s['p90_ms'] * 1000:.0f} us",
                    f"{s['cpu']['median_ms'] * 1000:.0f} / {s['cpu']['p90_ms'] * 1000:.0f} us",
                    f"{s['solved']:.1%}",
                    verdict(s["median_ms"] <= TARGET_SMALL_MEDIAN_MS and s["solved"] == 1.0),
                )
            )
            rows.append(
                (
                    f"{name}/{part}",
                    "random, from home",
                    f"{q['median_ms']:.2f} ms",
                    f"{q['p90_ms']:.2f} ms",
                    f"{q['cpu']['median_ms']:.2f} / {q['cpu']['p90_ms']:.2f} ms",
                    f"{q['solved']:.1%}",
                    verdict(q["p90_ms"] <= TARGET_RANDOM_P90_MS and q["solved"] >= 0.99),
                )
            )
    out = {
        "machine": machine(),
        "targets": {
            "small_delta": "median <= 150 us, 100% solved (<= 2 cm, <= 0.1 rad, warm-started)",
            "random_from_home": ">= 99% solved, p90 <= 5 ms",
        },
        "parts": results,
        "skipped_robots": skipped,
        "pass": all(
            r["small_delta"]["median_ms"] <= TARGET_SMALL_MEDIAN_MS
            and r["small_delta"]["solved"] == 1.0
            and r["random_from_home"]["p90_ms"] <= TARGET_RANDOM_P90_MS
            and r["random_from_home"]["solved"] >= 0.99
            for r in results.values()
        ),
    }
    emit("ik", out, rows, ("part", "case", "median", "p90", "cpu median / p90", "solved", "target"))


if __name__ == "__main__":
    main()
