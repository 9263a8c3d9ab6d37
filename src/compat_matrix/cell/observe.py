"""One probe call on one variant, observed: its values, the exception that stopped it, the warnings it raised
(Python's and logged ones), and which audited methods ran on the subject. Runs in a variant's
child.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import random
import signal
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from compat_matrix.cell import tracing
from compat_matrix.cell.factory import SEED, seed_torch
from compat_matrix.cell.probes import ERROR, INCONCLUSIVE, LINES, REACHED, WARNINGS, Inconclusive, Probe, Values
from compat_matrix.cell.probes.common import jsonable, stable_text
from compat_matrix.shared.limits import DEFAULT_TIMEOUT
from compat_matrix.shared.results import describe_exception, one_line

BUILDS_ON = "transformers"


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


def forget_once() -> None:
    """Empty the caches behind transformers' `logger.warning_once` (and any other `*_once`): what one probe
    logged first must not silence the same message in another, whichever ran first in a variant."""
    for name in dir(logging.Logger):
        clear = getattr(getattr(logging.Logger, name), "cache_clear", None)
        if name.endswith("_once") and callable(clear):
            clear()


@contextlib.contextmanager
def logged_warnings() -> Iterator[set[str]]:
    """Warnings and errors logged while the block runs: transformers' own logger (`logger.warning`,
    `warning_once`, each message as if for the first time), which does not propagate, and every logger that
    reaches the root."""
    forget_once()
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


def reseed(seed: int = SEED) -> None:
    """Every random generator a probe may draw from, as at the start of every probe call: a variant that ran other
    probes before this one (the per-name variants run only some) starts it from the same state as the others."""
    random.seed(seed)
    if "torch" in sys.modules:
        seed_torch(seed)
    if "numpy.random" in sys.modules:
        sys.modules["numpy.random"].seed(seed)


def call_probe(
    probe: Probe,
    build: Callable[[], Any],
    timeout: float = DEFAULT_TIMEOUT,
    watched: tracing.Watched | None = None,
    lines: bool = False,
) -> Values:
    """Run one probe on one variant. Exceptions and warnings (Python's and logged ones) become observations, and
    so do the audited methods whose code ran on the subject (`reached`, of the names in `watched`) and, with
    `lines`, which statements of their code ran (`lines`). Raises ProbeTimeout."""
    with (
        warnings.catch_warnings(record=True) as caught,
        logged_warnings() as logged,
        tracing.reached(watched or {}, getattr(build, "cls", None), _static(build, watched or {})) as seen,
        tracing.statements(watched or {}) if lines else contextlib.nullcontext() as ran,
    ):
        warnings.simplefilter("always")
        reseed()
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
    if lines and watched:
        values[LINES] = ran
    return {name: jsonable(value) for name, value in values.items()}


def _static(build: Any, watched: tracing.Watched) -> frozenset[str]:
    """The watched names that are staticmethods on the variant: their calls have no `self` to check."""
    cls = getattr(build, "cls", None)
    return (
        frozenset(n for n in watched if isinstance(inspect.getattr_static(cls, n, None), staticmethod))
        if cls
        else frozenset()
    )
