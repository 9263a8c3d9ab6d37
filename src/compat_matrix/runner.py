"""The in-environment side: one interpreter per cell runs every probe on every variant of every subject.

    python -m compat_matrix.runner REQUEST.json RESULT.json

Imports torch, transformers and what the probes use once. Each subject then runs in a child forked from that
process (it imports the subject, finds its overrides, chooses the probes), and each variant of the subject in a
grandchild forked from that child: as shipped, with the audited methods deleted, and, where those differ and
there are several audited methods, with each one deleted alone. Every variant starts from the same state, so
nothing one variant did first (a lazy import, a warning shown once) can make another look different. An
exception or a warning inside a probe is an observation, not a failure of the cell; a subject that crashes or
hangs is labelled and costs only its own result. Writes the cell result atomically.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib.metadata
import inspect
import json
import logging
import os
import platform
import signal
import sys
import tempfile
import time
import types
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from compat_matrix import tracing, variants
from compat_matrix.factory import Factory, load_callable, resolve_factory
from compat_matrix.probes import (
    ERROR,
    INCONCLUSIVE,
    REACHED,
    WARNINGS,
    Inconclusive,
    Probe,
    Values,
    prewarm,
    probes_for,
    registry,
)
from compat_matrix.probes.common import jsonable, stable_text
from compat_matrix.results import (
    CRASHED,
    OK,
    TIMED_OUT,
    CellResult,
    Observation,
    SubjectResult,
    describe_exception,
    one_line,
    write_json_atomic,
)

BUILDS_ON = "transformers"
DEFAULT_TIMEOUT = 300.0  # seconds per probe call, as in compat_matrix.spec
WATCHDOG_GRACE = 10.0  # seconds past the timeout before a parent kills a child the alarm did not stop
PR_SET_PDEATHSIG = 1  # prctl(2)
METHOD_TYPES = (types.FunctionType, classmethod, staticmethod, property)


class ProbeTimeout(Exception):
    """A probe call ran past the matrix's `timeout`."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise ProbeTimeout in this (main) thread once `seconds` have passed."""

    def expire(signum: int, frame: Any) -> None:
        raise ProbeTimeout(f"probe call exceeded the timeout of {seconds:g}s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class _Collect(logging.Handler):
    def __init__(self, into: set[str]):
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.add(f"{record.name.split('.')[0]} logger: {one_line(record.getMessage())}")


@contextlib.contextmanager
def logged_warnings() -> Iterator[set[str]]:
    """Warnings and errors logged while the block runs: transformers' own logger (`logger.warning`,
    `warning_once`), which does not propagate, and every logger that reaches the root."""
    into: set[str] = set()
    handler = _Collect(into)
    loggers = [logging.getLogger(), logging.getLogger(BUILDS_ON)]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield into
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


def call_probe(
    probe: Probe, build: Callable[[], Any], timeout: float = DEFAULT_TIMEOUT, watched: tracing.Watched | None = None
) -> Values:
    """Run one probe on one variant. Exceptions and warnings (Python's and logged ones) become observations, and
    so do the audited methods whose code ran (`reached`, of the names in `watched`). Raises ProbeTimeout."""
    with (
        warnings.catch_warnings(record=True) as caught,
        logged_warnings() as logged,
        tracing.reached(watched or {}) as seen,
    ):
        warnings.simplefilter("always")
        try:
            with time_limit(timeout):
                values = dict(probe.func(build))
        except ProbeTimeout:
            raise
        except Inconclusive as exc:
            values = {INCONCLUSIVE: one_line(str(exc))}
        except Exception as exc:
            values = {ERROR: describe_exception(exc)}
    texts = {f"{w.category.__name__}: {one_line(str(w.message))}" for w in caught} | logged
    if texts:
        values[WARNINGS] = sorted(stable_text(t) for t in texts)
    if watched:
        values[REACHED] = sorted(seen)
    return {name: jsonable(value) for name, value in values.items()}


def pair(probes: list[Probe], runs: dict[str, dict[str, Values]]) -> list[Observation]:
    """Observations of every probe that every variant completed, matched by name; a name a variant lacks reads
    None there. The variants beyond the first two are the per-method bases."""
    observations = []
    for probe in probes:
        if not all(probe.name in values for values in runs.values()):
            continue
        by_variant = {variant: values[probe.name] for variant, values in runs.items()}
        names = list(dict.fromkeys(name for values in by_variant.values() for name in values))
        for name in names:
            without = tuple(
                (variant.removeprefix(variants.WITHOUT), values.get(name))
                for variant, values in by_variant.items()
                if variant.startswith(variants.WITHOUT)
            )
            observations.append(
                Observation(
                    probe.name,
                    name,
                    by_variant[variants.OVERRIDE].get(name),
                    by_variant[variants.BASE].get(name),
                    probe.carrying(name),
                    without,
                )
            )
    return observations


def discover_overrides(cls: type, package: str = BUILDS_ON) -> list[tuple[str, str, bool]]:
    """Every method `cls` defines itself that a class of `package` after it in the MRO also defines, with that
    class and whether some probe exercises it. Dunder methods (`__init__`) are construction, not behaviour."""
    probed = {m for p in registry().values() for m in p.exercises}
    found = []
    for name, value in vars(cls).items():
        if name.startswith("__") or not isinstance(value, METHOD_TYPES):
            continue
        origin = next((k for k in cls.__mro__[1:] if name in vars(k) and k.__module__.split(".")[0] == package), None)
        if origin is not None:
            found.append((name, f"{origin.__module__}.{origin.__qualname__}", name in probed))
    return found


@dataclass(frozen=True)
class Forked:
    """What a forked child left: its JSON answer, or why there is none (crashed, timed out)."""

    status: str
    answer: Any = None
    reason: str | None = None


def forked(work: Callable[[], Any], progress: Path, limit: float) -> Forked:
    """`work()` in a child forked from this process; its answer must be JSON. The child names each call it starts
    in `progress`; the parent kills a child whose current call has run `limit` seconds (a hang that the in-child
    alarm cannot interrupt). A child that dies or exits without an answer is CRASHED, naming where it was."""
    with tempfile.TemporaryDirectory(prefix="compat-matrix-") as tmp:
        out = Path(tmp, "answer.json")
        pid = os.fork()
        if pid == 0:  # the child: run, write, leave without running the parent's cleanup
            die_with_parent()
            code = 1
            try:
                out.write_text(json.dumps(work()))
                code = 0
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        status, killed = _wait(pid, progress, limit)
        where = progress.read_text()
        if killed:
            return Forked(TIMED_OUT, reason=f"{where}: no answer after {limit:g}s")
        if os.WIFSIGNALED(status):
            return Forked(CRASHED, reason=f"{where}: killed by {signal.Signals(os.WTERMSIG(status)).name}")
        if os.WEXITSTATUS(status) != 0 or not out.exists():
            return Forked(CRASHED, reason=f"{where}: exited with code {os.WEXITSTATUS(status)}")
        return Forked(OK, json.loads(out.read_text()))


def _wait(pid: int, progress: Path, limit: float) -> tuple[int, bool]:
    """Wait for the child; kill it once its current call has taken `limit` seconds. Returns (status, killed)."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status, False
        if time.time() - progress.stat().st_mtime > limit:
            os.kill(pid, signal.SIGKILL)
            return os.waitpid(pid, 0)[1], True
        time.sleep(0.05)


def run_variant(
    cls: type,
    variant: str,
    methods: tuple[str, ...],
    probes: list[Probe],
    factory: Factory,
    timeout: float,
    progress: Path,
) -> dict[str, Any]:
    """In a variant's own child: make the subject class that variant, then every probe on fresh instances."""
    variants.apply(cls, variant, methods)
    watched = {name: tracing.bodies(inspect.getattr_static(cls, name)) for name in methods}
    values: dict[str, Values] = {}
    for probe in probes:
        progress.write_text(f"{probe.name} ({variant})")
        try:
            values[probe.name] = call_probe(probe, lambda: factory(cls), timeout, watched)
        except ProbeTimeout as exc:
            return {"values": values, "timed_out": f"{probe.name} ({variant}): {exc}"}
    return {"values": values, "timed_out": None}


def run_subject(
    target: str, methods: tuple[str, ...], factory_ref: str | None, timeout: float, progress: Path
) -> SubjectResult:
    """Every probe that exercises one of `methods`, on every variant, each variant in its own forked child."""
    failed = SubjectResult(target=target, methods=methods)
    try:
        cls = load_callable(target)
        factory = resolve_factory(factory_ref)
    except Exception as exc:
        return replace(failed, status="import-failed", reason=describe_exception(exc))
    overrides = discover_overrides(cls)
    # No methods in the matrix file: audit every discovered override that some probe covers.
    methods = methods or tuple(name for name, _, probed in overrides if probed)
    failed = replace(failed, methods=methods, overrides=tuple(overrides))
    try:
        variants.check(cls, methods)
    except variants.VariantError as exc:
        return replace(failed, status="bad-subject", reason=str(exc))
    gc.freeze()  # the subject's imports too, before its variants are forked
    probes = probes_for(methods)
    exercised = {m for p in probes for m in p.exercises}
    unprobed = tuple(m for m in methods if m not in exercised)
    done = replace(failed, probes=tuple(p.name for p in probes), unprobed=unprobed)
    runs: dict[str, dict[str, Values]] = {}
    for variant in variants.names(methods, per_method=True) if probes else []:
        if variant.startswith(variants.WITHOUT) and not _differs(pair(probes, runs)):
            break  # the per-method bases only say which override a difference follows

        def work(variant: str = variant) -> dict[str, Any]:
            return run_variant(cls, variant, methods, probes, factory, timeout, progress)

        run = forked(work, progress, timeout + WATCHDOG_GRACE)
        if run.status != OK or run.answer["timed_out"]:
            status, reason = (run.status, run.reason) if run.status != OK else (TIMED_OUT, run.answer["timed_out"])
            return replace(done, status=status, reason=reason, observations=tuple(pair(probes, runs)))
        runs[variant] = run.answer["values"]
    return replace(done, variants=tuple(runs), observations=tuple(pair(probes, runs)))


def _differs(observations: list[Observation]) -> bool:
    return any(o.carries and not o.same for o in observations)


def run_isolated(target: str, methods: tuple[str, ...], factory_ref: str | None, timeout: float) -> SubjectResult:
    """`run_subject` in a forked child: torch and transformers are already imported, so the child starts at once,
    and a subject that aborts, segfaults or hangs costs only its own result. Its variants' children are watched
    by the subject's child; this process steps in only when that child itself stops answering."""
    with tempfile.TemporaryDirectory(prefix="compat-matrix-") as tmp:
        progress = Path(tmp, "progress")
        progress.write_text("starting")
        run = forked(
            lambda: run_subject(target, methods, factory_ref, timeout, progress).to_json(),
            progress,
            timeout + 2 * WATCHDOG_GRACE,
        )
    if run.status != OK:
        return SubjectResult(target=target, methods=methods, status=run.status, reason=run.reason)
    return SubjectResult.from_json(run.answer)


def installed_versions(packages: list[str]) -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in packages:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def die_with_parent() -> None:
    """Ask Linux to kill this process when its parent dies, so that nothing outlives an interrupted run."""
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the cell's own limit still stops the run
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def run(request: dict[str, Any]) -> CellResult:
    die_with_parent()
    start = time.monotonic()
    import torch  # noqa: F401  paid once per cell, before any subject
    import transformers  # noqa: F401

    prewarm()
    # Everything imported so far is permanent: the collections that transformers and accelerate run (once per
    # Trainer step) then skip it, and forked children share its pages instead of copying them.
    gc.freeze()
    timeout = request.get("timeout", DEFAULT_TIMEOUT)
    subjects = tuple(
        run_isolated(s["target"], tuple(s["methods"]), s.get("factory"), timeout) for s in request["subjects"]
    )
    return CellResult(
        matrix=request["matrix"],
        cell=request["cell"],
        requested=request["requested"],
        resolved=installed_versions(request["packages"]),
        subjects=subjects,
        seconds=round(time.monotonic() - start, 2),
    )


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m compat_matrix.runner REQUEST.json RESULT.json", file=sys.stderr)
        return 2
    request = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    result = run(request)
    write_json_atomic(Path(argv[1]), result.to_json())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
