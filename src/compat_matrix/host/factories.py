"""Factory modules beside the matrix file: a subject's `factory = "my_factories:make"` imports from
`my_factories.py` in the matrix file's folder (each cell puts that folder on its path, after what it installs).

    beside(folder, ref)      the file of the module `ref` names, where it is beside the matrix file
    missing(folder, ref)     why `ref` cannot be what the file names there (validate), or None
    unplaced(spec)           the factories neither beside the file nor of a requirement's package (warnings)
    template(…, unbuilt)     the starter `init --factory-template` writes: one function per class not built

Host side: the module is read, never imported (it imports torch and the library).
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from compat_matrix.shared.results import Unbuilt

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


def module_name(matrix: str) -> str:
    """The module `init --factory-template` writes beside the matrix file: `<matrix name>_factories`."""
    return re.sub(r"\W", "_", matrix) + "_factories"


def function_name(target: str) -> str:
    """A factory's name for a class: `CrossEncoderTrainer` → `cross_encoder_trainer`."""
    name = target.rsplit(":", 1)[-1].rsplit(".", 1)[-1]
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def template(package: str, found_with: str, unbuilt: Sequence[Unbuilt]) -> str:
    """A starter factory module: one function per class the default factory could not build, each with why as a
    comment and, for a trainer, rows that hold the dataset columns it asked for. Each builds as the default factory
    does until you give it what the class is written for (compat_matrix.cell.factory holds the pieces)."""
    said = (
        f"Factories for the classes of {package} that compat-matrix could not build on its own ({found_with}), "
        "written by `compat-matrix init --factory-template`: fill each in, then name it in the matrix file beside "
        'this (`factory = "<this module>:<function>"` under the class\'s [[subjects]]). Each receives the class to '
        "build (the variant under test: build that class, not the shipped one) and returns a small instance, the "
        "same weights every time. Nothing may be downloaded from a model hub."
    )
    wrapped = textwrap.wrap(said, WIDTH)
    lines = [f'"""{wrapped[0]}', *wrapped[1:-1], f'{wrapped[-1]}"""', ""]
    lines += [
        "from __future__ import annotations",
        "",
        "import torch",
        "",
        "from compat_matrix.cell.factory import SEED, tiny_dataset, tiny_trainer",
    ]
    for item in unbuilt:
        lines += ["", "", *_function(item)]
    return "\n".join(lines) + "\n"


def _function(item: Unbuilt) -> list[str]:
    name = item.target.rsplit(":", 1)[-1]
    why = _said(item.reason).removeprefix(f"could not build {name}: ").removesuffix("; write a factory (see README)")
    lines = [
        f"def {function_name(item.target)}(cls):",
        *_docstring(f"{name}: the default factory could not build it: {why}"),
    ]
    if item.needs:
        lines += _comment(f"It needs {item.needs}, which was not installed: add it to extra_requirements first.")
    if item.kind == "trainer":
        if item.columns:
            after = f"; with them: {_said(item.then)}" if item.then else "; with them it builds"
            asked = ", ".join(item.columns)
            lines += _comment(f"Its dataset needs the columns it asked for, one by one: {asked}{after}")
        columns = ", ".join(f'"{c}": "t{3 + 2 * i} t{4 + 2 * i} t{5 + 2 * i}"' for i, c in enumerate(item.columns))
        lines += [
            "    # Rows of the data it is written for (the tiny tokenizer knows the words t3 … t63):",
            f"    rows = [{{**row, {columns}}} for row in tiny_dataset()]" if columns else "    rows = tiny_dataset()",
            "    model = None  # the model it trains, tiny (None: a tiny causal LM, or of the class its `model` names)",
            "    return tiny_trainer(cls, rows, model)  # arguments for two CPU steps, a tokenizer if it takes one",
        ]
    else:
        lines += [
            "    config = cls.config_class()  # the smallest sizes it builds with: hidden sizes 32, 2 layers, 2 heads",
            "    torch.manual_seed(SEED)  # every variant starts from the same weights",
            "    return cls(config)",
        ]
    return lines


WIDTH = 116  # of a line of the module written


def _docstring(text: str) -> list[str]:
    wrapped = textwrap.wrap(text, WIDTH - 7)
    if len(wrapped) == 1:
        return [f'    """{wrapped[0]}"""']
    return [f'    """{wrapped[0]}', *(f"    {line}" for line in wrapped[1:]), '    """']


def _comment(text: str) -> list[str]:
    return [f"    # {line}" for line in textwrap.wrap(text, WIDTH - 6)]


TRIPLE = '"' * 3


def _said(text: str | None) -> str:
    """An error for a docstring or comment: one line, with no quotes that end the docstring and no escapes."""
    return " ".join(str(text).split()).replace(TRIPLE, "'''").replace("\\", "/")
