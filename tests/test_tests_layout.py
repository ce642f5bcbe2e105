"""The tests mirror the package: a test of `pear_agent/<part>/` lives in `tests/<part>/`, so whoever
changes `pear_agent/loop/runner.py` finds `tests/loop/`. Only checks of the whole project (docs,
imports, settings, generated pages, the test suite itself) sit at the top of `tests/`."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"

PROJECT_WIDE = {
    "test_ci_no_skips.py": "the suite's own rule: no skip in CI",
    "test_docs.py": "every page's command blocks",
    "test_flake_hunt.py": "the wallclock marker across the suite",
    "test_house.py": "the parts' import graph, file sizes and function-level imports across the package",
    "test_imports.py": "import rules across pear_agent/ and sim_adapters/",
    "test_no_issue_numbers.py": "prose across docs/ and code",
    "test_object_reference.py": "a generated page (scripts/object_reference.py)",
    "test_robot_reference.py": "a generated page (scripts/robot_reference.py)",
    "test_settings.py": "every setting of every part",
    "test_settings_reference.py": "a generated page (scripts/settings_reference.py)",
    "test_tensorboard_screenshot.py": "a developer script (scripts/tensorboard_screenshot.py)",
    "test_tests_layout.py": "this rule",
}
"""The top-level test modules, each with why it belongs to no one part."""

OTHER_FOLDERS = {
    "benchmarks": "benchmarks/ (the scripts that write benchmarks/results/)",
    "sim_adapters": "sim_adapters/ (the simulators' adapters, one subfolder where one has many tests)",
    "libero": "sim_adapters/libero, run in .venv-libero (its own pins)",
    "metaworld": "sim_adapters/metaworld, run in .venv-metaworld (its own pins)",
    "export": "records/export_lerobot, whose readers run in .venv-lerobot",
    "robots": "not tests: robot YAMLs the tests load",
}
"""Test folders named after something other than a pear_agent part, and what they test."""


def _parts() -> set[str]:
    pkg = ROOT / "pear_agent"
    return {p.name for p in pkg.iterdir() if (p / "__init__.py").is_file()}


def test_only_project_wide_checks_sit_at_the_top_of_tests() -> None:
    flat = {p.name for p in TESTS.glob("test_*.py")}
    strays = sorted(flat - set(PROJECT_WIDE))
    assert not strays, (
        f"{strays}: a test of one part goes in tests/<part>/ (parts: {', '.join(sorted(_parts()))}); "
        "a check of the whole project is listed in PROJECT_WIDE with its reason"
    )
    gone = sorted(set(PROJECT_WIDE) - flat)
    assert not gone, f"{gone}: listed in PROJECT_WIDE but not in tests/"


def test_every_test_folder_is_named_after_a_part() -> None:
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))}
    unknown = sorted(folders - _parts() - set(OTHER_FOLDERS))
    assert not unknown, f"tests/{unknown}: name a test folder after the pear_agent part it tests"
    for folder in folders - {"robots"}:
        assert (TESTS / folder / "__init__.py").is_file(), f"tests/{folder}/ needs an __init__.py"
