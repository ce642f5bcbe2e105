"""A LeRobot policy checkpoint behind JSON lines: the server side of `--policy lerobot:<checkpoint>`.

Runs in LeRobot's own environment (`.venv-lerobot`, `scripts/setup_lerobot.sh`):

    .venv-lerobot/bin/python -m pear_agent.policies.lerobot.server CHECKPOINT [--device cpu]

It loads the checkpoint as LeRobot's own policy server does (`get_policy_class(type).
from_pretrained`, then `make_pre_post_processors` with the processors saved beside the weights, so
the dataset's normalization is applied as in training), prints one line, then answers one request
line with one answer line until its input closes.

- hello (first line out): `{"ready": true, "type", "input_features": {key: shape}, "output_features":
  {key: shape}, "chunk_size", "n_action_steps", "fps", "fps_source"}` (fps: the training dataset's
  rate where its `meta/info.json` is still at the path `train_config.json` names, else null), or
  `{"error": "..."}` and exit status 2.
- request: `{"vectors": {"observation.state": [...], ...}, "images": {"observation.images.<cam>":
  base64 JPEG}, "task": "the instruction", "n": actions}`.
- answer: `{"actions": [[...], ...], "infer_s": seconds}` (the first n actions of the predicted
  chunk, unnormalized by the saved post-processor: the dataset's `action` layout), or
  `{"error": "..."}` (the server keeps serving).

Images travel as JPEG because the recordings the policy was trained on hold JPEG (quality 95)
before the dataset's video: the policy sees the same compression, and a frame is a small part of
its raw size (256 x 256 x 3 = 196 KB). LeRobot's own async server
(`lerobot.async_inference.policy_server`) speaks gRPC with pickled LeRobot objects both ways, so its
client must import lerobot; this one's client (`pear_agent.policies.lerobot.client`) needs only the
standard library and numpy.

Imports: the standard library, numpy, torch, lerobot and `pear_agent.records.export_lerobot`'s JPEG
decoder (cv2), all present in `.venv-lerobot`; nothing of the core environment's.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from pear_agent.records.export_lerobot import decode_jpeg


def _shape(feature: Any) -> list[int]:
    return [int(x) for x in getattr(feature, "shape", ())]


def dataset_fps(checkpoint: Path) -> tuple[float | None, str]:
    """The training dataset's rate, from `train_config.json`'s dataset root (None where unknown)."""
    try:
        train = json.loads((checkpoint / "train_config.json").read_text())
        root = (train.get("dataset") or {}).get("root")
        if root:
            info = json.loads((Path(root) / "meta" / "info.json").read_text())
            return float(info["fps"]), f"{root}/meta/info.json"
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None, ""


class Server:
    def __init__(self, checkpoint: Path, device: str) -> None:
        from lerobot.policies.factory import get_policy_class, make_pre_post_processors  # optional: lerobot

        cfg = json.loads((checkpoint / "config.json").read_text())
        kind = cfg.get("type")
        if not kind:
            raise ValueError(f"{checkpoint / 'config.json'} names no policy type")
        self.policy = get_policy_class(kind).from_pretrained(str(checkpoint))
        self.policy.to(device)
        self.policy.eval()
        self.pre, self.post = make_pre_post_processors(
            self.policy.config,
            pretrained_path=str(checkpoint),
            preprocessor_overrides={"device_processor": {"device": device}},
            postprocessor_overrides={"device_processor": {"device": "cpu"}},
        )
        self.device = device
        conf = self.policy.config
        self.inputs = {k: _shape(v) for k, v in conf.input_features.items()}
        self.outputs = {k: _shape(v) for k, v in conf.output_features.items()}
        fps, source = dataset_fps(checkpoint)
        self.hello = {
            "ready": True,
            "type": kind,
            "input_features": self.inputs,
            "output_features": self.outputs,
            "chunk_size": getattr(conf, "chunk_size", None),
            "n_action_steps": getattr(conf, "n_action_steps", None),
            "fps": fps,
            "fps_source": source,
        }

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        import numpy as np  # optional: numpy (the server's side)
        import torch  # optional: torch

        t0 = time.perf_counter()
        obs: dict[str, Any] = {}
        vectors = request.get("vectors") or {}
        images = request.get("images") or {}
        for key, shape in self.inputs.items():
            if key in images:
                img = decode_jpeg(base64.b64decode(images[key]))
                if list(img.shape) != [shape[1], shape[2], shape[0]]:
                    h, w = img.shape[:2]
                    raise ValueError(
                        f"{key} is {h}x{w}; the policy was trained on {shape[1]}x{shape[2]} (C,H,W {shape})"
                    )
                t = torch.from_numpy(img).permute(2, 0, 1).float().div(255.0)
                obs[key] = t.unsqueeze(0).contiguous()
            elif key in vectors:
                v = np.asarray(vectors[key], dtype=np.float32).reshape(-1)
                if list(v.shape) != shape:
                    raise ValueError(f"{key} has {v.size} values; the policy was trained on {shape}")
                obs[key] = torch.from_numpy(v).unsqueeze(0)
            else:
                raise ValueError(f"the request lacks the policy's input {key}")
        obs["task"] = [str(request.get("task") or "")]
        n = int(request.get("n") or 0)
        with torch.no_grad():
            batch = self.pre(obs)
            chunk = self.policy.predict_action_chunk(batch)
            if chunk.ndim != 3:
                chunk = chunk.unsqueeze(0)
            chunk = chunk[:, : n if n > 0 else None, :]
            actions = [self.post(chunk[:, i, :]) for i in range(chunk.shape[1])]
        out = torch.stack(actions, dim=1).squeeze(0).detach().cpu().numpy()
        return {"actions": out.astype(float).tolist(), "infer_s": time.perf_counter() - t0}


def _say(out: TextIO, obj: dict[str, Any]) -> None:
    out.write(json.dumps(obj, separators=(",", ":")) + "\n")
    out.flush()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m pear_agent.policies.lerobot.server", description=__doc__.split("\n")[0]
    )
    p.add_argument("checkpoint", help="a LeRobot pretrained_model folder (config.json, weights, processors)")
    p.add_argument("--device", default="cpu", help="torch device (cpu, cuda)")
    args = p.parse_args(argv)
    # the protocol owns stdout: everything LeRobot and torch print goes to stderr
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    ckpt = Path(args.checkpoint)
    try:
        if not (ckpt / "config.json").is_file():
            raise ValueError(f"{ckpt}: not a LeRobot checkpoint folder (no config.json)")
        server = Server(ckpt, args.device)
    except Exception as exc:  # any failure to load is the user's one line
        _say(out, {"error": " ".join(f"{type(exc).__name__}: {exc}".split())[:500]})
        return 2
    _say(out, server.hello)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            reply = server.answer(json.loads(line))
        except Exception as exc:  # a bad request: answered, the server goes on
            reply = {"error": " ".join(f"{type(exc).__name__}: {exc}".split())[:500]}
        _say(out, reply)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
