"""The two processes, as the imports show them: `shared/` is the standard library alone, `cell/` never reaches the
host or pandas and imports torch and transformers only inside functions, and `host/` reads nothing of the cell but
the probe registry's face (`compat_matrix.probes`)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from conftest import ROOT

PACKAGE = ROOT / "src" / "compat_matrix"
STDLIB = sys.stdlib_module_names | {"__future__"}


def imports(tree: ast.Module) -> list[tuple[str, bool]]:
    """Every module a file imports, and whether the import runs when the module loads (not inside a function)."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            inside |= {id(n) for n in ast.walk(node) if n is not node}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, id(node) not in inside) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.module, id(node) not in inside))
    return found


def refused(side: str, module: str, at_load: bool) -> str | None:
    """Why `side` may not import `module` (None where it may)."""
    top = module.split(".")[0]
    ours = top == "compat_matrix"
    if side == "shared" and not (top in STDLIB or module.startswith("compat_matrix.shared")):
        return "shared/ reads the standard library and itself alone"
    if side == "cell":
        if module.startswith("compat_matrix.host") or top == "pandas":
            return "the cell never reaches the host or pandas"
        if ours and not module.startswith(("compat_matrix.cell", "compat_matrix.shared")):
            return "the cell reads cell/ and shared/ alone"
        if at_load and not ours and top not in STDLIB:
            return "the cell imports what the cell installs inside functions only"
    if side == "host":
        if module.startswith("compat_matrix.cell"):
            return "the host reads the cell only through compat_matrix.probes"
        if top in ("torch", "transformers"):
            return "the host never imports torch or transformers"
    return None


def crossings(package: Path) -> list[str]:
    """`file: import module: why` for every import that crosses the boundary the wrong way."""
    found = []
    for path in sorted(package.rglob("*.py")):
        side = path.relative_to(package).parts[0]
        if side not in ("shared", "cell", "host"):
            continue
        for module, at_load in imports(ast.parse(path.read_text(encoding="utf-8"))):
            why = refused(side, module, at_load)
            if why:
                found.append(f"{path.relative_to(package)}: import {module}: {why}")
    return found


def test_no_import_crosses_the_boundary():
    assert crossings(PACKAGE) == []


def test_every_module_belongs_to_one_side():
    loose = {p.name for p in PACKAGE.glob("*.py")}
    assert loose == {"__init__.py", "__main__.py", "probes.py"}, "a module outside shared/, cell/ and host/"


@pytest.mark.parametrize(
    ("side", "code", "why"),
    [
        ("shared", "import packaging.version\n", "standard library"),
        ("shared", "from compat_matrix.cell import tiny\n", "standard library"),
        ("cell", "from compat_matrix.host import spec\n", "never reaches the host"),
        ("cell", "def f():\n    import pandas\n", "never reaches the host or pandas"),
        ("cell", "import torch\n", "inside functions only"),
        ("cell", "from compat_matrix import probes\n", "cell/ and shared/ alone"),
        ("host", "from compat_matrix.cell.probes import registry\n", "only through compat_matrix.probes"),
        ("host", "def f():\n    import transformers\n", "never imports torch"),
    ],
)
def test_a_wrong_import_is_caught(tmp_path, side, code, why):
    (tmp_path / side).mkdir()
    (tmp_path / side / "wrong.py").write_text(code)
    (found,) = crossings(tmp_path)
    assert found.startswith(f"{side}/wrong.py: import ") and why in found


@pytest.mark.parametrize(
    ("side", "code"),
    [
        ("cell", "def f():\n    import torch\n"),
        ("cell", "from compat_matrix.shared import results\n"),
        ("host", "import pandas\nfrom compat_matrix.probes import registry\n"),
        ("shared", "import json\nfrom compat_matrix.shared.results import Observation\n"),
    ],
)
def test_an_allowed_import_passes(tmp_path, side, code):
    (tmp_path / side).mkdir()
    (tmp_path / side / "fine.py").write_text(code)
    assert crossings(tmp_path) == []
