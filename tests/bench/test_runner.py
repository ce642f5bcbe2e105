"""The bench runner: seed splits, resumable JSONL (SIGKILL and restart), no key in any output."""

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pear_agent.bench.runner import SPLITS, BenchConfig, parse_seeds, read_results, run_bench, split_seeds
from tests.servers import serve_in_thread

pytestmark = pytest.mark.wallclock


def _bench(out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "pear_agent", "bench", "--out", str(out), "--quiet", "--no-video", *extra]


def test_splits_are_disjoint_and_named() -> None:
    ranges = sorted(SPLITS.values())
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(ranges))
    assert split_seeds("test", 3) == [20000, 20001, 20002]
    with pytest.raises(ValueError, match="unknown split"):
        split_seeds("dev", 3)


def test_parse_seeds() -> None:
    assert parse_seeds("0-3,7, 2") == [0, 1, 2, 3, 7]
    with pytest.raises(ValueError, match=r"expected e\.g\."):
        parse_seeds("a-b")


def test_torn_last_line_is_ignored(tmp_path) -> None:
    p = tmp_path / "results.jsonl"
    p.write_text('{"key": "t/s0", "success": true}\n{"key": "t/s1", "succ')
    assert [r["key"] for r in read_results(p)] == ["t/s0"]


def test_sigkill_then_restart_runs_every_episode_exactly_once(tmp_path) -> None:
    out = tmp_path / "bench"
    cmd = _bench(out, "--tasks", "conveyor_pick", "--seeds", "0-7", "--workers", "2")
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    results = out / "results.jsonl"
    deadline = time.monotonic() + 120
    while not (results.exists() and len(results.read_text().splitlines()) >= 2):
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline, "no results within 120 s"
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)  # the runner and its workers, mid-run
    proc.wait()
    first = read_results(results)
    assert 2 <= len(first) < 8
    with results.open("a") as f:  # as if killed in the middle of writing a line
        f.write('{"key": "conveyor_pick/s7", "success": tr')
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    keys = [rec["key"] for rec in read_results(results)]
    assert sorted(keys) == sorted(f"conveyor_pick/s{s}" for s in range(8))  # each exactly once
    assert len(results.read_text().splitlines()) == 8  # the torn line is gone
    assert keys[: len(first)] == [rec["key"] for rec in first]  # earlier results kept, not rerun
    assert "conveyor_pick" in r.stdout and "95% CI" in r.stdout and (out / "index.html").exists()


def test_resume_refuses_a_different_bench(tmp_path) -> None:
    cfg = BenchConfig(["pick_cube"], [0], {"kind": "scripted"}, str(tmp_path), video=False, render=False)
    run_bench(cfg, progress=False)
    cfg.mode = "realtime"
    with pytest.raises(ValueError, match="another --out"):
        run_bench(cfg, progress=False)


