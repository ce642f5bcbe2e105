"""Run the command blocks of the README and docs/, so the docs are run, not just written.

Every ```bash block must follow a marker line saying how it is checked:

    <!-- docs: ci -->                 run by the test suite (tests/test_docs.py), verbatim
    <!-- docs: ci-run -->             run verbatim by .ci/run (the README's two set-up commands)
    <!-- docs: slow -->               runnable here but long: `check_docs.py --level slow` runs it,
                                      and so does CI (`--ci`: .ci/run) on the pages in CI_PAGES
    <!-- docs: slow (not in CI: why) --> runnable here but too long (or needing an extra
                                      environment) for CI's time: `--level slow` runs it, `--ci` names
                                      it and why, and leaves it out; `--level local` runs these only
                                      (developers run it before they stop and commit its output),
                                      as it runs the slow blocks of pages CI's docs step leaves out
                                      (CI_PAGES lists those it runs)
    <!-- docs: manual (why) -->       cannot run here (a model server, a real robot, a GPU): says why

Usage: python scripts/check_docs.py [--level ci|slow|local] [--ci] [--list] [--at FILE:LINE] [FILE ...]
Each block runs with `bash -euo pipefail` in the repository root, in its own process group (what it
starts in the background is stopped when it ends). Exit 1 if a block fails or lacks a marker.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^<!--\s*docs:\s*(ci-run|ci|slow|manual)\b\s*(.*?)\s*-->\s*$")
LEVELS = ("ci", "slow", "local")
NOT_IN_CI = "not in CI:"
"""A slow block's note that starts so is left out by `--ci`, and says why."""
CI_PAGES = (
    "docs/pear-eval.md",
    "docs/rl.md",
    "docs/robots.md",
    "docs/roadster.md",
    "docs/view-and-export.md",
    "docs/tasks.md",
)
"""The pages whose slow blocks CI's docs step runs (.ci/run: `check_docs.py --ci` on these); the slow
blocks of the other pages run only at `--level slow` and `--level local`."""


@dataclass
class Block:
    path: Path
    line: int
    """1-based line of the opening fence."""
    marker: str | None
    note: str
    text: str

    @property
    def where(self) -> str:
        shown = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{shown}:{self.line}"

    def commands(self) -> list[str]:
        """The block's command lines (continuations joined, comments and blanks dropped)."""
        out: list[str] = []
        pending = ""
        for raw in self.text.splitlines():
            line = raw.rstrip()
            if not pending and (not line.strip() or line.lstrip().startswith("#")):
                continue
            if line.endswith("\\"):
                pending += line[:-1].rstrip() + " "
                continue
            out.append(" ".join((pending + line).split()))
            pending = ""
        return out


def left_out_of_ci(block: Block) -> str | None:
    """Why CI leaves this slow block out (its marker's `not in CI: why`, or a page of the project's
    docs that CI's docs step does not run), or None."""
    note = block.note.strip("() ")
    if block.marker != "slow":
        return None
    if note.startswith(NOT_IN_CI):
        return note[len(NOT_IN_CI) :].strip() or "(no reason given)"
    if block.path in doc_files() and block.path.relative_to(ROOT).as_posix() not in CI_PAGES:
        return "its page is not among those CI's docs step runs (check_docs.CI_PAGES)"
    return None


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        fence = lines[i].strip()
        if fence.startswith("```"):
            lang = fence[3:].strip()
            j = i + 1
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            if lang in ("bash", "sh"):
                k = i - 1
                while k >= 0 and not lines[k].strip():
                    k -= 1
                m = MARKER.match(lines[k].strip()) if k >= 0 else None
                out.append(
                    Block(
                        path,
                        i + 1,
                        m.group(1) if m else None,
                        m.group(2) if m else "",
                        "\n".join(lines[i + 1 : j]),
                    )
                )
            i = j + 1
            continue
        i += 1
    return out


def run_block(block: Block, timeout_s: float) -> tuple[bool, str, float]:
    """Run one block; (ok, the tail of its output, seconds). The block ends when its shell does;
    what it started in the background is stopped then (its output goes to a file, not a pipe, so a
    background process that keeps it open cannot hold the block)."""
    env = dict(os.environ, MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"))
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", block.text],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            proc.wait(timeout=timeout_s)
            ok = proc.returncode == 0
            note = "" if ok else f"\n[exit {proc.returncode}]"
        except subprocess.TimeoutExpired:
            ok, note = False, f"\n[timed out after {timeout_s:.0f} s]"
        finally:
            with contextlib.suppress(ProcessLookupError):  # background servers the block started
                os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()
        out.seek(0)
        tail = out.read().decode(errors="replace")[-3000:] + note
    return ok, tail, time.monotonic() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", help="markdown files (default: README.md and docs/)")
    ap.add_argument(
        "--level",
        choices=LEVELS,
        default="ci",
        help=f"ci: the ci blocks; slow: ci and slow; local: the slow blocks CI leaves out ({NOT_IN_CI} why)",
    )
    ap.add_argument(
        "--at", action="append", default=[], metavar="FILE:LINE", help="run only the block(s) opening there"
    )
    ap.add_argument("--list", action="store_true", help="list the blocks and their markers, run nothing")
    ap.add_argument(
        "--ci",
        action="store_true",
        help="CI's run: the slow blocks only (the ci ones run in the tests), leaving out and naming "
        f"those marked `slow ({NOT_IN_CI} why)`",
    )
    ap.add_argument("--timeout-s", type=float, default=900.0, help="per block")
    args = ap.parse_args(argv)
    # stopped from outside (a CI timeout): still stop what the running block started in the background
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    files = [Path(f).resolve() for f in args.files] or doc_files()
    todo = ("slow",) if args.ci else {"ci": ("ci",), "slow": ("ci", "slow"), "local": ("slow",)}[args.level]
    only_left_out = args.level == "local" and not args.ci
    failed = 0
    seen: set[str] = set()
    for path in files:
        for b in blocks(path):
            seen.add(b.where)
            if b.marker is None:
                print(f"{b.where}: a bash block without a `<!-- docs: ... -->` marker", flush=True)
                failed += 1
                continue
            why = left_out_of_ci(b) if args.ci else None
            if why is not None:
                print(f"{b.where}: left out of CI: {why}", flush=True)
                continue
            skip = (only_left_out and left_out_of_ci(b) is None) or (args.at and b.where not in args.at)
            if skip and not args.list:
                continue  # not asked for: not named either
            if args.list or b.marker not in todo:
                print(f"{b.where}: {b.marker} {b.note}".rstrip(), flush=True)
                continue
            ok, tail, secs = run_block(b, args.timeout_s)
            print(f"{b.where}: {'ok' if ok else 'FAILED'} ({secs:.0f} s)", flush=True)
            if not ok:
                failed += 1
                print("  " + tail.replace("\n", "\n  "), flush=True)
    for where in sorted(set(args.at) - seen):
        print(f"{where}: no bash block opens there (--list shows where they do)", flush=True)
        failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
