"""Loads a dataset with LeRobot's own `LeRobotDataset` (run under .venv-lerobot by
tests/export/test_lerobot_export.py) and prints what the test compares with the source logs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from lerobot.datasets.lerobot_dataset import CODEBASE_VERSION, LeRobotDataset


def main(root: str, frames_dir: str | None = None) -> None:
    """`frames_dir`: also write every decoded camera frame there as `<index>_<key>.png` (lossless,
    RGB), for the test to compare by pixels."""
    ds = LeRobotDataset("pear-agent/episodes", root=Path(root), video_backend="torchcodec")
    episodes = []
    for ep in range(ds.meta.total_episodes):
        row = ds.meta.episodes[ep]
        episodes.append({"from": int(row["dataset_from_index"]), "to": int(row["dataset_to_index"])})
    frames = []
    for i in range(len(ds)):
        item = ds[i]
        if frames_dir is not None:
            from PIL import Image  # optional: only when frames are asked for

            for k in ds.meta.camera_keys:
                rgb = (item[k].permute(1, 2, 0).clamp(0, 1) * 255).round().byte().numpy()
                Image.fromarray(rgb).save(Path(frames_dir) / f"{i}_{k}.png")
        frames.append(
            {
                "episode_index": int(item["episode_index"]),
                "frame_index": int(item["frame_index"]),
                "timestamp": float(item["timestamp"]),
                "task": item["task"],
                "action": item["action"].tolist(),
                "action.joints_rad": item["action.joints_rad"].tolist(),
                "observation.state": item["observation.state"].tolist(),
                "images": {k: list(item[k].shape) for k in ds.meta.camera_keys},
                "image_mean": {k: float(item[k].float().mean()) for k in ds.meta.camera_keys},
                "next.success": bool(item["next.success"]),
                "next.done": bool(item["next.done"]),
            }
        )
    out = {
        "codebase_version": CODEBASE_VERSION,
        "info_version": ds.meta.info["codebase_version"],
        "fps": ds.fps,
        "num_episodes": ds.num_episodes,
        "num_frames": ds.num_frames,
        "features": {k: v.get("names") for k, v in ds.features.items()},
        "episodes": episodes,
        "frames": frames,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
