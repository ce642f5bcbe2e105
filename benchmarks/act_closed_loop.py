"""The closed loop on a CPU: expert `pick_cube` episodes recorded at the control rate,
exported as a LeRobot dataset, a small ACT trained on it with LeRobot's own trainer (`lerobot-train`;
a ResNet-18 from random initialisation, `--policy.pretrained_backbone_weights=null`: no weights are
downloaded), and the trained policy benched on held-out seeds next to the expert, with `compare`.

    PEAR_BENCH_TAG=issue41 .venv/bin/python benchmarks/act_closed_loop.py --root runs/act-loop \\
        [--episodes 200] [--fps 10] [--px 96] [--steps 2000] [--batch-size 8] [--test-seeds 0-49]

Each stage (robot, record, export, train, bench) is the shell command it prints and keeps in the
results with its wall time. A stage already done under ROOT (ROOT/stages.json) is not run again, its
time read back, so the stages can run one call at a time (`--stages record,export`). The camera
images are `--px` square (a copy of robots/panda.yaml with smaller cameras: ACT's ResNet-18 on a
CPU); the training log's losses, the dataset's frames and size, and every benched episode's outcome
are in the results.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import _common  # noqa: F401  (sets sys.path and MUJOCO_GL)
from _common import REPO_ROOT, emit, machine

STAGES = ("robot", "record", "export", "train", "bench")
LOG_LINE = re.compile(r"loss:(\S+) grdn:(\S+) lr:(\S+) updt_s:(\S+) data_s:(\S+)")


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default="runs/act-loop", help="folder for every stage's output")
    ap.add_argument("--stages", default=",".join(STAGES), help="comma list of " + ", ".join(STAGES))
    ap.add_argument("--episodes", type=int, default=200, help="expert episodes recorded (seeds from 1000)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--fps", type=int, default=10, help="--record-fps and the export's --fps")
    ap.add_argument("--px", type=int, default=96, help="camera width and height")
    ap.add_argument("--steps", type=int, default=2000, help="training steps (at most, see --train-minutes)")
    ap.add_argument(
        "--train-minutes",
        type=float,
        default=0,
        help="stop training after this long (0: no limit) and keep the last checkpoint (--save-every)",
    )
    ap.add_argument("--save-every", type=int, default=0, help="checkpoint every N steps (default: --steps)")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--chunk", type=int, default=10, help="ACT chunk_size = n_action_steps")
    ap.add_argument("--dim-model", type=int, default=256)
    ap.add_argument("--lr", type=float, default=1e-4, help="optimizer_lr and optimizer_lr_backbone")
    ap.add_argument("--train-workers", type=int, default=1, help="lerobot-train --num_workers")
    ap.add_argument("--device", default="cpu", help="torch device of the training and of the policy server")
    ap.add_argument("--test-seeds", default="0-49", help="held-out seeds (the recording uses 1000 on)")
    ap.add_argument("--episode-s", type=float, default=15.0, help="the policy's --lerobot-episode-s")
    ap.add_argument(
        "--threshold",
        type=float,
        default=0.0,
        help="the policy's --chunk-size-threshold (0: a whole chunk runs before the next request, as ACT)",
    )
    ap.add_argument("--pear-agent", default=f"{sys.executable} -m pear_agent.cli")
    ap.add_argument("--lerobot-venv", default=".venv-lerobot")
    return ap.parse_args()


def commands(a: argparse.Namespace) -> dict[str, list[str]]:
    """Every stage's shell commands, run from the repository root."""
    root, pa = a.root, a.pear_agent
    robot = f"{root}/panda-{a.px}px.yaml"
    ckpt = f"{root}/act/checkpoints/last/pretrained_model"
    seeds = f"1000-{1000 + a.episodes - 1}"
    limit = f"timeout --signal=INT {a.train_minutes * 60:g}s " if a.train_minutes > 0 else ""
    train = [
        f"HF_HUB_OFFLINE=1 {limit}{a.lerobot_venv}/bin/lerobot-train --dataset.repo_id=pear-agent/episodes",
        f"--dataset.root={root}/dataset --dataset.video_backend=torchcodec --policy.type=act",
        f"--policy.device={a.device} --policy.push_to_hub=false --policy.pretrained_backbone_weights=null",
        f"--policy.dim_model={a.dim_model} --policy.dim_feedforward={4 * a.dim_model} --policy.use_vae=false",
        f"--policy.chunk_size={a.chunk} --policy.n_action_steps={a.chunk}",
        f"--policy.optimizer_lr={a.lr:g} --policy.optimizer_lr_backbone={a.lr:g}",
        f"--batch_size={a.batch_size} --steps={a.steps} --save_freq={a.save_every or a.steps} --log_freq=10",
        f"--num_workers={a.train_workers} --seed=1 --wandb.enable=false --output_dir={root}/act",
    ]
    bench = f"--tasks pick_cube --seeds {a.test_seeds} --robot {robot} --no-video --quiet"
    bench += f" --workers {a.workers}"
    return {
        "robot": [
            f"mkdir -p {root} && sed 's/width: 256/width: {a.px}/; s/height: 256/height: {a.px}/' "
            f"robots/panda.yaml > {robot}"
        ],
        "record": [
            f"{pa} bench --tasks pick_cube --seeds {seeds} --robot {robot} --record-fps {a.fps} --no-video "
            f"--quiet --workers {a.workers} --out {root}/expert-rec"
        ],
        "export": [f"{pa} export --format lerobot {root}/expert-rec --out {root}/dataset --fps {a.fps}"],
        "train": [" ".join(train) + f" > {root}/train.log 2>&1"],
        "bench": [
            f"{pa} bench {bench} --out {root}/expert-bench",
            f"{pa} bench --policy lerobot:{ckpt} --lerobot-episode-s {a.episode_s:g} "
            f"--chunk-size-threshold {a.threshold:g} --lerobot-device {a.device} {bench} "
            f"--out {root}/act-bench",
            f"{pa} compare {root}/expert-bench {root}/act-bench > {root}/compare.txt",
        ],
    }


