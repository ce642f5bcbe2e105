"""Many episodes in one process: real MuJoCo scenes, several in flight on one event loop, give the
same records as one at a time (no renderer or simulator shared between episodes in flight), and
the pool hands a finished episode's environment to the next one of its task."""

import asyncio
import json

import pytest

from pear_agent.loop.config import EpisodeConfig
from pear_agent.loop.registry import EnvSpec
from pear_agent.loop.runner import EnvironmentPool, EpisodeJob, arun_episodes, run_episodes
from pear_agent.loop.task_experts import EXPERTS, scripted_policy
from pear_agent.policies.base import PolicyReply
from pear_agent.policies.scripted import ScriptedPolicy
from pear_agent.records.log import RunWriter

pytest.importorskip("mujoco")


class Yielding(ScriptedPolicy):
    """The scripted expert behind an awaited call, as a model would be: episodes interleave turn by
    turn (each decision gives the loop to the others)."""

    async def aact(self, messages, ctx) -> PolicyReply:
        await asyncio.sleep(0.001 * (ctx.turn % 3))
        return self.act(messages, ctx)


def _records(run_dir):
    lines = []
    for raw in (run_dir / "episode.jsonl").read_text().splitlines():
        line = json.loads(raw)
        line.pop("latency_s", None)
        for ik in (line.get("plan") or {}).get("ik", {}).values():
            ik.pop("ik_ms", None)
        lines.append(line)
    images = {p.name: p.read_bytes() for p in sorted((run_dir / "images").glob("*.jpg"))}
    return lines, images


def test_episodes_in_flight_together_record_what_they_record_alone(tmp_path) -> None:
    spec = EnvSpec("pick_cube")  # cameras rendered: two renderers per scene, interleaved

    def jobs(root):
        return [
            EpisodeJob(
                spec,
                Yielding("pick_cube", expert=EXPERTS["pick_cube"]),
                seed=s,
                writer=lambda s=s: RunWriter(root / str(s), None),
            )
            for s in range(4)
        ]

    alone_pool, together_pool = EnvironmentPool(), EnvironmentPool()
    alone = run_episodes(jobs(tmp_path / "alone"), concurrency=1, pool=alone_pool)
    together = run_episodes(jobs(tmp_path / "together"), concurrency=4, pool=together_pool)
    assert [o.job.seed for o in together] == [0, 1, 2, 3]  # in the jobs' order
    assert all(o.result.success for o in alone + together)
    assert alone_pool.built == 1 and together_pool.built == 4  # reused one at a time; one each at once
    assert together_pool.idle() == 4 and together_pool.in_use == 0
    for s in range(4):
        a, b = _records(tmp_path / "alone" / str(s)), _records(tmp_path / "together" / str(s))
        assert a[0] == b[0] and a[1] == b[1] and len(a[1]) >= 4, s  # every line and every image
    alone_pool.close()
    together_pool.close()


def test_a_failing_episode_is_an_outcome_and_its_environment_is_not_reused() -> None:
    pool = EnvironmentPool()

    class Exploding(ScriptedPolicy):
        blocking = False

        def act(self, messages, ctx):
            raise RuntimeError("policy bug")

    jobs = [
        EpisodeJob(
            EnvSpec("pick_cube", render=False), Exploding("pick_cube", expert=EXPERTS["pick_cube"]), seed=0
        )
    ]
    jobs.append(EpisodeJob(EnvSpec("pick_cube", render=False), lambda: scripted_policy("pick_cube"), seed=1))
    bad, good = run_episodes(jobs, concurrency=1, pool=pool)
    assert bad.result is None and bad.error == "RuntimeError: policy bug"
    assert good.result.success and good.messages[0]["role"] == "system"
    assert pool.built == 2 and pool.idle() == 1  # the one in a bad state was closed, not pooled
    pool.close()


def test_arun_episodes_streams_outcomes_as_they_end() -> None:
    pool = EnvironmentPool()
    spec = EnvSpec("push_to_target", render=False)
    cfg = EpisodeConfig(max_turns=2)

    async def collect():
        jobs = (
            EpisodeJob(spec, scripted_policy("push_to_target"), seed=s, config=cfg, tag=s) for s in range(3)
        )
        return [o.job.tag async for o in arun_episodes(jobs, concurrency=2, pool=pool)]

    tags = asyncio.run(collect())
    assert sorted(tags) == [0, 1, 2] and pool.built == 2
    pool.close()


def test_a_family_with_large_environments_keeps_fewer_idle_but_as_many_as_run_at_once(
    monkeypatch,
) -> None:
    from pear_agent.loop.registry import family_of

    monkeypatch.setattr(family_of("pick_cube"), "idle_environments", 1)
    pool = EnvironmentPool()  # default limit: 4 idle
    cfg = EpisodeConfig(max_turns=2)
    tasks = ["pick_cube", "push_to_target", "pick_cube", "push_to_target"]
    jobs = [EpisodeJob(EnvSpec(t, render=False), scripted_policy(t), seed=0, config=cfg) for t in tasks]
    run_episodes(jobs, concurrency=1, pool=pool)
    assert pool.idle() == 1 and pool.built == 4  # each switch of task closed the other one
    pool.close()

    pool = EnvironmentPool()
    same = [
        EpisodeJob(EnvSpec("pick_cube", render=False), scripted_policy("pick_cube"), seed=s, config=cfg)
        for s in range(6)
    ]
    run_episodes(same, concurrency=3, pool=pool)
    assert pool.built == 3  # three at a time came back and were reused, not rebuilt
    assert pool.idle() == 3
    pool.close()
