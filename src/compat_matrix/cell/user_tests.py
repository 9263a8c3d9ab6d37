"""The user's own pytest tests, run in a child forked per variant (as shipped, base, broken versions): what each
test's outcome is, and which broken versions each catches.

Runs inside a cell's environment, where pytest is installed when a subject names tests. pytest runs with a small
plugin that records every test's outcome the way pytest's own summary counts them: a failure in the test's call is
`failed`, one in setup or teardown is `error`, a skip in setup or call is `skipped`; a test that could not be
collected (an import error, say) is `error` with the collector's message; a test that runs past the timeout is
stopped by an alarm and `failed` with "timed out".
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import types
from pathlib import Path
from typing import Any

from compat_matrix.cell import mutants, variants
from compat_matrix.cell.forks import WATCHDOG_GRACE, Forked, forked
from compat_matrix.shared.results import OK, TestOutcome, one_line

PASSED, FAILED, ERROR, SKIPPED, NOT_RUN = "passed", "failed", "error", "skipped", "not run"
RUNNING = "running the test "  # in the progress file: the test a child that died or hung was running


class TestTimeout(Exception):
    """A user's test ran past the matrix's timeout."""

    __test__ = False  # not a test class, for pytest's collection of modules that import it


def _message(report: Any) -> str:
    """The first line of what went wrong: the crash message, or the last `E` line of a collection error."""
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    if crash is not None:
        return one_line(crash.message)
    text = str(getattr(report, "longrepr", "") or "")
    errors = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
    return one_line(errors[-1] if errors else text)


class Outcomes:
    """A pytest plugin: every test's outcome and first line of failure, by node id; the current test in a file."""

    def __init__(self, progress: Path | None, timeout: float):
        self.progress = progress
        self.timeout = timeout
        self.outcomes: dict[str, tuple[str, str | None]] = {}

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        if self.progress is not None:
            self.progress.write_text(f"{RUNNING}{nodeid}")

    def pytest_runtest_setup(self, item: Any) -> None:
        def expire(signum: int, frame: Any) -> None:
            raise TestTimeout(f"timed out after {self.timeout:g}s")

        signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, self.timeout)

    def pytest_runtest_teardown(self, item: Any, nextitem: Any) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)

    def pytest_runtest_logreport(self, report: Any) -> None:
        known = self.outcomes.get(report.nodeid)
        if report.failed:
            outcome = FAILED if report.when == "call" else ERROR
            if known is None or known[0] in (PASSED, SKIPPED):
                self.outcomes[report.nodeid] = (outcome, _message(report))
        elif report.skipped and known is None:
            self.outcomes[report.nodeid] = (SKIPPED, _message(report))
        elif report.passed and report.when == "call" and known is None:
            self.outcomes[report.nodeid] = (PASSED, None)

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self.outcomes[report.nodeid] = (ERROR, _message(report))


def run_tests(
    nodeids: list[str], rootdir: str, timeout: float, progress: Path | None = None
) -> dict[str, tuple[str, str | None]]:
    """Run the named tests (node ids or paths) with pytest in this process, node ids relative to `rootdir`; every
    test's (outcome, message). pytest's own output is swallowed: the outcomes are the answer."""
    import pytest

    plugin = Outcomes(progress, timeout)
    options = ["-p", "no:cacheprovider", "-q", "--no-header", "-o", "addopts=", f"--rootdir={rootdir}"]
    options.append("--continue-on-collection-errors")  # a module that cannot be imported costs only its own tests
    arguments = [*nodeids, *options]
    said = io.StringIO()
    with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
        code = pytest.main(arguments, plugins=[plugin])
    if plugin.outcomes:
        return plugin.outcomes
    # Nothing ran at all: a node id that does not exist, a conftest that cannot be imported, pytest.exit()
    lines = [line.strip() for line in said.getvalue().splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("ERROR", "E "))]
    why = one_line((errors or lines or [f"pytest exited with {code!r}"])[-1])
    return dict.fromkeys(requested(nodeids, rootdir), (ERROR, why))


def requested(nodeids: list[str], rootdir: str) -> list[str]:
    """The node ids as pytest names them: relative to `rootdir`."""
    named = []
    for nodeid in nodeids:
        path, sep, rest = nodeid.partition("::")
        named.append(os.path.relpath(path, rootdir) + sep + rest if os.path.isabs(path) else nodeid)
    return named


def run_user_tests(
    cls: type, methods: tuple[str, ...], tests: list[str], rootdir: str, timeout: float, progress: Path, broken: bool
) -> tuple[tuple[TestOutcome, ...], tuple[str, ...]]:
    """The user's tests, once per variant, each in its own forked child (pytest imported once, before): as
    shipped, with the audited methods deleted and, with `broken`, with each broken version of each audited method
    (a plain function) in its place. The tests and the broken versions they ran against."""
    broken_versions = mutants.variant_names(tuple(m for m in methods if _plain(cls, m))) if broken else []
    outcomes: dict[str, dict[str, tuple[str, str | None]]] = {}
    for variant in [variants.OVERRIDE, variants.BASE, *broken_versions]:

        def work(variant: str = variant) -> dict[str, tuple[str, str | None]]:
            variants.apply(cls, variant, methods)
            return run_tests(tests, rootdir, timeout, progress)

        run = forked(work, progress, timeout + WATCHDOG_GRACE, f"collecting the tests ({variant})")
        answer = {k: tuple(v) for k, v in run.answer.items()} if run.status == OK else _stopped(run, tests, rootdir)
        outcomes[variant] = answer
    ids = list(dict.fromkeys(i for found in outcomes.values() for i in found if i))
    ran = tuple(v.removeprefix(mutants.PREFIX) for v in broken_versions)
    return tuple(_outcome(i, outcomes, broken_versions) for i in ids), ran


def _plain(cls: type, method: str) -> bool:
    """Whether the base implementation of `method` is a plain function, which a broken version can stand in for."""
    base = variants.base_of(cls, method)  # None where the release orphaned it
    return base is not None and isinstance(vars(base).get(method), types.FunctionType)


def _stopped(run: Forked, tests: list[str], rootdir: str) -> dict[str, tuple[str, str | None]]:
    """When a variant's child died or hung: the test it was running is an error naming why (the rest: not run);
    outside any test (collecting, importing), every requested test is."""
    where, reason = run.where or "", run.reason or ""
    if where.startswith(RUNNING):
        return {where.removeprefix(RUNNING): (ERROR, f"{run.status}: {reason.removeprefix(where + ': ')}")}
    return dict.fromkeys(requested(tests, rootdir), (ERROR, f"{run.status}: {reason}"))


def _outcome(test: str, outcomes: dict[str, dict[str, tuple[str, str | None]]], broken: list[str]) -> TestOutcome:
    def of(variant: str) -> tuple[str, str | None]:
        return outcomes[variant].get(test, (NOT_RUN, None))

    passed = of(variants.OVERRIDE)[0] == PASSED
    catches = tuple(v.removeprefix(mutants.PREFIX) for v in broken if passed and of(v)[0] in (FAILED, ERROR))
    failures = tuple(
        (v.removeprefix(mutants.PREFIX), message) for v in outcomes if (message := of(v)[1]) and of(v)[0] != SKIPPED
    )
    return TestOutcome(test, of(variants.OVERRIDE)[0], of(variants.BASE)[0], catches, failures)
