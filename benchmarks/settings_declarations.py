"""Where the loop's settings are declared: every class-level field (dataclass, pydantic model,
NamedTuple, plain class annotation) in pear_agent/ and sim_adapters/ whose name is one of
`observation`, `max_chunk`, `history` or `max_context_tokens`, each check of max_chunk >= 1 written
in code, and the context budget written as a literal 64000.

    .venv/bin/python benchmarks/settings_declarations.py [--tag before]

writes benchmarks/results/settings_declarations-<tag>.json."""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from pathlib import Path

from _common import machine  # type: ignore[import-not-found]

ROOT = Path(__file__).resolve().parent.parent
NAMES = ("observation", "max_chunk", "history", "max_context_tokens")
MAX_CHUNK_CHECK = re.compile(r"max_chunk\b[^\n]*<\s*1\b")


def sources() -> list[Path]:
    return sorted(p for d in ("pear_agent", "sim_adapters") for p in (ROOT / d).rglob("*.py"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tag", default="now")
    args = ap.parse_args()
    fields: dict[str, list[str]] = {n: [] for n in NAMES}
    checks: list[str] = []
    literals: list[str] = []
    for path in sources():
        rel = str(path.relative_to(ROOT))
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    named = isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                    if named and item.target.id in fields:  # type: ignore[union-attr]
                        fields[item.target.id].append(f"{rel}:{item.lineno} {node.name}")  # type: ignore[union-attr]
            if isinstance(node, ast.Constant) and node.value == 64000 and not isinstance(node.value, bool):
                literals.append(f"{rel}:{node.lineno}")
        for i, line in enumerate(text.splitlines(), 1):
            if MAX_CHUNK_CHECK.search(line):
                checks.append(f"{rel}:{i}")
    out = {
        "benchmark": "settings_declarations",
        "command": "benchmarks/settings_declarations.py " + " ".join(sys.argv[1:]),
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip(),
        "machine": machine(),
        "class_fields": {n: {"count": len(v), "where": v} for n, v in fields.items()},
        "max_chunk_ge_1_checks": {"count": len(checks), "where": checks},
        "context_budget_literal_64000": {"count": len(literals), "where": literals},
    }
    dest = ROOT / "benchmarks" / "results" / f"settings_declarations-{args.tag}.json"
    dest.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: v["count"] for k, v in out["class_fields"].items()}))
    print("max_chunk >= 1 checks:", len(checks), " literal 64000:", len(literals), "->", dest.name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
