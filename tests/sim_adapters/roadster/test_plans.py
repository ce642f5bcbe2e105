"""Roadster plans: a reply may carry up to K commands, one per 0.2 s interval; realtime
flies the rest of the plan while the next decision is made, a new plan replaces what is left;
paused flies the first command per turn unless told to fly the whole plan."""

import json

import pytest

from pear_agent.loop.episode import Episode, EpisodeConfig
from pear_agent.protocol.actions import ActionError
from pear_agent.records.log import RunWriter
from sim_adapters.roadster.environment import RoadsterEnvironment
from sim_adapters.roadster.pilot import PilotPolicy, plan_ahead, predict
from tests.sim_adapters.roadster.test_environment import Fixed

pytest.importorskip("mujoco")

CLIMB = {"mode": "climb", "vz": 3.0}
HOLD = {"mode": "hold", "roll": 0.0, "pitch": 0.0, "vz": 0.0}


def plan(*cmds) -> str:
    return "plan:\n```json\n" + json.dumps({"plan": list(cmds)}) + "\n```"


def _turns(path):
    return [json.loads(x) for x in path.read_text().splitlines() if '"kind": "turn"' in x]


def test_plan_parse_schema_and_limit():
    env = RoadsterEnvironment("roadster_kickflip", "light", render=False, max_chunk=4)
    cmd = env.parse(plan({"mode": "coast"}, CLIMB))
    assert [c.mode for c in cmd.plan] == ["coast", "climb"] and cmd.to_json()["plan"][1]["vz"] == 3.0
    assert env.parse('{"mode": "coast"}').to_json() == {"mode": "coast"}  # a command is a plan of one
    with pytest.raises(ActionError, match="the plan has 5 commands; this flight takes plans of at most 4"):
        env.parse(plan(*[CLIMB] * 5))
    with pytest.raises(ActionError, match="plan step 2: 'mode' must be one of"):
        env.parse(plan(CLIMB, {"mode": "warp"}))
    items = env.response_schema()["anyOf"][1]["properties"]["plan"]
    assert items["maxItems"] == 4
    one = RoadsterEnvironment("roadster_kickflip", "light", render=False)
    with pytest.raises(ActionError, match="one command per reply"):
        one.parse(plan(CLIMB, CLIMB))
    assert "max_plan: 4" in (env.reset(20000) or env.system_prompt())


def test_realtime_flies_the_rest_of_the_plan_while_thinking_and_a_new_plan_replaces_it(tmp_path):
    env = RoadsterEnvironment("roadster_kickflip", "light", mode="realtime", render=False, max_chunk=10)
    first = plan({"mode": "coast"}, CLIMB, CLIMB, HOLD, HOLD, HOLD, HOLD, HOLD)
    second = plan({"mode": "coast"})
    cfg = EpisodeConfig(mode="realtime", latency_s=0.6, max_chunk=10, max_turns=3)
    writer = RunWriter(tmp_path, video_fps=None)
    Episode(env, Fixed([first, second, second]), cfg, writer=writer).run(20000)
    t = _turns(tmp_path / "episode.jsonl")
    # turn 2's reply came 0.6 s late: three intervals flew commands 2, 3, 4 of the first plan
    flown = [r["cmd"] for r in t[1]["rows"]]
    assert flown[:3] == ["climb:vz+3.0", "climb:vz+3.0", "hold:roll+0:pitch+0:vz+0.0"]
    assert flown[3] == "coast"  # then the new plan's first command
    assert t[1]["plan"]["previous_plan"] == {"late_intervals_flown": 3, "dropped": 4}
    fields = env.result_fields()
    assert fields["max_chunk"] == 10 and fields["plan"]["rule"] == "realtime"
    assert fields["plan"]["late_intervals_from_plan"] == 3 and fields["plan"]["commands_dropped"] == 4


@pytest.mark.parametrize(("rule", "intervals"), [("first", 1), ("whole", 3)])
def test_paused_flies_the_first_command_unless_told_the_whole_plan(tmp_path, rule, intervals):
    env = RoadsterEnvironment("roadster_kickflip", "light", render=False, max_chunk=4, plan_rule=rule)
    writer = RunWriter(tmp_path, video_fps=None)
    Episode(env, Fixed([plan(CLIMB, HOLD, CLIMB)]), EpisodeConfig(max_chunk=4, max_turns=1), writer).run(
        20000
    )
    t = _turns(tmp_path / "episode.jsonl")[0]
    assert len(t["rows"]) == intervals and t["plan"]["flown_now"] == intervals
    assert env.header()["plan_rule"] == rule


def test_predict_and_plan_ahead():
    row = {
        "t_s": 0.0,
        "h_m": 0.0,
        "vz_mps": 0.0,
        "roll_deg": 0.0,
        "roll_rate_dps": 0.0,
        "time_to_truck_s": 1.5,
        "time_past_truck_s": 3.0,
        "above_roof_m": -1.3,
        "v_fwd_mps": 20.0,
        "cmd": "coast",
        "y_m": 0.0,
        "v_side_mps": 0.0,
    }
    nxt = predict(row, {"mode": "coast"})
    assert nxt["time_to_truck_s"] == pytest.approx(1.3) and nxt["t_s"] == pytest.approx(0.2)
    _, cmds = plan_ahead("kickflip", row, 5)
    assert [c["mode"] for c in cmds][:2] == ["coast", "coast"] and cmds[2][
        "mode"
    ] == "hold"  # climb at <= 1.1 s


def test_plans_land_where_single_commands_crash_at_one_second_per_decision():
    landed = {}
    for k in (1, 10):
        env = RoadsterEnvironment("roadster_kickflip", "light", mode="realtime", render=False, max_chunk=k)
        cfg = EpisodeConfig(mode="realtime", latency_s=1.0, max_chunk=k)
        landed[k] = sum(
            Episode(env, PilotPolicy(lead_s=1.0), cfg).run(s).success for s in (20000, 20001, 20002)
        )
    assert landed[1] == 0 and landed[10] >= 2


def test_cli_fly_whole_plan_is_recorded_and_flies_the_plan(tmp_path, capsys):
    from pear_agent.cli import main

    base = ["run", "--task", "roadster_kickflip", "--seed", "20000", "--max-chunk", "5", "--no-video"]
    assert main([*base, "--fly-whole-plan", "--json", "--runs-dir", str(tmp_path / "w")]) == 0
    whole = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert main([*base, "--json", "--runs-dir", str(tmp_path / "f")]) == 0
    first = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert whole["plan"]["rule"] == "whole" and first["plan"]["rule"] == "first"
    assert whole["max_chunk"] == first["max_chunk"] == 5
    assert whole["turns"] < first["turns"] / 2  # five intervals a turn instead of one
