"""The house's shape, on the source text (`benchmarks/house_metrics.py` measures the same):

- no file in `pear_agent/` or `sim_adapters/` over 700 lines;
- no import circle between the parts of `pear_agent` (robot, protocol, records, policies, loop,
  bench, rl, train, ros2, cli) and no arrow from a part up to one listed after it in LAYERS;
- at most 20 imports of the project's own modules inside functions (each says why:
  tests/test_imports.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import house_metrics as hm  # noqa: E402

MAX_LINES = 700
MAX_FUNCTION_IMPORTS = 20


def test_no_file_over_700_lines() -> None:
    over = [f"{f['file']} ({f['lines']})" for f in hm.largest_files(10_000) if f["lines"] > MAX_LINES]
    assert not over, f"split these below {MAX_LINES} lines: " + ", ".join(over)


def test_no_import_circle_and_no_arrow_back_up_between_the_parts() -> None:
    s = hm.structure()
    assert len(s["parts"]) >= 10  # the scan found the parts
    assert not s["part_circles"], s["part_circles"]
    back = [f"{a['from']} -> {a['to']} ({a['e.g.']})" for a in s["part_arrows_back_up"]]
    assert not back, "a lower part imports a higher one: " + "; ".join(back)
    unranked = [p for p in s["parts"] if p not in hm.LAYERS]
    assert not unranked, f"place these in house_metrics.LAYERS: {unranked}"


def test_few_imports_of_our_own_modules_inside_functions() -> None:
    n = hm.structure()["function_level_own_imports"]
    assert 0 < n <= MAX_FUNCTION_IMPORTS, n


def test_the_scan_sees_a_circle_and_an_arrow_back_up(tmp_path: Path) -> None:
    """The checks above could fail: a circle between two parts and an arrow up are both found."""
    edges = {"pear_agent.loop": {"pear_agent.policies"}, "pear_agent.policies": {"pear_agent.loop"}}
    assert hm._circles(edges) == [["pear_agent.loop", "pear_agent.policies"]]
    module = tmp_path / "m.py"
    module.write_text("import os\n\ndef f():\n    from pear_agent.loop import episode\n    return episode\n")
    assert [(t, inside) for t, inside, _ in hm.imports(module, "pear_agent.m")] == [
        ("os", False),
        ("pear_agent.loop.episode", True),
    ]
