"""The flake hunt's report (scripts/flake_hunt.sh): each test that failed in at least one run, with
its failure line, and a summary of the runs and the load average seen.

Usage: python scripts/flake_report.py FOLDER   (FOLDER holds run1.xml ... (JUnit) and loadavg.txt)
Exit 1 if a test failed or errored in any run, or a run left no report (pytest itself crashed).
"""

from __future__ import annotations

import os
import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Hunt:
    runs: int = 0
    missing: list[str] = field(default_factory=list)
    """Runs that left no JUnit report."""
    tests: set[str] = field(default_factory=set)
    passes: int = 0
    skips: int = 0
    failures: dict[str, list[tuple[int, str]]] = field(default_factory=lambda: defaultdict(list))
    """test id -> (run, first line of its failure) for each run it failed in."""


def _test_id(case: ET.Element) -> str:
    cls, name = case.get("classname", ""), case.get("name", "")
    parts = cls.split(".")
    # tests.ros2.test_stops (module) or tests.ros2.test_stops.TestX (a class): back to a node id
    mod = next((i for i in range(len(parts), 0, -1) if parts[i - 1].startswith("test_")), len(parts))
    path = "/".join(parts[:mod]) + ".py" if parts[:mod] else "?"
    return "::".join([path, *parts[mod:], name])


def failure_line(element: ET.Element) -> str:
    """The line that says why: the message's first line, else the last `E   ` line of the trace."""
    msg = (element.get("message") or "").strip()
    if msg:
        return msg.splitlines()[0][:240]
    trace = (element.text or "").strip().splitlines()
    e_lines = [ln[1:].strip() for ln in trace if ln.startswith("E ")]
    return (e_lines[-1] if e_lines else trace[-1] if trace else "?")[:240]


VERBOSE_LINE = re.compile(r"^(tests/\S+::\S+) (PASSED|FAILED|ERROR|SKIPPED)\b", re.M)
"""A test's line in pytest -v's log: what a run stopped before its JUnit report still tells."""


def _from_log(text: str, run: int, hunt: Hunt) -> int:
    seen = VERBOSE_LINE.findall(text)
    for tid, outcome in seen:
        hunt.tests.add(tid)
        if outcome in ("FAILED", "ERROR"):
            hunt.failures[tid].append((run, "(the run stopped before its report: see its log)"))
        elif outcome == "SKIPPED":
            hunt.skips += 1
        else:
            hunt.passes += 1
    return len(seen)


def read(folder: Path) -> Hunt:
    hunt = Hunt()
    logs = sorted(folder.glob("run*.log"), key=lambda p: int(re.sub(r"\D", "", p.stem) or 0))
    for log in logs:
        run = int(re.sub(r"\D", "", log.stem))
        hunt.runs += 1
        xml = folder / f"run{run}.xml"
        if not xml.exists():
            done = _from_log(log.read_text(errors="replace"), run, hunt)
            hunt.missing.append(f"run {run}: no report, stopped after {done} tests ({log})")
            continue
        for case in ET.parse(xml).getroot().iter("testcase"):
            tid = _test_id(case)
            hunt.tests.add(tid)
            bad = case.find("failure")
            if bad is None:
                bad = case.find("error")
            if bad is not None:
                hunt.failures[tid].append((run, failure_line(bad)))
            elif case.find("skipped") is not None:
                hunt.skips += 1
            else:
                hunt.passes += 1
    return hunt


def load_seen(folder: Path) -> str:
    path = folder / "loadavg.txt"
    ones = (
        [float(line.split()[0]) for line in path.read_text().splitlines() if line.strip()]
        if path.exists()
        else []
    )
    if not ones:
        return "load average: not sampled"
    return (
        f"load average (1 min, sampled every 5 s, {len(ones)} samples) on {os.cpu_count()} CPUs: "
        f"min {min(ones):.2f}, mean {sum(ones) / len(ones):.2f}, max {max(ones):.2f}"
    )


def report(folder: Path) -> tuple[str, int]:
    hunt = read(folder)
    lines = []
    for tid in sorted(hunt.failures):
        fails = hunt.failures[tid]
        lines.append(f"FLAKY {tid}: failed in {len(fails)} of {hunt.runs} runs")
        for run, why in fails:
            lines.append(f"  run {run}: {why}")
    lines += [f"MISSING {m}" for m in hunt.missing]
    failed = sum(len(f) for f in hunt.failures.values())
    total = failed + hunt.passes + hunt.skips
    lines.append(
        f"summary: {hunt.runs} runs, {len(hunt.tests)} wallclock tests, {total} test runs: {hunt.passes} "
        f"passed, {failed} failed, {hunt.skips} skipped; {len(hunt.failures)} tests failed at least once"
    )
    if not hunt.tests:
        lines.append("NOTHING RAN: no wallclock test was selected (check the paths and -k)")
    lines.append(load_seen(folder))
    bad = bool(hunt.failures or hunt.missing or not hunt.tests)
    return "\n".join(lines), 1 if bad else 0


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print(
            "usage: python scripts/flake_report.py FOLDER (the flake hunt's run*.xml and loadavg.txt)",
            file=sys.stderr,
        )
        return 2
    text, rc = report(Path(argv[0]))
    print(text)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
