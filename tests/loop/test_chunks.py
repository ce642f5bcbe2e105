"""Action chunks through the real loop in MuJoCo: the whole chunk checked before anything
moves, one motion through the waypoints, early stop on contact with the step reached named, the
chunk limit refused (not truncated), records that replay."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pear_agent.loop.arm_environment import arm_episode
from pear_agent.loop.config import EpisodeConfig
from pear_agent.loop.registry import make_backend
from pear_agent.loop.task_experts import scripted_policy
from pear_agent.policies.base import PolicyReply
from pear_agent.policies.replay import ReplayPolicy
from pear_agent.protocol.actions import ActionError, parse_reply, response_schema
from pear_agent.records.log import RunWriter


class Canned:
    """Replies from a list, in order (the model's side of the loop, scripted)."""

    name = "canned"
    blocking = False

    def __init__(self, replies: list[str]) -> None:
        self.replies = replies

    def reset(self, seed: int) -> None:
        pass

    def act(self, messages, ctx) -> PolicyReply:
        return PolicyReply(text=self.replies[min(ctx.turn, len(self.replies)) - 1])


def chunk(*steps: dict) -> str:
    return "chunk:\n```json\n" + json.dumps({"action": [{"arm": s} for s in steps]}) + "\n```"


@pytest.fixture(scope="module")
def backend(panda):
    be = make_backend("pick_cube", panda, render=False)
    yield be
    be.close()


def _run(backend, kin, replies: list[str], k: int, turns: int, tmp_path: Path | None = None):
    writer = RunWriter(tmp_path, video_fps=None) if tmp_path is not None else None
    ep = arm_episode(backend, kin, Canned(replies), EpisodeConfig(max_chunk=k, max_turns=turns), writer)
    return ep, ep.run(0)


# -- protocol ---------------------------------------------------------------------------------
def test_single_action_is_a_chunk_of_one_and_limits_are_refused(panda) -> None:
    one = parse_reply('{"action": {"arm": {"move_cm": [0, 0, 1]}}}', panda, max_chunk=4)
    assert len(one.chunk) == 1 and one.to_json() == {"action": {"arm": {"move_cm": [0.0, 0.0, 1.0]}}}
    three = parse_reply(chunk({"move_cm": [1, 0, 0]}, {"move_cm": [0, 1, 0]}, {"gripper": 0}), panda, 4)
    assert [s["arm"].position_cm for s in three.chunk[:2]] == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    assert three.chunk[2]["arm"].gripper == 0.0 and len(three.to_json()["action"]) == 3
    with pytest.raises(ActionError, match=r"the chunk has 5 steps.*at most 4"):
        parse_reply(chunk(*[{"move_cm": [0, 0, 1]}] * 5), panda, max_chunk=4)
    with pytest.raises(ActionError, match=r"2 steps.*single action"):
        parse_reply(chunk({"move_cm": [0, 0, 1]}, {"move_cm": [0, 0, 1]}), panda)
    with pytest.raises(ActionError, match=r"^step 2: .*position"):
        parse_reply('{"action": [{"arm": {"move_cm": [0,0,1]}}, {"arm": {"position": [0,0,1]}}]}', panda, 4)
    with pytest.raises(ActionError, match="empty list"):
        parse_reply('{"action": []}', panda, 4)
    note = parse_reply(chunk({"move_cm": [0, 0, 1]}, {"gripper": 3}), panda, 4).notes
    assert note and note[0].startswith("step 2: ")


def test_schema_says_max_items(panda) -> None:
    assert "anyOf" in response_schema(panda)["properties"]["action"]
    assert all(a["type"] == "object" for a in response_schema(panda)["properties"]["action"]["anyOf"])
    arr = response_schema(panda, 4)["properties"]["action"]["anyOf"][1]
    assert arr["type"] == "array" and arr["maxItems"] == 4 and arr["minItems"] == 1


# -- the loop in simulation ---------------------------------------------------------------------
@pytest.fixture()
def unreachable(backend, panda_kin):
    """A chunk whose third step has no IK solution (checked, so the test cannot pass vacuously)."""
    env_ep, _ = _run(backend, panda_kin, ['{"action": {"arm": {"move_cm": [0, 0, 0]}}}'], k=4, turns=1)
    env = env_ep.env
    env.reset(0)
    env.observe(1, 2, None)
    # back towards the base and down, tilting the hand: the third step is beyond the wrist's limits
    tilt = {"move_cm": [-10, 0, -10], "turn_rad": [0, -0.5, 0]}
    for steps in ([{"move_cm": [0, 0, -2]}, tilt, tilt],):
        reply = chunk(*steps)
        _, infos, refused = env.plan_chunk(env.parse(reply), env._state, env._obs.joints_rad)
        if refused is not None and len(infos) == 3:
            return reply
    pytest.fail("no test chunk with an unreachable third step for this robot")


def test_refused_chunk_names_step_3(backend, panda_kin, unreachable, tmp_path) -> None:
    _ep, _res = _run(backend, panda_kin, [unreachable, unreachable], k=4, turns=2, tmp_path=tmp_path)
    lines = [json.loads(x) for x in (tmp_path / "episode.jsonl").read_text().splitlines()]
    t1 = next(x for x in lines if x.get("kind") == "turn")
    assert t1["outcome"]["status"] == "ik_failed" and t1["outcome"]["detail"].startswith("step 3: ")
    assert "nothing moved" in t1["outcome"]["detail"]
    assert [s["status"] for s in t1["steps"]] == ["not run", "not run", "refused"]
    assert t1["executed"] == [] and t1["outcome"]["steps_reached"] == 0
    # the next turn's prompt tells the model which step and why
    t2 = [x for x in lines if x.get("kind") == "turn"][1]
    assert "step 3:" in t2["prompt"]
    # and the arm did not move: the state shown at turn 2 is the state at turn 1
    assert t2["state"] == t1["state"]
    header = next(x for x in lines if x.get("kind") == "header")
    assert header["max_chunk"] == 4 and "up to 4 steps" in header["system_prompt"]


def test_chunk_longer_than_k_is_a_correction_turn(backend, panda_kin) -> None:
    reply = chunk(*[{"move_cm": [0, 0, -1]}] * 3)
    ep, res = _run(backend, panda_kin, [reply], k=2, turns=1)
    assert res.invalid_replies == 1 and res.turns == 1
    last = ep.env.observe(2, 2, ep._feedback).text
    assert "invalid reply" in last and "3 steps" in last and "at most 2" in last


def test_chunk_moves_through_waypoints_without_stopping_and_reaches_all(backend, panda_kin) -> None:
    steps = [{"move_cm": [4, 0, 0]}, {"move_cm": [0, 4, 0]}, {"move_cm": [0, 0, 4]}]
    speeds: list[float] = []
    be = backend
    io = be.parts["arm"]
    orig = be._maybe_emit_frame

    def sample() -> None:
        speeds.append(float(np.max(np.abs(be.data.qvel[io.dadr]))))
        orig()

    be._maybe_emit_frame = sample
    try:
        ep, _res = _run(be, panda_kin, [chunk(*steps)], k=4, turns=1)
    finally:
        be._maybe_emit_frame = orig
    state0 = ep.messages[1]["content"][0]["text"]
    assert "State:" in state0
    env = ep.env
    env.observe(2, 2, None)
    p = np.array(env._state["arm"].position_cm)
    start = np.array(json.loads(state0.split("State: ", 1)[1].splitlines()[0])["arm"]["position"])
    assert np.allclose(p - start, [4, 4, 4], atol=0.6)
    # one motion: after it starts, the arm does not come to rest until the end (no stop per waypoint)
    moving = [i for i, s in enumerate(speeds) if s > 0.05]
    assert moving, "the arm never moved"
    inner = speeds[moving[0] : moving[-1]]
    assert min(inner) > 0.01, f"the arm stopped between waypoints (min speed {min(inner):.4f} rad/s)"


def test_chunk_into_the_table_stops_early_and_says_the_step(backend, panda_kin, tmp_path) -> None:
    # down to the workspace floor (the fingertips reach below it: the table), then sideways and up
    down = [{"move_cm": [0, -10, -10]}] + [{"move_cm": [0, 0, -10]}] * 5
    reply = chunk(*down, {"move_cm": [10, 0, 0]}, {"move_cm": [0, 0, 10]})
    ep, _res = _run(backend, panda_kin, [reply], k=8, turns=1, tmp_path=tmp_path)
    turn = next(json.loads(x) for x in (tmp_path / "episode.jsonl").read_text().splitlines() if '"turn"' in x)
    fb = ep._feedback
    assert fb.startswith("blocked during step") and "touched" in fb and "table" in fb, fb
    n = int(fb.split("during step ", 1)[1].split()[0])
    assert n < 8 and f"step {n - 1} of 8 reached" in fb  # stopped early, and says where
    assert turn["outcome"]["steps_reached"] == n - 1
    assert [s["status"] for s in turn["steps"]][n - 1 :] == ["blocked"] + ["not run"] * (8 - n)
    ep.env.observe(2, 2, None)
    start_x = turn["state"]["arm"]["position"][0]
    assert ep.env._state["arm"].position_cm[0] < start_x + 5  # the sideways step never completed


def test_replay_replays_chunks(backend, panda_kin, tmp_path) -> None:
    steps = [{"move_cm": [3, 0, 0]}, {"move_cm": [0, 3, 0]}]
    _run(backend, panda_kin, [chunk(*steps), chunk(*steps)], k=4, turns=2, tmp_path=tmp_path / "a")
    replay = ReplayPolicy(tmp_path / "a" / "episode.jsonl")
    writer = RunWriter(tmp_path / "b", video_fps=None)
    arm_episode(backend, panda_kin, replay, EpisodeConfig(max_chunk=4, max_turns=2), writer).run(0)
    rec = [[json.loads(x) for x in (tmp_path / d / "episode.jsonl").read_text().splitlines()] for d in "ab"]
    turns = [[x for x in r if x.get("kind") == "turn"] for r in rec]
    assert [t["action"] for t in turns[0]] == [t["action"] for t in turns[1]]
    assert all(t["outcome"]["steps_reached"] == 2 for t in turns[1])
    assert turns[0][1]["state"] == turns[1][1]["state"]


def test_scripted_expert_sends_chunks_and_succeeds(backend, panda_kin) -> None:
    one = arm_episode(backend, panda_kin, scripted_policy("pick_cube"), EpisodeConfig(max_chunk=1)).run(0)
    ep = arm_episode(backend, panda_kin, scripted_policy("pick_cube"), EpisodeConfig(max_chunk=4))
    four = ep.run(0)
    assert one.success and four.success and four.turns < one.turns
    sizes = [len(ep.env.parse(m["content"]).chunk) for m in ep.messages if m["role"] == "assistant"]
    assert max(sizes) > 1 and max(sizes) <= 4


def test_served_expert_answers_with_a_chunk_when_told_k(backend, panda_kin) -> None:
    from pear_agent.loop.arm_environment import ArmEnvironment
    from pear_agent.loop.expert_server import expert_reply

    env = ArmEnvironment(backend, panda_kin, max_chunk=4)
    env.reset(0)
    ctx = env.observe(1, 25, None).context
    facts = ctx.observation.privileged
    body = {"messages": [], "pear_privileged": {"task": "pick_cube", "state": ctx.state, "facts": facts}}
    _, one = expert_reply(body)
    body["pear_privileged"]["max_chunk"] = ctx.max_chunk
    _, four = expert_reply(body)
    assert len(env.parse(one).chunk) == 1 and 1 < len(env.parse(four).chunk) <= 4
