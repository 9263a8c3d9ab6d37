"""compat-matrix's front door in this repository.

    nox -s matrix                                   every matrix/*.toml: all cells, then the reports
    COMPAT_MATRIX=path/to/file.toml nox -s matrix   just that file (its reports go to reports/ beside it)
    nox -s "cell:<matrix>:transformers=5.x:torch=2.13.0"   one cell (what CI shards on); `nox -l` lists them
    nox -s tests | unit | lint | selfcheck

Thin on purpose: compat_matrix.host.nox_sessions registers the cells and `matrix`, as it does for the noxfile
packaged with compat-matrix (`compat-matrix run`, from any folder); this file adds the development sessions.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "src"))
# Where PYTHONDONTWRITEBYTECODE is set, this process would compile compat-matrix from source on every run, 0.1 s
# before its first cell starts: it keeps its bytecode where the processes it starts keep theirs (in the envdir's
# nox_sessions.HOST_BYTECODE; the default envdir here, as the folder is named before compat-matrix is imported).
if sys.dont_write_bytecode and sys.pycache_prefix is None:
    sys.dont_write_bytecode, sys.pycache_prefix = False, str(ROOT / ".nox" / "compat-matrix-host-bytecode")

from compat_matrix.host import nox_sessions, plan  # noqa: E402

nox.needs_version = ">=2026.8.10"  # allow_parallel; the same bound as in pyproject.toml

RUN = nox_sessions.planned_run(ROOT, Path(__file__), os.environ)
nox_sessions.register(RUN)
# The probes against the broken overrides that ship with them; its reports stay out of reports/. Planned by the first
# process of a run only: the processes a run starts get their cells from its plan.
SELFCHECK = (
    None
    if RUN.request is None
    else nox_sessions.planned_run(
        ROOT,
        Path(__file__),
        {
            **os.environ,
            plan.FILES_VARIABLE: str(ROOT / "tests" / "broken_overrides" / "selfcheck.toml"),
            plan.REPORTS_VARIABLE: str(ROOT / "build" / "selfcheck"),
        },
    )
)
if SELFCHECK is not None and not SELFCHECK.names & RUN.names:
    nox_sessions.register(SELFCHECK, with_matrix=False)


@nox.session(python=False)
def selfcheck(session: nox.Session) -> None:
    """Every probe against its broken overrides: fails unless each differs where selfcheck.toml expects it, in the
    observations it names (never where the base errored), and the controls stay `same`."""
    nox_sessions.matrix_session(session, SELFCHECK or RUN)


@nox.session
def tests(session: nox.Session) -> None:
    """Unit tests and integration tests that build real cells."""
    session.install("-e", f"{ROOT}[test]")
    session.run("pytest", *(session.posargs or ["-q"]))


@nox.session
def unit(session: nox.Session) -> None:
    """The fast lane: the tests that need no torch, no cell and no registry (under a minute)."""
    session.install("-e", f"{ROOT}[test]")
    session.run("pytest", "-q", "-m", "not integration and not network", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
