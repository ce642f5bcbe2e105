"""Loads a control-rate dataset with LeRobot's own `LeRobotDataset` (run under .venv-lerobot by
tests/export/test_lerobot_control.py): prints every frame's vectors, language and index columns as
JSON, and writes each frame's camera images, shrunk to 64 x 64 (area average), to an .npz for the
test to compare with the recorded images."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import cv2
import numpy as np
from lerobot.datasets.lerobot_dataset import LeRobotDataset

VECTORS = (
    "action",
    "turn.ee_delta",
    "observation.state",
    "observation.velocity",
    "observation.tool_pose",
    "sim_time_s",
)


def main(root: str, images_out: str) -> None:
    ds = LeRobotDataset("pear-agent/episodes", root=Path(root), video_backend="torchcodec")
    episodes = []
    for ep in range(ds.meta.total_episodes):
        row = ds.meta.episodes[ep]
        episodes.append({"from": int(row["dataset_from_index"]), "to": int(row["dataset_to_index"])})
    frames, images = [], {k: [] for k in ds.meta.camera_keys}
    for i in range(len(ds)):
        item = ds[i]
        frames.append(
            {
                "episode_index": int(item["episode_index"]),
                "frame_index": int(item["frame_index"]),
                "timestamp": float(item["timestamp"]),
                "task": item["task"],
                "subtask": item.get("subtask"),
                "turn_index": int(item["turn_index"]),
                "next.success": bool(item["next.success"]),
                "next.done": bool(item["next.done"]),
            }
            | {k: item[k].tolist() for k in VECTORS}
        )
        for k in ds.meta.camera_keys:
            chw = (item[k].numpy() * 255.0).round().clip(0, 255).astype(np.uint8)
            images[k].append(cv2.resize(chw.transpose(1, 2, 0), (64, 64), interpolation=cv2.INTER_AREA))
    np.savez(images_out, **{k: np.stack(v) for k, v in images.items()})
    out = {
        "fps": ds.fps,
        "num_episodes": ds.num_episodes,
        "num_frames": ds.num_frames,
        "features": {k: v.get("names") for k, v in ds.features.items()},
        "episodes": episodes,
        "frames": frames,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
