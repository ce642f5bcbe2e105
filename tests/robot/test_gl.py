"""`configure_gl`: the one place that chooses MuJoCo's headless OpenGL."""

from __future__ import annotations

import ctypes.util
import re
from pathlib import Path

import pytest

from pear_agent.robot.gl import configure_gl

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def bare_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("MUJOCO_GL", "PYOPENGL_PLATFORM"):  # set first: the teardown then restores each as it was
        monkeypatch.setenv(name, "unset")
        monkeypatch.delenv(name)
    return monkeypatch


def test_a_users_choice_is_kept(bare_env: pytest.MonkeyPatch) -> None:
    import os

    bare_env.setenv("MUJOCO_GL", "osmesa")
    assert configure_gl() == "osmesa" and os.environ["PYOPENGL_PLATFORM"] == "osmesa"


@pytest.mark.parametrize(
    ("libraries", "chosen"),
    [({"EGL", "OSMesa"}, "egl"), ({"OSMesa"}, "osmesa"), ({"EGL"}, "egl"), (set(), "egl")],
)
def test_egl_by_default_osmesa_where_egl_is_missing(bare_env: pytest.MonkeyPatch, libraries, chosen) -> None:
    import os

    bare_env.setattr(ctypes.util, "find_library", lambda name: f"lib{name}.so" if name in libraries else None)
    assert configure_gl() == chosen == os.environ["MUJOCO_GL"] == os.environ["PYOPENGL_PLATFORM"]


def test_no_other_module_sets_mujoco_gl() -> None:
    setting = re.compile(r"""environ(\.setdefault\(|\[)\s*["']MUJOCO_GL["']""")
    others = [
        p.relative_to(ROOT).as_posix()
        for folder in ("pear_agent", "sim_adapters")
        for p in (ROOT / folder).rglob("*.py")
        if setting.search(p.read_text(encoding="utf-8")) and p.name != "gl.py"
    ]
    assert others == [], f"MUJOCO_GL is chosen by pear_agent.robot.gl.configure_gl alone: {others}"
