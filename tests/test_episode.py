import itertools
import json

import numpy as np
import pytest

from pear_agent.episode import Episode, EpisodeConfig
from pear_agent.policies.base import PolicyReply, TurnContext
from pear_agent.policies.scripted import ScriptedPolicy
from pear_agent.records import RunWriter
from pear_agent.registry import make_backend


class ListPolicy:
    """Replies from a list, one per turn (a stand-in for a model with fixed answers)."""

    name = "list"

    def __init__(self, replies: list[str]) -> None:
        self.replies = replies
        self.seen: list[int] = []

    def reset(self, seed: int) -> None:
        pass

    def act(self, messages, ctx: TurnContext) -> PolicyReply:
        self.seen.append(len(messages))
        return PolicyReply(self.replies[min(ctx.turn - 1, len(self.replies) - 1)])


@pytest.fixture(scope="module")
def backend(panda):
    be = make_backend("pick_cube", panda)
    yield be
    be.close()


def test_scripted_episode_succeeds_and_logs_every_turn(backend, panda_kin, tmp_path) -> None:
    writer = RunWriter(tmp_path, video_fps=10)
    ep = Episode(backend, panda_kin, ScriptedPolicy("pick_cube"), writer=writer)
    res = ep.run(0)
    assert res.success and res.end_reason == "success"
    lines = [json.loads(x) for x in (tmp_path / "episode.jsonl").read_text().splitlines()]
    assert lines[0]["kind"] == "header" and lines[0]["seed"] == 0
    turns = [x for x in lines if x["kind"] == "turn"]
    assert len(turns) == res.turns and turns[-1]["end"] == "success"
    for t in turns:
        assert t["reply"] and t["action"] is not None and t["outcome"]["status"] in {"reached", "blocked"}
        for rel in t["images"].values():
            assert (tmp_path / rel).read_bytes()[:2] == b"\xff\xd8"
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["success"] and summary["turns"] == res.turns
    import imageio_ffmpeg

    frames, secs = imageio_ffmpeg.count_frames_and_secs(str(tmp_path / "episode.mp4"))
    assert frames >= 10 * res.sim_time_s * 0.8 and secs > 0


def test_context_is_append_only(backend, panda_kin) -> None:
    snapshots = []

    class Spy(ScriptedPolicy):
        def act(self, messages, ctx):
            snapshots.append(json.dumps(messages))
            return super().act(messages, ctx)

    Episode(backend, panda_kin, Spy("pick_cube")).run(1)
    assert len(snapshots) >= 3
    for a, b in itertools.pairwise(snapshots):
        assert b.startswith(a[:-1])  # the earlier conversation is an exact prefix


def test_invalid_reply_ends_episode_with_reason(backend, panda_kin) -> None:
    res = Episode(backend, panda_kin, ListPolicy(['{"arm": {"gripper": 3}}'])).run(0)
    assert res.end_reason == "invalid_action" and "out of range" in res.detail and res.turns == 1


def test_ik_failure_is_reported_and_counts_as_a_turn(backend, panda_kin, tmp_path) -> None:
    # Step by step towards the far low corner of the workspace, beyond the arm's reach.
    policy = ListPolicy(['{"arm": {"position": [10, 10, -10]}}'])
    writer = RunWriter(tmp_path, video_fps=None)
    res = Episode(backend, panda_kin, policy, EpisodeConfig(max_turns=9), writer).run(0)
    assert res.end_reason == "turn_limit" and res.turns == 9
    turns = [json.loads(x) for x in (tmp_path / "episode.jsonl").read_text().splitlines()][1:]
    failed = [i for i, t in enumerate(turns) if t["outcome"]["status"] == "ik_failed"]
    assert failed and failed[0] + 1 < len(turns), [t["outcome"] for t in turns]
    i = failed[0]
    assert "Last action: ik_failed" in turns[i + 1]["prompt"] and "did not move" in turns[i + 1]["prompt"]
    assert np.allclose(
        turns[i]["state"]["arm"]["position"], turns[i + 1]["state"]["arm"]["position"], atol=0.3
    )


def test_context_budget_ends_episode(backend, panda_kin) -> None:
    res = Episode(backend, panda_kin, ListPolicy(["{}"]), EpisodeConfig(max_context_tokens=1500)).run(0)
    assert res.end_reason == "context_budget" and res.turns >= 1


def test_policy_error_ends_episode(backend, panda_kin) -> None:
    class Dead(ListPolicy):
        def act(self, messages, ctx):
            return PolicyReply("", error="endpoint unreachable: connection refused")

    res = Episode(backend, panda_kin, Dead([])).run(0)
    assert res.end_reason == "policy_error" and "connection refused" in res.detail
