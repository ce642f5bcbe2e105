from pathlib import Path

from pear_agent.records.log import RunWriter, new_run_dir


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


def test_video_is_encoded_when_the_episode_finishes(tmp_path: Path) -> None:
    import imageio_ffmpeg
    import numpy as np

    w = RunWriter(tmp_path, video_fps=10)
    frame = np.zeros((48, 64, 3), np.uint8)
    for i in range(15):
        frame[:, : 4 * (i + 1), 0] = 255  # a red bar growing left to right
        w.add_frame(frame)
    assert not (tmp_path / "episode.mp4").exists()  # nothing encoded while the episode runs
    summary: dict = {"success": True}
    w.finish(summary)
    frames, secs = imageio_ffmpeg.count_frames_and_secs(str(tmp_path / "episode.mp4"))
    assert frames == 15 and secs > 1 and summary["video"].endswith("episode.mp4")
    reader = imageio_ffmpeg.read_frames(str(tmp_path / "episode.mp4"))
    meta = next(reader)
    last = None
    for raw in reader:
        last = np.frombuffer(raw, np.uint8).reshape(meta["size"][1], meta["size"][0], 3)
    assert last[24, 50, 0] > 200 and last[24, 50, 2] < 60  # red stays red through the kept frames
