"""The text protocol is light: parsing a reply or rendering a prompt loads no image codec and no
kinematics library (OpenCV encodes camera images in `robot/images.py`, Pinocchio solves poses in
`robot/kinematics.py`). Checked in a fresh interpreter, where nothing else has loaded them yet.

Mutation tried by hand: `import cv2` back at the top of `protocol/prompts.py` fails with
"import pear_agent.protocol.prompts loaded ['cv2']"."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("cv2", "pinocchio", "mujoco", "torch")


@pytest.mark.parametrize("part", ["", ".prompts", ".state", ".history", ".actions"])
def test_the_protocol_loads_no_image_codec_or_kinematics(part: str) -> None:
    module = "pear_agent.protocol" + part
    code = f"import sys, {module}; print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", f"import {module} loaded {out.stdout.strip()}"


def test_the_check_sees_a_heavy_import() -> None:
    """The probe is not blind: importing the kinematics module does load Pinocchio."""
    code = f"import sys, pear_agent.robot.kinematics; print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "pinocchio" in out.stdout, out.stdout + out.stderr
