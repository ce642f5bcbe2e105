"""docs/object-reference.md is generated from the object schema and objects/: it must be current."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_object_reference_page_is_current() -> None:
    p = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "object_reference.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr + " (run: python scripts/object_reference.py)"
    text = (ROOT / "docs" / "object-reference.md").read_text()
    assert "| `mug` | the red mug | 4 primitives |" in text
