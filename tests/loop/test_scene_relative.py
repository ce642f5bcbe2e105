"""`--scene-relative`: each object's position minus the tool point, checked against MuJoCo's own
bodies and sites (not against the code that computes it), in both the compact and the full
observation; the briefing says so only when it is on, and with it off the prompts are the ones
without it, byte for byte."""

import json

import numpy as np
import pytest

from pear_agent.loop.arm_environment import ArmEnvironment, arm_episode
from pear_agent.loop.config import EpisodeConfig
from pear_agent.loop.registry import make_backend
from pear_agent.loop.task_experts import scripted_policy
from pear_agent.protocol.actions import parse_reply

pytest.importorskip("mujoco")

from sim_adapters.mujoco.scene import ee_site_name


@pytest.fixture(scope="module")
def backend(panda):
    be = make_backend("pick_cube", panda, render=False)
    yield be
    be.close()


def _true_relative_cm(backend) -> np.ndarray:
    """The cube's centre minus the tool point's site, read from MuJoCo's data, in cm."""
    d = backend.data
    return (d.body("cube").xpos - d.site(ee_site_name("arm")).xpos) * 100.0


def _true_yaw_turn(backend) -> float:
    """The cube's yaw minus the tool's, from MuJoCo's body and site frames, wrapped to a half turn."""
    d = backend.data
    cube = np.arctan2(d.body("cube").xmat[3], d.body("cube").xmat[0])
    site = d.site(ee_site_name("arm")).xmat
    tool = np.arctan2(site[3], site[0])
    return float((cube - tool + np.pi / 2) % np.pi - np.pi / 2)


def _parse_compact_relative(line: str) -> dict[str, float]:
    name, word, part, *fields = line.split()
    assert (name, word, part) == ("object", "from", "arm")
    return {k: float(v) for k, v in (f.split("=") for f in fields)}


def test_the_compact_line_is_the_object_minus_the_tool_point(backend, panda_kin):
    """Mutation seen to fail: `round(float(t) - float(o), 1)` in `relative_positions` (the tool
    minus the object) failed here: dx off by 46 cm, twice the distance."""
    env = ArmEnvironment(backend, panda_kin, observation="compact", scene_facts=True, scene_relative=True)
    for seed in (0, 1, 2):
        env.reset(seed)
        for turn in (1, 2):
            p = env.observe(turn, 25, None)
            _state, _scene, rel_line = p.text.splitlines()
            got = _parse_compact_relative(rel_line)
            true = _true_relative_cm(backend)
            for axis, v in zip(("dx", "dy", "dz"), true, strict=True):
                assert abs(got[axis] - v) <= 0.5 + 0.1, (seed, axis, got, true)  # integer cm
            assert abs(got["dyaw"] - _true_yaw_turn(backend)) <= 0.005 + 0.011, (seed, got)
            assert p.record["scene_relative"] == rel_line
            # move towards the cube by what the line says (capped): the next turn's line shrinks
            step = {"move_cm": np.clip([got["dx"], got["dy"], 0], -8, 8).tolist(), "turn_rad": [0, 0, 0.3]}
            env.execute(parse_reply(json.dumps({"action": {"arm": step}}), env.robot))
    assert env.result_fields()["scene_relative"] is True


def test_the_full_observation_carries_it_as_json(backend, panda_kin):
    env = ArmEnvironment(backend, panda_kin, observation="state", scene_facts=True, scene_relative=True)
    env.reset(3)
    p = env.observe(1, 25, None)
    rel = next(x for x in p.text.splitlines() if x.startswith("Relative: "))
    got = json.loads(rel.removeprefix("Relative: "))["object"]["arm"]
    assert np.allclose(got["move_cm"], _true_relative_cm(backend), atol=0.06)  # to 1 mm (facts: 0.1 mm)
    assert abs(got["turn_rad"] - _true_yaw_turn(backend)) <= 0.005 + 0.011  # 0.01 rad; the state's yaw
    assert "`Relative`" in env.system_prompt()


def test_off_the_prompts_are_byte_identical_and_the_briefing_is_silent(backend, panda_kin):
    """With it off nothing changes: the same system prompt and turn text as an environment built
    without the keyword at all; with it on the only difference is the added line and the
    briefing's sentence about it."""
    for obs in ("compact", "state"):
        plain = ArmEnvironment(backend, panda_kin, observation=obs, scene_facts=True)
        off = ArmEnvironment(backend, panda_kin, observation=obs, scene_facts=True, scene_relative=False)
        on = ArmEnvironment(backend, panda_kin, observation=obs, scene_facts=True, scene_relative=True)
        texts = {}
        for name, env in (("plain", plain), ("off", off), ("on", on)):
            env.reset(5)
            texts[name] = (env.system_prompt(), env.observe(1, 25, None).text)
        assert texts["plain"] == texts["off"]
        assert "dx=" not in texts["off"][0] and "`Relative`" not in texts["off"][0]
        on_lines, off_lines = texts["on"][1].splitlines(), texts["off"][1].splitlines()
        assert [x for x in on_lines if x not in off_lines] == [
            x for x in on_lines if x.startswith(("object from arm", "Relative: "))
        ]
        assert len(on_lines) == len(off_lines) + 1
        assert texts["on"][0] != texts["off"][0]
        assert "scene_relative" not in off.result_fields()
    compact_on = ArmEnvironment(
        backend, panda_kin, observation="compact", scene_facts=True, scene_relative=True
    )
    assert "`<object> from <part> dx= dy= dz= dyaw=`" in compact_on.system_prompt()


def test_it_needs_scene_facts():
    with pytest.raises(ValueError, match="--scene-relative needs --scene-facts"):
        EpisodeConfig(observation="compact", scene_relative=True)


def test_an_expert_episode_records_it_and_still_succeeds(backend, panda_kin, tmp_path):
    from pear_agent.records.log import RunWriter

    cfg = EpisodeConfig(observation="compact", scene_facts=True, scene_relative=True)
    writer = RunWriter(tmp_path / "a", None)
    result = arm_episode(backend, panda_kin, scripted_policy("pick_cube"), cfg, writer).run(4)
    assert result.success and result.scene_facts
    lines = [json.loads(x) for x in (tmp_path / "a" / "episode.jsonl").read_text().splitlines()]
    turns = [x for x in lines if x.get("kind") == "turn"]
    assert turns and all("object from arm dx=" in t["prompt"] for t in turns)
