"""Lanes for the imports of warm cells: at most `width` runners importing torch and transformers at once, as the
benchmark's floor does. A runner says through a pipe (shared.request.IMPORTED_FD) when its imports are done, or
ends; then the next cell's runner starts importing while this one runs its probes, on the core that would else wait
for the last cell of a round.

    lanes = ImportLanes(width)
    runner = lanes.start(spawn, stopped)    spawn(variables, fds) starts the runner, once a lane is free
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from typing import TypeVar

from compat_matrix.shared.request import IMPORTED_FD

STOP_CHECK = 1.0  # seconds between two looks at whether the run still wants the cell, while it waits for a lane

Started = TypeVar("Started")


class ImportLanes:
    """`width` lanes, each held by one runner from its start to the end of its imports."""

    def __init__(self, width: int) -> None:
        self._free = threading.BoundedSemaphore(width)

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
        threading.Thread(target=self._freed_by, args=(read,), daemon=True).start()
        return started

    def _freed_by(self, read: int) -> None:
        """Free the lane once the runner writes to `read` (its imports are done) or ends (the pipe closes)."""
        try:
            os.read(read, 1)
        finally:
            os.close(read)
            self._free.release()
