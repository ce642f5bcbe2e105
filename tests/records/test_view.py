"""`--view` and `pear-agent view`: real episodes into a Rerun recording, read back with Rerun's own
reader (`rerun.chunk.RrdReader`), and checked against the episode's log: counts per entity, the
reply texts, the targets, the joint series and their timestamps."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

rerun = pytest.importorskip("rerun")
from rerun.chunk import RrdReader  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pear_agent", *args], cwd=REPO, capture_output=True, text=True, timeout=600
    )


def read_rrd(path: Path) -> dict[str, dict[str, list[Any]]]:
    """Entity path -> column -> values over all its chunks (timelines as integers: ns or sequence)."""
    out: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for chunk in RrdReader(path).stream().to_chunks():
        rb = chunk.to_record_batch()
        for name in rb.schema.names:
            col = rb.column(name)
            if name in ("turn", "sim_time", "log_time"):
                out[chunk.entity_path][name] += col.cast("int64").to_pylist()
            elif name != "rerun.controls.RowId":
                out[chunk.entity_path][name] += col.to_pylist()
    return out


def read_log(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lines = [json.loads(x) for x in (run_dir / "episode.jsonl").read_text().splitlines() if x.strip()]
    return lines[0], [r for r in lines if r.get("kind") == "turn"]


def _sorted_by_turn(entity: dict[str, list[Any]], column: str) -> list[Any]:
    pairs = sorted(zip(entity["turn"], entity[column], strict=True), key=lambda p: p[0])
    return [v for _, v in pairs]


@pytest.fixture(scope="module")
def arm_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    runs = tmp_path_factory.mktemp("runs")
    p = _cli("run", "--view", "--no-video", "--json", "--runs-dir", str(runs))
    assert p.returncode == 0, p.stderr
    return Path(json.loads(p.stdout.strip().splitlines()[-1])["run_dir"])


def check_arm_recording(rrd: Path, run_dir: Path) -> None:
    header, turns = read_log(run_dir)
    n = len(turns)
    assert n >= 3
    ent = read_rrd(rrd)
    # every camera image the model got, one per turn, at that turn
    for cam in turns[0]["images"]:
        assert sorted(ent[f"/cameras/{cam}"]["turn"]) == list(range(1, n + 1)), cam
    # reply text and parsed action as logged
    assert _sorted_by_turn(ent["/model/reply"], "TextDocument:text") == [[t["reply"]] for t in turns]
    assert len(ent["/model/action"]["turn"]) == sum(1 for t in turns if t.get("action"))
    assert [v[0] for v in _sorted_by_turn(ent["/decision/latency_s"], "Scalars:scalars")] == pytest.approx(
        [t["latency_s"] for t in turns]
    )
    # commanded targets: one per turn that had an IK target, in metres
    tgt_turns = [t for t in turns if (t.get("plan") or {}).get("ik", {}).get("arm")]
    assert len(ent["/world/arm/target"]["turn"]) == len(tgt_turns) > 0
    first = _sorted_by_turn(ent["/world/arm/target"], "Points3D:positions")[0][0]
    assert first == pytest.approx(
        [v / 100 for v in tgt_turns[0]["plan"]["ik"]["arm"]["target_position_cm"]], abs=1e-5
    )
    # joint series: a position per joint per turn, at the turn's observation time (the previous
    # turn's end), and velocities from the second turn on
    obs_t_ns = [0] + [round(t["sim_time_s"] * 1e9) for t in turns[:-1]]
    joints = [e for e in ent if e.startswith("/joints/arm/") and e.endswith("/position_rad")]
    assert len(joints) == len(turns[0]["joints_rad"]["arm"]) == 7
    for k, e in enumerate(sorted(joints, key=lambda s: s.split("/")[3])):
        assert sorted(ent[e]["turn"]) == list(range(1, n + 1))
        assert sorted(ent[e]["sim_time"]) == pytest.approx(obs_t_ns, abs=2000)
        values = [v[0] for v in _sorted_by_turn(ent[e], "Scalars:scalars")]
        assert values == pytest.approx([t["joints_rad"]["arm"][k] for t in turns], abs=1e-6)
        assert len(ent[e.replace("position_rad", "velocity_rad_s")]["turn"]) == n - 1
    # the robot's link frames from its model, once per turn, moving
    links = _sorted_by_turn(ent["/world/robot/links"], "Points3D:positions")
    assert len(links) == n and len(links[0]) >= 7
    assert links[0] != links[-1]
    assert ent["/episode/instruction"]["TextDocument:text"] == [[header["instruction"]]]


def test_run_view_writes_a_recording_with_every_turn(arm_run: Path) -> None:
    check_arm_recording(arm_run / "episode.rrd", arm_run)


def test_view_command_rebuilds_the_same_recording_from_the_log(arm_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "again.rrd"
    p = _cli("view", str(arm_run), "--out", str(out))
    assert p.returncode == 0, p.stderr
    check_arm_recording(out, arm_run)
    live, offline = read_rrd(arm_run / "episode.rrd"), read_rrd(out)
    assert {e: len(c["turn"]) for e, c in live.items() if "turn" in c} == {
        e: len(c["turn"]) for e, c in offline.items() if "turn" in c
    }


def test_view_command_bad_input_is_one_line(tmp_path: Path) -> None:
    p = _cli("view", str(tmp_path))
    assert p.returncode == 2 and "no episode log" in p.stderr and "Traceback" not in p.stderr


def test_no_view_no_recording_and_no_rerun_import(tmp_path: Path) -> None:
    runs = str(tmp_path)
    code = (
        "import sys; from pear_agent.cli import main; "
        f"rc = main(['run', '--no-video', '--json', '--runs-dir', {runs!r}]); "
        "print('RERUN' if 'rerun' in sys.modules else 'NO-RERUN'); sys.exit(rc)"
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1] == "NO-RERUN"
    assert not list(tmp_path.rglob("*.rrd"))


def test_bench_view_records_only_the_chosen_episode(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    p = _cli("bench", "--tasks", "pick_cube", "--seeds", "0-1", "--no-video", "--quiet", "--out", str(out),
             "--view", "pick_cube/s1")  # fmt: skip
    assert p.returncode == 0, p.stderr
    rrds = sorted(out.rglob("episode.rrd"))
    assert [r.parent.name for r in rrds] == ["pick_cube-s1"]
    check_arm_recording(rrds[0], rrds[0].parent)


def test_roadster_view_has_aircraft_pose_scene_and_telemetry(tmp_path: Path) -> None:
    p = _cli(
        "run", "--task", "roadster_kickflip", "--view", "--no-video", "--json", "--runs-dir", str(tmp_path)
    )
    assert p.returncode == 0, p.stderr
    run_dir = Path(json.loads(p.stdout.strip().splitlines()[-1])["run_dir"])
    _, turns = read_log(run_dir)
    ent = read_rrd(run_dir / "episode.rrd")
    rows = sum(len(t.get("rows") or []) for t in turns)
    # a pose at every turn's telemetry row and every row flown after it
    assert len(ent["/world/aircraft"]["turn"]) == len(turns) + rows
    assert "/world/truck" in ent and "/world/road" in ent
    assert len(ent["/telemetry/row"]["turn"]) == len(turns)
    assert len(ent["/telemetry/h_m"]["turn"]) == len(turns) + rows
    assert max(v[0] for v in ent["/telemetry/h_m"]["Scalars:scalars"]) > 1.0  # the car flew
    last_t = max(ent["/world/aircraft"]["sim_time"])
    assert last_t == pytest.approx(turns[-1]["sim_time_s"] * 1e9, rel=1e-6)
