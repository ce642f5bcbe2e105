"""Which OpenGL MuJoCo renders with, headless: set once, here, before MuJoCo is imported.

`MUJOCO_GL` (and `PYOPENGL_PLATFORM`) are read by MuJoCo and PyOpenGL at import time, so every
process that may render (the command, each worker, each Ray actor) calls `configure_gl()` before
its first MuJoCo import. A value the user set is kept."""

from __future__ import annotations

import ctypes.util
import os


def configure_gl() -> str:
    """Headless rendering: EGL by default, OSMesa if EGL is missing; returns the `MUJOCO_GL` in force."""
    if "MUJOCO_GL" not in os.environ:
        has_egl = ctypes.util.find_library("EGL") is not None
        has_osmesa = ctypes.util.find_library("OSMesa") is not None
        os.environ["MUJOCO_GL"] = "osmesa" if (not has_egl and has_osmesa) else "egl"
    os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
    return os.environ["MUJOCO_GL"]
