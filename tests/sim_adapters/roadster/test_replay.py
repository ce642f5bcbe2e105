"""The report's telemetry plot: a well-formed inline SVG whose curves stay inside their panels."""

import itertools
import xml.etree.ElementTree as ET

import pytest

from pear_agent.loop.episode import Episode, EpisodeConfig
from pear_agent.records.log import RunWriter
from sim_adapters.roadster.environment import RoadsterEnvironment
from sim_adapters.roadster.pilot import PilotPolicy
from sim_adapters.roadster.replay import WIDTH, decisions, flight_rows, telemetry_svg

pytest.importorskip("mujoco")
NS = "{http://www.w3.org/2000/svg}"


def flight_log(tmp_path, mode="paused", latency_s=None):
    import json

    env = RoadsterEnvironment("roadster_kickflip", "gale", mode=mode, render=False)
    writer = RunWriter(tmp_path / "run", video_fps=None)
    Episode(env, PilotPolicy(), EpisodeConfig(mode=mode, latency_s=latency_s), writer=writer).run(20003)
    return [json.loads(x) for x in (tmp_path / "run" / "episode.jsonl").read_text().splitlines()]


def test_plot_curves_stay_in_bounds_and_one_bar_per_decision(tmp_path):
    lines = flight_log(tmp_path)
    svg = ET.fromstring(telemetry_svg(lines))
    height = float(svg.get("height"))
    lines_drawn = svg.findall(f".//{NS}polyline")
    assert len(lines_drawn) == 6  # h, roll, pitch, wind, side wind, y
    for poly in lines_drawn:
        pts = [tuple(map(float, p.split(","))) for p in poly.get("points").split()]
        assert all(0 <= x <= WIDTH and 0 <= y <= height for x, y in pts)
    titles = [t.text for t in svg.findall(f".//{NS}title")]
    assert sum(1 for t in titles if t.startswith("t=")) == len(decisions(lines))
    rows = flight_rows(lines)
    assert rows[0]["t_s"] == 0 and [r["t_s"] for r in rows] == sorted(r["t_s"] for r in rows)


def test_realtime_rows_include_those_flown_while_thinking(tmp_path):
    lines = flight_log(tmp_path, "realtime", 0.6)
    rows = flight_rows(lines)
    steps = [round(b["t_s"] - a["t_s"], 2) for a, b in itertools.pairwise(rows)]
    assert max(steps) <= 0.2 + 1e-6  # no gap: the 0.6 s of thinking is in the plot as 0.2 s rows
    assert len(decisions(lines)) < len(rows) - 1


def test_no_rows_no_plot():
    assert "no telemetry" in telemetry_svg([{"kind": "header"}])
