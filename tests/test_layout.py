"""The layout stays readable: every module has its line in the README's Layout table, and no module grows past 500
lines (one idea per module)."""

from __future__ import annotations

import re

from conftest import ROOT

PACKAGE = ROOT / "src" / "compat_matrix"
LIMIT = 500  # lines of one module


def modules() -> list[str]:
    return sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_module_has_its_line_in_the_readme_layout():
    """A row names a module by its path (`host/plan.py`), or a package by its folder and, in the same row, each of its
    modules by name (`cell/probes/` … `checkpointing`, `generic`); a package's `__init__` goes with its folder."""
    layout = (ROOT / "README.md").read_text(encoding="utf-8").split("### Layout", 1)[1].split("\n## ", 1)[0]
    rows = [set(re.findall(r"`([\w/.]+)`", row)) for row in layout.splitlines() if row.startswith("| `")]

    def named(module: str) -> bool:
        folder, _, file = module.rpartition("/")
        stem = file.removesuffix(".py")
        return any(module in row or (f"{folder}/" in row and (stem in row or stem == "__init__")) for row in rows)

    assert [m for m in modules() if not named(m)] == []


def test_no_module_is_over_500_lines():
    long = {m: n for m in modules() if (n := len((PACKAGE / m).read_text(encoding="utf-8").splitlines())) > LIMIT}
    assert long == {}


def test_the_benchmark_scripts_import_what_they_name():
    """benchmarks/ is run by hand, not by the tests: a module moved or renamed under it must still fail here. Each
    script is imported (its `main` not run), and every `module.name` it reads from compat_matrix exists."""
    import ast
    import importlib
    import importlib.util

    for script in sorted((ROOT / "benchmarks").glob("*.py")):
        tree = ast.parse(script.read_text(encoding="utf-8"))
        imported = {
            alias.asname or alias.name: f"{node.module}.{alias.name}"
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("compat_matrix")
            for alias in node.names
        }
        spec = importlib.util.spec_from_file_location(f"bench_{script.stem}", script)
        spec.loader.exec_module(importlib.util.module_from_spec(spec))  # its imports resolve
        missing = [
            f"{script.name}:{node.lineno} {imported[node.value.id]}.{node.attr}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in imported
            and importlib.util.find_spec(imported[node.value.id]) is not None
            and not hasattr(importlib.import_module(imported[node.value.id]), node.attr)
        ]
        assert missing == []
