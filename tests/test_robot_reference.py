"""docs/robot-reference.md is generated from the robot-description schema: it must be current and
list every key of every section (scripts/robot_reference.py writes it)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from pear_agent.robot.config import RobotConfig

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "robot-reference.md"


def test_reference_page_is_current() -> None:
    p = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "robot_reference.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr + " (run: python scripts/robot_reference.py)"


def test_every_key_of_every_section_is_listed() -> None:
    schema = RobotConfig.model_json_schema()
    models = {**schema.pop("$defs"), "RobotConfig": schema}
    text = PAGE.read_text()
    sections = dict(re.findall(r'<a id="(\w+)"></a>(.*?)(?=<a id=|\Z)', text, re.S))
    assert set(sections) == {m.lower() for m in models}
    for name, model in models.items():
        keys = re.findall(r"^\| `(\w+)` \|", sections[name.lower()], re.M)
        assert keys == [k for k in model["properties"] if k != "source"], name
    assert "| `workspace_cm` | mapping `x` / `y` / `z` → list of 2 numbers | *required* |" in text
