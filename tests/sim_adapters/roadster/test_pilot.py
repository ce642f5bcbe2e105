"""The scripted pilot reads only the text a model reads, through the real loop and the real sim."""

import json

import pytest

from pear_agent.loop.episode import Episode, EpisodeConfig
from sim_adapters.roadster.pilot import PilotParams, PilotPolicy, kickflip, lean_against_drift, pilot_reply

pytest.importorskip("mujoco")


def row(**kw):
    base = {
        "t_s": 0.2, "y_m": 0.0, "h_m": 0.0, "v_side_mps": 0.0, "vz_mps": 0.0, "roll_deg": 0.0,
        "roll_rate_dps": 0.0, "time_to_truck_s": 2.0, "time_past_truck_s": 2.5, "above_roof_m": -1.2,
        "cmd": "coast",
    }  # fmt: skip
    return base | kw


def test_kickflip_rules():
    assert kickflip(row())[1]["mode"] == "coast"
    assert kickflip(row(time_to_truck_s=1.0))[1] == {"mode": "hold", "roll": 0.0, "pitch": 0.0, "vz": 6.0}
    assert kickflip(row(time_to_truck_s=0.2, h_m=3.6, above_roof_m=1.5, vz_mps=5))[1]["mode"] == "rotate"
    assert kickflip(row(roll_deg=120, cmd="rotate:roll:360:lift1.0", h_m=4))[1]["to"] == 360.0
    assert kickflip(row(roll_deg=358, time_past_truck_s=0.0, h_m=0.5))[1] == {"mode": "land"}


def test_leans_against_drift():
    assert lean_against_drift(row(y_m=3.0, v_side_mps=1.0)) > 0  # drifting left: right side down
    assert lean_against_drift(row(y_m=-3.0, v_side_mps=-1.0)) < 0
    assert abs(lean_against_drift(row(y_m=100.0))) <= 10.0


def test_noise_changes_the_rules_per_flight_reproducibly():
    a, b = PilotPolicy(noise=1.0, seed=1), PilotPolicy(noise=1.0, seed=2)
    a.reset(5)
    b.reset(5)
    assert a.params != b.params
    c = PilotPolicy(noise=1.0, seed=1)
    c.reset(5)
    assert c.params == a.params
    d = PilotPolicy()
    d.reset(5)
    assert d.params == PilotParams()


def test_refuses_a_conversation_that_is_not_a_flight():
    with pytest.raises(ValueError, match="not a roadster briefing"):
        pilot_reply(
            [{"role": "system", "content": "You control a robot arm."}, {"role": "user", "content": "x"}]
        )
    reply = PilotPolicy().act([{"role": "system", "content": "arm"}])
    assert reply.error and "not a roadster briefing" in reply.error


@pytest.mark.parametrize("task", ["roadster_ramp_flip", "roadster_kickflip"])
def test_pilot_lands_light_wind_flights_through_the_loop(task):
    from sim_adapters.roadster.environment import RoadsterEnvironment

    env = RoadsterEnvironment(task, "light", render=False)
    wins = 0
    for seed in range(20000, 20005):
        result = Episode(env, PilotPolicy(), EpisodeConfig()).run(seed)
        wins += result.success
        assert result.end_reason in ("success", "crashed", "failed")
    assert wins >= 4


def test_realtime_three_seconds_per_decision_loses_the_kickflip():
    from sim_adapters.roadster.environment import RoadsterEnvironment

    env = RoadsterEnvironment("roadster_kickflip", "light", mode="realtime", render=False)
    for seed in range(20000, 20003):
        paused = Episode(RoadsterEnvironment("roadster_kickflip", "light", render=False), PilotPolicy()).run(
            seed
        )
        late = Episode(env, PilotPolicy(), EpisodeConfig(mode="realtime", latency_s=3.0)).run(seed)
        assert paused.success and not late.success
        assert late.advanced_s >= 3.0


def test_reply_is_one_command_json():
    from sim_adapters.roadster.environment import RoadsterEnvironment

    env = RoadsterEnvironment("roadster_kickflip", "gale", render=False)
    env.reset(20003)
    msgs = [{"role": "system", "content": env.system_prompt()}, env.observe(1, 10, None).message]
    _, text = pilot_reply(msgs)
    cmd = json.loads(text.split("```json\n")[1].split("\n```")[0])
    assert env.parse(text).to_json() == cmd
