"""The loop gives the same episodes as an older commit's: the scripted experts' results, records
(every log line, summary, image sent to the model) and replays, compared between this tree and the
code at an older commit (default 54f184c: main just before the one episode runner; a record field
only this tree writes is listed, not a difference).

Both sides run `pear-agent bench --no-video` over the same tasks and seeds: the old code as it ran
(`--workers 2`, one episode per worker at a time), this tree with many episodes in flight
(`--workers 2 --concurrency 8`: episodes interleave turn by turn in a worker, so a renderer or
simulator shared by mistake would show here). Then every recorded episode is replayed from its log
(`ReplayPolicy`) on each side. Wall-clock fields (wall time, decision latencies, IK milliseconds) are
left out of the comparison; everything else must be equal, floats bit for bit.

    .venv/bin/python benchmarks/loop_equivalence.py [--seeds 0-49] [--old-ref 54f184c]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common  # noqa: F401  (sets sys.path and MUJOCO_GL)
from _common import REPO_ROOT, emit, machine, verdict

MUJOCO_TASKS = "pick_cube,place_in_bowl,push_to_target,conveyor_pick,bimanual_pickup,align_blocks"
ROADSTER_TASKS = "roadster_ramp_flip:light,roadster_kickflip:light"
VOLATILE = {
    "latency_s",
    "ik_ms",
    "wall_time_s",
    "latencies_s",
    "latency_median_s",
    "latency_p90_s",
    "run_dir",
}
"""Wall-clock fields (and absolute paths): they differ between any two runs."""


def strip(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: strip(v) for k, v in obj.items() if k not in VOLATILE}
    if isinstance(obj, list):
        return [strip(v) for v in obj]
    return obj


ADDED: set[str] = set()
"""Record fields the new tree writes and the old one did not: listed in the output, not a
difference (every field both write must be equal)."""


def first_diff(a: Any, b: Any, path: str = "") -> str | None:
    """Where two JSON values first differ (None: equal; a field only the new tree writes is added)."""
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in b:
                return f"{path}/{k}: only in old"
            if k not in a:  # a field the records gained since (max_chunk, joints_rad...): additive
                ADDED.add(k)
                continue
            d = first_diff(a[k], b[k], f"{path}/{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} vs {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            d = first_diff(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    return None if a == b else f"{path}: {str(a)[:80]} vs {str(b)[:80]}"


def episode_files(run_dir: Path) -> dict[str, Any]:
    """An episode's records without wall-clock fields, and a hash of every image it sent."""
    lines = [strip(json.loads(x)) for x in (run_dir / "episode.jsonl").read_text().splitlines() if x]
    summary = strip(json.loads((run_dir / "summary.json").read_text()))
    images = {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted((run_dir / "images").glob("*"))
    }
    return {"log": lines, "summary": summary, "images": images}


# -- one side (runs inside the tree under test: its own pear_agent on sys.path) ----------------
REPLAY_SNIPPET = r"""
import json, sys
from pathlib import Path
try:  # the package layout of newer trees: pear_agent/loop, robot, records
    from pear_agent.loop import registry
    from pear_agent.loop.episode import Episode, EpisodeConfig
    from pear_agent.records.log import RunWriter
    from pear_agent.robot.kinematics import Kinematics
    from pear_agent.robot.loader import load_robot
    from pear_agent.loop.arm_environment import arm_episode
    any_episode = Episode
except ImportError:  # an older tree: the modules side by side in pear_agent/
    from pear_agent import registry
    from pear_agent.episode import Episode, EpisodeConfig
    from pear_agent.records import RunWriter
    from pear_agent.kinematics import Kinematics
    try:  # the loader's home in newer trees; an older tree has it in robot_config
        from pear_agent.robot_loader import load_robot
    except ImportError:
        from pear_agent.robot_config import load_robot
    try:  # one constructor in newer trees: Episode(environment, ...), the arm's built by arm_episode
        from pear_agent.arm_environment import arm_episode
        any_episode = Episode
    except ImportError:  # Episode(backend, kinematics, ...) and Episode.of(environment, ...)
        arm_episode, any_episode = Episode, Episode.of
from pear_agent.policies.replay import ReplayPolicy

bench, out = Path(sys.argv[1]), Path(sys.argv[2])
cache = {}
for raw in (bench / "results.jsonl").read_text().splitlines():
    rec = json.loads(raw)
    task, seed = rec["task"], rec["seed"]
    log = bench / rec["run_dir"] / "episode.jsonl"
    writer = RunWriter(out / rec["run_dir"], video_fps=None)
    if task.startswith("roadster_"):
        env = registry.make_environment(task)
        result = any_episode(env, ReplayPolicy(log), EpisodeConfig(), writer).run(seed)
        env.close()
    else:
        if task not in cache:
            robot = load_robot(registry.task_entry(task).default_robot)
            cache[task] = (registry.make_backend(task, robot, render=True), Kinematics(robot))
        backend, kin = cache[task]
        result = arm_episode(backend, kin, ReplayPolicy(log), EpisodeConfig(), writer).run(seed)
    print(json.dumps({"key": rec["key"], "success": result.success, "turns": result.turns}), flush=True)
for backend, _ in cache.values():
    backend.close()
"""


