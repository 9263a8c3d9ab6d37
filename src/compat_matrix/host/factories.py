"""Factory modules beside the matrix file: a subject's `factory = "my_factories:make"` imports from
`my_factories.py` in the matrix file's folder (each cell puts that folder on its path, after what it installs).

    beside(folder, ref)      the file of the module `ref` names, where it is beside the matrix file
    missing(folder, ref)     why `ref` cannot be what the file names there (validate), or None
    unplaced(spec)           the factories neither beside the file nor of a requirement's package (warnings)

Host side: the module is read, never imported (it imports torch and the library).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

if TYPE_CHECKING:
    from compat_matrix.host.spec import MatrixSpec


def beside(folder: Path, ref: str) -> Path | None:
    """The file that holds module `ref` ("a.b:make": a/b.py, or a/b/__init__.py) in `folder`, if there is one."""
    parts = ref.partition(":")[0].split(".")
    for path in (folder.joinpath(*parts).with_suffix(".py"), folder.joinpath(*parts, "__init__.py")):
        if path.is_file():
            return path
    return None


def top_level(source: str) -> set[str]:
    """The names a module's own top level binds: functions, classes, assignments and imports."""
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def missing(folder: Path, ref: str) -> str | None:
    """Why the module beside the matrix file cannot give what `ref` names (it does not parse, or binds no such name
    at its top level); None where it can, or where no module of that name is beside the file."""
    path = beside(folder, ref)
    if path is None:
        return None
    name = ref.partition(":")[2].split(".")[0]
    try:
        bound = top_level(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        return f"cannot read {path.name} beside the matrix file ({type(exc).__name__}: {exc})"
    except SyntaxError as exc:
        return f"{path.name} beside the matrix file does not parse (line {exc.lineno}: {exc.msg})"
    if name in bound:
        return None
    defined = sorted(n for n in bound if not n.startswith("_"))
    return f"{path.name} beside the matrix file defines no {name!r}" + (
        f" (it defines {', '.join(defined)})" if defined else ""
    )


def unplaced(spec: MatrixSpec) -> list[str]:
    """A warning per factory or inputs callable whose module is neither beside the matrix file nor of a package a
    requirement names (its name, `-` read as `_`): only the cell can tell whether it imports."""
    installed = set()
    for requirement in (*spec.requirements, *spec.extra_requirements):
        try:
            installed.add(canonicalize_name(Requirement(requirement).name).replace("-", "_"))
        except InvalidRequirement:  # a local path: the name of its package is not known here
            return []
    out = []
    for index, subject in enumerate(spec.subjects):
        for key, ref in (("factory", subject.factory), ("inputs", subject.inputs)):
            top = (ref or "").partition(":")[0].split(".")[0]
            if not ref or beside(spec.path.parent, ref) is not None or top.lower().replace("-", "_") in installed:
                continue
            out.append(
                f"{spec.path}: subjects[{index}].{key} = {ref!r}: no {top}.py beside the matrix file and no "
                f"requirement named {top}; a module of your own goes beside the matrix file"
            )
    return out