def test_bench_through_a_model_endpoint_never_writes_the_key(tmp_path) -> None:
    key = "sk-test-SECRET123456"
    out = tmp_path / "bench"
    with serve_in_thread() as url:
        r = subprocess.run(
            [
                *_bench(out, "--tasks", "pick_cube", "--seeds", "0-1", "--workers", "2", "--model", "expert"),
                *("--base-url", url, "--api-key-env", "PEAR_TEST_KEY", "--send-privileged", "--realtime"),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env=os.environ | {"PEAR_TEST_KEY": key},
        )
    assert r.returncode == 0, r.stderr[-2000:]
    recs = read_results(out / "results.jsonl")
    assert len(recs) == 2 and all(x["success"] and x["mode"] == "realtime" for x in recs)
    assert all(x["policy"] == "openai:expert" and x["latencies_s"] for x in recs)
    leaks = [str(p) for p in out.rglob("*") if p.is_file() and b"SECRET123456" in p.read_bytes()]
    assert leaks == [] and "SECRET123456" not in r.stdout + r.stderr
    assert (
        json.loads((out / "bench.json").read_text())["config"]["policy"]["settings"]["api_key_env"]
        == "PEAR_TEST_KEY"
    )


def test_bench_with_an_unset_key_variable_is_one_line(tmp_path) -> None:
    r = subprocess.run(
        _bench(
            tmp_path,
            "--tasks",
            "pick_cube",
            "--seeds",
            "0",
            "--model",
            "m",
            "--api-key-env",
            "PEAR_UNSET_VAR",
        ),
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "PEAR_UNSET_VAR" in r.stderr and "Traceback" not in r.stderr


def test_loop_options_reach_every_episode_and_belong_to_the_identity(tmp_path) -> None:
    opts = {"max_invalid": 1, "observation": "state", "scene_facts": False}
    cfg = BenchConfig(
        ["pick_cube"], [0], {"kind": "scripted"}, str(tmp_path), video=False, render=False, episode=opts
    )
    (rec,) = run_bench(cfg, progress=False)
    assert rec["max_invalid"] == 1 and rec["observation"] == "state" and rec["success"]
    cfg.episode = opts | {"max_invalid": 3}
    with pytest.raises(ValueError, match="another --out"):
        run_bench(cfg, progress=False)


def test_structured_output_auto_is_probed_once_by_the_runner(tmp_path) -> None:
    """The parent probes the server; the two workers reuse its answer (no probe per worker)."""
    from tests.servers import BadHandler, bad_server

    out = tmp_path / "bench"
    BadHandler.requests.clear()
    with bad_server() as root:
        r = subprocess.run(
            [
                *_bench(out, "--tasks", "pick_cube", "--seeds", "0-1", "--workers", "2", "--model", "m"),
                *("--base-url", f"{root}/llamaschema/v1", "--structured-output", "auto", "--max-turns", "1"),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "auto chose json_object" in r.stderr
    settings = json.loads((out / "bench.json").read_text())["config"]["policy"]["settings"]
    assert settings["structured_output_chosen"] == "json_object"
    probes = [b for _, b in BadHandler.requests if "response_format" in b and not b.get("stream")]
    assert len(probes) == 2  # json_schema (HTTP 500), then json_object: once for the whole bench
    episodes = [b for _, b in BadHandler.requests if b.get("stream")]
    assert len(episodes) == 2 and all(b["response_format"]["type"] == "json_object" for b in episodes)


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_kill_9_of_the_runner_ends_its_workers(tmp_path) -> None:
    """Only the runner is killed (not its process group): its spawned workers must not stay orphaned."""
    out = tmp_path / "bench"
    cmd = _bench(out, "--tasks", "conveyor_pick", "--seeds", "0-20", "--workers", "2")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    workers: list[int] = []
    results = out / "results.jsonl"
    while len(workers) < 2 or not (results.exists() and results.read_text().strip()):  # mid-episode
        assert proc.poll() is None and time.monotonic() < deadline, "workers did not start"
        time.sleep(0.2)
        workers = [c for c in _children(proc.pid) if "spawn_main" in Path(f"/proc/{c}/cmdline").read_text()]
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not all(_gone(w) for w in workers):
        time.sleep(0.1)
    left = [w for w in workers if not _gone(w)]
    for w in left:
        os.kill(w, signal.SIGKILL)
    assert left == [], f"orphaned bench workers: {left}"


def test_sigkill_with_episodes_in_flight_then_restart_runs_every_episode_exactly_once(tmp_path) -> None:
    """Three episodes in flight per worker: a SIGKILL loses only those, and a restart repeats none."""
    out = tmp_path / "bench"
    cmd = _bench(out, "--tasks", "conveyor_pick", "--seeds", "0-9", "--workers", "2", "--concurrency", "3")
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    results = out / "results.jsonl"
    deadline = time.monotonic() + 180
    while not (results.exists() and len(results.read_text().splitlines()) >= 2):
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline, "no results within 180 s"
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    first = read_results(results)
    assert 2 <= len(first) < 10
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    keys = [rec["key"] for rec in read_results(results)]
    assert sorted(keys) == sorted(f"conveyor_pick/s{s}" for s in range(10))  # each exactly once
    assert keys[: len(first)] == [rec["key"] for rec in first]


def test_max_in_flight_caps_what_the_server_sees_over_kept_alive_connections(tmp_path) -> None:
    """Eight episodes in flight in one worker against the real `serve` (uvicorn, HTTP): the server
    never sees more than --max-in-flight requests at once, and they come on a few reused connections."""
    from dataclasses import asdict

    from pear_agent.policies.model_settings import ModelSettings
    from tests.servers import InFlight

    counter = InFlight(None)
    with serve_in_thread(latency_s=0.3, counter=counter) as url:
        settings = ModelSettings(model="expert", base_url=url, send_privileged=True, max_in_flight=3)
        cfg = BenchConfig(
            ["pick_cube"],
            list(range(8)),
            {"kind": "openai", "settings": asdict(settings)},
            str(tmp_path),
            concurrency=8,
            video=False,
            render=False,
            max_turns=3,
        )
        recs = run_bench(cfg, progress=False)
    assert len(recs) == 8 and all(r["turns"] == 3 and r["end_reason"] == "turn_limit" for r in recs)
    assert counter.requests == 24 and 2 <= counter.peak <= 3
    assert len(counter.peers) <= 6  # keep-alive: connections reused, not one per request
    waits = []
    for r in recs:
        lines = (tmp_path / r["run_dir"] / "episode.jsonl").read_text().splitlines()[1:]
        waits += [json.loads(x)["policy_info"]["queue_s"] for x in lines]
    assert len(waits) == 24 and max(waits) > 0.1  # the wait for a slot is recorded, apart from latency
    # how many were in flight is not part of what the bench is: a resume may change it
    cfg.concurrency, cfg.policy["settings"]["max_in_flight"] = 2, 5
    assert len(run_bench(cfg, progress=False)) == 8


def test_bad_concurrency_is_one_line(tmp_path) -> None:
    r = subprocess.run(_bench(tmp_path, "--concurrency", "0"), capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--concurrency must be >= 1" in r.stderr and "Traceback" not in r.stderr
