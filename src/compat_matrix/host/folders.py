"""The folders a run writes into: a reports folder's own files (a result per cell, the run logs, the run lock) and the
environments' folder, each kept out of `git status` by a .gitignore; where a matrix file's reports go; a cell's
result file, and reading it back."""

from __future__ import annotations

import contextlib
from pathlib import Path

from compat_matrix.host.cells import Cell
from compat_matrix.shared.results import CellResult, ResultFileError, read_cell_result
from compat_matrix.shared.vocabulary import Status

CELLS_DIR = ".cells"  # inside the reports folder: one result file per cell, not committed
LOGS = ".logs"  # inside the reports folder: what changes from run to run (durations), not committed
LOCK = ".lock"  # inside the reports folder: held by the run that writes into it
IGNORED = f"# compat-matrix's own files: a result per cell, run logs, the run lock\n{CELLS_DIR}/\n{LOGS}/\n{LOCK}\n"
ENVIRONMENTS_IGNORED = "# compat-matrix's environments, plans and noxfile\n*\n"  # in the environments' folder


def ignore_housekeeping(folder: Path, text: str = IGNORED) -> None:
    """A `.gitignore` in `folder` (a reports folder, or the environments') that keeps compat-matrix's own files out
    of `git status`, unless the folder has one already."""
    path = Path(folder) / ".gitignore"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError, PermissionError), open(path, "x", encoding="utf-8") as handle:
            handle.write(text)


def result_path(reports: Path, cell: Cell) -> Path:
    return reports / CELLS_DIR / cell.matrix / cell.filename


def read_result(matrix: str, cell: Cell, reports: Path) -> CellResult:
    """The result of a cell of `matrix` in `reports`; a missing or damaged file becomes a result that says so."""
    path = result_path(reports, cell)
    try:
        return read_cell_result(path)
    except ResultFileError as exc:
        status, reason = (Status.NOT_RUN, "no result file") if not path.exists() else (Status.DAMAGED, str(exc))
        return CellResult(matrix, cell.id, cell.requested, status=status, reason=reason)


def reports_folder(matrix_file: Path, home: Path) -> Path:
    """Where a matrix file's reports go unless told otherwise: `home`/reports for the files in `home`/matrix (this
    repository's, or those of the folder `compat-matrix run` started in), else reports/ beside the file."""
    matrix_file, home = Path(matrix_file).resolve(), Path(home).resolve()
    return home / "reports" if matrix_file.parent == home / "matrix" else matrix_file.parent / "reports"
