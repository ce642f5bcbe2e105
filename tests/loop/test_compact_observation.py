"""`--observation compact` on the arms: the short briefing, the state as integer fields in one line
that parses back, bare-JSON replies the parser accepts, and a compact episode that succeeds and
replays."""

import json
import math

import pytest

from pear_agent.loop.arm_environment import ArmEnvironment, arm_episode
from pear_agent.loop.config import EpisodeConfig
from pear_agent.loop.registry import make_backend
from pear_agent.loop.task_experts import scripted_policy
from pear_agent.policies.replay import ReplayPolicy
from pear_agent.protocol.actions import parse_reply
from pear_agent.protocol.prompts import system_prompt
from pear_agent.protocol.state import parse_compact_state
from pear_agent.records.log import RunWriter

pytest.importorskip("mujoco")


@pytest.fixture(scope="module")
def backend(panda):
    be = make_backend("pick_cube", panda, render=False)
    yield be
    be.close()


def test_the_compact_briefing_is_a_fraction_of_the_full_one(backend, panda):
    backend.reset(0)
    full = system_prompt(panda, backend.task, observation="state")
    short = system_prompt(panda, backend.task, observation="compact", scene_facts=True)
    assert len(short) * 3 < len(full)
    assert backend.task.instruction.strip() in short and "move_cm" in short and "grip=" in short
    assert '{"action":{"arm":{"move_cm":[0.0,0.0,-2.0],"gripper":0.0}}}' in short  # its example parses
    parse_reply('{"action":{"arm":{"move_cm":[0.0,0.0,-2.0],"gripper":0.0}}}', panda)


def test_a_compact_state_line_parses_back_to_the_rounded_state(backend, panda_kin):
    env = ArmEnvironment(backend, panda_kin, observation="compact", scene_facts=True)
    env.reset(0)
    p = env.observe(1, 25, None)
    assert isinstance(p.message["content"], str) and not p.images
    state_line, scene_line = p.text.splitlines()
    assert state_line == p.line and p.context.bare_json
    back = parse_compact_state(state_line)["arm"]
    real = p.record["state"]["arm"]
    for k, v in zip(("x", "y", "z"), real["position"], strict=True):
        assert abs(back[k] - v) <= 0.5 + 1e-9
    for k, v in zip(("roll", "pitch", "yaw"), real["orientation"], strict=True):
        assert abs(back[k] - math.degrees(v)) <= 0.5 + 0.6  # the state's orientation is rounded to 0.01 rad
    assert back["grip"] == round(real["gripper"])
    assert scene_line.startswith("cube x=") or "x=" in scene_line
    with pytest.raises(ValueError, match="not a compact state field"):
        parse_compact_state("arm x=1 q=2")


def test_bare_json_replies_parse(panda):
    a = parse_reply('{"action":{"arm":{"move_cm":[1,0,-2],"gripper":0}},"done":true}', panda)
    assert a.parts["arm"].position_cm == [1.0, 0.0, -2.0] and a.parts["arm"].gripper == 0.0 and a.done


def test_a_compact_episode_succeeds_with_bare_json_and_replays(backend, panda_kin, tmp_path):
    cfg = EpisodeConfig(observation="compact", scene_facts=True, history=2)
    writer = RunWriter(tmp_path / "a", None)
    episode = arm_episode(backend, panda_kin, scripted_policy("pick_cube"), cfg, writer)
    first = episode.run(3)
    assert first.success and first.observation == "compact" and first.history == 2
    replies = [m["content"] for m in episode.messages if m["role"] == "assistant"]
    assert replies and all(r.startswith('{"action":') and "\n" not in r for r in replies)
    users = [m["content"] for m in episode.messages if m["role"] == "user"]
    assert all("Turn " not in u and "State:" not in u for u in users)
    log = tmp_path / "a" / "episode.jsonl"
    assert json.loads(log.read_text().splitlines()[0])["observation"] == "compact"
    again = arm_episode(backend, panda_kin, ReplayPolicy(log), cfg).run(3)
    assert again.success and again.turns == first.turns
    assert again.sim_time_s == pytest.approx(first.sim_time_s, abs=1e-6)


@pytest.mark.parametrize("observation", ["compact", "state"])
def test_the_briefing_states_the_turn_limit_the_episode_flies(backend, panda_kin, observation):
    """An episode flown with fewer turns than its task's limit (a training recipe's `max_turns`)
    says that limit in its briefing (and the full observation's turn header), not the task's."""
    assert backend.task.max_turns != 7
    cfg = EpisodeConfig(observation=observation, scene_facts=True, max_turns=7)
    episode = arm_episode(backend, panda_kin, scripted_policy("pick_cube"), cfg)
    episode.run(0)
    briefing = episode.messages[0]["content"]
    assert "7 turns" in briefing and f"{backend.task.max_turns} turns" not in briefing
    if observation == "state":
        assert episode.messages[1]["content"].startswith("Turn 1 of 7.")
