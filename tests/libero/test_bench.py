"""`pear-agent bench --suite`: LIBERO episodes through the one bench runner (resume, report,
end reasons), plus the per-suite layout with Wilson intervals."""

import json

import pytest

from sim_adapters.libero.family import format_summary, parse_range, suite_summary, suite_tasks


def test_ranges_and_task_names():
    assert parse_range("0-2,5", 10, "tasks") == [0, 1, 2, 5]
    with pytest.raises(ValueError, match="must lie in 0-9"):
        parse_range("3-10", 10, "tasks")
    with pytest.raises(ValueError, match="use N, N-M"):
        parse_range("a", 10, "tasks")
    assert suite_tasks("libero_spatial,libero_goal", "0-1") == [
        "libero_spatial/0",
        "libero_spatial/1",
        "libero_goal/0",
        "libero_goal/1",
    ]


def test_summary_layout_per_suite_and_overall():
    rs = [
        {"task": "libero_spatial/0", "seed": i, "success": i < 3, "turns": 10, "wall_time_s": 5.0}
        for i in range(5)
    ] + [{"task": "libero_object/1", "seed": 0, "success": False, "turns": 30, "wall_time_s": 9.0}]
    s = suite_summary(rs)
    assert s["suites"]["libero_spatial"]["successes"] == 3
    assert s["overall"]["episodes"] == 6
    lo, hi = s["overall"]["wilson95"]
    assert lo < 0.5 < hi
    assert s["tasks"]["libero_spatial/0"]["episodes"] == 5
    assert "overall" in format_summary(s)


def test_pear_agent_bench_suite_runs_through_the_bench_runner(tmp_path, capsys):
    """The bowl on the plate, scored by LIBERO's own check; results.jsonl, the HTML report and
    suites.json as for any bench; a second run resumes (nothing rerun)."""
    from pear_agent.cli import main

    out = tmp_path / "bench"
    argv = ["bench", "--suite", "libero_spatial", "--suite-tasks", "0", "--seeds", "1", "--out", str(out)]
    assert main([*argv, "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "libero_spatial" in printed and "overall" in printed
    (rec,) = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert (rec["task"], rec["seed"], rec["key"]) == ("libero_spatial/0", 1, "libero_spatial/0/s1")
    assert rec["success"] and rec["end_reason"] == "success", rec
    assert (out / "index.html").exists()
    assert json.loads((out / "suites.json").read_text())["overall"]["successes"] == 1
    assert main([*argv, "--quiet"]) == 0  # resumed: the episode is not run again
    assert len((out / "results.jsonl").read_text().splitlines()) == 1


def test_pear_agent_bench_suite_errors_are_one_line(capsys):
    from pear_agent.cli import main

    assert main(["bench", "--suite", "libero_nope"]) == 2
    assert "unknown suite 'libero_nope'" in capsys.readouterr().err
    assert main(["bench", "--preset", "libero_nope"]) == 2
    assert "unknown preset 'libero_nope'" in capsys.readouterr().err
    assert main(["bench", "--preset", "libero_plus/camera", "--seeds", "3"]) == 2
    assert "init state 0" in capsys.readouterr().err


def test_bench_preset_runs_the_protocol_and_pairs_with_libero(tmp_path, capsys, monkeypatch):
    """A preset is an ordinary bench (results.jsonl, resume, report) plus the paper's table: here
    cut to one LIBERO-Pro task and the LIBERO episode it pairs with (the full presets run 2,000
    episodes and more)."""
    from pear_agent.cli import main
    from sim_adapters.libero import presets

    tasks = ["libero_pro/language/libero_object/0", "libero_object/0"]
    monkeypatch.setattr(presets, "expand", lambda name, seeds=None: presets.Expansion(name, tasks, [0]))
    out = tmp_path / "bench"
    argv = ["bench", "--preset", "libero_pro/language", "--out", str(out), "--quiet"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "libero_pro/language" in printed and "drop vs LIBERO" in printed
    keys = {json.loads(x)["key"] for x in (out / "results.jsonl").read_text().splitlines()}
    assert keys == {"libero_pro/language/libero_object/0/s0", "libero_object/0/s0"}
    summary = json.loads((out / "libero_summary.json").read_text())
    (pro,) = [g for g in summary["groups"] if g["benchmark"] == "libero_pro"]
    assert pro["perturbation"] == "language" and pro["all"]["paired"]["pairs"] == 1
    assert (out / "index.html").exists()


def test_a_bench_process_exits_without_egl_teardown_errors(tmp_path):
    """Idle environments are closed before robosuite ends its EGL display at exit (handlers run
    last-registered first), so a finished bench prints no `EGLError` tracebacks."""
    import os
    import subprocess
    import sys

    argv = ["bench", "--suite", "libero_spatial", "--suite-tasks", "0", "--seeds", "0", "--max-turns", "2"]
    argv += ["--no-video", "--quiet", "--out", str(tmp_path / "bench")]
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    done = subprocess.run(
        [sys.executable, "-m", "pear_agent", *argv], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "bench" / "results.jsonl").exists()
    assert "EGLError" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr[-2000:]