def run_stages(a: argparse.Namespace, cmds: dict[str, list[str]]) -> dict[str, Any]:
    done_file = Path(a.root) / "stages.json"
    done = json.loads(done_file.read_text()) if done_file.exists() else {}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))
    for stage in [s for s in a.stages.split(",") if s]:
        if stage not in STAGES:
            raise SystemExit(f"--stages: unknown stage {stage!r} (stages: {', '.join(STAGES)})")
        if stage in done:
            print(f"[{stage}] done before ({done[stage]['wall_s']:.0f} s), not run again", file=sys.stderr)
            continue
        t0 = time.perf_counter()
        for cmd in cmds[stage]:
            print(f"[{stage}] {cmd}", file=sys.stderr)
            rc = subprocess.run(["bash", "-c", cmd], cwd=REPO_ROOT, env=env).returncode
            if rc != 0 and not (stage == "train" and rc == 124 and a.train_minutes > 0):  # 124: timed out
                raise SystemExit(f"[{stage}] exit status {rc}: {cmd}")
        if stage == "train":
            prune_checkpoints(Path(a.root) / "act" / "checkpoints")
        done[stage] = {"commands": cmds[stage], "wall_s": time.perf_counter() - t0, "at": time.time()}
        done_file.parent.mkdir(parents=True, exist_ok=True)
        done_file.write_text(json.dumps(done, indent=1))
    return done


