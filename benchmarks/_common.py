"""Shared helpers for the benchmark scripts: statistics, machine facts, output (JSON + table).

Every script prints a readable table on stderr and one JSON object on stdout, so
`python benchmarks/x.py | jq` and `python benchmarks/x.py 2>/dev/null` both work.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("MUJOCO_GL", "egl")

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


def stats_ms(samples_s: Sequence[float]) -> dict[str, float]:
    """Median / p90 / p95 / mean / min / max in milliseconds of samples given in seconds."""
    a = np.asarray(samples_s, dtype=float) * 1000.0
    if a.size == 0:
        return {"n": 0}
    return {
        "n": int(a.size),
        "median_ms": float(np.median(a)),
        "p90_ms": float(np.percentile(a, 90)),
        "p95_ms": float(np.percentile(a, 95)),
        "mean_ms": float(np.mean(a)),
        "min_ms": float(np.min(a)),
        "max_ms": float(np.max(a)),
    }


def machine() -> dict[str, Any]:
    """What the figures depend on: cores, load while measuring, library versions."""
    info: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "loadavg_1_5_15": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "machine": platform.machine(),
        "mujoco_gl": os.environ.get("MUJOCO_GL"),
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return info


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def emit(name: str, result: dict[str, Any], rows: list[Sequence[Any]], header: Sequence[str]) -> None:
    """Print the table (stderr) and the JSON (stdout, one line)."""
    cols = [list(map(str, header))] + [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cols) for i in range(len(header))]
    print(
        f"\n== {name} ==  (load {result['machine']['loadavg_1_5_15']}, {result['machine']['cpus']} cpus)",
        file=sys.stderr,
    )
    for j, r in enumerate(cols):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)), file=sys.stderr)
        if j == 0:
            print("  ".join("-" * w for w in widths), file=sys.stderr)
    sys.stderr.flush()
    record = {"benchmark": name, "command": command_line(), "commit": git_commit(), **result}
    text = json.dumps(record, default=_jsonable)
    print(text)
    sys.stdout.flush()
    path = results_path(name)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
        shown = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path
        print(f"raw results: {shown}", file=sys.stderr)


RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"


def results_path(name: str) -> Path | None:
    """Where a run's raw results go: `benchmarks/results/<name>[-<PEAR_BENCH_TAG>].json` (committed
    beside the table that cites them); `PEAR_BENCH_SAVE=0` writes none (tests, quick tries)."""
    if os.environ.get("PEAR_BENCH_SAVE", "1") == "0":
        return None
    tag = os.environ.get("PEAR_BENCH_TAG", "").strip()
    return RESULTS_DIR / (f"{name}-{tag}.json" if tag else f"{name}.json")


def command_line() -> str:
    """The command that produced a result, as typed (relative to the repository root)."""
    script = Path(sys.argv[0])
    if script.resolve().is_relative_to(REPO_ROOT):
        script = script.resolve().relative_to(REPO_ROOT)
    return " ".join([str(script), *sys.argv[1:]])


def git_commit() -> str | None:
    import subprocess

    try:
        cmd = ["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 100 else f"{v:.1f}"
    return str(v)


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.floating | np.integer | np.bool_):
        return obj.item()
    raise TypeError(type(obj).__name__)


def expand_tasks(tasks: str) -> list[str]:
    """Comma-separated task names; `objects` stands for every `pick_up_object/<name>`."""
    from sim_adapters.mujoco.family import object_tasks

    out: list[str] = []
    for t in tasks.split(","):
        out += object_tasks() if t == "objects" else [t]
    return out


def record_episode(task: str = "pick_cube", seed: int = 0, robot: str = "panda") -> dict[str, Any]:
    """Run one scripted episode (render on, no records) and keep what each turn saw and sent.

    Returns the robot, kinematics, backend, and per turn: the observation (with its images),
    the reply text, and the messages list exactly as the policy received it.
    """
    from pear_agent.loop.arm_environment import arm_episode
    from pear_agent.loop.registry import make_backend
    from pear_agent.loop.task_experts import scripted_policy
    from pear_agent.robot.kinematics import Kinematics
    from pear_agent.robot.loader import load_robot

    cfg = load_robot(robot)
    backend = make_backend(task, cfg, render=True)
    kin = Kinematics(cfg)
    inner = scripted_policy(task)
    turns: list[dict[str, Any]] = []

    class Recorder:
        name = "scripted"

        def reset(self, s: int) -> None:
            inner.reset(s)

        def act(self, messages, ctx):
            reply = inner.act(messages, ctx)
            turns.append(
                {"obs": ctx.observation, "reply": reply.text, "messages": json.loads(json.dumps(messages))}
            )
            return reply

    result = arm_episode(backend, kin, Recorder()).run(seed)
    return {"robot": cfg, "kin": kin, "backend": backend, "turns": turns, "result": result}
