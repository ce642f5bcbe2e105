"""User docs and code say what the system does now: no issue numbers in their prose. A result file's
name keeps its tag (`rl_beats_warm_start-issue38-seeds20000.json`, `PEAR_BENCH_TAG=issue38`); the
history of how a figure was reached belongs in `benchmarks/README.md`, beside the raw results."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROSE_ISSUE = re.compile(r"(?<![\w-])[Ii]ssues?[ -]#?\d+")
"""`issue 13`, `Issue 41's`, `issues 10 and 22`, `the issue-26 settings`; not a tag glued to a name."""

CODE_DIRS = (
    "pear_agent", "sim_adapters", "scripts", "prompts", "launch", "ros2_ws/src", "robots", "objects", "tests",
)  # fmt: skip
SELF = Path(__file__).resolve()
"""This module's own examples of what the pattern finds."""
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".sh", ".txt", ".j2"}


def user_files() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for d in CODE_DIRS:
        files += sorted(p for p in (ROOT / d).rglob("*") if p.is_file() and p.suffix in SUFFIXES)
    files += sorted((ROOT / "benchmarks").glob("*.py"))  # the scripts; their history is in the README
    return [p for p in files if "generated" not in p.parts and "__pycache__" not in p.parts and p != SELF]


def test_the_pattern_tells_prose_from_a_result_files_tag() -> None:
    prose = ["before issue 13", "Issue 41's part", "issues 10 and 22", "the issue-26 settings", "issue #7"]
    tags = ["rl_beats_warm_start-issue38-seeds20000.json", "PEAR_BENCH_TAG=issue38-compact", "an issue"]
    assert all(PROSE_ISSUE.search(s) for s in prose)
    assert not any(PROSE_ISSUE.search(s) for s in tags)


def test_no_issue_numbers_in_the_prose_of_readme_docs_or_code() -> None:
    found = []
    for path in user_files():
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if m := PROSE_ISSUE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {m.group(0)!r}")
    where = "\n".join(found)
    assert not found, f"issue numbers in user docs or code (history goes to benchmarks/README.md):\n{where}"
