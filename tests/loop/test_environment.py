"""The environment seam: the one turn loop drives a world that is not an arm (no backend, no IK)."""

import json
from dataclasses import dataclass
from typing import Any

import pytest

from pear_agent.loop.environment import StepResult, TurnPrompt
from pear_agent.loop.episode import Episode, EpisodeConfig
from pear_agent.policies.base import PolicyReply, TurnContext
from pear_agent.protocol.actions import ActionError
from pear_agent.records.log import RunWriter
from pear_agent.robot.backend import TaskInfo


@dataclass
class Step:
    step: float
    done: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"action": {"step": self.step}, **({"done": True} if self.done else {})}


class Line:
    """A 1-D world: reach x = 3 with steps in [-1, 1]; time passes 1 s a step."""

    name = "line"

    def __init__(self, verdict: bool | None = None) -> None:
        self.x, self.t, self.advanced, self.verdict = 0.0, 0.0, [], verdict
        self._task = TaskInfo("reach_3", "Reach x = 3.", 10)

    @property
    def task(self) -> TaskInfo:
        return self._task

    def reset(self, seed: int) -> None:
        self.x, self.t = 0.0, 0.0

    def system_prompt(self) -> str:
        return 'Reply {"action": {"step": n}} with n in [-1, 1].'

    def header(self) -> dict[str, Any]:
        return {"world": "line"}

    def observe(self, turn: int, max_turns: int, feedback: str | None) -> TurnPrompt:
        text = f"Turn {turn} of {max_turns}. x = {self.x:g}." + (f" Last: {feedback}" if feedback else "")
        ctx = TurnContext(turn, self._task.name, {"x": self.x}, None, response_schema=self.response_schema())
        return TurnPrompt(
            {"role": "user", "content": text}, text, ctx, len(text) // 4 + 8, record={"x": self.x}
        )

    def response_schema(self) -> dict[str, Any]:
        return {"type": "object", "required": ["action"]}

    def parse(self, reply: str) -> Step:
        try:
            obj = json.loads(reply)
            step = float(obj["action"]["step"])
        except (ValueError, KeyError, TypeError):
            raise ActionError('expected {"action": {"step": n}}') from None
        if not -1 <= step <= 1:
            raise ActionError(f"step {step:g} is outside [-1, 1]")
        return Step(step, bool(obj.get("done", False)))

    def execute(self, action: Step) -> StepResult:
        self.x += action.step
        self.t += 1.0
        status = "crashed" if self.x < -1 else "ok"
        return StepResult(
            status,
            f"moved {action.step:+g}",
            f"step {action.step:+g}",
            self.x >= 3,
            {"outcome": {"status": status}, "sim_time_s": self.t},
            end=status == "crashed",
            detail="fell off the line" if status == "crashed" else "",
            reward=1.0 if self.x >= 3 else 0.0,
        )

    def advance(self, duration_s: float) -> None:
        self.advanced.append(duration_s)
        self.t += duration_s

    def time_s(self) -> float:
        return self.t

    def set_frame_sink(self, sink) -> None:
        pass

    def judge_success(self, end_reason: str, detail: str) -> bool | None:
        return self.verdict


class Replies:
    name = "replies"

    def __init__(self, replies: list[str], latency_s: float = 0.0) -> None:
        self.replies, self.latency_s, self.seen = replies, latency_s, []

    def reset(self, seed: int) -> None:
        pass

    def act(self, messages, ctx: TurnContext) -> PolicyReply:
        self.seen.append(ctx)
        return PolicyReply(self.replies[min(ctx.turn - 1, len(self.replies) - 1)], latency_s=self.latency_s)


STEP = '{"action": {"step": 1}}'


def test_the_loop_drives_a_non_arm_world_with_corrections(tmp_path) -> None:
    env, writer = Line(), RunWriter(tmp_path, video_fps=None)
    policy = Replies([STEP, "go right", STEP, '{"action": {"step": 5}}', STEP])
    seen = []
    res = Episode(env, policy, EpisodeConfig(), writer, seen.append).run(0)
    assert res.success and res.end_reason == "success" and res.turns == 5 and res.robot == "line"
    assert res.invalid_replies == 2 and [t.outcome for t in seen] == ["ok", "invalid", "ok", "invalid", "ok"]
    assert seen[0].summary == "step +1"
    lines = [json.loads(x) for x in (tmp_path / "episode.jsonl").read_text().splitlines()]
    assert lines[0]["world"] == "line" and lines[0]["max_invalid"] == 3
    turns = lines[1:]
    assert [t["x"] for t in turns] == [0, 1, 1, 2, 2] and turns[-1]["reward"] == 1.0
    assert res.reward == 1.0  # the last step's reward is the result's
    assert "invalid reply (1 in a row" in turns[2]["prompt"] and "step 5 is outside" in turns[4]["prompt"]
    assert policy.seen[0].response_schema == env.response_schema()


def test_environment_end_done_and_judge() -> None:
    res = Episode(Line(), Replies(['{"action": {"step": -1}}'])).run(0)
    assert res.end_reason == "crashed" and res.detail == "fell off the line" and res.turns == 2
    res = Episode(Line(), Replies(['{"action": {"step": 1}, "done": true}'])).run(0)
    assert res.end_reason == "done" and res.turns == 1 and not res.success
    res = Episode(Line(verdict=True), Replies(['{"action": {"step": 1}, "done": true}'])).run(0)
    assert res.end_reason == "done" and res.success and res.judged


