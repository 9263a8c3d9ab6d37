"""Children forked from a cell's process after its imports: each does one piece of work (a subject, a variant,
a run of the user's tests) and answers in JSON; a child that dies or hangs is labelled, not fatal.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compat_matrix.shared.results import CRASHED, OK, TIMED_OUT, describe_exception

PR_SET_PDEATHSIG = 1  # prctl(2)
WATCHDOG_GRACE = 10.0  # seconds past the timeout before a parent kills a child the alarm did not stop
MOST_AT_ONCE = 2  # children of one process at once: a variant beside another, and no more
STOPPED = "stopped"  # a child stopped because one before it failed


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
    (answer,) = forked_each([(work, progress, starting)], progress, limit)
    return answer


def forked_each(
    works: list[tuple[Callable[[], Any], Path, str]], progress: Path, limit: float, stop: bool = True
) -> list[Forked]:
    """Each work in a child of its own, as in `forked`, up to `_at_once()` at a time; the answers in the works'
    order. Each work names its calls in a progress file of its own (its `starting` text until then); this process
    copies them into `progress`, so that whoever watches this process sees its children advance. With `stop`, once
    a child crashes or hangs, the ones after it are stopped (killed, or never started): their answer is STOPPED.
    The ones before it run on, so the first failure in the works' order is the one a run one at a time would meet.
    Without it, every work runs whatever the others do."""
    at_once = _at_once()
    answers: dict[int, Forked] = {}
    waiting, running = list(enumerate(works)), {}
    shown: dict[int, str] = {}
    cut = len(works)  # the children after this one are stopped: it failed
    with tempfile.TemporaryDirectory(prefix="compat-matrix-") as tmp:
        try:
            while running or (waiting and waiting[0][0] < cut):
                while waiting and waiting[0][0] < cut and len(running) < at_once:
                    index, (work, own, starting) = waiting.pop(0)
                    own.write_text(starting)
                    running[index] = (_start(work, Path(tmp, str(index))), own)
                for index, (pid, own) in list(running.items()):
                    ended = _ended(pid, own, limit) if index < cut else _kill(pid)
                    if ended is not None:
                        del running[index]
                        if index < cut:
                            answers[index] = _answer(*ended, own.read_text(), Path(tmp, str(index)), limit)
                            cut = index if stop and answers[index].status != OK else cut
                    elif own != progress and (text := own.read_text()) != shown.get(index):
                        shown[index] = text
                        progress.write_text(text)
                if running:
                    _wait_any([pid for pid, _ in running.values()], 0.05)
        finally:
            for pid, _ in running.values():  # this process is being interrupted
                _kill(pid)
    stopped = Forked(STOPPED, reason="stopped: a child before it failed")
    return [answers.get(index, stopped) for index in range(len(works))]


def _at_once() -> int:
    """How many children may run at once: two where two cores are free for them, as each child's torch uses
    OMP_NUM_THREADS threads (cells set 1); one where that is not set, as torch then uses every core in each child.
    No more than two, because each cell is one of as many lanes as there are cores."""
    try:
        threads = int(os.environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(MOST_AT_ONCE, cores // threads)) if threads > 0 else 1


def _wait_any(pids: list[int], seconds: float) -> None:
    """Until one of the children `pids` ends, or `seconds` pass: at once where the kernel hands out process file
    descriptors (Linux 5.3), else after `seconds`. Polling alone would add up to `seconds` to every batch of
    variants, which waits for its last child."""
    fds: list[int] = []
    try:
        for pid in pids:
            fds.append(os.pidfd_open(pid))
        waiting = select.poll()  # not select.select: that refuses descriptors from 1024 on
        for fd in fds:
            waiting.register(fd, select.POLLIN)
        waiting.poll(seconds * 1000)
    except (AttributeError, OSError):  # no pidfd_open here
        time.sleep(seconds)
    finally:
        for fd in fds:
            os.close(fd)


def _start(work: Callable[[], Any], folder: Path) -> int:
    """Fork a child that runs `work` and leaves its answer (or its exception) in `folder`; returns its pid."""
    folder.mkdir()
    pid = os.fork()
    if pid == 0:  # the child: run, write, leave without running the parent's cleanup
        die_with_parent()
        code = 1
        try:
            (folder / "answer.json").write_text(json.dumps(work()))
            code = 0
        except BaseException as exc:
            (folder / "error.txt").write_text(describe_exception(exc))
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return pid


def _ended(pid: int, progress: Path, limit: float) -> tuple[int, bool] | None:
    """(status, killed) once the child has ended, killed if its current call has taken `limit` seconds; None
    while it runs."""
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        return status, False
    if time.time() - progress.stat().st_mtime > limit:
        return _kill(pid)
    return None


def _kill(pid: int) -> tuple[int, bool]:
    """Kill a child and reap it: (status, killed)."""
    os.kill(pid, signal.SIGKILL)
    return os.waitpid(pid, 0)[1], True


def _answer(status: int, killed: bool, where: str, folder: Path, limit: float) -> Forked:
    out, error = folder / "answer.json", folder / "error.txt"
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


def die_with_parent() -> None:
    """Ask Linux to kill this process when its parent dies, so that nothing outlives an interrupted run."""
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the cell's own limit still stops the run
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
