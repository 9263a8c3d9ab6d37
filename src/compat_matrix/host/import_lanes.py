"""Lanes for the imports of warm cells: at most `width` runners importing torch and transformers at once, as the
benchmark's floor does. A runner says through a pipe (shared.request.IMPORTED_FD) when its imports are done, or
ends; then the next cell's runner starts importing while this one runs its probes, on the core that would else wait
for the last cell of a round. Once every cell's runner has started, no import waits for a lane any more, and the
ones still going are what the run waits for: each runner done importing then yields the CPU to them (its process
group, with every subject it forked, at the lowest priority, YIELDED), so that the last cell's import takes what it
takes alone rather than sharing its core with the other cells' probes. The runners must be in this process's
session (their own process group, not their own session): Linux shares the CPU between sessions first
(autogroups), where a priority counts only within each.

    lanes = ImportLanes(width, runners)
    runner = lanes.start(spawn, stopped)    spawn(variables, fds) starts the runner, once a lane is free
    lanes.ended()                           in each cell's thread as its cell ends (one that started no runner: reused,
                                            not installed, interrupted waiting, no longer waits for a lane)
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Mapping
from typing import Protocol, TypeVar

from compat_matrix.shared.request import IMPORTED_FD

STOP_CHECK = 1.0  # seconds between two looks at whether the run still wants the cell, while it waits for a lane
YIELDED = 19  # the niceness of a runner done importing, once no cell waits for a lane


class Runner(Protocol):
    pid: int  # the runner leads a process group of its own


Started = TypeVar("Started", bound=Runner)


class ImportLanes:
    """`width` lanes, each held by one runner from its start to the end of its imports; `runners`: how many will
    start (after the last, those done importing yield to those still importing)."""

    def __init__(self, width: int, runners: int) -> None:
        self._free = threading.BoundedSemaphore(width)
        self._lock = threading.Lock()
        self._left = runners  # runners not started yet
        self._imported: list[int] = []  # process groups of the runners done importing, until none is left to start
        self._mine = threading.local()  # whether this thread's cell started its runner

    def start(
        self,
        spawn: Callable[[Mapping[str, str], tuple[int, ...]], Started],
        stopped: Callable[[], str | None],
    ) -> Started:
        """`spawn(variables, fds)` once a lane is free, with the variable that names the descriptor its runner writes
        to and the descriptor to pass on; KeyboardInterrupt where `stopped()` says why the run no longer wants it."""
        while not self._free.acquire(timeout=STOP_CHECK):
            if why := stopped():
                raise KeyboardInterrupt(why)
        if why := stopped():
            self._free.release()
            raise KeyboardInterrupt(why)
        read, write = os.pipe()
        try:
            started = spawn({IMPORTED_FD: str(write)}, (write,))
        except BaseException:
            os.close(read)
            self._free.release()
            raise
        finally:
            os.close(write)
        self._mine.started = True
        self._one_less()
        threading.Thread(target=self._freed_by, args=(read, started.pid), daemon=True).start()
        return started

    def ended(self) -> None:
        """This thread's cell has ended: where it started no runner, it no longer waits for a lane."""
        if not getattr(self._mine, "started", False):
            self._one_less()
        self._mine.started = False

    def _one_less(self) -> None:
        """One cell fewer waits for a lane: after the last, the runners done importing yield."""
        with self._lock:
            self._left -= 1
            if self._left > 0:
                return
            yielding, self._imported = self._imported, []
        for group in yielding:
            _yield(group)

    def _freed_by(self, read: int, group: int) -> None:
        """Free the lane once the runner writes to `read` (its imports are done) or ends (the pipe closes); the
        runner's process group yields at once where every runner has started, else once the last one has."""
        try:
            os.read(read, 1)
        finally:
            os.close(read)
            self._free.release()
            with self._lock:
                later = self._left > 0
                if later:
                    self._imported.append(group)
            if not later:
                _yield(group)


def _yield(group: int) -> None:
    """Lower the priority of a runner's process group (a runner that has ended: nothing to do)."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PGRP, group, YIELDED)
