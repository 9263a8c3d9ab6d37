"""The observation names each probe of a run can make, read from the probes' source (the dict displays its own
`return`s hold): what `--observation` is checked against before anything runs."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from compat_matrix.shared.vocabulary import ObservationName


def probe_names(modules: Sequence[str]) -> dict[str, frozenset[str] | None] | None:
    """The probes a matrix's cells run (the built-in ones, and those of its probe `modules`), each with the
    observation names it can make (None: names it makes up as it runs); None when a probe module named by its module
    name hides which probes it registers."""
    from compat_matrix.probes import registry

    found: dict[str, frozenset[str] | None] = {name: _returned(p.func) for name, p in registry().items()}
    for ref in modules:
        if not ref.endswith(".py"):
            return None
        try:
            tree = ast.parse(Path(ref).read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            return None  # the cell will say what is wrong with it
        found[Path(ref).name] = None  # a module that fails to import is an observation named after it
        found |= {node.name: _names(node) for node in ast.walk(tree) if _registers(node)}
    return found


def _registers(node: ast.AST) -> bool:
    """Whether `node` is a function decorated with `@probe(...)` (or `@<module>.probe(...)`)."""
    if not isinstance(node, ast.FunctionDef):
        return False
    calls = [d.func for d in node.decorator_list if isinstance(d, ast.Call)]
    return any(getattr(f, "id", None) == "probe" or getattr(f, "attr", None) == "probe" for f in calls)


def _returned(func: Callable[..., Any]) -> frozenset[str] | None:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return None
    node = tree.body[0]
    return _names(node) if isinstance(node, ast.FunctionDef) else None


def _names(function: ast.FunctionDef) -> frozenset[str] | None:
    """The names a probe function returns: the keys of the dict displays in its own `return`s, with the names every
    probe call may add (but `lines`, made on the class as shipped alone: nothing to compare); None when it returns
    anything else (a helper's answer, a dict made as it runs)."""
    names: set[str] = set(ObservationName) - {ObservationName.LINES}
    for node in _own_returns(function):
        keys = node.value.keys if isinstance(node.value, ast.Dict) else [None]
        if not all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in keys):
            return None
        names |= {k.value for k in keys}
    return frozenset(names)


def _own_returns(node: ast.AST) -> Iterator[ast.Return]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue  # a nested function's returns are its own
        if isinstance(child, ast.Return):
            yield child
        yield from _own_returns(child)
