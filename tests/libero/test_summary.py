"""Per benchmark, perturbation and suite: success, Wilson interval, paired drop against LIBERO."""

import math

from pear_agent.bench.stats import wilson
from sim_adapters.libero.summary import format_table, summarize


def _r(task, seed, success, wall=10.0, turns=10):
    return {"task": task, "seed": seed, "success": success, "wall_time_s": wall, "turns": turns}


def test_paired_drop_uses_the_libero_episode_of_the_same_task_and_init_state():
    base = [_r("libero_goal/3", s, True) for s in range(4)]
    swap = [_r("libero_pro/swap/libero_goal/3", s, s < 1) for s in range(4)]
    lonely = [_r("libero_pro/swap/libero_goal/4", 0, True)]  # no LIBERO episode to pair with
    other = [_r("pick_cube", 0, True)]  # not a LIBERO task: ignored
    s = summarize(base + swap + lonely + other)
    groups = {(g["benchmark"], g["perturbation"]): g for g in s["groups"]}
    assert set(groups) == {("libero", "-"), ("libero_pro", "swap")}
    lib = groups[("libero", "-")]["all"]
    assert lib["successes"] == 4 and "paired" not in lib
    sw = groups[("libero_pro", "swap")]["all"]
    assert (sw["successes"], sw["episodes"]) == (2, 5)
    assert sw["wilson95"] == list(wilson(2, 5))
    paired = sw["paired"]
    assert paired["pairs"] == 4
    assert math.isclose(paired["drop_pp"], 75.0)
    assert math.isclose(paired["mcnemar_p"], 0.25)  # 3 discordant pairs, all one way
    assert math.isclose(sw["mean_wall_s_per_episode"], 10.0)
    assert s["libero_pro_overall"]["episodes"] == 5


def test_table_has_a_row_per_suite_and_group():
    rs = [_r("libero_spatial/0", 0, True), _r("libero_plus/camera/libero_spatial/0/3", 0, False)]
    rs += [_r("libero_object/1", 0, True), _r("libero_plus/camera/libero_object/1/0", 0, True)]
    table = format_table(summarize(rs))
    rows = table.splitlines()
    assert rows[0].startswith("benchmark/perturbation")
    camera = [r for r in rows if r.startswith("libero_plus/camera")]
    assert len(camera) == 3  # two suites and all
    assert "+50.0 pp (2)" in camera[-1]
