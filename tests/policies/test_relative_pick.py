"""The `relative_pick` teacher on the real MuJoCo pick_cube (Panda): it reads only the compact text
the model reads, copies its numbers into short bare-JSON replies, and picks the cube up; without
the relative line it refuses in one line."""

import json

import pytest

from pear_agent.loop.arm_environment import arm_episode
from pear_agent.loop.config import EpisodeConfig
from pear_agent.loop.registry import make_backend
from pear_agent.policies.relative_pick import RelativePickPolicy, pick_reply

pytest.importorskip("mujoco")


@pytest.fixture(scope="module")
def backend(panda):
    be = make_backend("pick_cube", panda, render=False)
    yield be
    be.close()


def test_it_picks_the_cube_from_the_text_alone(backend, panda_kin):
    """Mutation seen to fail: without the yaw turn (`act["turn_rad"]` never set) the gripper closes
    on the cube's corners where the cube is turned more than about 25 degrees: 12 of 20 seeds."""
    cfg = EpisodeConfig(observation="compact", scene_facts=True, scene_relative=True, max_turns=16)
    wins, replies = 0, []
    for seed in range(20):
        episode = arm_episode(backend, panda_kin, RelativePickPolicy(), cfg)
        wins += episode.run(seed).success
        replies += [m["content"] for m in episode.messages if m["role"] == "assistant"]
    assert wins >= 18, wins  # 20 of 20 when written; a margin for MuJoCo builds
    assert all(json.loads(r)["action"]["arm"] for r in replies)
    moves = [v for r in replies for v in json.loads(r)["action"]["arm"].get("move_cm", [])]
    assert moves and all(isinstance(v, int) for v in moves)  # copied integers, nothing computed
    assert max(len(r) for r in replies) < 80


def test_the_rules_read_the_lines():
    state = "arm x=31 y=0 z=49 roll=180 pitch=0 yaw=0 grip=1"
    scene = "object x=54 y=-9 z=2"
    assert pick_reply(f"{state}\n{scene}\nobject from arm dx=23 dy=-9 dz=-47 dyaw=-0.55") == {
        "arm": {"move_cm": [23, -9, 0], "turn_rad": [0, 0, -0.55]}
    }
    assert pick_reply(f"last: blocked\n{state}\n{scene}\nobject from arm dx=0 dy=1 dz=-12 dyaw=0.01") == {
        "arm": {"move_cm": [0, 0, -12]}
    }
    assert pick_reply(f"{state}\n{scene}\nobject from arm dx=1 dy=0 dz=-1 dyaw=0.00") == {
        "arm": {"gripper": 0}
    }
    closed = state.replace("grip=1", "grip=0")
    assert pick_reply(f"{closed}\n{scene}\nobject from arm dx=0 dy=0 dz=0 dyaw=0.00") == {
        "arm": {"move_cm": [0, 0, 10], "gripper": 0}
    }
    with pytest.raises(ValueError, match="--scene-relative"):
        pick_reply(f"{state}\n{scene}")
