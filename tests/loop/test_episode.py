import itertools
import json

import numpy as np
import pytest

from pear_agent.loop.arm_environment import arm_episode
from pear_agent.loop.config import EpisodeConfig
from pear_agent.loop.registry import make_backend
from pear_agent.loop.task_experts import EXPERTS, scripted_policy
from pear_agent.policies.base import PolicyReply, TurnContext
from pear_agent.policies.scripted import ScriptedPolicy
from pear_agent.records.log import RunWriter


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
    ep = arm_episode(backend, panda_kin, scripted_policy("pick_cube"), writer=writer)
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

    arm_episode(backend, panda_kin, Spy("pick_cube", expert=EXPERTS["pick_cube"])).run(1)
    assert len(snapshots) >= 3
    for a, b in itertools.pairwise(snapshots):
        assert b.startswith(a[:-1])  # the earlier conversation is an exact prefix


def test_invalid_reply_ends_episode_at_once_with_max_invalid_1(backend, panda_kin) -> None:
    policy = ListPolicy(['{"action": {"arm": {"move_cm": [0, 0, 500]}}}'])
    res = arm_episode(backend, panda_kin, policy, EpisodeConfig(max_invalid=1)).run(0)
    assert res.end_reason == "invalid_action" and "out of range" in res.detail and res.turns == 1
    assert res.max_invalid == 1 and res.invalid_replies == 1


def test_invalid_replies_get_correction_turns_until_max_invalid(backend, panda_kin, tmp_path) -> None:
    bad, good = '{"action": {}}', '{"action": {"arm": {"move_cm": [0, 0, 1]}}}'
    policy = ListPolicy([bad, bad, good, bad, bad, bad, good])
    writer = RunWriter(tmp_path, video_fps=None)
    res = arm_episode(backend, panda_kin, policy, EpisodeConfig(max_turns=10), writer).run(0)
    # two invalid, one valid (resets the count), then three invalid in a row end it
    assert res.end_reason == "invalid_action" and res.turns == 6 and res.invalid_replies == 5
    turns = [json.loads(x) for x in (tmp_path / "episode.jsonl").read_text().splitlines()][1:]
    assert [t["outcome"]["status"] for t in turns] == ["invalid", "invalid", "reached"] + ["invalid"] * 3
    assert "invalid reply (1 in a row" in turns[1]["prompt"] and "names no part" in turns[1]["prompt"]
    assert "did not move" in turns[1]["prompt"] and turns[-1]["end"] == "invalid_action"
    assert np.allclose(turns[0]["state"]["arm"]["position"], turns[2]["state"]["arm"]["position"], atol=0.05)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["max_invalid"] == 3 and summary["invalid_replies"] == 5


class Echo(ListPolicy):
    """A model that repeats the last user turn (the whole text, or just its state JSON)."""

    def __init__(self, whole: bool) -> None:
        super().__init__([])
        self.whole = whole

    def act(self, messages, ctx):
        content = messages[-1]["content"]
        text = content if isinstance(content, str) else content[0]["text"]
        if not self.whole:
            text = "State: " + text.split("State: ", 1)[1].split("\n", 1)[0]
        return PolicyReply(text)


@pytest.mark.parametrize("whole", [True, False])
def test_an_echoed_state_is_never_executed(backend, panda_kin, tmp_path, whole: bool) -> None:
    writer = RunWriter(tmp_path, video_fps=None)
    res = arm_episode(backend, panda_kin, Echo(whole), EpisodeConfig(max_invalid=4), writer).run(0)
    assert res.end_reason == "invalid_action" and res.turns == 4 and res.invalid_replies == 4
    turns = [json.loads(x) for x in (tmp_path / "episode.jsonl").read_text().splitlines()][1:]
    assert all("action" not in t and t["outcome"]["status"] == "invalid" for t in turns)
    assert "looks like the state" in turns[0]["error"]
    assert turns[0]["state"] == turns[-1]["state"]  # the arm never moved


def test_done_ends_the_episode_and_the_task_check_decides(backend, panda_kin, tmp_path) -> None:
    policy = ListPolicy(
        ['I am done.\n```json\n{"action": {"arm": {"move_cm": [0, 0, 1]}}, "done": true}\n```']
    )
    writer = RunWriter(tmp_path, video_fps=None)
    res = arm_episode(backend, panda_kin, policy, writer=writer).run(0)
    assert res.end_reason == "done" and res.turns == 1 and not res.success  # the cube was not picked
    turns = [json.loads(x) for x in (tmp_path / "episode.jsonl").read_text().splitlines()][1:]
    assert turns[0]["action"]["done"] is True and turns[0]["outcome"]["status"] == "reached"


class Judged:
    """The real backend plus seam 2's hook, as a hardware backend defines it."""

    def __init__(self, inner, verdict) -> None:
        self._inner, self.verdict, self.calls = inner, verdict, []

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def judge_success(self, end_reason: str, detail: str):
        self.calls.append((end_reason, detail))
        return self.verdict


@pytest.mark.parametrize("verdict", [True, False, None])
def test_backend_judge_success_overrides_the_verdict(backend, panda_kin, verdict) -> None:
    judged = Judged(backend, verdict)
    policy = ListPolicy(['{"action": {"arm": {"gripper": 1}}, "done": true}'])
    res = arm_episode(judged, panda_kin, policy).run(0)
    assert judged.calls == [("done", "the model declared the task done")]
    assert res.success is (False if verdict is None else verdict) and res.judged is (verdict is not None)


