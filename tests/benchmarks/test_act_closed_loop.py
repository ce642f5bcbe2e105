"""benchmarks/act_closed_loop.py's parts that need no training: the commands it runs (no download,
the same robot for recording and both benches, held-out seeds apart from the recorded ones) and the
parsers of LeRobot's training log and the bench's results."""

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import act_closed_loop as acl  # noqa: E402

# lerobot-train 0.4.4's log lines (their format: benchmarks/results/lerobot_train_check-issue41.json)
TRAIN_LOG = (
    "INFO 2026-12-04 22:10:01 ot_train.py:351 step:10 smpl:80 ep:3 epch:0.01 loss:79.358 grdn:375.880 "
    "lr:1.0e-04 updt_s:5.543 data_s:0.557\n"
    "INFO 2026-12-04 22:10:09 ot_train.py:351 step:20 smpl:160 ep:6 epch:0.03 loss:7.112 grdn:44.130 "
    "lr:1.0e-04 updt_s:0.540 data_s:0.088\n"
    "INFO 2026-12-04 22:10:10 ot_train.py:360 Checkpoint policy after step 20\n"
)


def args(**over: object) -> argparse.Namespace:
    sys_argv, sys.argv = sys.argv, ["act_closed_loop.py"]
    try:
        a = acl.parse_args()
    finally:
        sys.argv = sys_argv
    for k, v in over.items():
        setattr(a, k, v)
    return a


def test_commands_train_without_download_on_the_recorded_robot() -> None:
    cmds = acl.commands(args(root="runs/x", episodes=200, px=96, fps=10, test_seeds="0-49"))
    (train,) = cmds["train"]
    assert "--policy.pretrained_backbone_weights=null" in train and train.startswith("HF_HUB_OFFLINE=1 ")
    assert "--dataset.root=runs/x/dataset" in train and "--output_dir=runs/x/act" in train
    (record,) = cmds["record"]
    assert "--seeds 1000-1199" in record and "--record-fps 10" in record
    robot = "--robot runs/x/panda-96px.yaml"
    assert robot in record and all(robot in c for c in cmds["bench"][:2])
    assert "--policy lerobot:runs/x/act/checkpoints/last/pretrained_model" in cmds["bench"][1]
    assert all("--seeds 0-49" in c for c in cmds["bench"][:2])  # held out: none of 1000-1199
    assert "--fps 10" in cmds["export"][0]
    assert "timeout" not in train and "--save_freq=2000" in train  # no limit: one checkpoint at the end
    (limited,) = acl.commands(args(train_minutes=30, save_every=100))["train"]
    assert "timeout --signal=INT 1800s " in limited and "--save_freq=100" in limited


def test_robot_stage_writes_smaller_cameras(tmp_path: Path) -> None:
    (cmd,) = acl.commands(args(root=str(tmp_path), px=64))["robot"]
    subprocess.run(["bash", "-c", cmd], cwd=ROOT, check=True)
    text = (tmp_path / "panda-64px.yaml").read_text()
    assert text.count("width: 64") == 2 and text.count("height: 64") == 2 and "256" not in text


def test_train_log_parses_lerobot_lines(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text(TRAIN_LOG)
    rows = acl.train_log(log)
    assert [r["step"] for r in rows] == [10, 20]  # --log_freq=10
    assert rows[0]["loss"] == pytest.approx(79.358) and rows[1]["update_s"] == pytest.approx(0.540)
    assert rows[1]["data_s"] == pytest.approx(0.088) and rows[1]["grad_norm"] == pytest.approx(44.13)
    assert acl.train_log(tmp_path / "missing.log") == []
    bar = "Training:   0%|   | 21/5000 [03:26<19:51:32, 14.35s/step]\rTraining:   0%|  | 22/5000 [03:40<1"
    log.write_text(TRAIN_LOG + bar)
    assert acl.steps_done(log) == 22 and acl.steps_done(tmp_path / "missing.log") is None


def test_episodes_keeps_the_last_line_per_episode(tmp_path: Path) -> None:
    lines = [
        {
            "key": "pick_cube/s1",
            "seed": 1,
            "success": False,
            "end_reason": "endpoint",
            "latencies_s": [],
        },
        {
            "key": "pick_cube/s0",
            "seed": 0,
            "success": True,
            "end_reason": "success",
            "latencies_s": [0.2, 0.1],
        },
        {"key": "pick_cube/s1", "seed": 1, "success": True, "end_reason": "success", "latencies_s": [0.3]},
    ]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    (tmp_path / "ep0").mkdir()
    lines[1]["run_dir"] = "ep0"
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    turns = [
        {"kind": "turn", "state": {"arm": {"position": [50, 0, z], "gripper": g}}}
        for z, g in ((30, 1), (2, 1), (15, 0))
    ]
    (tmp_path / "ep0" / "episode.jsonl").write_text(
        "".join(json.dumps(t) + "\n" for t in [{"kind": "header"}, *turns])
    )
    eps = acl.episodes(tmp_path)
    assert eps[0]["lowest_tool_cm"] == [50, 0, 2] and eps[0]["last_tool_cm"] == [50, 0, 15]
    assert eps[0]["last_gripper"] == 0 and "lowest_tool_cm" not in eps[1]
    assert [(e["seed"], e["success"]) for e in eps] == [(0, True), (1, True)]
    assert eps[0]["latency_median_s"] == pytest.approx(0.2)
    assert acl.episodes(tmp_path / "none") == []


def test_prune_keeps_the_last_checkpoint(tmp_path: Path) -> None:
    for step in ("000050", "000100"):
        (tmp_path / step / "pretrained_model").mkdir(parents=True)
    (tmp_path / "last").symlink_to("000100")
    acl.prune_checkpoints(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["000100", "last"]
    assert acl.checkpoint_step(tmp_path / "last") == 100
    assert acl.checkpoint_step(tmp_path / "missing") is None
