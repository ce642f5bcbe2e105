"""Episode records: a run folder with a JSONL line per turn (flushed as it happens), the images
sent to the model, a summary JSON, and an mp4 of the episode (encoded when the episode ends)."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

SECRET_PATTERNS = [re.compile(r"sk-[A-Za-z0-9_\-]{8,}")]


def read_log(log_path: Path, error: type[Exception] = ValueError) -> Iterator[dict[str, Any]]:
    """The records of an episode.jsonl, in order; blank lines skipped, a line that is not JSON is
    `error` naming the file and line (the exporter's and the viewer's own error classes)."""
    for n, line in enumerate(log_path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError:
            raise error(f"{log_path}:{n}: not a JSON line") from None


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.floating | np.integer):
        return obj.item()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def new_run_dir(root: Path, task: str, seed: int) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    safe_task = re.sub(r"[^A-Za-z0-9_.-]+", "_", task)  # e.g. libero_spatial/3 -> libero_spatial_3
    base = Path(root) / f"{stamp}-{safe_task}-s{seed}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    path.mkdir(parents=True)
    return path


class VideoWriter:
    """H.264 mp4 through the ffmpeg binary that ships in the imageio-ffmpeg wheel.

    Frames are kept (JPEG-compressed, in memory) during the episode and encoded by `close()`, after
    the episode: x264 never competes for the CPU with a model server during timed decisions.
    """

    def __init__(self, path: Path, fps: float, frame_quality: int = 95) -> None:
        self.path, self.fps = path, fps
        self.frame_quality = frame_quality
        self._frames: list[bytes] = []
        self._size: tuple[int, int] | None = None
        self.frames = 0

    def add(self, frame: np.ndarray) -> None:
        import cv2  # heavy: cv2

        h, w = frame.shape[:2]
        if self._size is None:
            self._size = (w, h)
        elif self._size != (w, h):
            raise ValueError(f"frame size changed from {self._size} to {(w, h)}")
        ok, buf = cv2.imencode(
            ".jpg", np.ascontiguousarray(frame[..., ::-1]), [cv2.IMWRITE_JPEG_QUALITY, self.frame_quality]
        )
        if not ok:
            raise ValueError("frame encoding failed")
        self._frames.append(buf.tobytes())
        self.frames += 1

    def close(self) -> None:
        """Encode the kept frames into the mp4 (nothing to do without frames)."""
        if not self._frames or self._size is None:
            return
        import cv2  # heavy: cv2
        import imageio_ffmpeg  # optional: imageio_ffmpeg

        gen = imageio_ffmpeg.write_frames(
            str(self.path),
            self._size,
            fps=self.fps,
            codec="libx264",
            pix_fmt_out="yuv420p",
            macro_block_size=2,
            quality=7,
            ffmpeg_log_level="error",
        )
        gen.send(None)
        try:
            for jpeg in self._frames:
                bgr = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
                gen.send(np.ascontiguousarray(bgr[..., ::-1]))
        finally:
            gen.close()
            self._frames = []


class RunWriter:
    def __init__(
        self, run_dir: Path, video_fps: float | None = 10.0, secrets: list[str] | None = None
    ) -> None:
        self.run_dir = Path(run_dir)
        (self.run_dir / "images").mkdir(parents=True, exist_ok=True)
        self.log_path = self.run_dir / "episode.jsonl"
        self._log = self.log_path.open("a", encoding="utf-8")
        self._secrets = [s for s in (secrets or []) if s]
        self.video: VideoWriter | None = None
        if video_fps:
            self.video = VideoWriter(self.run_dir / "episode.mp4", video_fps)
        self.observers: list[Any] = []
        """Objects with `record(line)` and `close(summary)` (`pear_agent.records.view.EpisodeView`): they get
        each log line as written (secrets redacted) and the summary. Empty unless asked for."""

    def redact(self, text: str) -> str:
        for s in self._secrets:
            text = text.replace(s, "[redacted]")
        for pat in SECRET_PATTERNS:
            text = pat.sub("[redacted]", text)
        return text

    def write_text(self, name: str, text: str) -> Path:
        path = self.run_dir / name
        path.write_text(self.redact(text), encoding="utf-8")
        return path

    def save_image(self, turn: int, camera: str, jpeg: bytes) -> str:
        rel = f"images/turn_{turn:03d}_{camera}.jpg"
        (self.run_dir / rel).write_bytes(jpeg)
        return rel

    def save_control(self, turn: int, arrays: dict[str, np.ndarray]) -> str:
        """A turn's control-rate recording (`ArmEnvironment.take_recording`) as one .npz."""
        rel = f"control/turn_{turn:03d}.npz"
        (self.run_dir / "control").mkdir(exist_ok=True)
        np.savez(self.run_dir / rel, **arrays)
        return rel

    def log(self, record: dict[str, Any]) -> None:
        line = self.redact(json.dumps(record, default=_jsonable))
        self._log.write(line + "\n")
        self._log.flush()
        if self.observers:
            self._notify("record", json.loads(line))

    def add_frame(self, frame: np.ndarray) -> None:
        if self.video is not None:
            try:
                self.video.add(frame)
            except Exception as exc:  # a broken encoder must not end the episode
                log.warning("video disabled: %s", exc)
                self.video = None

    def finish(self, summary: dict[str, Any]) -> None:
        if self.video is not None:
            try:
                self.video.close()  # encoded now, after the episode's timed decisions
            except Exception as exc:  # a broken encoder must not lose the summary
                log.warning("video not written: %s", exc)
            if self.video.frames and self.video.path.exists():
                summary["video"] = str(self.video.path)
        text = self.redact(json.dumps(summary, indent=2, default=_jsonable))
        (self.run_dir / "summary.json").write_text(text, encoding="utf-8")
        self._log.close()
        if self.observers:
            self._notify("close", json.loads(text))

    def _notify(self, method: str, payload: dict[str, Any]) -> None:
        """Pass a line or the summary on; an observer that fails is dropped, the episode goes on."""
        for obs in list(self.observers):
            try:
                getattr(obs, method)(payload)
            except Exception as exc:  # a broken viewer must not end the episode
                log.warning("episode view disabled: %s", exc)
                self.observers.remove(obs)
