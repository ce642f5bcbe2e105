"""LIBERO through the pear-agent protocol (optional; runs in the separate .venv-libero).

Nothing here imports LIBERO, robosuite or torch at module level: `config.import_libero()` does,
lazily, after pointing LIBERO at its config and the offline assets.
"""

SUITES: dict[str, int] = {
    "libero_spatial": 10,
    "libero_object": 10,
    "libero_goal": 10,
    "libero_10": 10,
}
"""The paper's four suites (40 tasks; libero_10 is LIBERO-Long) and their task counts."""

MAX_TURNS: dict[str, int] = {
    "libero_spatial": 30,
    "libero_object": 30,
    "libero_goal": 30,
    "libero_10": 60,
}
"""Per-suite turn limits: LIBERO's step budgets (220/280/300/520 steps at 20 Hz) over the ~10
control steps an end-effector move of a few cm takes, with room for retries."""


def task_names() -> list[str]:
    """Every task this adapter runs, as `pear-agent` names it (`libero_spatial/0` ... `libero_10/9`).

    The registry lists LIBERO's tasks from here, so a benchmark built on LIBERO (LIBERO-Plus,
    LIBERO-Pro) adds its names in this one place."""
    return [f"{suite}/{i}" for suite, n in SUITES.items() for i in range(n)]
