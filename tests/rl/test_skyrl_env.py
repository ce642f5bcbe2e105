import json

import pytest
import skyrl_gym

from pear_agent.cli import main
from pear_agent.loop.task_experts import scripted_policy
from pear_agent.rl.skyrl_env import ENV_ID  # importing registers the environment


def drive(env, reply_fn):
    """What SkyRL's generator does: init, then model text -> step until done; returns the chat."""
    chat, _ = env.init([{"role": "user", "content": "(dataset prompt; pear-agent replaces it)"}])
    rewards, done = [], False
    while not done:
        text = reply_fn(chat)
        chat.append({"role": "assistant", "content": text})
        out = env.step(text)
        chat += out["observations"]
        rewards.append(out["reward"])
        done = out["done"]
    env.close()
    return chat, rewards, out


@pytest.mark.parametrize("seed", [4])
def test_expert_driven_through_skyrl_gym_matches_pear_agent_run(seed, tmp_path, capsys) -> None:
    assert ENV_ID == "pear_agent" and ENV_ID in skyrl_gym.registry
    env = skyrl_gym.make(
        "pear_agent", env_config={"task": "pick_cube"}, extras={"extra_info": {"seed": seed}}
    )
    expert = scripted_policy("pick_cube")
    expert.reset(seed)
    chat, rewards, last = drive(env, lambda chat: expert.act(chat, env.context).text)

    argv = [
        "run",
        "--task",
        "pick_cube",
        "--seed",
        str(seed),
        "--json",
        "--no-video",
        "--runs-dir",
        str(tmp_path),
    ]
    code = main(argv)
    ref = json.loads(capsys.readouterr().out)
    assert rewards[-1] == (1.0 if ref["success"] else 0.0) and sum(rewards) == rewards[-1]
    assert code == 0 and rewards[-1] == 1.0
    assert last["metadata"]["turns"] == ref["turns"] == env.turns == len(rewards)
    assert last["metadata"]["end_reason"] == ref["end_reason"]
    # the model saw images as OpenAI image parts, and the same replies as the recorded run
    assert chat[0]["role"] == "system" and chat[1]["content"][-1]["type"] == "image_url"
    log = [json.loads(x) for x in (tmp_path.glob("*/episode.jsonl").__next__()).read_text().splitlines()[1:]]
    assert [m["content"] for m in chat if m["role"] == "assistant"] == [t["reply"] for t in log]
    assert [m["content"][0]["text"] for m in chat if m["role"] == "user"] == [t["prompt"] for t in log]


def test_invalid_reply_ends_with_zero_reward_and_text_only_observations() -> None:
    env = skyrl_gym.make(
        "pear_agent",
        env_config=None,
        extras={"task": "push_to_target", "seed": 1, "text_only": True, "render": False},
    )
    # one valid action, then three invalid replies (each answered with a correction turn) end it
    replies = iter(['{"action": {"arm": {"move_cm": [0, 0, 1]}}}'] + ["I am not sure what to do."] * 3)
    chat, rewards, last = drive(env, lambda chat: next(replies))
    assert rewards == [0.0] * 4 and last["done"]
    assert last["metadata"]["end_reason"] == "invalid_action" and env.get_metrics()["success"] == 0.0
    assert all(isinstance(m["content"], str) for m in chat)
    assert "Turn 2 of" in chat[3]["content"] and "reached" in chat[3]["content"]
    assert "Turn 3 of" in chat[5]["content"] and "invalid reply (1 in a row" in chat[5]["content"]


def test_close_mid_episode_stops_the_episode_thread() -> None:
    env = skyrl_gym.make("pear_agent", extras={"task": "pick_cube", "render": False})
    env.init([])
    env.step('{"action": {"arm": {"move_cm": [0, 0, 1]}}}')
    thread = env._thread
    env.close()
    assert not thread.is_alive()
    assert env.step("{}")["done"]


def test_unknown_task_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown task 'nope'"):
        skyrl_gym.make("pear_agent", extras={"task": "nope"})
