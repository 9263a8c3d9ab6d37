"""Matrix files read: one file loaded and parsed into a MatrixSpec, or every problem it has; the files a run reads;
several loaded at once, two with one name refused."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from compat_matrix.host.spec.model import MatrixSpec
from compat_matrix.host.spec.problems import MatrixError
from compat_matrix.host.spec.tables import parse


def load(path: Path) -> MatrixSpec:
    """Read and validate one matrix file; raise MatrixError listing every problem."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MatrixError([f"{path}: no such matrix file"]) from None
    except IsADirectoryError:
        raise MatrixError([f"{path}: a folder, not a matrix file"]) from None
    except UnicodeDecodeError as exc:
        raise MatrixError([f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"]) from None
    except (OSError, ValueError) as exc:
        raise MatrixError([f"{path}: cannot read the matrix file ({type(exc).__name__}: {exc})"]) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MatrixError([f"{path}: invalid TOML: {exc}"]) from None
    return parse(data, path)


def matrix_files(selected: str | None, default_dir: Path) -> list[Path]:
    """The files named by COMPAT_MATRIX (several separated by the path separator), else every *.toml in matrix/."""
    if selected:
        return [Path(p).resolve() for p in selected.split(os.pathsep) if p]
    return sorted(Path(default_dir).glob("*.toml"))


def load_all(paths: list[Path]) -> tuple[list[MatrixSpec], list[str]]:
    """The specs that loaded, and every problem of those that did not, including two files with one name."""
    specs: list[MatrixSpec] = []
    problems: list[str] = []
    for path in paths:
        try:
            specs.append(load(path))
        except MatrixError as exc:
            problems += exc.problems
    names: dict[str, Path] = {}
    for matrix in specs:
        if matrix.name in names:
            problems.append(f"{matrix.path}: matrix.name = {matrix.name!r}: also the name of {names[matrix.name]}")
        names.setdefault(matrix.name, matrix.path)
    if not paths:
        problems.append("no matrix files: add matrix/*.toml or set COMPAT_MATRIX=path/to/file.toml")
    return specs, problems
