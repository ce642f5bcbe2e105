from pathlib import Path

from pear_agent.records import RunWriter, new_run_dir


def test_run_dir_is_flat_and_unique(tmp_path: Path) -> None:
    a = new_run_dir(tmp_path, "libero_spatial/3", 0)
    b = new_run_dir(tmp_path, "libero_spatial/3", 0)
    assert a.parent == tmp_path and b.parent == tmp_path and a != b
    assert "/" not in a.name and "libero_spatial_3" in a.name


def test_log_lines_are_flushed_and_secrets_redacted(tmp_path: Path) -> None:
    w = RunWriter(tmp_path, video_fps=None, secrets=["hunter2-secret"])
    w.log({"turn": 1, "reply": "key is hunter2-secret and sk-abcdefghijklmnop"})
    text = (tmp_path / "episode.jsonl").read_text()  # readable before finish(): flushed per line
    assert "hunter2" not in text and "sk-abcdefghijklmnop" not in text and text.count("[redacted]") == 2
    w.finish({"success": True})
    assert (tmp_path / "summary.json").is_file() and not (tmp_path / "episode.mp4").exists()
