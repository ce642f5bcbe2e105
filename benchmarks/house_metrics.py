"""The structure of the house, measured on the source text (nothing here imports the code).

- package-level import graph of `pear_agent` (one node per subpackage, `pear_agent.cli` etc. for
  a top-level module; every import counts, at the top or inside a function, not those under
  `if TYPE_CHECKING:`): its circles and its arrows back up (an arrow from a part to a part
  listed after it in LAYERS);
- the largest files of `pear_agent/` and `sim_adapters/` (lines);
- the imports of the project's own modules made inside a function (count, and per reason word);
- the import time of `pear_agent.protocol` and `pear_agent.cli` (`python -X importtime`,
  microseconds, median of --importtime-runs fresh interpreters) and the heavy packages each loads.

    python benchmarks/house_metrics.py --out benchmarks/results/house-after.json
"""

from __future__ import annotations

import argparse
import ast
import json
import platform
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TREES = ("pear_agent", "sim_adapters")
OWN = ("pear_agent", "sim_adapters")
# Lower parts first: a part may import the parts listed before it. `cli` (the commands) sits
# at the top (`python -m pear_agent` above it); `settings` (the run settings every
# command reads) at the bottom.
LAYERS = (
    "pear_agent.settings",
    "pear_agent.robot",
    "pear_agent.protocol",
    "pear_agent.records",
    "pear_agent.policies",
    "pear_agent.loop",
    "pear_agent.bench",
    "pear_agent.rl",
    "pear_agent.train",
    "pear_agent.ros2",
    "pear_agent.cli",
    "pear_agent.__main__",
)
REASON = re.compile(r"#\s*(optional|heavy|cycle):")
HEAVY = ("cv2", "pinocchio", "mujoco", "torch", "transformers", "fastapi", "openai", "rclpy", "lerobot")
"""Third-party packages an import-time row names when a module loads them."""


