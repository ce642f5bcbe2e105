"""The task mix: weights, scenario filters, the curriculum, fixed validation/test draws."""

from __future__ import annotations

import numpy as np
import pytest

from pear_agent.train.config import MixEntry
from pear_agent.train.mix import TaskMix, expand_tasks
from sim_adapters.roadster.scenario import make_scenario, slow_approach, time_to_truck_s


def test_weights_set_how_often_each_entry_is_drawn():
    mix = TaskMix(
        [MixEntry(task="roadster_ramp_flip:light"), MixEntry(task="roadster_ramp_flip:storm", weight=2)]
    )
    draws = [mix.draw() for _ in range(600)]
    storm = sum(d.task.endswith("storm") for d in draws) / len(draws)
    assert storm == pytest.approx(2 / 3, abs=0.06)
    seeds = [d.seed for d in draws if d.task.endswith("storm")]
    assert len(set(seeds)) == len(seeds) and all(0 <= s < 10_000 for s in seeds)


def test_a_filter_draws_only_scenarios_that_pass_it():
    mix = TaskMix([MixEntry(task="roadster_kickflip:gale", filter="slow_approach")])
    for d in (mix.draw() for _ in range(5)):
        sc = make_scenario("kickflip", "gale", d.seed)
        assert slow_approach(sc) and 14.0 <= sc.speed_mps <= 16.0 and time_to_truck_s(sc) >= 2.6


def test_the_curriculum_favours_entries_with_a_learning_signal():
    mix = TaskMix([MixEntry(task="pick_cube"), MixEntry(task="place_in_bowl")], curriculum=True)
    a, b = mix.draw(), mix.draw()
    mix.update(a if a.task == "pick_cube" else b, [True] * 8)  # always solved: the floor
    other = next(d for d in (a, b, mix.draw(), mix.draw(), mix.draw()) if d.task == "place_in_bowl")
    mix.update(other, [True, False] * 4)  # p = 0.5: the most signal
    p = mix.probabilities()
    assert p[1] > 10 * p[0] and np.isclose(p.sum(), 1.0)


def test_fixed_draws_and_patterns():
    mix = TaskMix([MixEntry(task="roadster_ramp_flip:light")], split="test")
    assert [d.seed for d in mix.fixed(3)] == [20000, 20001, 20002]
    assert expand_tasks("pick_cube") == ["pick_cube"]
    with pytest.raises(ValueError, match="matches no task"):
        expand_tasks("nosuite/*")
