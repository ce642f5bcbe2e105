"""docs/settings-reference.md against what the commands themselves say: the page is made
from `reference()` over the settings' fields, so comparing it with that same loop proves nothing.
Here every option row of its turn-loop and model-client tables is checked against the output of
`pear-agent <cmd> --help` (the flag is offered, with the page's help text) and against the value the
command's parser gives when the option is not passed (the page's default).

Mutation tried by hand: `reference()` showing the field's own default instead of its
command-line one (`default = f.default`), the page regenerated: tests/test_settings.py passes;
`test_every_documented_default_is_the_commands_default` fails with "`pear-agent run
--max-context-tokens`: the page says '64000', the command ''" (and `--retry-timeouts`: True)."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pear_agent.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "settings-reference.md"
SECTIONS = ("## The turn loop", "## The model client")
"""the page's command-line tables: for `run` and `bench` (their headings say so)"""
COMMANDS = ("run", "bench")


def _page_rows() -> dict[str, tuple[str, str]]:
    """flag -> (default cell, help cell) of the page's command-line tables, read as markdown."""
    rows: dict[str, tuple[str, str]] = {}
    section = None
    for line in PAGE.read_text().splitlines():
        if line.startswith("## "):
            section = line if line.startswith(SECTIONS) else None
            continue
        m = re.fullmatch(r"\| `(--[a-z0-9-]+)` \|(.*?)\|(.*)\|", line)
        if section and m:
            cells = [c.strip().replace("\\|", "|") for c in (m.group(2), m.group(3))]
            rows[m.group(1)] = (cells[0], cells[1])
    return rows


def _help_options(text: str) -> dict[str, str]:
    """flag -> help text from argparse's `--help` output (continuation lines joined)."""
    out: dict[str, str] = {}
    current: str | None = None
    for line in text.splitlines():
        m = re.match(r"^  (-\S.*?)(?:\s{2,}(.*))?$", line)
        if m:
            flags = [f.split()[0] for f in m.group(1).split(", ")]
            current = next((f for f in flags if f.startswith("--")), flags[0])
            out[current] = m.group(2) or ""
        elif current is not None and line.startswith("   ") and line.strip():
            # argparse wraps at hyphens too ("--history-" / "older"): such a break joins with no space
            sep = "" if re.search(r"\w-$", out[current]) else " "
            out[current] = f"{out[current]}{sep}{line.strip()}".strip()
        else:
            current = None
    return out


def _help_of(command: str) -> str:
    env = dict(os.environ, COLUMNS="100")  # a narrow terminal: wrapped help must still parse
    p = subprocess.run(
        [sys.executable, "-m", "pear_agent", command, "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    return p.stdout


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


@pytest.fixture(scope="module")
def page() -> dict[str, tuple[str, str]]:
    rows = _page_rows()
    # the parse itself: both tables, with the options every user meets
    assert {"--max-turns", "--realtime", "--model", "--no-stream", "--max-tokens"} <= set(rows), rows
    return rows


@pytest.mark.parametrize("command", COMMANDS)
def test_every_documented_option_is_in_the_commands_help_with_its_text(page, command: str) -> None:
    options = _help_options(_help_of(command))
    assert "--help" in options and len(options) > len(page) // 2, options  # the parse itself
    missing = sorted(set(page) - set(options))
    assert not missing, f"documented but not offered by `pear-agent {command}`: {missing}"
    for flag, (_, text) in page.items():
        assert " ".join(options[flag].split()) == " ".join(text.split()), (command, flag, options[flag], text)


def test_every_documented_default_is_the_commands_default(page) -> None:
    """The page's default cell is what the command gives when the option is not passed (repr; an
    empty cell: None, or an empty collection: `--extra-body` gives {}), for `run` and `bench`
    alike."""
    subs = _subparsers()
    for command in COMMANDS:
        actions = {s: a for a in subs[command]._actions for s in a.option_strings}
        for flag, (shown, _) in page.items():
            value = subs[command].get_default(actions[flag].dest)
            want = "" if value is None or value in ({}, [], ()) else repr(value)
            where = f"`pear-agent {command} {flag}`"
            assert shown == want, f"{where}: the page says {shown!r}, the command {want!r}"
