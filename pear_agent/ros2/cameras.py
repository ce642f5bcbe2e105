"""Cameras and video of the ROS 2 backend (a mixin of `RosBackend`)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from pear_agent.robot.backend import FrameSink
from pear_agent.ros2 import conversions as cv


class Cameras:
    """Camera images for the model (decoded, newest per camera) and the video sink."""

    def _active_cameras(self) -> dict[str, str]:
        """Camera name -> topic: the robot YAML's cameras with a topic, less `disabled_cameras`."""
        off = {c.strip() for c in self.settings.disabled_cameras.split(",") if c.strip()}
        unknown = off - set(self.robot.cameras) - {"all"}
        if unknown:
            raise ValueError(
                f"disabled_cameras: {sorted(unknown)} are not cameras of robot {self.robot.name}"
            )
        return {
            n: c.topic for n, c in self.robot.cameras.items() if c.topic and n not in off and "all" not in off
        }

    def _pick_video_camera(self, wanted: str) -> str | None:
        cams = list(self.cameras)
        if wanted == "none":
            return None
        if not wanted:
            return cams[0] if cams else None
        if wanted not in cams:
            raise ValueError(
                f"video_camera {wanted!r}: not a camera with a topic in robot {self.robot.name} ({cams})"
            )
        return wanted

    def image_info(self) -> dict[str, dict[str, Any]]:
        """Per camera: the header stamp, the age at receipt-to-now and the native size."""
        now = time.monotonic()
        out = {}
        with self._lock:
            items = dict(self._images)
        for cam, (msg, compressed, t) in items.items():
            stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
            info: dict[str, Any] = {"stamp_s": round(stamp, 6), "age_s": round(now - t, 4)}
            if not compressed:
                info["native"] = [int(msg.width), int(msg.height)]
            out[cam] = info
        return out

    def _decode(self, cam: str, msg: Any, compressed: bool) -> np.ndarray | None:
        try:
            img = cv.compressed_to_rgb(msg) if compressed else cv.image_to_rgb(msg)
        except cv.ImageDecodeError as exc:
            self.node.get_logger().warning(f"camera {cam}: {exc}")
            return None
        c = self.robot.cameras[cam]
        return cv.fit_image(img, c.width, c.height)

    def _latest_images(self) -> dict[str, np.ndarray]:
        """Each camera's latest image, resized to the robot YAML's declared resolution."""
        out = {}
        with self._lock:
            pending = {k: v for k, v in self._images.items() if k not in self._decoded}
            out.update(self._decoded)
        for cam, (msg, compressed, _) in pending.items():
            img = self._decode(cam, msg, compressed)
            if img is None:
                continue
            with self._lock:
                self._decoded[cam] = img
            out[cam] = img
        return {k: out[k] for k in self.robot.cameras if k in out}

    def _pump_video(self) -> None:
        """Hand the sink one frame per period of its rate while the caller waits on a motion and at
        each observation: the video camera's newest image, or the last one again when the camera is
        slower than the video, so the mp4 plays the motion at its real speed."""
        if self._sink is None or self.video_camera is None:
            return
        now = time.monotonic()
        if now < self._sink_due:
            return
        with self._lock:
            item = self._images.get(self.video_camera)
        if item is None:
            return
        frame = self._sink_frame
        if frame is None or item[2] > frame[0]:
            img = self._decode(self.video_camera, item[0], item[1])
            if img is not None:
                frame = self._sink_frame = (item[2], img)
        if frame is None:
            return
        self._sink(frame[1])
        # on schedule; after a pause (the model deciding: nothing moved) start afresh
        behind = now - self._sink_due > self._sink_period_s
        self._sink_due = (now if behind else self._sink_due) + self._sink_period_s

    def set_frame_sink(self, sink: FrameSink | None, fps: float | None = None) -> None:
        """Frames of `video_camera` (resized like the model's images) go to `sink` at `fps` (default
        `video_fps`, the rate the mp4 is written at) while a motion runs and at each observation."""
        fps = fps or self.video_fps
        self._sink = sink
        self._sink_period_s = 1.0 / fps if fps > 0 else 0.1
        self._sink_due = 0.0
        self._sink_frame = None
