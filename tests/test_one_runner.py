"""Issue 26: one episode runner. `bench`, RL rollouts and the trainer run their episodes through
`pear_agent.episodes.arun_episode` (pooled environment, rewards read before the environment goes
back, token traces, policy version); a second copy of the pool-run-release code fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "pear_agent"
RUNNER = ROOT / "episodes.py"
SINGLE_EPISODE = {
    "episode.py": "defines Episode",
    "arm_environment.py": "`arm_episode` builds the arm's environment for an Episode; it runs none",
    "cli.py": "`pear-agent run`: one episode, its own environment, no pool",
    "robots_check.py": "a robot's self-check on a bare backend",
    "ros2/agent_node.py": "one live episode on a ROS 2 robot",
    "rl/skyrl_env.py": "SkyRL's gym interface steps one episode turn by turn (SkyRL owns the loop)",
}
"""Modules allowed to build an `Episode` themselves, and why: none of them pools environments or
runs more than one episode."""


def _calls(tree: ast.AST) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute):
                base = f.value.id if isinstance(f.value, ast.Name) else ""
                out.append(f"{base}.{f.attr}")
            elif isinstance(f, ast.Name):
                out.append(f.id)
    return out


def test_only_the_runner_builds_episodes_and_takes_environments_from_a_pool() -> None:
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if path == RUNNER:
            continue
        calls = _calls(ast.parse(path.read_text(encoding="utf-8")))
        builds = [c for c in calls if c in ("Episode", "arm_episode")]
        pooled = [
            c for c in calls if c.endswith((".acquire", ".release", ".discard")) and "POOL" in c.upper()
        ]
        pooled += [c for c in calls if c in ("make_spec_environment", ".make_spec_environment")]
        if pooled or (builds and rel not in SINGLE_EPISODE):
            offenders.append(f"{rel}: {sorted(set(builds + pooled))}")
    assert not offenders, (
        "episodes run outside the one runner (pear_agent/episodes.py: arun_episode): " + "; ".join(offenders)
    )


def test_the_runner_itself_still_has_the_pattern() -> None:
    """The scan above would pass vacuously if the runner's calls were renamed: they are here."""
    calls = _calls(ast.parse(RUNNER.read_text(encoding="utf-8")))
    assert {"Episode", "pool.acquire", "pool.release", "pool.discard"} <= set(calls)


def test_bench_rollouts_and_trainer_all_go_through_arun_episode(tmp_path, monkeypatch) -> None:
    import pear_agent.episodes as episodes
    from pear_agent.bench.runner import run_job
    from pear_agent.rl import rollouts
    from pear_agent.rl.rollouts import PolicySpec, RolloutJob, run_rollout
    from pear_agent.train.rollout import LoopOptions, TrainJob, run_episodes
    from sim_adapters.roadster.pilot import PilotPolicy

    seen: list[str] = []
    real = episodes.arun_episode

    async def counting(job, pool=episodes.POOL):
        out = await real(job, pool)
        seen.append(job.environment.task)
        return out

    monkeypatch.setattr(episodes, "arun_episode", counting)
    monkeypatch.setattr(rollouts, "arun_episode", counting)  # imported by name there
    task = "roadster_ramp_flip:light"
    line = run_job({"task": task, "seed": 3, "out_dir": str(tmp_path), "policy": {"kind": "scripted"},
                    "video": False, "render": False})  # fmt: skip
    rec = run_rollout(RolloutJob(task, 3, PolicySpec("scripted", pilot_noise=0.0), render=False))
    (tr,) = run_episodes([TrainJob(task, 3)], lambda job: PilotPolicy(), LoopOptions(), policy_version=7)
    assert seen == [task, task, task]
    # the same initial state and deterministic pilot: the same episode through all three callers
    assert line["success"] == rec["success"] == tr["success"]
    assert line["turns"] == rec["turns"] == tr["turns"]
    assert rec["shaped_reward"] == pytest.approx(tr["shaped_reward"], abs=1e-12)
    assert rec["messages"] == tr["messages"]
    assert len(tr["turn_tokens"]) == tr["turns"]  # one trace slot per reply (None: no ids)


def test_rewards_are_read_before_the_environment_goes_back_to_the_pool() -> None:
    """The runner reads the family's rewards while the episode still holds its environment: a pool
    that resets an environment the moment it is released changes nothing in the outcome."""
    from pear_agent.episode import EpisodeConfig
    from pear_agent.episodes import EnvironmentPool, EpisodeJob, run_episodes
    from pear_agent.registry import EnvSpec
    from sim_adapters.roadster.pilot import PilotPolicy

    class Wiping(EnvironmentPool):
        def release(self, spec, env):
            env.reset(12345)  # another episode's initial state, as a reused environment gets
            super().release(spec, env)

    spec = EnvSpec.of("roadster_ramp_flip:light", render=False, config=EpisodeConfig())
    jobs = [EpisodeJob(spec, PilotPolicy(), seed=3)]
    plain = run_episodes(jobs, pool=EnvironmentPool())[0]
    wiped = run_episodes(jobs, pool=Wiping())[0]
    assert plain.error is None and plain.shaped_reward is not None
    assert wiped.shaped_reward == plain.shaped_reward and wiped.reward == plain.reward
