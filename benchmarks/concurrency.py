"""Episodes in flight against one model server: a local OpenAI-compatible server with a
fixed decision time answers every request with a valid hold-still action; `pear-agent bench
--concurrency N` runs pick_cube episodes (`--no-video`, a fixed number of turns) against it.

Per size N (episodes in flight): episodes/hour end to end against the server-bound ideal
(N x 3600 / (turns x decision time)), the same in the steady middle of the run (requests the server
completed per second against N / decision time), requests in flight measured at the server (peak,
time-weighted mean), the runtime's CPU per turn (the bench and its workers, start-up included; the
server's own CPU is not counted), and the peak memory (RSS summed over the bench's processes).

    .venv/bin/python benchmarks/concurrency.py [--sizes 1,8,64,256] [--decision-s 2] [--turns 10]
        [--observation both|state] [--workers 1] [--waves 2]
    .venv-libero/bin/python benchmarks/concurrency.py --task libero_spatial/0 --sizes 1,8 (LIBERO)

The server runs in its own process (`--serve`), started by the script.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import _common  # noqa: F401  (sets sys.path and MUJOCO_GL)
from _common import REPO_ROOT, emit, machine, verdict
from fastapi import FastAPI, Request  # module level: the server's annotations must resolve here

HOLD = {
    "pick_cube": '{"action": {"arm": {"gripper": 1.0}}}',
}
"""A valid action that keeps the robot where it is (the gripper is open already)."""
HOLD_DEFAULT = '{"action": {"arm": {"gripper": 1.0}}}'


# -- the server (its own process) -------------------------------------------------------------
def serve(port: int, decision_s: float, reply: str) -> None:
    """A chat-completions endpoint that takes exactly `decision_s` per request (streamed or not) and
    counts what it sees: requests in flight, each request's start and end."""
    import asyncio

    import uvicorn
    from fastapi.responses import StreamingResponse

    app = FastAPI()
    state: dict[str, Any] = {"now": 0, "peak": 0, "spans": []}
    text = f"I hold still.\n```json\n{reply}\n```"

    @app.post("/reset")
    async def reset() -> dict[str, Any]:
        state.update(now=0, peak=0, spans=[])
        return {"ok": True}

    @app.get("/stats")
    async def stats() -> dict[str, Any]:
        return {"peak": state["peak"], "spans": state["spans"]}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": "hold", "object": "model"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        body = await request.json()
        t0 = time.time()
        state["now"] += 1
        state["peak"] = max(state["peak"], state["now"])
        try:
            await asyncio.sleep(decision_s)
        finally:
            state["now"] -= 1
            state["spans"].append((t0, time.time()))
        usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
        if not body.get("stream"):
            choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            head = {"id": "x", "object": "chat.completion", "created": 0, "model": "hold"}
            return head | {"choices": [choice], "usage": usage}

        def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> str:
            choices = [{"index": 0, "delta": delta, "finish_reason": finish}] if delta is not None else []
            obj = {
                "id": "x",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "hold",
                "choices": choices,
            }
            return f"data: {json.dumps(obj | extra)}\n\n"

        async def events() -> Any:
            yield chunk({"role": "assistant", "content": text})
            yield chunk({}, "stop")
            yield chunk(None, usage=usage)
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", backlog=4096)


# -- the measurement ----------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(url: str, data: bytes | None = None) -> Any:
    with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=30) as r:
        return json.loads(r.read())


