"""The code uses other tools only through their public APIs: no `from nox.sessions import _normalize_path`, no
`argparse._SubParsersAction`."""

from __future__ import annotations

import ast

import pytest

from conftest import ROOT

OURS = {"compat_matrix", "conftest", "broken_overrides"}
DOCUMENTED = {"os._exit"}  # public despite the underscore
SOURCES = (ROOT / folder for folder in ("src", "tests", "benchmarks"))
FILES = [*sorted(p for folder in SOURCES for p in folder.rglob("*.py") if "build" not in p.parts), ROOT / "noxfile.py"]


def private_uses(tree: ast.AST) -> list[str]:
    """Private names taken from modules that are not this project's."""
    modules: dict[str, str] = {}  # local name → module
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update({(a.asname or a.name).split(".")[0]: a.name for a in node.names})
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            root = node.module.split(".")[0]
            found += [
                f"from {node.module} import {a.name}" for a in node.names if a.name.startswith("_") and root not in OURS
            ]
            modules.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            module = modules.get(base.id) if isinstance(base, ast.Name) else None
            if module and module.split(".")[0] not in OURS and f"{module}.{node.attr}" not in DOCUMENTED:
                found.append(f"{module}...{node.attr}")
    return found


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_private_apis_of_other_tools(path):
    assert private_uses(ast.parse(path.read_text(encoding="utf-8"))) == []


def test_the_check_finds_them():
    code = "from nox.sessions import _normalize_path\nimport argparse\nargparse._SubParsersAction\n"
    assert private_uses(ast.parse(code)) == ["from nox.sessions import _normalize_path", "argparse..._SubParsersAction"]
