import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pear_agent", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_run_default_json_summary(tmp_path: Path) -> None:
    p = _cli("run", "--json", "--runs-dir", str(tmp_path))
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout.strip().splitlines()[-1])
    assert summary["success"] is True and summary["turns"] >= 3
    run_dir = Path(summary["run_dir"])
    assert (run_dir / "episode.jsonl").is_file() and (run_dir / "episode.mp4").stat().st_size > 1000
    assert summary["task"] == "pick_cube" and summary["robot"] == "panda" and summary["mode"] == "paused"


def test_run_human_output_names_log_and_video(tmp_path: Path) -> None:
    p = _cli("run", "--task", "push_to_target", "--seed", "2", "--runs-dir", str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert "pear-agent: panda / push_to_target / scripted / seed 2 / paused" in p.stdout
    assert "turn 1" in p.stdout and "success in" in p.stdout and "episode.mp4" in p.stdout


def test_robots_lists_and_validates() -> None:
    p = _cli("robots")
    assert p.returncode == 0 and "panda" in p.stdout and "ok" in p.stdout


def test_prompt_describes_frames_units_parts_cameras_action() -> None:
    p = _cli("prompt", "--robot", "panda", "--task", "place_in_bowl", "--schema")
    assert p.returncode == 0, p.stderr
    for needle in [
        "=== system ===",
        "Coordinate frame",
        "cm",
        "rad",
        "`arm`",
        "`front`",
        "`wrist`",
        "# The action",
        "Put the red cube into the blue bowl.",
        'State: {"arm"',
        "[image `front`: 256x256 JPEG",
        '"additionalProperties": false',
    ]:
        assert needle in p.stdout, needle


def test_bad_input_gives_one_line_error_not_traceback() -> None:
    for args, needle in [
        (("run", "--task", "fly"), "unknown task 'fly'"),
        (("run", "--robot", "nope"), "robot 'nope'"),
        (("run", "--policy", "replay"), "needs --replay"),
    ]:
        p = _cli(*args)
        assert p.returncode == 2 and needle in p.stderr and "Traceback" not in p.stderr, p.stderr
