"""What recording at the control rate (`--record-fps`) costs: whole scripted episodes' wall time per
simulated second with and without it (interleaved, same seeds), the recording's size, and what the
switch costs when off (the one comparison per control step in `MujocoBackend._maybe_emit_frame`).

    .venv/bin/python benchmarks/record_cost.py [--episodes 4] [--fps 30] [--task pick_cube]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import _common  # noqa: F401  (sets sys.path and MUJOCO_GL)
from _common import emit, machine, stats_ms

from pear_agent.loop.episode import Episode, EpisodeConfig
from pear_agent.loop.registry import EnvSpec, PolicyAsk, close_environment, resolve
from pear_agent.records.log import RunWriter


def episode(task: str, seed: int, root: Path, fps: float | None) -> dict[str, Any]:
    family, name = resolve(task, {})
    cfg = EpisodeConfig(record_fps=fps)
    env = family.make(EnvSpec.of(name, {}, render=True, config=cfg))
    try:
        run_dir = root / f"{'rec' if fps else 'plain'}-s{seed}"
        writer = RunWriter(run_dir, video_fps=None)
        policy = family.default_policy(name, ask=PolicyAsk(seed=seed))
        t0 = time.perf_counter()
        result = Episode(env, policy, cfg, writer).run(seed)
        wall = time.perf_counter() - t0
    finally:
        close_environment(env)
    control = list((run_dir / "control").glob("*.npz")) if fps else []
    return {
        "seed": seed,
        "turns": result.turns,
        "sim_s": result.sim_time_s,
        "wall_s": wall,
        "success": result.success,
        "control_bytes": sum(p.stat().st_size for p in control),
    }


def off_switch_ns(task: str, n: int = 200_000) -> float:
    """ns per control step that the recording switch costs when off (period 0: one comparison)."""
    family, name = resolve(task, {})
    env = family.make(EnvSpec.of(name, {}, render=True, config=EpisodeConfig()))
    try:
        backend = env.backend
        backend.reset(0)
        emit_frame = backend._maybe_emit_frame
        t0 = time.perf_counter()
        for _ in range(n):
            emit_frame()
        return (time.perf_counter() - t0) / n * 1e9
    finally:
        close_environment(env)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--fps", type=float, default=30.0)
    ap.add_argument("--task", default="pick_cube")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        episode(args.task, 99, root, fps=args.fps)  # warm-up: imports, model compile, renderer
        plain, rec = [], []
        for s in range(args.episodes):  # interleaved, so load changes hit both alike
            plain.append(episode(args.task, s, root, fps=None))
            rec.append(episode(args.task, s, root, fps=args.fps))
    off_ns = off_switch_ns(args.task)
    per_sim_plain = [e["wall_s"] / e["sim_s"] for e in plain]
    per_sim_rec = [e["wall_s"] / e["sim_s"] for e in rec]
    frames = sum(round(e["sim_s"] * args.fps) for e in rec)
    extra_s = sum(r["wall_s"] - p["wall_s"] for r, p in zip(rec, plain, strict=True))
    res = {
        "machine": machine(),
        "task": args.task,
        "episodes": args.episodes,
        "record_fps": args.fps,
        "wall_per_sim_s_ms_plain": stats_ms(per_sim_plain),
        "wall_per_sim_s_ms_record": stats_ms(per_sim_rec),
        "extra_ms_per_frame": extra_s / max(frames, 1) * 1000,
        "control_bytes_per_frame": sum(e["control_bytes"] for e in rec) / max(frames, 1),
        "off_switch_ns_per_control_step": off_ns,
        "raw": {"plain": plain, "record": rec},
    }
    p, r = res["wall_per_sim_s_ms_plain"], res["wall_per_sim_s_ms_record"]
    rows = [
        ["wall ms per simulated s, no recording", p["median_ms"], p["p90_ms"], len(plain)],
        [f"wall ms per simulated s, --record-fps {args.fps:g}", r["median_ms"], r["p90_ms"], len(rec)],
        ["extra ms per recorded frame (2 cameras, JPEG, FK)", res["extra_ms_per_frame"], "", frames],
        ["bytes per recorded frame", res["control_bytes_per_frame"], "", frames],
        ["off: ns per control step (the switch)", off_ns, "", 200_000],
    ]
    emit("record_cost", res, rows, ["what", "median", "p90", "n"])


if __name__ == "__main__":
    main()
