"""The PEAR paper's real-robot protocol (section 4.4) as a bench preset: `bench --preset pear_real`.

30 trials per model on the dual-arm YAM: the five `align_with_ruler` scenes twice each (seeds 0-9:
scene = seed % 5; seeds 0-4 on one arm's side, 5-9 on the other's) and the ten `pick_up_object`
objects twice each (seeds 0 and 1). A trial fails past 25 turns; a move the IK refuses is a turn
(the model is told and retries), as every refused action is in `Episode`. Each result line records
the per-decision token cap (reasoning + answer) the model ran under. The table is the paper's:
successes per task group, the total, and 95% Wilson intervals.

The same 30 trials run on the real robot through `pear-agent ros protocol pear_real`, whose results
file has this shape, so `pear-agent compare` pairs a simulated run against a real one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pear_agent.bench.stats import wilson
from pear_agent.robot.object_config import object_names as names

NAME = "pear_real"
ROBOT = "yam_bimanual"
MAX_TURNS = 25
RULER_TASK = "align_with_ruler"
RULER_SEEDS = tuple(range(10))
OBJECT_SEEDS = (0, 1)
GROUPS = {"align_with_ruler": "ruler alignment", "pick_up_object": "object pickup"}
PAPER = {"base": 0, "pear": 18, "trials": 30}
"""The paper's figures on the real YAM (section 4.4): the base model 0/30, PEAR 18/30."""


def object_names() -> list[str]:
    return names()


@dataclass(frozen=True)
class Trial:
    task: str
    seed: int

    @property
    def group(self) -> str:
        return group_of(self.task)


def group_of(task: str) -> str:
    return task.partition("/")[0].partition("~")[0]


def trials(objects: list[str] | None = None) -> list[Trial]:
    """The 30 trials: ruler scenes x 2, then objects x 2 (ten objects: the shipped ones)."""
    names = objects if objects is not None else object_names()[:10]
    out = [Trial(RULER_TASK, s) for s in RULER_SEEDS]
    out += [Trial(f"pick_up_object/{n}", s) for n in names for s in OBJECT_SEEDS]
    return out


def table(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per task group and in all: successes, trials, rate, 95% Wilson interval."""
    rows: dict[str, Any] = {}
    for key in (*GROUPS, "total"):
        rs = [r for r in results if key == "total" or group_of(r["task"]) == key]
        n, k = len(rs), sum(1 for r in rs if r.get("success"))
        lo, hi = wilson(k, n)
        rows[key] = {"successes": k, "trials": n, "rate": k / n if n else 0.0, "ci95": [lo, hi]}
    return rows


def format_table(rows: dict[str, Any], label: str = "") -> str:
    """The paper's layout: one column per task group and the total, `k/n` and the interval."""
    head = f"PEAR real-robot protocol ({NAME}){': ' + label if label else ''}"
    lines = [head, f"  {'task group':<18s} {'success':>9s}  {'rate':>5s}  95% Wilson CI"]
    for key, row in rows.items():
        name = GROUPS.get(key, "total")
        lo, hi = row["ci95"]
        k, n = row["successes"], row["trials"]
        lines.append(f"  {name:<18s} {k:>4d}/{n:<4d}  {row['rate']:5.2f}  [{lo:.2f}, {hi:.2f}]")
    lines.append(f"  (the paper, real YAM: base model {PAPER['base']}/30, PEAR {PAPER['pear']}/30)")
    return "\n".join(lines)