def sources() -> list[Path]:
    return [p for tree in TREES for p in sorted((REPO / tree).rglob("*.py"))]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def part_of(module: str) -> str | None:
    """`pear_agent.loop.episode` -> `pear_agent.loop`; `pear_agent.cli` stays itself."""
    bits = module.split(".")
    if bits[0] != "pear_agent" or len(bits) < 2:
        return None
    return ".".join(bits[:2])


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(path: Path, name: str | None = None) -> list[tuple[str, bool, int]]:
    """(imported module, inside a function, line) for each import in `path` (the module `name`,
    else its place in the repository), relative imports resolved; `from a import b` yields `a.b`
    (a submodule or a name, `part_of` cuts it)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = (name or module_name(path)).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    out: list[tuple[str, bool, int]] = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    walk(sub, in_function)
                continue
            if isinstance(child, ast.Import):
                out.extend((a.name, in_function, child.lineno) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = package[: len(package) - child.level + 1]
                    base = ".".join([*up, base] if base else up)
                out.extend((f"{base}.{a.name}", in_function, child.lineno) for a in child.names)
            walk(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))

    walk(tree, False)
    return out


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def structure() -> dict:
    edges: dict[str, set[str]] = {}
    witness: dict[tuple[str, str], str] = {}
    module_edges: dict[str, set[str]] = {}
    function_imports: list[dict] = []
    names = {module_name(p) for p in sources()}
    for path in sources():
        src = module_name(path)
        text_lines = path.read_text(encoding="utf-8").splitlines()
        for target, in_function, line in imports(path):
            if not target.startswith(OWN):
                continue
            if in_function:
                here = text_lines[line - 1]
                above = text_lines[line - 2].strip() if line >= 2 else ""
                m = REASON.search(here) or (REASON.search(above) if above.startswith("#") else None)
                function_imports.append(
                    {
                        "file": str(path.relative_to(REPO)),
                        "line": line,
                        "module": target,
                        "reason": m.group(1) if m else None,
                    }
                )
            mod = target if target in names else target.rsplit(".", 1)[0]
            if mod in names and mod != src:
                module_edges.setdefault(src, set()).add(mod)
            a, b = part_of(src), part_of(target)
            if a and b and a != b:
                edges.setdefault(a, set()).add(b)
                witness.setdefault((a, b), f"{path.relative_to(REPO)}:{line} -> {target}")
    rank = {part: i for i, part in enumerate(LAYERS)}
    back_up = [
        {"from": a, "to": b, "e.g.": witness[(a, b)]}
        for a in sorted(edges)
        for b in sorted(edges[a])
        if rank.get(a, len(LAYERS)) < rank.get(b, len(LAYERS))
    ]
    # Imports of one function-level site are counted once per statement (a `from x import a, b`
    # is one import).
    sites = {(f["file"], f["line"]) for f in function_imports}
    reasons = Counter({(f["file"], f["line"]): f["reason"] for f in function_imports}.values())
    return {
        "parts": sorted({p for e in edges for p in (e, *edges[e])}),
        "part_edges": {a: sorted(b) for a, b in sorted(edges.items())},
        "part_circles": _circles(edges),
        "part_arrows_back_up": back_up,
        "module_circles": _circles(module_edges),
        "function_level_own_imports": len(sites),
        "function_level_own_imports_by_reason": {str(k): v for k, v in sorted(reasons.items(), key=str)},
        "function_level_own_import_sites": sorted(
            {(f["file"], f["line"]): f for f in function_imports}.values(),
            key=lambda f: (f["file"], f["line"]),
        ),
    }


def largest_files(n: int) -> list[dict]:
    sizes = [(len(p.read_text(encoding="utf-8").splitlines()), str(p.relative_to(REPO))) for p in sources()]
    sizes.sort(reverse=True)
    return [{"file": f, "lines": lines} for lines, f in sizes[:n]]


def importtime_us(module: str, python: str) -> tuple[int, int, list[str]]:
    """`python -X importtime -c "import module"`: the microseconds of the project's top-level rows
    (`pear_agent`, then `module`: cumulative, what the import itself costs), of every top-level row
    (the interpreter's start included), and the modules loaded."""
    run = subprocess.run(
        [python, "-X", "importtime", "-c", f"import {module}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    own = every = 0
    loaded = []
    for row in run.stderr.splitlines():
        if not row.startswith("import time:") or "cumulative" in row:
            continue
        _, cumulative, raw = row[len("import time:") :].split("|", 2)
        name = raw.strip()
        if len(raw) - len(raw.lstrip(" ")) == 1:  # a top-level row: one space, no nesting
            every += int(cumulative)
            if name.split(".")[0] == module.split(".")[0]:
                own += int(cumulative)
        loaded.append(name)
    return own, every, loaded


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, help="write the JSON here (else stdout)")
    parser.add_argument("--largest", type=int, default=10, help="how many of the largest files to list")
    parser.add_argument("--importtime-runs", type=int, default=5, help="0 skips the import-time measure")
    parser.add_argument(
        "--importtime",
        nargs="*",
        default=["pear_agent.protocol", "pear_agent.cli"],
        help="the modules whose import is timed (the text protocol; the command line, what every "
        "`pear-agent` call loads)",
    )
    args = parser.parse_args()
    result: dict = {
        "command": " ".join(["python", *sys.argv]),
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "commit": subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip(),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **structure(),
        "largest_files": largest_files(args.largest),
    }
    result["files_over_700_lines"] = [f for f in largest_files(10_000) if f["lines"] > 700]
    for module in args.importtime if args.importtime_runs else ():
        runs = [importtime_us(module, sys.executable) for _ in range(args.importtime_runs)]
        loaded = runs[-1][2]
        result.setdefault("importtime_us", {})[module] = {
            "median": int(statistics.median(r[0] for r in runs)),
            "runs": [r[0] for r in runs],
            "with_interpreter_start_median": int(statistics.median(r[1] for r in runs)),
            "modules_loaded": len(loaded),
            "loads": sorted({m.split(".")[0] for m in loaded} & set(HEAVY)),
        }
    text = json.dumps(result, indent=2) + "\n"
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    print(
        json.dumps(
            {k: result[k] for k in ("part_circles", "function_level_own_imports", "files_over_700_lines")}
            | {"arrows_back_up": [f"{a['from']} -> {a['to']}" for a in result["part_arrows_back_up"]]},
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
