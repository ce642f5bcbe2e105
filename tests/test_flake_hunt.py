"""The flake hunt (scripts/flake_hunt.sh) finds every test that waits on wall-clock time: a test
module that starts a ROS 2 node, a process in the background, a server, a browser or Ray workers
carries the `wallclock` marker, and the hunt's report names each test that failed in any run."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("flake_report", ROOT / "scripts" / "flake_report.py")
flake_report = importlib.util.module_from_spec(spec)
sys.modules["flake_report"] = flake_report
spec.loader.exec_module(flake_report)

STARTS = {
    # (rclpy's message serialization alone starts nothing)
    "a ROS 2 node": re.compile(
        r"^\s*(import rclpy|from rclpy\b(?!\.serialization\b))|\brclpy\.init\(|"
        r"def \w+\([^)]*\b(start_node|start_double|probe)\b",
        re.M,
    ),
    "a process in the background": re.compile(r"\bPopen\(|\btests\.ros2\.doc_commands\b"),
    "worker processes": re.compile(r'^(?!.*parse_args).*"--workers", "[2-9]"', re.M),
    "a server": re.compile(r"\btests\.servers\b|from tests import servers|\bfault_server\b|\buvicorn\b"),
    "a browser": re.compile(r"\bwebdriver\b|\bselenium\b"),
    "Ray workers": re.compile(r"^\s*import ray\b|\bray\.init\(", re.M),
}
"""What makes a test wait on wall-clock time, as it reads in a test module's source."""
MARKED = re.compile(r"pytest\.mark\.wallclock\b")


def what_it_starts(source: str) -> list[str]:
    return [what for what, pattern in STARTS.items() if pattern.search(source)]


def test_every_module_that_starts_a_node_a_server_or_a_process_is_marked_wallclock() -> None:
    """Mutation: `pytestmark = pytest.mark.wallclock` taken out of tests/ros2/test_stops.py: this
    test failed naming it ("tests/ros2/test_stops.py starts a ROS 2 node")."""
    unmarked = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        source = path.read_text(encoding="utf-8")
        starts = what_it_starts(source)
        if starts and not MARKED.search(source):
            unmarked.append(f"{path.relative_to(ROOT)} starts {', '.join(starts)}")
    assert not unmarked, (
        "these modules wait on wall-clock time: add `pytestmark = pytest.mark.wallclock` (the flake "
        "hunt runs them under load): " + "; ".join(unmarked)
    )


def test_the_patterns_see_what_they_look_for() -> None:
    assert what_it_starts("import rclpy\n") == ["a ROS 2 node"]
    assert what_it_starts("def test_x(tmp_path, start_node: Callable) -> None:") == ["a ROS 2 node"]
    assert what_it_starts("proc = subprocess.Popen([...])") == ["a process in the background"]
    assert what_it_starts("from tests.servers import serve_app") == ["a server"]
    assert what_it_starts("from selenium import webdriver") == ["a browser"]
    assert what_it_starts("    import ray\n") == ["Ray workers"]
    assert what_it_starts('_cli("bench", "--workers", "2")') == ["worker processes"]
    # a name in a tuple, a plain subprocess.run, one worker: none of them waits on the clock
    assert (
        what_it_starts('heavy = ("mujoco", "rclpy")\nsubprocess.run(["x"])\nprobe = 3\n"--workers", "1"')
        == []
    )
    assert what_it_starts('parser.parse_args(["--workers", "3"])') == []  # parsed, not started


def test_the_marker_is_registered_and_selects_the_ros_tests() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'"wallclock: ', pyproject), "register the wallclock marker in pyproject.toml"
    assert MARKED.search((ROOT / "tests" / "ros2" / "test_stops.py").read_text())


FAILED = '<failure message="AssertionError: the move ended before full speed&#10;more">trace</failure>'
JUNIT = f"""<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="3">
<testcase classname="tests.ros2.test_stops" name="test_a[none]" time="1.0">{FAILED}</testcase>
<testcase classname="tests.records.test_view_web.TestPage" name="test_b" time="1.0"/>
<testcase classname="tests.policies.test_serve" name="test_c" time="0.1"><skipped message="no"/></testcase>
</testsuite></testsuites>"""
CLEAN = JUNIT.replace(FAILED, "")


def test_the_report_names_each_test_that_failed_once_with_its_line(tmp_path: Path) -> None:
    for run, xml in ((1, JUNIT), (2, CLEAN)):
        (tmp_path / f"run{run}.log").write_text("pytest's output\n")
        (tmp_path / f"run{run}.xml").write_text(xml)
    (tmp_path / "loadavg.txt").write_text("3.10 2.00 1.00\n4.90 2.50 1.10\n")
    text, rc = flake_report.report(tmp_path)
    assert rc == 1
    assert "FLAKY tests/ros2/test_stops.py::test_a[none]: failed in 1 of 2 runs" in text
    assert "  run 1: AssertionError: the move ended before full speed\n" in text
    assert "test_view_web" not in text.split("summary")[0]  # it passed in both runs
    assert "summary: 2 runs, 3 wallclock tests, 6 test runs: 3 passed, 1 failed, 2 skipped" in text
    assert "min 3.10, mean 4.00, max 4.90" in text


def test_a_clean_hunt_passes_and_a_run_without_a_report_fails(tmp_path: Path) -> None:
    (tmp_path / "run1.log").write_text("2 passed\n")
    (tmp_path / "run1.xml").write_text(CLEAN)
    assert flake_report.report(tmp_path)[1] == 0
    (tmp_path / "run2.log").write_text(
        "tests/policies/test_serve.py::test_c PASSED [ 50%]\n"
        "tests/ros2/test_stops.py::test_a[none] FAILED [100%]\n"
        "Segmentation fault\n"
    )
    text, rc = flake_report.report(tmp_path)
    assert rc == 1 and "MISSING run 2: no report, stopped after 2 tests" in text
    assert "FLAKY tests/ros2/test_stops.py::test_a[none]: failed in 1 of 2 runs" in text  # from the log


def test_a_hunt_that_selected_nothing_fails(tmp_path: Path) -> None:
    (tmp_path / "run1.log").write_text("no tests ran\n")
    (tmp_path / "run1.xml").write_text('<testsuites><testsuite name="pytest" tests="0"/></testsuites>')
    text, rc = flake_report.report(tmp_path)
    assert rc == 1 and "NOTHING RAN" in text


@pytest.mark.parametrize("runs", ["0", "x", ""])
def test_a_bad_number_of_runs_is_one_line(runs: str) -> None:
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "flake_hunt.sh"), "-n", runs],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "positive integer" in proc.stderr or "needs a number" in proc.stderr