def test_console_line_shows_the_clipped_motion(backend, panda_kin) -> None:
    seen = []
    policy = ListPolicy(['{"action": {"arm": {"move_cm": [0, 0, 50]}}}'])
    res = arm_episode(backend, panda_kin, policy, EpisodeConfig(max_turns=1), on_turn=seen.append).run(0)
    assert res.turns == 1 and len(seen) == 1
    step = panda_kin.robot.parts["arm"].limits.max_position_step_cm
    assert f"move +0.0 +0.0 +{step:.1f} cm" in seen[0].summary and "+50.0" not in seen[0].summary


def test_state_observation_sends_plain_string_content(backend, panda_kin, tmp_path) -> None:
    msgs = []

    class Spy(ScriptedPolicy):
        def act(self, messages, ctx):
            msgs.append(messages)
            return super().act(messages, ctx)

    writer = RunWriter(tmp_path, video_fps=None)
    cfg = EpisodeConfig(max_turns=2, observation="state", scene_facts=True)
    res = arm_episode(backend, panda_kin, Spy("pick_cube", expert=EXPERTS["pick_cube"]), cfg, writer).run(0)
    assert res.observation == "state" and res.scene_facts and res.turns == 2
    last = msgs[-1]
    assert all(isinstance(m["content"], str) for m in last)
    assert "No camera images" in last[0]["content"] and "Camera images follow" not in last[0]["content"]
    user = [m["content"] for m in last if m["role"] == "user"]
    assert all("State: " in u and "Scene: " in u and "Camera" not in u for u in user)
    assert "position_cm" in user[0] and not list((tmp_path / "images").iterdir())
    header = json.loads((tmp_path / "episode.jsonl").read_text().splitlines()[0])
    assert header["observation"] == "state" and header["scene_facts"] is True


def test_images_observation_leaves_out_the_state(backend, panda_kin) -> None:
    msgs = []

    class Spy(ScriptedPolicy):
        def act(self, messages, ctx):
            msgs.append(messages)
            return super().act(messages, ctx)

    arm_episode(
        backend,
        panda_kin,
        Spy("pick_cube", expert=EXPERTS["pick_cube"]),
        EpisodeConfig(max_turns=1, observation="images"),
    ).run(0)
    user = msgs[0][1]["content"]
    assert isinstance(user, list) and user[-1]["type"] == "image_url"
    assert "State:" not in user[0]["text"] and "Camera images follow" in user[0]["text"]


def test_ik_failure_is_reported_and_counts_as_a_turn(backend, panda_kin, tmp_path) -> None:
    # Step by step towards the far low corner of the workspace, beyond the arm's reach.
    policy = ListPolicy(['{"action": {"arm": {"move_cm": [10, 10, -10]}}}'])
    writer = RunWriter(tmp_path, video_fps=None)
    res = arm_episode(backend, panda_kin, policy, EpisodeConfig(max_turns=9), writer).run(0)
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
    hold = '{"action": {"arm": {"move_cm": [0, 0, 0]}}}'
    res = arm_episode(backend, panda_kin, ListPolicy([hold]), EpisodeConfig(max_context_tokens=1500)).run(0)
    assert res.end_reason == "context_budget" and res.turns >= 1


def test_policy_error_ends_episode(backend, panda_kin) -> None:
    class Dead(ListPolicy):
        def act(self, messages, ctx):
            return PolicyReply("", error="endpoint unreachable: connection refused")

    res = arm_episode(backend, panda_kin, Dead([])).run(0)
    assert res.end_reason == "policy_error" and "connection refused" in res.detail
    # a failed request is neither a turn nor a decision time; it is counted apart
    assert res.turns == 0 and res.latencies_s == [] and res.policy_failures == 1


def test_context_error_from_the_client_ends_as_context_budget(backend, panda_kin) -> None:
    class Full(ListPolicy):
        def act(self, messages, ctx):
            info = {"end_reason": "context_budget", "decision_s": 0.7, "retries": 0}
            return PolicyReply("", error="the server's context is full", info=info)

    res = arm_episode(backend, panda_kin, Full([])).run(0)
    assert res.end_reason == "context_budget" and res.turns == 0
    assert res.failed_latencies_s == [0.7] and res.latencies_s == []


def test_a_reset_the_backend_aborts_ends_without_a_decision(backend, panda_kin, tmp_path) -> None:
    from pear_agent.robot.backend import EpisodeAborted

    class Aborting(Judged):
        def reset(self, seed):
            raise EpisodeAborted("stopped", "the home move was e-stopped")

    policy = ListPolicy(['{"action": {"arm": {"gripper": 1}}}'])
    writer = RunWriter(tmp_path, video_fps=None)
    res = arm_episode(Aborting(backend, None), panda_kin, policy, writer=writer).run(0)
    assert res.end_reason == "stopped" and "e-stopped" in res.detail and res.turns == 0 and not policy.seen
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["end_reason"] == "stopped" and summary["task"] == "pick_cube"


class FailingPolicy(ListPolicy):
    """A first reply, then no reply at all (an endpoint gone, a replay run out)."""

    def act(self, messages, ctx: TurnContext) -> PolicyReply:
        if ctx.turn > 1:
            return PolicyReply("", error="replay has only 1 replies")
        return super().act(messages, ctx)


@pytest.mark.parametrize("verdict", [True, None])
def test_a_judge_is_not_consulted_after_a_failure_of_the_loop(backend, panda_kin, verdict) -> None:
    """Only the end of a task attempt (success, done, turn limit) goes to an outside judge: an
    operator's "yes" never turns a policy error into a success."""
    judged = Judged(backend, verdict)
    policy = FailingPolicy(['{"action": {"arm": {"gripper": 1}}}'])
    res = arm_episode(judged, panda_kin, policy, EpisodeConfig(max_turns=3)).run(0)
    assert res.end_reason == "policy_error" and res.turns == 1
    assert judged.calls == [] and res.success is False and res.judged is False
