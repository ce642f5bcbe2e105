"""`pear-agent export --format lerobot --per-turn` on a real 20-episode bench (the scripted expert on
pick_cube), loaded back with LeRobot's own `LeRobotDataset` (in .venv-lerobot, where
scripts/setup_lerobot.sh puts LeRobot): frame counts, episode boundaries, actions, states, camera
shapes and contents, tasks and outcomes equal to the source logs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from pear_agent.cli import lerobot_python

REPO = Path(__file__).resolve().parents[2]
EPISODES = 20


def _cli(*args: str, timeout: int = 1200) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pear_agent", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout
    )


def _logs(bench: Path) -> list[tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]]:
    out = []
    for log in sorted(bench.rglob("episode.jsonl")):
        lines = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
        turns = [r for r in lines if r.get("kind") == "turn" and r.get("action") is not None]
        out.append(
            (lines[0], turns, json.loads((log.parent / "summary.json").read_text()) | {"dir": log.parent})
        )
    return out


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    py = lerobot_python()
    if py is None:
        pytest.skip("LeRobot is not installed: bash scripts/setup_lerobot.sh")
    root = tmp_path_factory.mktemp("lerobot")
    bench, out = root / "bench", root / "dataset"
    p = _cli("bench", "--tasks", "pick_cube", "--seeds", f"0-{EPISODES - 1}", "--no-video", "--quiet",
             "--workers", "2", "--out", str(bench))  # fmt: skip
    assert p.returncode == 0, p.stderr
    p = _cli("export", "--format", "lerobot", "--per-turn", str(bench), "--out", str(out))
    assert p.returncode == 0, p.stderr[-3000:]
    info = json.loads(p.stdout.strip().splitlines()[-1])
    assert info["format"] == "lerobot v3.0" and info["episodes"] == EPISODES
    load = subprocess.run(
        [py, str(REPO / "tests" / "export" / "load_lerobot.py"), str(out)],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert load.returncode == 0, load.stderr[-3000:]
    return bench, json.loads(load.stdout.strip().splitlines()[-1])


def test_lerobot_dataset_matches_the_logs(exported: tuple[Path, dict[str, Any]]) -> None:
    bench, ds = exported
    logs = _logs(bench)
    assert len(logs) == EPISODES
    assert ds["codebase_version"] == ds["info_version"] == "v3.0" and ds["fps"] == 10
    assert ds["num_episodes"] == EPISODES
    assert ds["num_frames"] == sum(len(t) for _, t, _ in logs) == len(ds["frames"])
    start = 0
    for k, (header, turns, summary) in enumerate(logs):
        # episode boundaries: LeRobot's episode index range = the turns with actions, in order
        assert ds["episodes"][k] == {"from": start, "to": start + len(turns)}, k
        frames = ds["frames"][start : start + len(turns)]
        start += len(turns)
        for i, (f, t) in enumerate(zip(frames, turns, strict=True)):
            assert f["episode_index"] == k and f["frame_index"] == i
            assert f["timestamp"] == pytest.approx(i / 10, abs=1e-4)
            assert f["task"] == header["instruction"]
            act = t["action"]["action"]["arm"]
            want = list(act.get("move_cm", [0, 0, 0])) + list(act.get("turn_rad", [0, 0, 0]))
            want.append(act["gripper"] if "gripper" in act else t["state"]["arm"]["gripper"])
            assert f["action"] == pytest.approx(want, abs=1e-5)
            st = t["state"]["arm"]
            assert f["observation.state"] == pytest.approx(
                st["position"] + st["orientation"] + [st["gripper"]], abs=1e-5
            )
            ik = t.get("plan", {}).get("ik", {}).get("arm") or {}
            assert f["action.joints_rad"] == pytest.approx(
                ik.get("target_joints_rad") or t["joints_rad"]["arm"], abs=1e-5
            )
            for cam, rel in t["images"].items():
                src = cv2.imread(str(summary["dir"] / rel), cv2.IMREAD_COLOR)
                key = f"observation.images.{cam}"
                assert f["images"][key] == [3, *src.shape[:2]]
                # the video frame is this turn's image (lossy AV1: compared by mean brightness)
                assert f["image_mean"][key] == pytest.approx(float(np.mean(src)) / 255.0, abs=0.02)
            last = i == len(turns) - 1
            assert f["next.done"] is last
            assert f["next.success"] is (last and bool(summary["success"]))


def test_episode_outcomes_are_in_the_metadata(exported: tuple[Path, dict[str, Any]]) -> None:
    bench, _ = exported
    out = bench.parent / "dataset"
    rows = [json.loads(x) for x in (out / "meta" / "pear_agent_episodes.jsonl").read_text().splitlines()]
    logs = _logs(bench)
    assert [r["success"] for r in rows] == [bool(s["success"]) for _, _, s in logs]
    assert [r["end_reason"] for r in rows] == [s["end_reason"] for _, _, s in logs]
    info = json.loads((out / "meta" / "info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["fps"] == 10 and info["total_episodes"] == EPISODES
    assert {"observation.images.front", "observation.images.wrist", "action", "action.joints_rad"} <= set(
        info["features"]
    )


def test_export_bad_input_is_one_line(tmp_path: Path) -> None:
    p = _cli("export", "--format", "lerobot", str(tmp_path / "nope"), "--out", str(tmp_path / "ds"))
    assert p.returncode == 2 and "no such run folder" in p.stderr and "Traceback" not in p.stderr
