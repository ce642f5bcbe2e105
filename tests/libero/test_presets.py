"""The paper's protocols as bench presets: what each expands to, and what it leaves out (and why)."""

import pytest

from sim_adapters.libero.presets import _spread, describe, expand, preset_names


def test_libero_is_40_tasks_by_50_init_states():
    e = expand("libero")
    assert len(e.tasks) == 40 and e.seeds == list(range(50))
    assert expand("libero@5").seeds == [0, 1, 2, 3, 4]
    assert expand("libero", seeds=[7, 9]).seeds == [7, 9]


def test_libero_pro_types_come_with_the_libero_episodes_they_pair_with():
    e = expand("libero_pro/swap@2")
    assert len(e.tasks) == 80 and e.seeds == [0, 1]
    assert sum(t.startswith("libero_pro/swap/") for t in e.tasks) == 40
    assert "libero_goal/3" in e.tasks
    assert len(expand("libero_pro").tasks) == 4 * 40 + 40


def test_libero_plus_runs_each_task_once_and_counts_what_it_leaves_out():
    e = expand("libero_plus/camera@1")
    assert e.seeds == [0]
    assert sum(t.startswith("libero_plus/camera/") for t in e.tasks) == 40  # one variant per task
    assert sum(not t.startswith("libero_plus/") for t in e.tasks) == 40  # and LIBERO's own, init state 0
    light = expand("libero_plus/light@1")
    # LIBERO-Plus's light scenes come only with its assets.zip: every light task is left out, by cause
    assert not any(t.startswith("libero_plus/light/") for t in light.tasks)
    (reason,) = light.skipped
    assert "assets" in reason and light.skipped[reason] == 1142
    assert "left out: 1142 tasks" in describe(light)


def test_spread_picks_evenly():
    assert _spread(10, 3) == [0, 3, 7]
    assert _spread(4, 10) == [0, 1, 2, 3]
    assert _spread(1, 1) == [0]


@pytest.mark.parametrize(
    ("preset", "seeds", "words"),
    [
        ("libero_nope", None, "unknown preset 'libero_nope'"),
        ("libero@0", None, "after @ give the episodes"),
        ("libero@x", None, "after @ give the episodes"),
        ("libero", [60], "init states 0-49"),
        ("libero_plus/camera", [3], "init state 0"),
    ],
)
def test_bad_presets_get_one_line(preset, seeds, words):
    with pytest.raises(ValueError, match=words):
        expand(preset, seeds)


def test_preset_names():
    names = preset_names()
    assert "libero" in names and "libero_pro/task" in names and "libero_plus/noise" in names
    assert len(names) == 1 + 1 + 4 + 1 + 7


def test_a_preset_cut_to_some_task_indices_keeps_their_perturbations_and_pairs():
    from sim_adapters.libero.presets import only_tasks

    e = only_tasks(expand("libero_pro/language@1"), [0])
    assert sorted(e.tasks) == sorted(
        [
            f"libero_pro/language/{s}/0"
            for s in ("libero_spatial", "libero_object", "libero_goal", "libero_10")
        ]
        + ["libero_spatial/0", "libero_object/0", "libero_goal/0", "libero_10/0"]
    )
    assert e.seeds == [0]
