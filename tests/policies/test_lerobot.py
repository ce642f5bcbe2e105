"""`--policy lerobot:<checkpoint>` against the real parts: a tiny ACT trained here by LeRobot's own
`lerobot-train` (in .venv-lerobot, no pretrained backbone) on a control-rate export of two expert
pick_cube episodes, served by `pear_agent.policies.lerobot.server` and run through `bench`, `run` and
`compare`. What is checked: the server answers a chunk of the asked shape with the dataset's rate;
each turn runs the configured number of actions, each held 1/fps simulated seconds, and the
controller's recorded setpoints are the chunk's targets; latency is recorded; `compare` pairs the
policy with the expert on the same seeds; a bad checkpoint, a missing LeRobot environment, features
that do not fit the robot and a server killed mid-episode each end in one line."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pear_agent.policies.lerobot.client import lerobot_python

pytestmark = pytest.mark.wallclock

REPO = Path(__file__).resolve().parents[2]
FPS = 10


def _cli(*args: str, env: dict[str, str] | None = None, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pear_agent", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def _one_line(p: subprocess.CompletedProcess) -> str:
    err = p.stderr.strip()
    assert p.returncode == 2, (p.returncode, p.stdout[-2000:], err[-2000:])
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two expert pick_cube episodes recorded at 10 Hz (also the expert bench `compare` pairs with),
    exported at 10 fps, and one step of a tiny ACT trained on them by lerobot-train."""
    py = lerobot_python()
    if py is None:
        pytest.skip("LeRobot is not installed: bash scripts/setup_lerobot.sh")
    root = tmp_path_factory.mktemp("lerobot-policy")
    expert, data, train = root / "expert", root / "dataset", root / "act"
    p = _cli("bench", "--tasks", "pick_cube", "--seeds", "0-1", "--no-video", "--quiet",
             "--record-fps", str(FPS), "--out", str(expert))  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    p = _cli("export", "--format", "lerobot", str(expert), "--fps", str(FPS), "--out", str(data))
    assert p.returncode == 0, p.stderr[-3000:]
    trainer = Path(py).parent / "lerobot-train"
    cmd = [
        str(trainer), "--dataset.repo_id=pear-agent/episodes", f"--dataset.root={data}",
        "--dataset.video_backend=torchcodec", "--policy.type=act", "--policy.device=cpu",
        "--policy.push_to_hub=false", "--policy.pretrained_backbone_weights=null",
        "--policy.dim_model=32", "--policy.dim_feedforward=64", "--policy.n_heads=2",
        "--policy.n_encoder_layers=1", "--policy.n_decoder_layers=1", "--policy.latent_dim=8",
        "--policy.chunk_size=8", "--policy.n_action_steps=8", "--batch_size=2", "--steps=1",
        "--save_freq=1", "--num_workers=0", "--wandb.enable=false", f"--output_dir={train}",
    ]  # fmt: skip
    t = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=900)
    assert t.returncode == 0, t.stderr[-3000:]
    ckpt = train / "checkpoints" / "last" / "pretrained_model"
    assert (ckpt / "config.json").is_file() and (ckpt / "policy_preprocessor.json").is_file()
    return {"root": root, "expert": expert, "checkpoint": ckpt}


def _environment(robot: str | None = None) -> Any:
    from pear_agent.loop.registry import make_environment

    return make_environment("pick_cube", render=True, **({"robot": robot} if robot else {}))


def test_the_server_answers_a_chunk_of_the_asked_shape_at_the_datasets_rate(trained: dict[str, Path]) -> None:
    from pear_agent.loop.registry import close_environment
    from pear_agent.policies.lerobot.client import LeRobotPolicy, LeRobotSettings, server_for

    settings = LeRobotSettings(actions_per_chunk=5)
    policy = LeRobotPolicy(str(trained["checkpoint"]), settings)
    env = _environment()
    try:
        env.reset(0)
        prompt = env.observe(1, 10, None)
        reply = policy.act([], prompt.context)
    finally:
        close_environment(env)
    assert reply.error is None, reply.error
    actions = np.asarray(reply.command["actions"], float)
    assert actions.shape == (5, 8) and np.all(np.isfinite(actions))  # 7 joints + the gripper
    assert reply.command["fps"] == FPS and reply.info["fps_source"].endswith("meta/info.json")
    assert reply.latency_s > 0 and reply.text == ""
    server = server_for(str(trained["checkpoint"]), settings)
    assert server.hello["type"] == "act" and server.hello["chunk_size"] == 8
    bad = server.ask({"vectors": {}, "images": {}, "task": "x", "n": 2})
    assert "lacks the policy's input" in bad["error"]  # answered; the server goes on
    assert server.proc.poll() is None


