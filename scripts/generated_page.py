"""What every generated reference page's script does with its rendered text: write the page, or
with `--check` exit 1 when the committed page differs (the tests run that)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def write_or_check(page: Path, render: Callable[[], str], script: str, description: str) -> int:
    ap = argparse.ArgumentParser(description=description.splitlines()[0])
    ap.add_argument("--check", action="store_true", help=f"exit 1 if {page.name} is stale")
    args = ap.parse_args()
    text = render()
    if args.check:
        if not page.is_file() or page.read_text() != text:
            print(f"{page} is stale: run python {script}", file=sys.stderr)
            return 1
        return 0
    page.write_text(text)
    print(f"wrote {page}")
    return 0
