"""Progress of a run, told by the process that started the cells: one line per finished cell with `k/N` and the
time left, estimated from the durations of earlier runs, and every half minute a line per cell still installing.

nox holds back a parallel session's output until it ends, so a cell tells its state in a small file beside its
result (`state_path`: installing or probing, since when) and this reads those files and the results. The lines of
the cells' nox that only restate a finished cell are left out (`shown`), so each cell is told once.
"""

from __future__ import annotations

import heapq
import json
import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from compat_matrix.host.spec import PYTHON
from compat_matrix.host.verdict import decide
from compat_matrix.shared.results import OK, CellResult, ResultFileError, read_cell_result

STARTED = "started"
INSTALLING = "installing"
PROBING = "probing"
NOTE_EVERY = 30.0  # seconds between two "still installing" lines of one cell


@dataclass(frozen=True)
class State:
    phase: str
    since: float  # when the phase began (wall clock, so that another process can read it)
    started: float  # when the cell began


def line(result: CellResult) -> str:
    """The line of a finished cell: what got installed, how long it took, and the verdict material."""
    versions = ", ".join(f"{k} {v}" for k, v in result.resolved.items() if k != PYTHON)
    subjects = ", ".join(f"{s.target.rsplit(':', 1)[-1]} {decide(s).verdict}" for s in result.subjects)
    parts = [result.cell, result.outcome + (" (reused)" if result.reused else ""), versions, subjects]
    parts += [f"{result.seconds:.1f} s" if result.seconds is not None else "", result.reason or ""]
    return " | ".join(p for p in parts if p)


# The lines of the cells' nox that say again that a cell finished well, which the cell's own line already says:
# a parallel session's banner, its closing line, and nox's summary of the sessions.
_RESTATED = re.compile(
    r"=+ \S+ cell:\S+: success\b"
    r"|nox > Session cell:\S+ was successful"
    r"|nox > Ran \d+ sessions?\b"
    r"|nox > \* cell:\S+: success\b"
)


def shown(output: str) -> bool:
    """Whether a line of the cells' nox is worth passing on: all but those that restate a cell that finished."""
    return not _RESTATED.match(output)


def state_path(result: Path) -> Path:
    return result.with_suffix(".state")


def write_state(result: Path, phase: str, started: float) -> None:
    """Say what the cell is doing now, since when, and since when it runs."""
    path = state_path(result)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"phase": phase, "since": time.time(), "started": started}), encoding="utf-8")


def read_state(result: Path) -> State | None:
    try:
        data = json.loads(state_path(result).read_text(encoding="utf-8"))
        return State(str(data["phase"]), float(data["since"]), float(data["started"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def duration(seconds: float) -> str:
    """`45 s`, `3 min 5 s`, `1 h 2 min`."""
    seconds = round(max(seconds, 0.0))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s" if seconds else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def time_left(running: Sequence[float], queued: Sequence[float], lanes: int) -> float:
    """When the last cell should end: the running cells keep their lanes for what they have left, and each queued
    cell takes the first lane that comes free."""
    free = sorted([*running, *[0.0] * max(lanes - len(running), 0)])
    heapq.heapify(free)
    for seconds in queued:
        heapq.heappush(free, heapq.heappop(free) + seconds)
    return max(free, default=0.0)


@dataclass(frozen=True)
class Tracked:
    cell: str  # the cell's id
    result: Path  # its result file
    expected: float | None  # seconds it took the last time it ran (not reused), if it did


def tracked(cells: Sequence[tuple[str, Path]]) -> list[Tracked]:
    """The cells of a run, each with the duration of its previous result, read before the run replaces it."""
    out = []
    for cell, path in cells:
        try:
            previous = read_cell_result(path)
            seconds = previous.seconds if previous.status == OK and not previous.reused else None
        except ResultFileError:
            seconds = None
        out.append(Tracked(cell, path, seconds))
    return out


class Watcher:
    """Call `tick()` every second or so while the cells run; it emits a line when there is something to say."""

    def __init__(
        self,
        cells: Sequence[Tracked],
        lanes: int,
        emit: Callable[[str], None],
        line: Callable[[CellResult], str],
        clock: Callable[[], float] = time.time,
    ):
        self.cells, self.lanes, self.emit, self.line, self.clock = list(cells), lanes, emit, line, clock
        self.started = clock()
        self.finished: set[str] = set()
        self.durations: list[float] = []  # of the cells that ran in this run
        self.noted: dict[str, float] = {}  # cell → when its last "still installing" line was emitted

    def tick(self) -> None:
        now = self.clock()
        for cell in self.cells:
            if cell.cell in self.finished:
                continue
            result = self._fresh_result(cell)
            if result is not None:
                self.finished.add(cell.cell)
                if result.status == OK and not result.reused and result.seconds is not None:
                    self.durations.append(result.seconds)
                self.emit(f"[{len(self.finished)}/{len(self.cells)}] {self.line(result)}{self._left(now)}")
                continue
            state = read_state(cell.result)
            if state and state.phase == INSTALLING and state.started >= self.started:
                since = now - state.since
                if since >= NOTE_EVERY and now - self.noted.get(cell.cell, 0.0) >= NOTE_EVERY:
                    self.noted[cell.cell] = now
                    self.emit(f"{cell.cell}: installing, {duration(since)} so far")

    def _fresh_result(self, cell: Tracked) -> CellResult | None:
        try:
            if cell.result.stat().st_mtime < self.started:
                return None
            return read_cell_result(cell.result)
        except (OSError, ResultFileError):
            return None

    def _left(self, now: float) -> str:
        if len(self.finished) == len(self.cells):
            return " · done"
        left = self.estimate(now)
        return "" if left is None else f" · about {duration(max(left, 1.0))} left"

    def estimate(self, now: float) -> float | None:
        """Seconds until every cell should be done, or None while no duration is known at all."""
        known = [c.expected for c in self.cells if c.expected is not None] + self.durations
        if not known:
            return None
        typical = statistics.median(known)
        running, queued = [], []
        for cell in self.cells:
            if cell.cell in self.finished:
                continue
            expected = cell.expected if cell.expected is not None else typical
            state = read_state(cell.result)
            if state and state.started >= self.started:
                running.append(max(expected - (now - state.started), 0.0))
            else:
                queued.append(expected)
        return time_left(running, queued, self.lanes)