def test_bench_runs_the_policy_end_to_end_at_the_control_rate(trained: dict[str, Path]) -> None:
    out = trained["root"] / "act-bench"
    policy = f"lerobot:{trained['checkpoint']}"
    p = _cli("bench", "--policy", policy, "--tasks", "pick_cube", "--seeds", "0-1", "--no-video", "--quiet",
             "--actions-per-chunk", "6", "--chunk-size-threshold", "0.5", "--lerobot-episode-s", "1.2",
             "--record-fps", str(FPS), "--out", str(out))  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    results = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["seed"] for r in results) == [0, 1]
    for r in results:
        assert r["policy"] == f"lerobot:{trained['checkpoint']}"
        assert r["end_reason"] in ("turn_limit", "success"), r.get("detail")
        # 6 actions a request, a new request once 3 are left: 3 actions x 0.1 s a turn, 1.2 s in all
        assert r["turns"] == 4 and r["sim_time_s"] == pytest.approx(1.2, abs=1e-3)
        assert len(r["latencies_s"]) == 4 and min(r["latencies_s"]) > 0
        log = out / r["run_dir"] / "episode.jsonl"
        turns = [t for t in map(json.loads, log.read_text().splitlines()) if t.get("kind") == "turn"]
        assert [t["sim_time_s"] for t in turns] == pytest.approx([0.3, 0.6, 0.9, 1.2], abs=1e-3)
        frames = 0
        for t in turns:
            chunk = t["action"]["joint_chunk"]
            assert chunk["actions"] == 6 and chunk["fps"] == FPS and t["executed"]["actions"] == 3
            assert t["latency_s"] > 0
            targets = np.asarray(chunk["targets"], float)[:3]
            with np.load(log.parent / t["control"]) as z:
                cmd = np.concatenate([z["arm.command_joints_rad"], z["arm.command_gripper"][:, None]], axis=1)
            frames += len(cmd)
            # every setpoint the controller followed this turn is one of the chunk's first 3 targets
            for row in cmd:
                assert np.min(np.max(np.abs(targets - row), axis=1)) < 1e-4, (row, targets)
        assert abs(frames - round(1.2 * FPS)) <= 1
    summary = json.loads((out / results[0]["run_dir"] / "summary.json").read_text())
    assert summary["latency_median_s"] > 0 and summary["decisions"] == 4

    c = _cli("compare", str(trained["expert"]), str(out), "--json")
    assert c.returncode == 0, c.stderr[-2000:]
    cmp = json.loads(c.stdout)
    assert cmp["shared"] == 2 and cmp["only_in_a"] == 0 and cmp["only_in_b"] == 0
    assert cmp["a"]["successes"] == 2  # the expert


def test_a_bad_checkpoint_or_a_missing_lerobot_environment_is_one_line(trained: dict[str, Path]) -> None:
    missing = _one_line(_cli("run", "--policy", "lerobot:/nonexistent/ckpt", "--no-video"))
    assert "not a LeRobot checkpoint folder" in missing and "/nonexistent/ckpt" in missing
    env = dict(os.environ, PEAR_LEROBOT_PYTHON="/nonexistent/python")
    novenv = _one_line(_cli("bench", "--policy", f"lerobot:{trained['checkpoint']}", "--seeds", "0",
                            "--out", str(trained["root"] / "never"), env=env))  # fmt: skip
    assert "PEAR_LEROBOT_PYTHON=/nonexistent/python does not exist" in novenv
    broken = trained["root"] / "broken"
    shutil.copytree(trained["checkpoint"], broken)
    (broken / "model.safetensors").write_bytes(b"not weights")
    bad = _one_line(_cli("bench", "--policy", f"lerobot:{broken}", "--seeds", "0", "--out",
                         str(trained["root"] / "never2")))  # fmt: skip
    assert f"lerobot:{broken}" in bad and "Error" in bad
    assert not (trained["root"] / "never2" / "results.jsonl").exists()


