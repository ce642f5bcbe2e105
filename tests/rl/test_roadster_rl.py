"""The roadster through the RL pieces the arm tasks use: rollout groups with the shaped reward,
SFT export of landed flights, and the skyrl-gym environment (real skyrl_gym, real MuJoCo)."""

import json

import pytest

from pear_agent.rl.rollouts import PolicySpec, collect_groups
from pear_agent.rl.trajectories import TrajectoryWriter, export_sft, load_trajectories
from sim_adapters.roadster.pilot import pilot_reply

pytest.importorskip("mujoco")


def test_groups_carry_the_shaped_reward_and_sft_keeps_landed_flights(tmp_path):
    out = tmp_path / "rollouts"
    groups = []
    with TrajectoryWriter(out) as writer:

        def keep(g):
            groups.append(g)
            for r in g.records:
                writer.write(r)

        spec = PolicySpec("scripted", pilot_noise=1.0)
        report = collect_groups(["roadster_kickflip:storm"], 2, 3, spec, render=False, on_group=keep)
    assert report.counts.kept == 2
    recs = [r for g in groups for r in g.records]
    assert all(0.0 <= r["reward"] <= 1.0 and r["reward"] == r["shaped_reward"] for r in recs)
    assert len({round(r["reward"], 6) for r in recs}) > 1  # the jittered pilot's flights differ
    for r in recs:
        assert (r["reward"] >= 0.5) == r["success"]  # +0.4 landing: landed flights sit above 0.5
    n = export_sft(out, tmp_path / "sft.jsonl")
    landed = [r for r in load_trajectories(out) if r.success]
    assert n == len(landed)
    rows = [json.loads(x) for x in (tmp_path / "sft.jsonl").read_text().splitlines()]
    assert all(row["messages"][0]["content"].startswith("You are the pilot") for row in rows)


def test_skyrl_env_flies_a_flight_and_pays_the_shaped_reward():
    pytest.importorskip("skyrl_gym")
    import skyrl_gym

    import pear_agent.rl.skyrl_env  # noqa: F401  (registers the env)

    env = skyrl_gym.make("pear_agent", env_config={"task": "roadster_ramp_flip:light", "seed": 20001})
    messages, _ = env.init([])
    assert "stunt: ramp_flip" in messages[0]["content"] and messages[1]["content"].startswith("telemetry")
    convo = list(messages)
    for _ in range(100):
        _, reply = pilot_reply(convo)
        out = env.step(reply)
        convo += [{"role": "assistant", "content": reply}, *out["observations"]]
        if out["done"]:
            break
    assert out["done"] and out["metadata"]["success"]
    assert 0.8 <= out["reward"] <= 1.0  # +0.4 landing, partial credit, the clean finish
    env.close()


def test_skyrl_env_refuses_an_unknown_band():
    pytest.importorskip("skyrl_gym")
    from pear_agent.rl.skyrl_env import PearAgentEnv

    with pytest.raises(ValueError, match="unknown wind band 'hurricane'"):
        PearAgentEnv(env_config={"task": "roadster_kickflip:hurricane"})
