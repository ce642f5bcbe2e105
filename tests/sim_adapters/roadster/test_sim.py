"""The real MuJoCo roadster: physics facts the issue states, crash rules, rows, reward."""

import math

import numpy as np
import pytest

from sim_adapters.roadster import model
from sim_adapters.roadster.commands import parse_command
from sim_adapters.roadster.sim import MAX_WHEEL_IMPACT_MPS, ROW_FIELDS, RoadsterSim
from sim_adapters.roadster.telemetry import format_row, parse_row

pytest.importorskip("mujoco")


def fly(sim, schedule, until_s=14.0):
    """schedule: list of (t_s, command json)."""
    i = 0
    while not sim.status.over and sim.t_s < until_s:
        while i < len(schedule) and sim.t_s >= schedule[i][0] - 1e-9:
            sim.set_command(parse_command(schedule[i][1]))
            i += 1
        sim.step_row()
    return sim


def test_car_mass_size_and_rest_on_four_wheels():
    sim = RoadsterSim("kickflip", "light", 20000)
    m = sim.model
    car = m.body("car").id
    dry = sum(m.body_mass[b] for b in range(m.nbody) if b == car or m.body_parentid[b] == car) - sim.air_kg
    assert dry == pytest.approx(model.DRY_MASS_KG, abs=1.0)
    sim.set_command(parse_command('{"mode": "coast"}'))
    sim.step(0.4)
    assert sim.row()["wheels"] == 4
    assert abs(sim.height_m()) < 0.05


def test_wheels_survive_a_4m_drop_but_not_a_6m_one():
    for drop_m, survives in ((3.8, True), (6.0, False)):
        sim = RoadsterSim("ramp_flip", "light", 20000)
        d = sim.data
        d.qpos[:7] = [0, 0, model.RIDE_HEIGHT_M + drop_m, 1, 0, 0, 0]
        d.qvel[:] = 0
        sim._mj.mj_forward(sim.model, d)
        sim.roll_total, sim._last_euler = 0.0, (0.0, 0.0)
        sim._wind_mean[:] = 0
        sim._gusts.sigma = 0.0
        sim._gusts.value[:] = 0
        fly(sim, [(0, '{"mode": "coast"}')], until_s=4.0)
        assert sim.status.over
        assert sim.status.crashed is (not survives), sim.status.reason
        if not survives:
            assert "suspension" in sim.status.reason and f"{MAX_WHEEL_IMPACT_MPS:g}" not in sim.status.reason


def test_rolling_on_the_road_puts_it_on_its_roof():
    sim = fly(RoadsterSim("kickflip", "light", 20000), [(0, '{"mode": "rotate", "axis": "roll", "to": 360}')])
    assert sim.status.crashed and "body touched the ground" in sim.status.reason


def test_driving_into_the_truck_is_a_crash():
    sim = fly(RoadsterSim("kickflip", "light", 20000), [(0, '{"mode": "coast"}')])
    assert sim.status.crashed and sim.status.reason == "hit the truck"
    assert sim.reward()["total"] < 0.1


def test_upside_down_thrust_pushes_down():
    sim = RoadsterSim("ramp_flip", "light", 20000)
    free = fly(RoadsterSim("ramp_flip", "light", 20000), [(0, '{"mode": "coast"}')], until_s=0.6)
    sim = fly(sim, [(0, '{"mode": "rotate", "axis": "roll", "to": 180, "lift": 0}')], until_s=0.6)
    # holding upside down fires (differentially) and can only add downward force: it falls at least as fast
    assert sim.data.qvel[2] <= free.data.qvel[2] + 0.3


def test_a_scripted_ramp_flip_lands_and_earns_the_landing_reward():
    sim = fly(
        RoadsterSim("ramp_flip", "light", 20001),
        [(0, '{"mode": "rotate", "axis": "roll", "to": 360, "lift": 1.0}'), (0.8, '{"mode": "land"}')],
    )
    assert sim.status.success, sim.status.reason
    r = sim.reward()
    assert r["landing"] == 0.4 and 0.4 < r["total"] <= 1.0
    assert sim.air_kg < sim.air0_kg  # the tank empties as the thrusters fire


def test_telemetry_row_has_every_field_and_round_trips_as_text():
    sim = RoadsterSim("kickflip", "storm", 20002)
    sim.step_row()
    row = sim.row()
    for f in (*ROW_FIELDS, "time_to_truck_s", "time_past_truck_s", "cmd"):
        assert f in row
    back = parse_row("header\n" + format_row(row))
    assert back["time_to_truck_s"] == pytest.approx(row["time_to_truck_s"])
    assert back["cmd"] == "coast"
    ahead = row["truck_ahead_m"] / max(row["v_fwd_mps"], 0.5)
    assert row["time_to_truck_s"] == pytest.approx(ahead, abs=0.05)


def test_storm_pushes_harder_side_on_than_nose_first():
    from sim_adapters.roadster.aero import drag_force

    rel = np.array([0.0, 30.0, 0.0])
    side = np.linalg.norm(drag_force(np.eye(3), rel))
    c, s = math.cos(math.pi / 2), math.sin(math.pi / 2)
    nose_first = np.linalg.norm(drag_force(np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]]), rel))
    flat = np.linalg.norm(drag_force(np.eye(3), np.array([0.0, 0.0, 30.0])))
    assert 5 <= side / nose_first <= 9 and 5 <= flat / nose_first <= 9


def test_wind_is_weaker_near_the_road():
    from sim_adapters.roadster.aero import height_factor

    assert height_factor(0.0) < height_factor(3.0) < height_factor(10.0) == 1.0