def test_features_that_do_not_fit_the_robot_end_the_episode_in_one_line(trained: dict[str, Path]) -> None:
    from pear_agent.loop.episode import Episode, EpisodeConfig
    from pear_agent.loop.registry import close_environment
    from pear_agent.policies.lerobot.client import LeRobotPolicy

    env = _environment("ur5e")  # 6 joints: the panda-trained policy's state has 7 + the gripper
    try:
        result = Episode(env, LeRobotPolicy(str(trained["checkpoint"])), EpisodeConfig()).run(0)
    finally:
        close_environment(env)
    assert result.end_reason == "policy_error" and result.turns == 0
    assert "features do not fit this robot" in result.detail and "observation.state" in result.detail
    assert "\n" not in result.detail


def test_a_server_killed_mid_episode_ends_it_in_one_line_with_the_robot_held(
    trained: dict[str, Path],
) -> None:
    from pear_agent.loop.episode import Episode, EpisodeConfig
    from pear_agent.loop.registry import close_environment
    from pear_agent.policies.lerobot.client import LeRobotPolicy, LeRobotSettings, server_for

    settings = LeRobotSettings(actions_per_chunk=4, lerobot_timeout_s=60)
    server = server_for(str(trained["checkpoint"]), settings)
    turns: list[float] = []

    def kill_after_first(t: Any) -> None:
        turns.append(t.sim_time_s)
        if len(turns) == 1:
            os.kill(server.pid, signal.SIGKILL)

    env = _environment()
    try:
        ep = Episode(env, LeRobotPolicy(str(trained["checkpoint"]), settings), EpisodeConfig(max_turns=50))
        ep.on_turn = kill_after_first
        result = ep.run(0)
    finally:
        close_environment(env)
    assert result.end_reason == "policy_error" and result.turns == 1, result.detail
    assert "LeRobot policy server" in result.detail and "\n" not in result.detail
    assert result.sim_time_s == pytest.approx(turns[0], abs=1e-9)  # nothing moved after the failure
    assert server.proc.poll() is not None
    fresh = server_for(str(trained["checkpoint"]), settings)  # the next episode gets a new one
    assert fresh is not server and fresh.proc.poll() is None


def test_realtime_runs_the_queue_while_a_request_is_in_flight(trained: dict[str, Path]) -> None:
    """An injected 0.25 s per decision (`--latency`): the queue runs two more 0.1 s actions during
    each request, and the new chunk's actions for those steps are dropped."""
    from pear_agent.loop.episode import Episode, EpisodeConfig
    from pear_agent.loop.registry import close_environment
    from pear_agent.policies.lerobot.client import LeRobotPolicy, LeRobotSettings

    settings = LeRobotSettings(actions_per_chunk=6, chunk_size_threshold=0.5)
    seen: list[tuple[str, float]] = []
    env = _environment()
    try:
        cfg = EpisodeConfig(mode="realtime", latency_s=0.25, max_turns=3)
        ep = Episode(env, LeRobotPolicy(str(trained["checkpoint"]), settings), cfg)
        ep.on_turn = lambda t: seen.append((t.summary, t.sim_time_s))
        result = ep.run(0)
    finally:
        close_environment(env)
    assert result.end_reason == "turn_limit" and result.advanced_s == pytest.approx(0.5)
    # turn 1 (untimed): steps 0-2; the request of step 3 takes 0.25 s: steps 3, 4 run meanwhile and
    # the setpoint is held 0.05 s; its chunk (steps 3-8) loses 3 and 4, runs 5; likewise turn 3
    assert [s for s, _ in seen] == [
        "3 actions at 10 Hz (steps 0-2), 3 queued",
        "1 action at 10 Hz (steps 5-5), 3 queued",
        "1 action at 10 Hz (steps 8-8), 3 queued",
    ]
    assert [t for _, t in seen] == pytest.approx([0.3, 0.65, 1.0], abs=1e-3)


def test_the_core_side_imports_neither_lerobot_nor_torch() -> None:
    code = (
        "import sys, pear_agent.cli, pear_agent.policies.lerobot.client, pear_agent.loop.episode, "
        "pear_agent.loop.arm_environment, pear_agent.bench.runner; "
        "bad = [m for m in ('lerobot', 'torch') if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)"
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr[-2000:]
