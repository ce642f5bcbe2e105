"""What `--view` costs per turn: the time the Rerun view (`pear_agent.records.view.EpisodeView`) spends on
each turn's log line inside the episode loop (images, link frames by FK, tool points and targets,
texts, joint series; the `.rrd` file sink writes on Rerun's own thread), the closing flush, and the
recording's size; plus whole scripted episodes' wall time per turn with and without the view.

    .venv/bin/python benchmarks/view_cost.py [--episodes 6] [--task pick_cube]

Without --view the runtime creates no observer and imports no Rerun (tests/records/test_view.py checks
that); `benchmarks/turn_overhead.py` times a turn without any writer, so it is unchanged.
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


class TimedView:
    """Wraps an EpisodeView; keeps the time of each turn line and of the close."""

    def __init__(self, view: Any) -> None:
        self.view, self.turn_s, self.other_s, self.close_s = view, [], [], 0.0

    def record(self, rec: dict[str, Any]) -> None:
        t0 = time.perf_counter()
        self.view.record(rec)
        (self.turn_s if rec.get("kind") == "turn" else self.other_s).append(time.perf_counter() - t0)

    def close(self, summary: dict[str, Any]) -> None:
        t0 = time.perf_counter()
        self.view.close(summary)
        self.close_s = time.perf_counter() - t0


def episode(task: str, seed: int, root: Path, view: bool) -> dict[str, Any]:
    from pear_agent.records.view import RRD_NAME, EpisodeView

    family, name = resolve(task, {})
    env = family.make(EnvSpec.of(name, {}, render=True, config=EpisodeConfig()))
    try:
        run_dir = root / f"{'view' if view else 'plain'}-s{seed}"
        writer = RunWriter(run_dir, video_fps=None)
        timed = None
        if view:
            timed = TimedView(
                EpisodeView(run_dir / RRD_NAME, run_dir=run_dir, kinematics=getattr(env, "kin", None))
            )
            writer.observers.append(timed)
        policy = family.default_policy(name, ask=PolicyAsk(seed=seed))
        t0 = time.perf_counter()
        result = Episode(env, policy, EpisodeConfig(), writer).run(seed)
        wall = time.perf_counter() - t0
    finally:
        close_environment(env)
    out: dict[str, Any] = {"seed": seed, "turns": result.turns, "wall_s": wall}
    if timed is not None:
        out |= {
            "view_turn_s": timed.turn_s,
            "view_header_s": sum(timed.other_s),
            "view_close_s": timed.close_s,
            "rrd_bytes": (run_dir / RRD_NAME).stat().st_size,
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--episodes", type=int, default=6)
    ap.add_argument("--task", default="pick_cube")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        episode(args.task, 99, root, view=True)  # warm-up: imports, model compile, Rerun start
        plain, viewed = [], []
        for s in range(args.episodes):  # interleaved, so load changes hit both alike
            plain.append(episode(args.task, s, root, view=False))
            viewed.append(episode(args.task, s, root, view=True))
    per_turn = [t for e in viewed for t in e["view_turn_s"]]
    turns = sum(e["turns"] for e in viewed)
    wall_plain = [e["wall_s"] / e["turns"] for e in plain]
    wall_view = [e["wall_s"] / e["turns"] for e in viewed]
    res = {
        "machine": machine(),
        "task": args.task,
        "episodes": args.episodes,
        "turns": turns,
        "view_per_turn_ms": stats_ms(per_turn),
        "view_header_ms": stats_ms([e["view_header_s"] for e in viewed]),
        "view_close_ms": stats_ms([e["view_close_s"] for e in viewed]),
        "rrd_bytes_per_turn": sum(e["rrd_bytes"] for e in viewed) / turns,
        "episode_wall_per_turn_ms_plain": stats_ms(wall_plain),
        "episode_wall_per_turn_ms_view": stats_ms(wall_view),
        "raw": {"plain": plain, "view": viewed},
    }
    v, p, w = (
        res["view_per_turn_ms"],
        res["episode_wall_per_turn_ms_plain"],
        res["episode_wall_per_turn_ms_view"],
    )
    rows = [
        ["view, per turn (in the loop)", v["median_ms"], v["p90_ms"], len(per_turn)],
        [
            "view, header (robot model, once)",
            res["view_header_ms"]["median_ms"],
            res["view_header_ms"]["p90_ms"],
            len(viewed),
        ],
        [
            "view, close (flush, once)",
            res["view_close_ms"]["median_ms"],
            res["view_close_ms"]["p90_ms"],
            len(viewed),
        ],
        ["episode wall per turn, no view", p["median_ms"], p["p90_ms"], len(plain)],
        ["episode wall per turn, --view", w["median_ms"], w["p90_ms"], len(viewed)],
    ]
    emit("view_cost", res, rows, ["what", "median ms", "p90 ms", "n"])


if __name__ == "__main__":
    main()
