"""The roadster's compact observation: integer rows that parse back within their rounding, a short
briefing, no echo of the command in force, and the scripted pilot flying it with bare-JSON replies."""

import pytest

from pear_agent.loop.episode import Episode, EpisodeConfig
from sim_adapters.roadster.commands import parse_plan
from sim_adapters.roadster.telemetry import (
    COMPACT_FIELDS,
    COMPACT_FLIGHT_FIELDS,
    COMPACT_TRUCK_FIELDS,
    compact_row,
    parse_compact_row,
    read_row,
)

pytest.importorskip("mujoco")


def test_a_compact_row_parses_back_within_its_rounding():
    from sim_adapters.roadster.sim import RoadsterSim

    sim = RoadsterSim("kickflip", "gale", 20004)
    sim.reset(20004, "gale")
    sim.step(1.4)
    row = sim.row()
    back = parse_compact_row("some correction\n" + compact_row(row))
    assert set(back) == {key for key, _ in COMPACT_FIELDS.values()}
    for short, (key, scale) in COMPACT_FIELDS.items():
        assert abs(back[key] - float(row[key])) <= 0.5 / scale + 1e-9, short
    assert read_row(compact_row(row)) == back
    with pytest.raises(ValueError, match="no compact telemetry row"):
        parse_compact_row("t=1.5 h=2")


def test_the_truck_fields_come_only_on_a_kickflip():
    from sim_adapters.roadster.sim import RoadsterSim

    assert list(COMPACT_FIELDS) == [*COMPACT_FLIGHT_FIELDS, *COMPACT_TRUCK_FIELDS]
    for stunt, fields in (("ramp_flip", COMPACT_FLIGHT_FIELDS), ("kickflip", COMPACT_FIELDS)):
        sim = RoadsterSim(stunt, "light", 20000)
        sim.reset(20000, "light")
        sim.step(0.5)
        assert [w.partition("=")[0] for w in compact_row(sim.row()).split()] == list(fields), stunt


def test_bare_json_commands_parse():
    assert parse_plan('{"mode":"rotate","axis":"roll","to":360,"lift":1}')[0].mode == "rotate"


@pytest.mark.parametrize("task, seed", [("roadster_ramp_flip", 20001), ("roadster_kickflip", 20004)])
def test_the_pilot_flies_the_compact_observation_as_well_as_the_full_one(task, seed):
    from sim_adapters.roadster.environment import RoadsterEnvironment
    from sim_adapters.roadster.pilot import PilotPolicy

    results = {}
    for obs in ("both", "compact"):
        env = RoadsterEnvironment(task, "gale", render=False, observation=obs)
        episode = Episode(env, PilotPolicy(), EpisodeConfig(observation=obs))
        results[obs] = (episode.run(seed), episode.messages, env)
    full, compact = results["both"][0], results["compact"][0]
    assert full.success and compact.success and compact.observation == "compact"
    assert compact.reward == pytest.approx(full.reward, abs=0.1)
    msgs = results["compact"][1]
    assert len(msgs[0]["content"]) * 2 < len(results["both"][1][0]["content"])
    assert all("in force" not in m["content"] for m in msgs if m["role"] == "user")
    assert all(m["content"].startswith("{") for m in msgs if m["role"] == "assistant")
