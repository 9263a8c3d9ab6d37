"""The in-environment side: one interpreter per cell runs every probe on both variants of every subject.

    python -m compat_matrix.runner REQUEST.json RESULT.json

Imports torch and transformers once, then runs each subject in a child forked from that process: it builds both
variant classes and calls each probe that exercises one of its audited methods, once per variant, on a fresh
instance. An exception or a warning inside a probe is an observation, not a failure of the cell; a subject that
crashes or hangs is labelled and costs only its own result. Writes the cell result atomically.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.metadata
import json
import os
import platform
import signal
import sys
import tempfile
import time
import types
import warnings
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from compat_matrix.factory import load_callable, resolve_factory
from compat_matrix.probes import Probe, Values, probes_for, registry
from compat_matrix.results import (
    CRASHED,
    TIMED_OUT,
    CellResult,
    Observation,
    SubjectResult,
    describe_exception,
    one_line,
    write_json_atomic,
)
from compat_matrix.variants import BASE, OVERRIDE, VariantError, variant_classes

BUILDS_ON = "transformers"
DEFAULT_TIMEOUT = 300.0  # seconds per probe call, as in compat_matrix.spec
WATCHDOG_GRACE = 10.0  # seconds past the timeout before the parent kills a subject the alarm did not stop
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


def call_probe(probe: Probe, build: Callable[[], Any], timeout: float = DEFAULT_TIMEOUT) -> Values:
    """Run one probe on one variant; exceptions and warnings become observations. Raises ProbeTimeout."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with time_limit(timeout):
                values = dict(probe.func(build))
        except ProbeTimeout:
            raise
        except Exception as exc:
            values = {"error": describe_exception(exc)}
    texts = sorted({f"{w.category.__name__}: {one_line(str(w.message))}" for w in caught})
    if texts:
        values["warnings"] = texts
    return values


def pair(probe: str, values: dict[str, Values]) -> list[Observation]:
    """Observations of both variants, matched by name; a name one variant lacks reads None there."""
    names = list(dict.fromkeys([*values[OVERRIDE], *values[BASE]]))
    return [Observation(probe, name, values[OVERRIDE].get(name), values[BASE].get(name)) for name in names]


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


def run_subject(
    target: str,
    methods: tuple[str, ...],
    factory_ref: str | None,
    timeout: float = DEFAULT_TIMEOUT,
    on_call: Callable[[str], None] = lambda where: None,
) -> SubjectResult:
    """Every probe that exercises one of `methods`, on both variants; `on_call` hears which call starts next."""
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
        variants = variant_classes(cls, methods)
    except VariantError as exc:
        return replace(failed, status="bad-subject", reason=str(exc))
    probes = probes_for(methods)
    observations: list[Observation] = []
    done = replace(failed, probes=tuple(p.name for p in probes))
    for probe in probes:
        values = {}
        for variant, klass in variants.items():
            on_call(f"{probe.name} ({variant})")
            try:
                values[variant] = call_probe(probe, lambda klass=klass: factory(klass), timeout)
            except ProbeTimeout as exc:
                why = f"{probe.name} ({variant}): {exc}"
                return replace(done, status=TIMED_OUT, reason=why, observations=tuple(observations))
        observations += pair(probe.name, values)
    return replace(done, observations=tuple(observations))


def run_isolated(target: str, methods: tuple[str, ...], factory_ref: str | None, timeout: float) -> SubjectResult:
    """`run_subject` in a forked child: torch and transformers are already imported, so the child starts at once,
    and a subject that aborts, segfaults or hangs past the timeout costs only its own result.

    The child names each probe call in a progress file before making it; the parent kills a child whose current
    call has run `timeout + WATCHDOG_GRACE` seconds (a hang that the in-child alarm cannot interrupt)."""
    with tempfile.TemporaryDirectory(prefix="compat-matrix-") as tmp:
        progress, out = Path(tmp, "progress"), Path(tmp, "result.json")
        progress.write_text("starting")
        pid = os.fork()
        if pid == 0:  # the child: run, write, leave without running the parent's cleanup
            die_with_parent()
            code = 1
            try:
                result = run_subject(target, methods, factory_ref, timeout, on_call=progress.write_text)
                out.write_text(json.dumps(result.to_json()))
                code = 0
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        status, killed = _wait(pid, progress, timeout + WATCHDOG_GRACE)
        where = progress.read_text()
        failed = SubjectResult(target=target, methods=methods)
        if killed:
            return replace(failed, status=TIMED_OUT, reason=f"{where}: no answer after {timeout + WATCHDOG_GRACE:g}s")
        if os.WIFSIGNALED(status):
            name = signal.Signals(os.WTERMSIG(status)).name
            return replace(failed, status=CRASHED, reason=f"{where}: killed by {name}")
        if os.WEXITSTATUS(status) != 0 or not out.exists():
            return replace(failed, status=CRASHED, reason=f"{where}: exited with code {os.WEXITSTATUS(status)}")
        return SubjectResult.from_json(json.loads(out.read_text()))


def _wait(pid: int, progress: Path, limit: float) -> tuple[int, bool]:
    """Wait for the child; kill it once its current call has taken `limit` seconds. Returns (status, killed)."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status, False
        if time.time() - progress.stat().st_mtime > limit:
            os.kill(pid, signal.SIGKILL)
            return os.waitpid(pid, 0)[1], True
        time.sleep(0.1)


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
