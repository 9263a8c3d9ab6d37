"""Children forked from a cell's process after its imports: each does one piece of work (a subject, a variant,
a run of the user's tests) and answers in JSON; a child that dies or hangs is labelled, not fatal.

Standard library only; runs inside each cell's environment.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compat_matrix.results import CRASHED, OK, TIMED_OUT, describe_exception

PR_SET_PDEATHSIG = 1  # prctl(2)
WATCHDOG_GRACE = 10.0  # seconds past the timeout before a parent kills a child the alarm did not stop


@dataclass(frozen=True)
class Forked:
    """What a forked child left: its JSON answer, or why there is none (crashed, timed out)."""

    status: str
    answer: Any = None
    reason: str | None = None  # "<where>: <what happened>"
    where: str | None = None  # what the child said it was doing last


def forked(work: Callable[[], Any], progress: Path, limit: float, starting: str = "starting") -> Forked:
    """`work()` in a child forked from this process; its answer must be JSON. The child names each call it starts
    in `progress` (`starting` until then); the parent kills a child whose current call has run `limit` seconds (a
    hang that the in-child alarm cannot interrupt). A child that dies, raises or exits without an answer is
    CRASHED, naming where it was and, for an exception, what it was."""
    progress.write_text(starting)
    with tempfile.TemporaryDirectory(prefix="compat-matrix-") as tmp:
        out, error = Path(tmp, "answer.json"), Path(tmp, "error.txt")
        pid = os.fork()
        if pid == 0:  # the child: run, write, leave without running the parent's cleanup
            die_with_parent()
            code = 1
            try:
                out.write_text(json.dumps(work()))
                code = 0
            except BaseException as exc:
                error.write_text(describe_exception(exc))
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        status, killed = _wait(pid, progress, limit)
        where = progress.read_text()
        if killed:
            return Forked(TIMED_OUT, reason=f"{where}: no answer after {limit:g}s", where=where)
        if os.WIFSIGNALED(status):
            name = signal.Signals(os.WTERMSIG(status)).name
            return Forked(CRASHED, reason=f"{where}: killed by {name}", where=where)
        if error.exists():
            return Forked(CRASHED, reason=f"{where}: {error.read_text()}", where=where)
        if os.WEXITSTATUS(status) != 0 or not out.exists():
            return Forked(CRASHED, reason=f"{where}: exited with code {os.WEXITSTATUS(status)}", where=where)
        return Forked(OK, json.loads(out.read_text()), where=where)


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


def die_with_parent() -> None:
    """Ask Linux to kill this process when its parent dies, so that nothing outlives an interrupted run."""
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the cell's own limit still stops the run
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