def tree_rss_mb(root: int) -> float:
    """RSS of `root` and all its descendants, MB."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            pid = int(stat.parent.name)
            parents[pid] = int(fields[1])
            rss[pid] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            continue
    keep, frontier = {root}, [root]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parents.items() if pp == p and c not in keep]
        keep.update(kids)
        frontier += kids
    return sum(rss.get(p, 0) for p in keep) / 2**20


def steady(spans: list[list[float]], decision_s: float) -> tuple[float, float, float]:
    """(requests completed per second, time-weighted mean in flight, active seconds) over the middle
    half of the time the server was busy."""
    if not spans:
        return 0.0, 0.0, 0.0
    t0, t1 = min(s for s, _ in spans), max(e for _, e in spans)
    lo, hi = t0 + (t1 - t0) / 4, t1 - (t1 - t0) / 4
    done = sum(1 for _, e in spans if lo <= e < hi)
    busy = sum(max(0.0, min(e, hi) - max(s, lo)) for s, e in spans)
    width = max(hi - lo, 1e-9)
    return done / width, busy / width, t1 - t0


def run_size(
    args: argparse.Namespace, url: str, n: int, workdir: Path, turns: int | None = None
) -> dict[str, Any]:
    turns_each = turns or args.turns
    per_worker = max(1, -(-n // args.workers))
    in_flight = per_worker * args.workers
    episodes = in_flight * args.waves
    out = workdir / f"n{n}-t{turns_each}"
    http(url.removesuffix("/v1") + "/reset", b"")
    cmd = [args.python, "-m", "pear_agent", "bench", "--tasks", args.task, "--seeds", f"0-{episodes - 1}"]
    cmd += ["--no-video", "--quiet", "--out", str(out), "--model", "hold", "--base-url", url]
    cmd += [
        "--max-turns",
        str(turns_each),
        "--max-context-tokens",
        "1000000",
        "--observation",
        args.observation,
    ]
    cmd += ["--workers", str(args.workers), "--concurrency", str(per_worker), "--timeout-s", "600"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load0 = os.getloadavg()
    t0 = time.time()
    env = os.environ | {"MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak_mb = 0.0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak_mb
        while not stop.is_set():
            peak_mb = max(peak_mb, tree_rss_mb(proc.pid))
            stop.wait(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    wall = time.time() - t0
    stop.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"bench of {n} in flight failed: {err.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    results = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    turns = sum(int(r["turns"]) for r in results)
    stats = http(url.removesuffix("/v1") + "/stats")
    rate, mean_in_flight, _active = steady(stats["spans"], args.decision_s)
    ideal_eph = in_flight * 3600 / (turns_each * args.decision_s)
    eph = len(results) * 3600 / wall
    return {
        "in_flight": in_flight,
        "workers": args.workers,
        "concurrency_per_worker": per_worker,
        "episodes": len(results),
        "turns": turns,
        "end_reasons": sorted({r["end_reason"] for r in results}),
        "wall_s": wall,
        "episodes_per_hour": eph,
        "ideal_episodes_per_hour": ideal_eph,
        "of_ideal_end_to_end": eph / ideal_eph,
        "steady_requests_per_s": rate,
        "of_ideal_steady": rate / (in_flight / args.decision_s),
        "server_peak_in_flight": stats["peak"],
        "server_mean_in_flight_steady": mean_in_flight,
        "server_requests": len(stats["spans"]),
        "runtime_cpu_s": cpu,
        "runtime_cpu_ms_per_turn": 1000 * cpu / max(turns, 1),
        "peak_rss_mb": peak_mb,
        "rss_mb_per_episode_in_flight": peak_mb / in_flight,
        "loadavg_before": [round(x, 2) for x in load0],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1,8,64,256", help="episodes in flight, comma-separated")
    ap.add_argument("--decision-s", type=float, default=2.0, help="the server's fixed time per decision")
    ap.add_argument("--turns", type=int, default=10, help="turns per episode (--max-turns; holding still)")
    ap.add_argument("--waves", type=int, default=2, help="episodes = waves x in flight")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--observation", default="both", choices=["both", "state"], help="state: no cameras")
    ap.add_argument("--task", default="pick_cube")
    ap.add_argument("--python", default=sys.executable, help="the Python that runs the bench")
    ap.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    reply = HOLD.get(args.task, HOLD_DEFAULT)
    if args.serve is not None:
        serve(args.serve, args.decision_s, reply)
        return

    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--serve",
            str(port),
            "--decision-s",
            str(args.decision_s),
            "--task",
            args.task,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.time() + 60
        while True:
            try:
                http(f"{url}/models")
                break
            except OSError:
                if time.time() > deadline or server.poll() is not None:
                    raise SystemExit("the benchmark's server did not start") from None
                time.sleep(0.2)
        sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
        rows = []
        with tempfile.TemporaryDirectory(prefix="concurrency-") as tmp:
            for n in sizes:
                row = run_size(args, url, n, Path(tmp))
                if args.turns > 1:  # the same episodes with one turn: start-up and resets, no more turns
                    one = run_size(args, url, n, Path(tmp), turns=1)
                    extra = max(row["turns"] - one["turns"], 1)
                    row["runtime_cpu_ms_per_extra_turn"] = (
                        1000 * (row["runtime_cpu_s"] - one["runtime_cpu_s"]) / extra
                    )
                    row["runtime_cpu_s_one_turn_run"] = one["runtime_cpu_s"]
                rows.append(row)
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
    targets = {r["in_flight"]: (0.9 if r["in_flight"] <= 64 else 0.7) for r in rows}
    ok = all(r["of_ideal_steady"] >= targets[r["in_flight"]] for r in rows)
    out = {
        "machine": machine(),
        "task": args.task,
        "decision_s": args.decision_s,
        "turns_per_episode": args.turns,
        "observation": args.observation,
        "sizes": rows,
        "target": ">= 90% of the server-bound ideal up to 64 in flight, >= 70% at 256 (steady)",
        "pass": ok,
    }
    table = [
        (
            r["in_flight"],
            r["episodes"],
            f"{r['wall_s']:.1f}",
            f"{r['episodes_per_hour']:.0f} / {r['ideal_episodes_per_hour']:.0f}",
            f"{100 * r['of_ideal_end_to_end']:.0f}%",
            f"{100 * r['of_ideal_steady']:.0f}%",
            f"{r['server_peak_in_flight']} / {r['server_mean_in_flight_steady']:.1f}",
            f"{r['runtime_cpu_ms_per_turn']:.1f} / {r.get('runtime_cpu_ms_per_extra_turn', 0):.1f}",
            f"{r['peak_rss_mb']:.0f} ({r['rss_mb_per_episode_in_flight']:.1f}/ep)",
            r["loadavg_before"][0],
        )
        for r in rows
    ]
    table.append(("verdict", verdict(ok), "", "", "", "", "", "", "", ""))
    header = ("in flight", "episodes", "wall s", "eps/h (ideal)", "end-to-end", "steady",
              "server peak/mean", "cpu ms/turn all/marginal", "peak RSS MB", "load")  # fmt: skip
    emit("concurrency", out, table, header)


if __name__ == "__main__":
    main()