def episodes(bench_dir: Path) -> list[dict[str, Any]]:
    """Each episode's outcome from a bench's results.jsonl (the last line per key: resumes append)."""
    rows: dict[str, dict[str, Any]] = {}
    path = bench_dir / "results.jsonl"
    if not path.exists():
        return []
    for line in path.read_text().splitlines():
        r = json.loads(line)
        keep = ("seed", "success", "end_reason", "turns", "sim_time_s", "wall_time_s", "policy")
        rows[r["key"]] = {k: r.get(k) for k in keep}
        lat = r.get("latencies_s") or []
        rows[r["key"]]["latency_median_s"] = sorted(lat)[len(lat) // 2] if lat else None
        rows[r["key"]] |= tool_path(bench_dir / str(r.get("run_dir") or ""))
    return sorted(rows.values(), key=lambda r: r["seed"])


def tool_path(run_dir: Path) -> dict[str, Any]:
    """Where the arm's tool went (the turns' logged states, cm): its lowest point and its last one,
    and the last gripper opening: what a failed episode did."""
    log = run_dir / "episode.jsonl"
    if not log.is_file():
        return {}
    arms = []
    for line in log.read_text().splitlines():
        rec = json.loads(line)
        if rec.get("kind") == "turn" and "arm" in (rec.get("state") or {}):
            arms.append(rec["state"]["arm"])
    if not arms:
        return {}
    low = min(arms, key=lambda a: a["position"][2])
    return {
        "lowest_tool_cm": low["position"],
        "last_tool_cm": arms[-1]["position"],
        "last_gripper": arms[-1]["gripper"],
    }


def train_log(path: Path, log_freq: int = 10) -> list[dict[str, Any]]:
    """The trainer's logged steps: loss, gradient norm, seconds per update and per data load."""
    out = []
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        m = LOG_LINE.search(line)
        if m:
            out.append(
                {
                    "step": log_freq * (len(out) + 1),
                    "loss": float(m.group(1)),
                    "grad_norm": float(m.group(2)),
                    "update_s": float(m.group(4)),
                    "data_s": float(m.group(5)),
                }
            )
    return out


def prune_checkpoints(folder: Path) -> None:
    """Keep only the checkpoint `last` points to (each one holds the optimizer's state too)."""
    keep = (folder / "last").resolve()
    for step in folder.iterdir() if folder.exists() else []:
        if step.name != "last" and step.is_dir() and step.resolve() != keep:
            shutil.rmtree(step)


def checkpoint_step(last: Path) -> int | None:
    """The step of lerobot-train's `checkpoints/last` (a link to the step's folder, e.g. 000300)."""
    try:
        return int(last.resolve().name)
    except (OSError, ValueError):
        return None


def steps_done(path: Path) -> int | None:
    """The steps the trainer finished: its progress bar's last `N/total` (a stop by the clock falls
    between two logged steps)."""
    found = re.findall(r"\|\s*(\d+)/\d+ \[", path.read_text()) if path.exists() else []
    return int(found[-1]) if found else None


def du_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def main() -> None:
    a = parse_args()
    cmds = commands(a)
    done = run_stages(a, cmds)
    root = REPO_ROOT / a.root if not Path(a.root).is_absolute() else Path(a.root)
    info_path = root / "dataset" / "meta" / "info.json"
    info = json.loads(info_path.read_text()) if info_path.exists() else {}
    rec = episodes(root / "expert-rec")
    log = train_log(root / "train.log")
    expert, act = episodes(root / "expert-bench"), episodes(root / "act-bench")
    compare = (root / "compare.txt").read_text() if (root / "compare.txt").exists() else None

    def rate(eps: list[dict[str, Any]]) -> str:
        return f"{sum(bool(e['success']) for e in eps)}/{len(eps)}" if eps else "-"

    res = {
        "machine": machine(),
        "settings": {k: v for k, v in vars(a).items() if k not in ("stages", "pear_agent", "lerobot_venv")},
        "backbone": "resnet18, random initialisation (--policy.pretrained_backbone_weights=null)",
        "stages": done,
        "recording": {
            "episodes": len(rec),
            "successes": sum(bool(e["success"]) for e in rec),
            "sim_s": sum(e["sim_time_s"] or 0 for e in rec),
        },
        "dataset": {
            "episodes": info.get("total_episodes"),
            "frames": info.get("total_frames"),
            "fps": info.get("fps"),
            "bytes": du_bytes(root / "dataset"),
            "recording_bytes": du_bytes(root / "expert-rec"),
        },
        "training": {
            "logged": log,
            "steps_done": steps_done(root / "train.log"),
            "first_loss": log[0]["loss"] if log else None,
            "last_loss": log[-1]["loss"] if log else None,
            "checkpoint": str(root / "act" / "checkpoints" / "last" / "pretrained_model"),
            "checkpoint_step": checkpoint_step(root / "act" / "checkpoints" / "last"),
        },
        "held_out": {"seeds": a.test_seeds, "expert": expert, "act": act},
        "compare": compare,
    }
    rows = [[s, f"{done[s]['wall_s']:.0f} s" if s in done else "-", ""] for s in STAGES]
    rows += [
        ["frames (episodes)", info.get("total_frames", "-"), info.get("total_episodes", "-")],
        ["training loss first -> last", res["training"]["first_loss"], res["training"]["last_loss"]],
        ["held-out success expert / ACT", rate(expert), rate(act)],
    ]
    emit("act_closed_loop", res, rows, ["what", "value", ""])


if __name__ == "__main__":
    main()
