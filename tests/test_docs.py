"""The docs are run, not just written: every bash block of the README and docs/ says how it is
checked, the `ci` blocks run here verbatim, the README's set-up commands are what .ci/run runs, and
the manual builds as a site with `mkdocs build --strict`."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("check_docs", ROOT / "scripts" / "check_docs.py")
check_docs = importlib.util.module_from_spec(spec)
sys.modules["check_docs"] = check_docs
spec.loader.exec_module(check_docs)

ALL = [b for f in check_docs.doc_files() for b in check_docs.blocks(f)]
CI = [b for b in ALL if b.marker == "ci"]


def test_every_bash_block_says_how_it_is_checked() -> None:
    unmarked = [b.where for b in ALL if b.marker is None]
    assert not unmarked, f"bash blocks without a `<!-- docs: ... -->` marker: {unmarked}"
    assert not [b.where for b in ALL if b.marker == "manual" and not b.note], "a manual block must say why"


def test_the_readme_opens_with_the_two_commands_ci_runs_verbatim() -> None:
    readme = [b for b in ALL if b.path.name == "README.md"]
    first = readme[0]
    assert first.marker == "ci-run"
    cmds = first.commands()
    assert cmds == [
        "bash scripts/setup.sh && .venv/bin/pear-agent run",
        "bash scripts/setup.sh --dev && bash scripts/test.sh",
    ]
    ci_lines = {line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()}
    for b in (b for b in ALL if b.marker == "ci-run"):
        missing = [c for c in b.commands() if c not in ci_lines]
        assert not missing, f"{b.where}: not run verbatim by .ci/run: {missing}"


def test_block_parser_joins_continuations_and_drops_comments(tmp_path: Path) -> None:
    md = tmp_path / "x.md"
    md.write_text("text\n<!-- docs: ci -->\n```bash\n# c\na --x \\\n    --y\n\nb\n```\n```bash\nc\n```\n")
    bs = check_docs.blocks(md)
    assert [b.marker for b in bs] == ["ci", None]
    assert bs[0].commands() == ["a --x --y", "b"]
    assert bs[0].line == 3


def test_ci_runs_the_slow_blocks_of_its_docs_and_says_why_it_leaves_one_out(tmp_path: Path) -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    line = next(x for x in ci.splitlines() if "check_docs.py --ci" in x)
    assert line.split("check_docs.py --ci")[1].split() == list(check_docs.CI_PAGES)
    slow = [b for b in ALL if b.marker == "slow" and str(b.path.relative_to(ROOT)) in check_docs.CI_PAGES]
    assert sum(check_docs.left_out_of_ci(b) is None for b in slow) >= 6  # most of them run
    for b in slow:
        why = check_docs.left_out_of_ci(b)
        assert why is None or len(why) > 10, f"{b.where}: say why CI leaves it out"
    md = tmp_path / "x.md"
    md.write_text(
        "<!-- docs: slow -->\n```bash\ntrue\n```\n"
        "<!-- docs: slow (not in CI: needs a GPU) -->\n```bash\nfalse\n```\n"
        "<!-- docs: ci -->\n```bash\nfalse\n```\n"
    )
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "check_docs.py"), "--ci", str(md)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr  # the failing blocks are not run
    assert ":2: ok" in proc.stdout and ":6: left out of CI: needs a GPU" in proc.stdout


def test_every_slow_block_ci_leaves_out_runs_at_the_local_level() -> None:
    """A slow block on a page CI's docs step does not run is left out of CI as surely as one marked
    `not in CI`: `--level local` runs both."""
    plain = [b for b in ALL if b.marker == "slow" and not b.note]
    on_ci_pages = {b.where for b in plain if str(b.path.relative_to(ROOT)) in check_docs.CI_PAGES}
    left_out = {b.where for b in plain if check_docs.left_out_of_ci(b)}
    assert left_out and on_ci_pages and left_out == {b.where for b in plain} - on_ci_pages
    assert any(w.startswith("docs/training.md:") for w in left_out)


def test_the_local_level_runs_only_what_ci_leaves_out(tmp_path: Path) -> None:
    """`--level local` (developers, before they stop): the `slow (not in CI: why)` blocks, no others;
    `--at FILE:LINE` runs the one block opening there."""
    md = tmp_path / "x.md"
    md.write_text(
        "<!-- docs: slow -->\n```bash\nfalse\n```\n"
        "<!-- docs: slow (not in CI: needs a LIBERO venv) -->\n```bash\ntrue\n```\n"
        "<!-- docs: ci -->\n```bash\nfalse\n```\n"
        "<!-- docs: slow (not in CI: a long benchmark) -->\n```bash\nfalse\n```\n"
    )
    script = [sys.executable, str(ROOT / "scripts" / "check_docs.py"), "--level", "local"]
    proc = subprocess.run([*script, str(md)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and ":6: ok" in proc.stdout and ":14: FAILED" in proc.stdout, proc.stdout
    assert (
        ":2: ok" not in proc.stdout and ":2: FAILED" not in proc.stdout and ":10: FAILED" not in proc.stdout
    )
    proc = subprocess.run([*script, "--at", f"{md}:6", str(md)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and ":6: ok" in proc.stdout and ":14: FAILED" not in proc.stdout, proc.stdout
    proc = subprocess.run([*script, "--at", f"{md}:7", str(md)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and f"{md}:7: no bash block opens there" in proc.stdout, proc.stdout


def test_the_manual_builds_as_a_site(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="mkdocs is in the dev extra")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "site" / "robots" / "index.html").exists()


@pytest.mark.parametrize("block", CI, ids=[b.where for b in CI])
def test_ci_block_runs_verbatim(block: check_docs.Block) -> None:
    if not (ROOT / ".venv" / "bin" / "pear-agent").exists():
        pytest.skip("the docs' commands use .venv (bash scripts/setup.sh)")
    ok, tail, _ = check_docs.run_block(block, timeout_s=900)
    assert ok, f"{block.where} failed:\n{tail}"