@pytest.mark.parametrize("max_invalid", [1, 2])
def test_max_invalid_consecutive_replies_end_the_episode(max_invalid: int) -> None:
    res = Episode(Line(), Replies(["?"]), EpisodeConfig(max_invalid=max_invalid)).run(0)
    assert res.end_reason == "invalid_action" and res.turns == max_invalid == res.invalid_replies


def test_realtime_advances_the_world_by_each_later_decision() -> None:
    env = Line()
    res = Episode(env, Replies(["?", STEP], latency_s=0.25), EpisodeConfig(mode="realtime")).run(0)
    # invalid replies took time too: the world moved on while the model thought
    assert (
        res.success and env.advanced == [0.25] * (res.turns - 1) and res.advanced_s == 0.25 * (res.turns - 1)
    )


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"max_invalid": 0}, "max-invalid"),
        ({"observation": "video"}, "observation"),
        ({"max_invalid": 1.5}, "integer"),
    ],
)
def test_bad_loop_options_are_refused(kwargs: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        EpisodeConfig(**kwargs)


# -- the turn's steps, one at a time, and the same episode as a coroutine ------------------------
def test_each_step_of_a_turn_does_its_own_part(tmp_path) -> None:
    env, writer = Line(), RunWriter(tmp_path, video_fps=None)
    ep = Episode(env, Replies([STEP, "nope"]), EpisodeConfig(max_turns=3), writer)
    assert ep.begin(0) and ep.turn == 0 and [m["role"] for m in ep.messages] == ["system"]
    log = tmp_path / "episode.jsonl"
    prompt = ep.observe()  # observe: the turn's message joins the conversation; nothing logged yet
    assert prompt.text.startswith("Turn 1 of 3. x = 0") and ep.messages[-1] == prompt.message
    assert len(log.read_text().splitlines()) == 1  # the header only
    reply = ep.decide()  # decide: the policy's answer, nothing applied yet
    assert reply.text == STEP and env.x == 0 and ep.messages[-1]["role"] == "user"
    ep.apply(reply)  # apply: executed, accounted, recorded (record: one flushed line)
    assert env.x == 1 and ep.result.turns == 1 and ep.messages[-1] == {"role": "assistant", "content": STEP}
    line = json.loads(log.read_text().splitlines()[-1])
    assert line["turn"] == 1 and line["action"] == {"action": {"step": 1.0}} and "end" not in line
    ep.observe()
    ep.apply(ep.decide())  # an invalid reply: a correction turn, the world unchanged
    assert env.x == 1 and ep.result.invalid_replies == 1 and not ep.over
    assert "invalid reply (1 in a row" in ep.observe().text
    ep.apply(PolicyReply("", error="server gone"))
    assert ep.over and ep.observe() is None and ep.result.end_reason == "policy_error"
    ep.record({"kind": "note"})  # record: one line, flushed at once
    assert json.loads(log.read_text().splitlines()[-1]) == {"kind": "note"}
    assert not (tmp_path / "summary.json").exists()
    res = ep.finish()  # finish: the result and the summary
    assert res.turns == 2 and res.policy_failures == 1
    assert json.loads((tmp_path / "summary.json").read_text())["end_reason"] == "policy_error"


def test_arun_plays_the_same_episode_as_run(tmp_path) -> None:
    import asyncio

    policy = [STEP, "go right", STEP, '{"action": {"step": 5}}', STEP]
    a, b = RunWriter(tmp_path / "a", video_fps=None), RunWriter(tmp_path / "b", video_fps=None)
    sync = Episode(Line(), Replies(policy), EpisodeConfig(), a).run(0)
    coro = asyncio.run(Episode(Line(), Replies(policy), EpisodeConfig(), b).arun(0))
    assert (sync.turns, sync.end_reason, sync.invalid_replies) == (coro.turns, coro.end_reason, 2)

    def lines(d):
        return [
            {k: v for k, v in json.loads(x).items() if k != "latency_s"}
            for x in (d / "episode.jsonl").read_text().splitlines()
        ]

    assert lines(tmp_path / "a") == lines(tmp_path / "b")


class SlowAsync(Replies):
    """A model that answers after `delay_s` of awaiting (a server), counting decisions in flight."""

    now = peak = 0

    def __init__(self, delay_s: float) -> None:
        super().__init__([STEP])
        self.delay_s = delay_s

    async def aact(self, messages, ctx) -> PolicyReply:
        import asyncio

        SlowAsync.now += 1
        SlowAsync.peak = max(SlowAsync.peak, SlowAsync.now)
        await asyncio.sleep(self.delay_s)
        SlowAsync.now -= 1
        return PolicyReply(STEP, latency_s=self.delay_s)


def test_episodes_on_one_loop_decide_at_the_same_time() -> None:
    import asyncio

    async def many():
        return await asyncio.gather(*(Episode(Line(), SlowAsync(0.05)).arun(s) for s in range(6)))

    SlowAsync.now = SlowAsync.peak = 0
    results = asyncio.run(many())
    assert all(r.success and r.turns == 3 for r in results)
    assert SlowAsync.peak == 6  # every episode was waiting for its model at once: none blocked the loop


def test_a_blocking_policy_decides_in_a_thread_and_a_cheap_one_inline() -> None:
    import asyncio
    import threading

    seen = {}

    class Blocking(Replies):
        def act(self, messages, ctx):
            seen.setdefault(self.name, threading.current_thread())
            return super().act(messages, ctx)

    class Cheap(Blocking):
        name = "cheap"
        blocking = False

    asyncio.run(Episode(Line(), Blocking([STEP])).arun(0))
    asyncio.run(Episode(Line(), Cheap([STEP])).arun(0))
    assert seen["replies"] is not threading.main_thread() and seen["cheap"] is threading.main_thread()
