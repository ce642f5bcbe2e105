"""The PEAR paper's evaluation protocols as named bench presets (`pear-agent bench --preset NAME`).

    libero                 LIBERO's 40 tasks x init states 0-49 (2,000 episodes)
    libero_pro             LIBERO-Pro's four types x 40 tasks x 0-49 (8,000), and the 2,000 LIBERO
                           episodes they are paired with
    libero_pro/TYPE        one type (task, swap, language, object): 2,000 + the 2,000 LIBERO ones
    libero_plus            LIBERO-Plus's 10,030 tasks, one episode each (init state 0, as
                           LIBERO-Plus evaluates), and LIBERO's 40 tasks at init state 0
    libero_plus/DIMENSION  one dimension (camera, robot, language, light, background, noise, layout)

`NAME@K` runs K episodes per task and perturbation: init states 0..K-1 for LIBERO and LIBERO-Pro,
K of each task's LIBERO-Plus variants (spread evenly over LIBERO-Plus's order) at init state 0.
Presets are ordinary benches: resumable, `--workers`, report, `compare`; a LIBERO-Plus task that
cannot run here (its assets are on no package index) is left out and counted, with the reason.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from pear_agent.bench.runner import parse_seeds
from sim_adapters.libero import plus
from sim_adapters.libero.config import SETUP_HINT, LiberoUnavailableError, available
from sim_adapters.libero.naming import (
    PLUS_DIMENSIONS,
    PRO_TYPES,
    SUITES,
    libero_names,
    parse,
    plus_catalog,
)

INIT_STATES = 50
"""LIBERO's (and LIBERO-Pro's) fixed init states per task."""
PAPER_EPISODES = {"libero": 2000, "libero_plus": 10030, "libero_pro": 8000}
"""What the PEAR paper ran (section 4): 40 x 50; 10,030 LIBERO-Plus tasks once; 2,000 per Pro type."""


@dataclass
class Expansion:
    """A preset as a bench: tasks x seeds, plus what was left out and why."""

    name: str
    tasks: list[str]
    seeds: list[int]
    skipped: dict[str, int] = field(default_factory=dict)
    """One-line reason (per dimension and cause) -> number of tasks left out."""


def preset_names() -> list[str]:
    return [
        "libero",
        "libero_pro",
        *(f"libero_pro/{t}" for t in PRO_TYPES),
        "libero_plus",
        *(f"libero_plus/{d}" for d in PLUS_DIMENSIONS),
    ]


def _spread(n: int, k: int) -> list[int]:
    """k of range(n), evenly spread and always including the first."""
    if k >= n:
        return list(range(n))
    return sorted({round(i * n / k) for i in range(k)})


def _skip_key(dim: str, reason: str) -> str:
    if "MagickWand" in reason:
        return f"{dim}: motion blur needs ImageMagick's MagickWand library"
    if "assets" in reason:
        return f"{dim}: needs LIBERO-Plus's own assets (assets.zip, on no package index)"
    return f"{dim}: {reason}"


def expand(preset: str, seeds: list[int] | None = None) -> Expansion:
    """A preset name (`libero_pro/swap@5`...) -> the bench it stands for. `seeds` replaces the
    init states of LIBERO and LIBERO-Pro presets."""
    name, _, k_text = preset.partition("@")
    if k_text and (not k_text.isdigit() or int(k_text) < 1):
        raise ValueError(f"--preset {preset!r}: after @ give the episodes per task and perturbation (>= 1)")
    k = int(k_text) if k_text else None
    if name not in preset_names():
        known = ", ".join(preset_names())
        raise ValueError(
            f"unknown preset {name!r}; presets are: pear_real (the YAM), {known} (NAME@K: K per task)"
        )
    kind, _, which = name.partition("/")
    base = libero_names()
    if kind in ("libero", "libero_pro"):
        chosen = seeds or list(range(k or INIT_STATES))
        if any(not 0 <= s < INIT_STATES for s in chosen):
            raise ValueError(f"--seeds: LIBERO has init states 0-{INIT_STATES - 1}")
        types = [which] if which else list(PRO_TYPES)
        pro = [f"libero_pro/{t}/{b}" for t in types for b in base] if kind == "libero_pro" else []
        return Expansion(preset, [*pro, *base], chosen)
    if seeds is not None and seeds != [0]:
        raise ValueError("--seeds: a LIBERO-Plus preset runs each task at init state 0, as LIBERO-Plus does")

    catalog = plus_catalog()
    if not catalog:
        raise ValueError("LIBERO-Plus is not installed here; run bash scripts/setup_libero.sh")
    dims = [which] if which else list(PLUS_DIMENSIONS)
    tasks: list[str] = []
    skipped: Counter[str] = Counter()
    for (suite, i, dim), variants in catalog.items():
        if dim not in dims:
            continue
        runnable = []
        for v in range(len(variants)):
            ref = parse(f"libero_plus/{dim}/{suite}/{i}/{v}")
            reason = plus.unavailable_reason(ref)
            if reason:
                skipped[_skip_key(dim, reason)] += 1
            else:
                runnable.append(ref.name)
        tasks += [runnable[j] for j in _spread(len(runnable), k)] if k else runnable
    return Expansion(preset, [*tasks, *base], [0], dict(skipped))


def describe(e: Expansion) -> str:
    n = len(e.tasks) * len(e.seeds)
    lines = [f"preset {e.name}: {len(e.tasks)} tasks x {len(e.seeds)} init states = {n} episodes"]
    lines += [f"  left out: {n} tasks ({why})" for why, n in sorted(e.skipped.items())]
    return "\n".join(lines)


__all__ = ["PAPER_EPISODES", "SUITES", "Expansion", "bench_tasks", "describe", "expand", "preset_names"]


def only_tasks(e: Expansion, indices: list[int]) -> Expansion:
    """The preset cut to the LIBERO tasks of these indices in every suite (and their perturbations):
    a short end-to-end run of a preset, e.g. a slow model on task 0 of each suite."""
    keep = set(indices)
    return Expansion(e.name, [t for t in e.tasks if parse(t).index in keep], e.seeds, e.skipped)


def bench_tasks(
    preset: str, seeds_text: str | None, task_indices: list[int] | None = None
) -> tuple[list[str], list[int]]:
    """`pear-agent bench --preset NAME [--seeds ...] [--suite-tasks ...]` -> (tasks, seeds); prints
    what it runs."""
    e = expand(preset, parse_seeds(seeds_text) if seeds_text else None)
    if task_indices is not None:
        e = only_tasks(e, task_indices)
    if not available():
        raise LiberoUnavailableError(f"LIBERO is not installed in this Python; {SETUP_HINT}")
    print(describe(e), flush=True)
    return e.tasks, e.seeds