def run_side(tree: Path, out: Path, tasks: str, seeds: str, extra: list[str]) -> dict[str, Any]:
    env = os.environ | {"MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"), "PYTHONPATH": str(tree)}
    bench = out / "bench"
    t0 = time.time()
    cmd = [sys.executable, "-m", "pear_agent", "bench", "--tasks", tasks, "--seeds", seeds, "--no-video"]
    cmd += ["--quiet", "--out", str(bench), *extra]
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"bench failed in {tree}: {proc.stderr[-2000:]}")
    t1 = time.time()
    proc = subprocess.run(
        [sys.executable, "-c", REPLAY_SNIPPET, str(bench), str(out / "replay")],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"replays failed in {tree}: {proc.stderr[-2000:]}")
    replays = {r["key"]: r for r in map(json.loads, proc.stdout.splitlines())}
    return {
        "bench": bench,
        "replay": out / "replay",
        "replays": replays,
        "bench_s": t1 - t0,
        "replay_s": time.time() - t1,
    }


def results(bench: Path) -> dict[str, dict[str, Any]]:
    return {r["key"]: r for r in map(json.loads, (bench / "results.jsonl").read_text().splitlines())}


def compare(old: dict[str, Any], new: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per task: episodes, and how many of them are equal in results, records, images, replays."""
    ro, rn = results(old["bench"]), results(new["bench"])
    per_task: dict[str, dict[str, Any]] = {}
    for key in sorted(set(ro) | set(rn)):
        a, b = ro.get(key), rn.get(key)
        task = (a or b)["task"]
        row = per_task.setdefault(
            task,
            {"episodes": 0, "results": 0, "records": 0, "images": 0, "replays": 0, "replays_reproduce": 0},
        )
        row["episodes"] += 1
        if a is None or b is None:
            row.setdefault("diffs", []).append(f"{key}: only in {'new' if a is None else 'old'}")
            continue
        d = first_diff(strip(a), strip(b))
        row["results"] += d is None
        if d:
            row.setdefault("diffs", []).append(f"{key} result {d}")
        fa, fb = episode_files(old["bench"] / a["run_dir"]), episode_files(new["bench"] / b["run_dir"])
        d = first_diff(fa["log"], fb["log"]) or first_diff(fa["summary"], fb["summary"])
        row["records"] += d is None
        if d:
            row.setdefault("diffs", []).append(f"{key} records {d}")
        row["images"] += fa["images"] == fb["images"]
        pa, pb = episode_files(old["replay"] / a["run_dir"]), episode_files(new["replay"] / b["run_dir"])
        d = first_diff(pa["log"], pb["log"]) or first_diff(pa["summary"], pb["summary"])
        row["replays"] += d is None and pa["images"] == pb["images"]
        if d:
            row.setdefault("diffs", []).append(f"{key} replay {d}")
        rep = new["replays"].get(key, {})
        row["replays_reproduce"] += (rep.get("success"), rep.get("turns")) == (b["success"], b["turns"])
    for row in per_task.values():
        row["diffs"] = row.get("diffs", [])[:5]
    return per_task


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", default="0-49")
    ap.add_argument("--tasks", default=f"{MUJOCO_TASKS},{ROADSTER_TASKS}")
    ap.add_argument("--old-ref", default="54f184c", help="the commit to compare against")
    ap.add_argument(
        "--old-tree", default=None, help="a checkout of it (default: git archive into a temp dir)"
    )
    ap.add_argument("--concurrency", type=int, default=8, help="episodes in flight per worker, new side")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--keep", default=None, help="keep the runs in this folder")
    args = ap.parse_args()

    work = Path(args.keep or tempfile.mkdtemp(prefix="loop-equivalence-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        compare_sides(args, work)
    finally:
        if not args.keep:  # both sides' runs and the old tree: ~70 MB a time, gone unless kept
            shutil.rmtree(work, ignore_errors=True)


def compare_sides(args: argparse.Namespace, work: Path) -> None:
    old_tree = Path(args.old_tree) if args.old_tree else work / "old-tree"
    if not args.old_tree and not old_tree.exists():
        old_tree.mkdir()
        archive = subprocess.run(
            ["git", "archive", args.old_ref], cwd=REPO_ROOT, capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(old_tree)], input=archive.stdout, check=True)
    load_before = machine()["loadavg_1_5_15"]
    old = run_side(old_tree, work / "old", args.tasks, args.seeds, ["--workers", str(args.workers)])
    new_extra = ["--workers", str(args.workers), "--concurrency", str(args.concurrency)]
    new = run_side(REPO_ROOT, work / "new", args.tasks, args.seeds, new_extra)
    per_task = compare(old, new)
    totals = {
        k: sum(r[k] for r in per_task.values())
        for k in ("episodes", "results", "records", "images", "replays")
    }
    totals["replays_reproduce"] = sum(r["replays_reproduce"] for r in per_task.values())
    ok = all(totals[k] == totals["episodes"] for k in ("results", "records", "images", "replays"))
    out = {
        "machine": machine(),
        "load_before": load_before,
        "old_ref": args.old_ref,
        "seeds": args.seeds,
        "new_side": f"--workers {args.workers} --concurrency {args.concurrency}",
        "tasks": per_task,
        "totals": totals,
        "seconds": {
            side: {"bench": r["bench_s"], "replay": r["replay_s"]} for side, r in (("old", old), ("new", new))
        },
        "target": "every episode equal in results, records, images and replays",
        "fields_added_since_old": sorted(ADDED),
        "pass": ok,
    }
    rows = [
        (t, r["episodes"], r["results"], r["records"], r["images"], r["replays"], r["replays_reproduce"])
        for t, r in per_task.items()
    ]
    rows.append(("all", *(totals[k] for k in ("episodes", "results", "records", "images", "replays")),
                 totals["replays_reproduce"]))  # fmt: skip
    rows.append(("verdict", verdict(ok), "", "", "", "", ""))
    emit(
        "loop_equivalence",
        out,
        rows,
        ("task", "episodes", "results =", "records =", "images =", "replays =", "replay ok"),
    )


if __name__ == "__main__":
    main()
