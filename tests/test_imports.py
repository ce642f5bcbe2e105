"""A house with no trapdoors, checked on the source text (nothing here imports the code).

- An import inside a function says why in one word (`# optional: rerun`, `# heavy: mujoco`,
  `# cycle: sim_adapters.mujoco.tasks`; docs/development.md, "Imports"): every other import stands
  at the top of its module.
- No module-level `__getattr__`: a table another module reads is a plain function.
- The turn loop (`pear_agent/loop/episode.py`) builds no environment: it imports no environment, family,
  registry or adapter module.
- A module named in a docstring (`pear_agent.x.y`, `sim_adapters.x.y`) exists.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TREES = ("pear_agent", "sim_adapters")
REASONS = ("optional", "heavy", "cycle")
REASON = re.compile(r"#\s*(" + "|".join(REASONS) + r"):\s*[\w.\-]+")


def _sources() -> list[Path]:
    return [p for tree in TREES for p in sorted((REPO / tree).rglob("*.py"))]


def _function_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    out: list[ast.Import | ast.ImportFrom] = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, ast.Import | ast.ImportFrom):
                out.append(child)
            walk(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))

    walk(tree, False)
    return out


def function_import_reasons(text: str) -> tuple[list[str | None], list[int]]:
    """The reason word of each import inside a function of `text` (None: none given) and the
    line numbers of those without one. The reason stands on the import's lines or on a comment
    line right above it."""
    lines = text.splitlines()
    reasons: list[str | None] = []
    missing = []
    for node in _function_imports(ast.parse(text)):
        span = lines[node.lineno - 1 : node.end_lineno]
        above = lines[node.lineno - 2].strip() if node.lineno >= 2 else ""
        candidates = [*span, above] if above.startswith("#") else span
        found = next((m for m in map(REASON.search, candidates) if m), None)
        reasons.append(found.group(1) if found else None)
        if found is None:
            missing.append(node.lineno)
    return reasons, missing


def test_every_import_inside_a_function_says_why() -> None:
    offenders, counts = [], Counter()
    for path in _sources():
        reasons, missing = function_import_reasons(path.read_text(encoding="utf-8"))
        counts.update(r for r in reasons if r)
        offenders += [f"{path.relative_to(REPO)}:{n}" for n in missing]
    assert not offenders, (
        "imports inside functions without a reason (`# optional: X`, `# heavy: X`, `# cycle: X`; "
        "or move them to the top of the module): " + ", ".join(offenders)
    )
    assert counts["optional"] > 0 and counts["heavy"] > 0  # the scan found what it scans for


def test_the_reason_scan_catches_a_bare_import_and_accepts_each_reason() -> None:
    bare = "def f():\n    import json\n    return json\n"
    assert function_import_reasons(bare) == ([None], [2])
    given = (
        "def f():\n    import rerun  # optional: rerun\n"
        "    # heavy: mujoco\n    from sim_adapters.mujoco import (\n        scene,\n    )\n"
        "    from pear_agent.x import y  # noqa: F401  # cycle: pear_agent.x\n"
    )
    assert function_import_reasons(given) == (["optional", "heavy", "cycle"], [])
    assert function_import_reasons("import json\n\n\ndef f():\n    return json\n") == ([], [])
    # a reason word outside the vocabulary is no reason
    assert function_import_reasons("def f():\n    import json  # lazy: json\n")[1] == [2]


def test_no_module_level_getattr() -> None:
    offenders = [
        str(path.relative_to(REPO))
        for path in _sources()
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
    ]
    assert offenders == [], f"module-level __getattr__ (make the table a function): {offenders}"


def _imported_modules(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


def test_the_loop_builds_no_environment() -> None:
    builders = (
        "pear_agent.loop.arm_environment",
        "pear_agent.loop.registry",
        "pear_agent.loop.arm_family",
        "sim_adapters",
    )
    mods = _imported_modules(REPO / "pear_agent" / "loop" / "episode.py")
    assert not [m for m in mods if m.startswith(builders)], sorted(mods)
    tree = ast.parse((REPO / "pear_agent" / "loop" / "episode.py").read_text(encoding="utf-8"))
    (episode,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Episode"]
    constructors = [
        f.name
        for f in episode.body
        if isinstance(f, ast.FunctionDef)
        and any(isinstance(d, ast.Name) and d.id == "classmethod" for d in f.decorator_list)
    ]
    assert constructors == [], f"Episode has one constructor, not also {constructors}"
    assert "__new__" not in (REPO / "pear_agent" / "loop" / "episode.py").read_text(encoding="utf-8")


def _module_file(dotted: str) -> Path | None:
    base = REPO.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _defines(path: Path, name: str) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == name:
            return True
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
        if isinstance(node, ast.Import | ast.ImportFrom) and name in {
            a.asname or a.name.split(".")[0] for a in node.names
        }:
            return True
    return False


NOT_MODULES = {"pear_agent.families": "the entry point group families register under (registry.py)"}


def dangling_names(docstring: str) -> list[str]:
    """Dotted names of this repository's modules in `docstring` (`pear_agent.x`, `pear_agent.x.Name`)
    whose module does not exist or does not define the name that follows it."""
    bad = []
    for dotted in re.findall(r"\b((?:pear_agent|sim_adapters)(?:\.\w+)+)", docstring):
        if dotted in NOT_MODULES:
            continue
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            found = _module_file(".".join(parts[:i]))
            if found is not None:
                break
        if i < len(parts) and not _defines(found, parts[i]):  # type: ignore[arg-type]
            bad.append(dotted)
    return bad


def test_docstrings_name_modules_that_exist() -> None:
    offenders = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node) or ""
                offenders += [f"{path.relative_to(REPO)}: {d}" for d in dangling_names(doc)]
    assert offenders == [], offenders
    assert dangling_names("runs in `pear_agent.concurrent`") == ["pear_agent.concurrent"]
    assert dangling_names("see `pear_agent.loop.episode.Nothing`") == ["pear_agent.loop.episode.Nothing"]
    assert dangling_names("`pear_agent.loop.episode.Episode` in `pear_agent.loop.runner`") == []
