"""`pear-agent run / prompt / bench / compare` with roadster tasks: the real CLI, in process."""

import json

import pytest

from pear_agent.cli import main

pytest.importorskip("mujoco")


def test_run_a_ramp_flip_prints_the_summary_with_the_reward(tmp_path, capsys):
    rc = main(["run", "--task", "roadster_ramp_flip", "--seed", "20001", "--no-video", "--json",
               "--runs-dir", str(tmp_path)])  # fmt: skip
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rc == 0 and summary["success"] and summary["task"] == "roadster_ramp_flip:light"
    assert summary["robot"] == "roadster" and 0.8 <= summary["reward"] <= 1.0
    assert (tmp_path / next(p.name for p in tmp_path.iterdir()) / "episode.jsonl").exists()


def test_run_realtime_with_a_3s_latency_crashes_the_kickflip(tmp_path, capsys):
    rc = main(["run", "--task", "roadster_kickflip", "--wind", "storm", "--seed", "20002", "--no-video",
               "--realtime", "--latency", "3", "--runs-dir", str(tmp_path)])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 1 and "realtime (+3 s per decision)" in out and "failure (crashed" in out


def test_bench_wind_axis_then_paired_compare_and_report(tmp_path, capsys):
    paused, late = tmp_path / "paused", tmp_path / "late"
    common = [
        "--tasks",
        "roadster_kickflip",
        "--wind",
        "light,storm",
        "--episodes",
        "3",
        "--no-video",
        "--quiet",
    ]
    assert main(["bench", *common, "--out", str(paused)]) == 0
    assert main(["bench", *common, "--out", str(late), "--realtime", "--latency", "1.0"]) == 0
    lines = [json.loads(x) for x in (paused / "results.jsonl").read_text().splitlines()]
    assert {x["key"] for x in lines} == {f"roadster_kickflip:{w}/s{s}" for w in ("light", "storm")
                                         for s in (20000, 20001, 20002)}  # fmt: skip
    assert all(x["policy"] == "pilot" and "reward" in x and x["wind"] in ("light", "storm") for x in lines)
    capsys.readouterr()
    assert main(["compare", str(paused), str(late), "--json"]) == 0
    c = json.loads(capsys.readouterr().out)
    assert c["shared"] == 6 and c["b"]["successes"] == 0
    assert c["a_only_success"] == c["a"]["successes"] >= 3  # every light kickflip lands paused
    page = next((paused / "episodes").iterdir()) / "report.html"
    assert "<svg" in page.read_text() and "reply s" in page.read_text()


def test_bad_wind_in_bench_is_one_line(tmp_path, capsys):
    rc = main(
        ["bench", "--tasks", "roadster_kickflip", "--wind", "breeze", "--out", str(tmp_path), "--quiet"]
    )
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err == (
        "pear-agent: error: --wind: unknown wind band 'breeze'; bands are: light, gale, storm"
    )


def test_prompt_prints_the_briefing_row_and_schema(capsys):
    assert main(["prompt", "--task", "roadster_kickflip", "--wind", "gale", "--schema"]) == 0
    out = capsys.readouterr().out
    assert "stunt: kickflip" in out and "telemetry t_s=0" in out and '"propertyName": "mode"' in out


def test_replay_of_a_recorded_flight_flies_it_again(tmp_path, capsys):
    args = ["run", "--task", "roadster_kickflip", "--wind", "gale", "--seed", "20004", "--no-video", "--json"]
    main([*args, "--runs-dir", str(tmp_path / "a")])
    first = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    log = next((tmp_path / "a").iterdir()) / "episode.jsonl"
    main([*args, "--runs-dir", str(tmp_path / "b"), "--policy", "replay", "--replay", str(log)])
    again = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (again["success"], again["detail"], again["turns"]) == (
        first["success"],
        first["detail"],
        first["turns"],
    )
    assert again["reward"] == first["reward"]


def test_run_flies_plans_on_an_injected_latency_and_lands_as_the_docs_say(tmp_path, capsys):
    """docs/roadster.md's example (`run` never told the planning pilot its decision time,
    and the car hit the truck in 4 turns while `bench` landed the same flight)."""
    flight = ["--task", "roadster_kickflip", "--wind", "light", "--seed", "20000"]
    plans = ["--realtime", "--latency", "1.0", "--max-chunk", "10"]
    rc = main(["run", *flight, *plans, "--no-video", "--runs-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert "realtime (+1 s per decision)" in out
    assert rc == 0 and any(line.startswith("landed in ") for line in out.splitlines()), out


def test_a_compact_windowed_flight_replays_through_the_cli(tmp_path, capsys):
    args = ["run", "--task", "roadster_kickflip", "--wind", "gale", "--seed", "20004", "--no-video", "--json",
            "--observation", "compact", "--history", "2"]  # fmt: skip
    assert main([*args, "--runs-dir", str(tmp_path / "a")]) == 0
    first = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert first["observation"] == "compact" and first["history"] == 2 and first["history_older"] == "line"
    log = next((tmp_path / "a").iterdir()) / "episode.jsonl"
    main([*args, "--runs-dir", str(tmp_path / "b"), "--policy", "replay", "--replay", str(log)])
    again = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (again["success"], again["detail"], again["turns"], again["reward"]) == (
        first["success"],
        first["detail"],
        first["turns"],
        first["reward"],
    )


def test_compact_prompt_prints_the_short_briefing_and_an_integer_row(capsys):
    assert main(["prompt", "--task", "roadster_kickflip", "--wind", "gale", "--observation", "compact"]) == 0
    out = capsys.readouterr().out
    assert "stunt: kickflip" in out and "one row of integers" in out
    row = out.split("=== user (turn 1) ===")[1].strip()
    assert row.startswith("t=0 h=") and "tt=" in row and "." not in row
