"""What an environment and a result are made of, as short fingerprints: the install arguments and the contents of
local requirements (an environment), the matrix's own probe modules, tests and factories, and compat-matrix's own
code (a result, for `--cached`)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Collection, Mapping
from pathlib import Path

from compat_matrix.host import factories
from compat_matrix.host.cells import Cell, install_args, local_requirements
from compat_matrix.host.folders import CELLS_DIR
from compat_matrix.host.spec import MatrixSpec

_SKIP = {".git", ".nox", "__pycache__", "build", "dist", ".venv", ".pytest_cache", ".ruff_cache", ".hypothesis"}
# compat_matrix.cell and .shared need only the standard library, so the cell imports them from here, uninstalled.
PACKAGE = Path(__file__).resolve().parent.parent


def fingerprint(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def tree_key(path: Path, skip: Collection[Path] = ()) -> str:
    """The contents of a local requirement: every file of its code (`local_files`), path and bytes."""
    digest = hashlib.sha256()
    for file in local_files(path, skip):
        digest.update(str(file.relative_to(path)).encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()[:16]


def local_files(path: Path, skip: Collection[Path] = ()) -> list[Path]:
    """The files of a local requirement that make its code: in a git checkout what git tracks or would track (its
    .gitignore honoured), elsewhere every file; never caches, build output, virtual environments, the folders in
    `skip` (this run's reports; a file there, the matrix file itself) or other compat-matrix reports folders (their
    reports and lock change every run)."""
    listed = _git_files(path)
    if listed is None:
        listed = [Path(top) / name for top, dirs, names in os.walk(path) for name in names]
    kept: dict[Path, bool] = {Path(folder).resolve(): False for folder in skip}
    files = set(kept)
    return sorted(
        f
        for f in listed
        if _kept_folder(f.parent, path, kept) and f.is_file() and not f.is_symlink() and f.resolve() not in files
    )


def _git_files(path: Path) -> list[Path] | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(path), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return [path / name for name in done.stdout.decode("utf-8", "surrogateescape").split("\0") if name]


def _kept_folder(folder: Path, root: Path, kept: dict[Path, bool]) -> bool:
    """Whether files in `folder` (below `root`) are code: no folder on the way is a cache, an environment or a
    reports folder."""
    if folder in kept:
        return kept[folder]
    if folder == root or root not in folder.parents:
        kept[folder] = True
        return True
    name = folder.name
    own = not (
        name in _SKIP or name.endswith(".egg-info") or (folder / "pyvenv.cfg").exists() or (folder / CELLS_DIR).is_dir()
    )
    kept[folder] = own and _kept_folder(folder.parent, root, kept)
    return kept[folder]


def environment_key(
    spec: MatrixSpec, cell: Cell, reports: Path | None = None, pins: Mapping[str, str] | None = None
) -> str:
    """What the environment must hold: the install arguments (ranged values pinned as `pins` say), and the contents
    of local requirements (installed_key)."""
    return installed_key(spec, install_args(spec, cell, pins), reports)


def installed_key(spec: MatrixSpec, args: list[str], reports: Path | None = None) -> str:
    """What an environment installed with `args` holds: the arguments, and the contents of local requirements (less
    the reports folder and the matrix file, when they sit inside one of them: what the file asks for is in the
    arguments)."""
    skip = [*([reports] if reports else []), Path(spec.path)]
    return fingerprint(json.dumps(args), *(tree_key(p, skip) for p in local_requirements(spec)))


def inputs_key(spec: MatrixSpec) -> str:
    """The contents of the matrix's own probe modules, of the tests its subjects name and of the factory modules
    beside the file: an edit to them makes earlier results stale (for `--cached`), as an edit to compat-matrix's
    probes does."""
    paths = [Path(ref) for ref in spec.probes if ref.endswith(".py")]
    paths += [Path(test.partition("::")[0]) for subject in spec.subjects for test in subject.tests]
    refs = [ref for subject in spec.subjects for ref in (subject.factory, subject.inputs) if ref]
    found = [path for ref in refs if (path := factories.beside(spec.path.parent, ref)) is not None]
    paths += [path.parent if path.name == "__init__.py" else path for path in found]  # a package: all of it
    keys = [tree_key(p) if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()[:16] for p in paths if p.exists()]
    return fingerprint(*keys)


def suite_key() -> str:
    """The in-environment code that produced a result: a change to any probe makes earlier results stale."""
    return fingerprint(*(f.read_text(encoding="utf-8") for f in sorted(PACKAGE.rglob("*.py"))))
