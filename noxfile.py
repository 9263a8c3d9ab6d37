"""compat-matrix's front door.

    nox -s matrix                                   every matrix/*.toml: all cells, then the reports
    COMPAT_MATRIX=path/to/file.toml nox -s matrix   just that file
    nox -s "cell:<matrix>:transformers=5.x:torch=2.13.0"   one cell (what CI shards on); `nox -l` lists them
    nox -s tests | lint | selfcheck

Thin on purpose: the matrix files are read with compat_matrix.spec, each cell becomes a session that calls
compat_matrix.envs.run_cell, and `matrix` hands the result files to the `compat-matrix report` command.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "src"))

from compat_matrix import cells, envs, spec  # noqa: E402

nox.options.default_venv_backend = "uv"
nox.options.reuse_venv = "yes"
LANES = os.cpu_count() or 1  # cells run side by side, one per core
os.environ.update(envs.uv_environment(os.environ))

REPORTS = Path(os.environ.get("COMPAT_MATRIX_REPORTS", ROOT / "reports")).resolve()
FILES = spec.matrix_files(os.environ.get("COMPAT_MATRIX"), ROOT / "matrix")
# A bad file runs nothing: `matrix` still runs, and the report command says what is wrong (exit code 2).
SPECS, PROBLEMS = spec.load_all(FILES)
CELLS = [(matrix_spec, cell) for matrix_spec in SPECS for cell in cells.cells(matrix_spec)] if not PROBLEMS else []
# The probes against the broken overrides that ship with them; its reports stay out of reports/.
SELFCHECK = spec.load(ROOT / "tests" / "broken_overrides" / "selfcheck.toml")
SELFCHECK_REPORTS = ROOT / "build" / "selfcheck"
SELFCHECK_CELLS = [(SELFCHECK, cell) for cell in cells.cells(SELFCHECK)]


def cell_session(matrix_spec: spec.MatrixSpec, cell: cells.Cell, reports: Path) -> None:
    def run(session: nox.Session) -> None:
        python = Path(session.bin) / "python"
        cached = os.environ.get("COMPAT_MATRIX_CACHED") == "1"
        envs.run_cell(matrix_spec, cell, python, reports, log=session.log, cached=cached)

    def unavailable(session: nox.Session) -> None:
        envs.write_unavailable(matrix_spec, cell, reports)
        session.log(f"{cell.id}: {envs.NO_INTERPRETER}: python {cell.python}")

    if cell.python and not envs.python_available(cell.python):
        return nox.session(name=cell.id, python=False, default=False, allow_parallel=True)(unavailable)
    return nox.session(name=cell.id, python=cell.python, default=False, allow_parallel=True)(run)


for matrix_spec, cell in CELLS:
    cell_session(matrix_spec, cell, REPORTS)
for matrix_spec, cell in SELFCHECK_CELLS:
    if matrix_spec.name not in {s.name for s in SPECS}:
        cell_session(matrix_spec, cell, SELFCHECK_REPORTS)


def run_cells_then_report(session: nox.Session, ids: list[str], reports: Path, files: list[Path]) -> None:
    """Run the cells in parallel (a nested nox, so one cell never stops another), then the report command, and
    end nox with the report's exit code: 0 ok, 1 expectation unmet, 2 bad matrix file, 3 a cell could not run.
    An interrupt (Ctrl-C, SIGTERM) stops the cells; the report is still written, unfinished cells `not run`."""
    install_project(session)
    cached = "--cached" in session.posargs  # reuse results whose fingerprint is unchanged
    options = [arg for arg in session.posargs if arg != "--cached"]
    interrupted = False
    with envs.run_lock(reports, log=session.log):
        # Started first, so that its imports (pandas) overlap the cells; it reads the results once told to.
        command = [Path(session.bin) / "compat-matrix", "report", "--wait", "--reports", reports, *files, *options]
        report = subprocess.Popen(command, stdin=subprocess.PIPE, text=True)
        try:
            if ids:
                nested = [sys.executable, "-m", "nox", "-f", __file__, "--parallel", str(LANES), "-s", *ids]
                env = {**os.environ, "COMPAT_MATRIX_CACHED": "1" if cached else "0"}
                interrupted = envs.run_interruptibly(nested, env)
        finally:
            report.communicate("go\n")
    if interrupted or report.returncode:
        sys.exit(130 if interrupted else report.returncode)


def install_project(session: nox.Session) -> None:
    """compat-matrix itself, for the report command; only when its code changed since the last install."""
    key = envs.fingerprint(envs.tree_key(ROOT / "src"), (ROOT / "pyproject.toml").read_text())
    stamp = Path(session.virtualenv.location) / envs.STAMP
    if not (stamp.exists() and stamp.read_text() == key):
        session.install(str(ROOT))
        stamp.write_text(key)


@nox.session
def matrix(session: nox.Session) -> None:
    """Run every cell of the matrix files, then write reports/<name>.md and .json."""
    run_cells_then_report(session, [cell.id for _, cell in CELLS], REPORTS, FILES)


@nox.session
def selfcheck(session: nox.Session) -> None:
    """Every probe against its broken overrides; fails unless each is reported as `differs` on every version."""
    run_cells_then_report(session, [cell.id for _, cell in SELFCHECK_CELLS], SELFCHECK_REPORTS, [SELFCHECK.path])


@nox.session
def tests(session: nox.Session) -> None:
    """Unit tests and integration tests that build real cells."""
    session.install("-e", f"{ROOT}[test]")
    session.run("pytest", *(session.posargs or ["-q"]))


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
