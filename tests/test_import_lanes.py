"""Import lanes: a warm cell's runner starts once fewer than `width` runners are importing, and frees its lane as
soon as it says its imports are done (the runner's `imported`) or ends, not when its probes end. The runners here
are small Python processes that do what a runner does with the descriptor."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from compat_matrix.cell.runner import imported
from compat_matrix.host.import_lanes import ImportLanes
from compat_matrix.host.warm_cells import alive
from compat_matrix.shared.request import IMPORTED_FD

GIB = 1024**3
# Says its imports are done after `IMPORTS` seconds, as the runner does, then "runs its probes" for `PROBES`.
RUNNER = "import os, sys, time; time.sleep({imports}); {said}; time.sleep({probes})"
SAYS = "from compat_matrix.cell.runner import imported; imported()"


def starter(started: dict[str, float], name: str, imports: float, probes: float, says: bool = True):
    code = RUNNER.format(imports=imports, probes=probes, said=SAYS if says else "pass")

    def spawn(variables, fds) -> subprocess.Popen:
        started[name] = time.monotonic()
        return subprocess.Popen([sys.executable, "-c", code], env={**os.environ, **variables}, pass_fds=fds)

    return spawn


def run_two(first_says: bool) -> tuple[dict[str, float], float, float]:
    """With one lane, a runner that imports for 0.5 s and probes for 3 s, and a second one after it: when each
    started, and when the first ended."""
    lanes, started, ended = ImportLanes(1), {}, {}

    def first() -> None:
        with lanes.start(starter(started, "first", 0.5, 3.0, first_says), lambda: None) as runner:
            runner.wait()
        ended["first"] = time.monotonic()

    thread = threading.Thread(target=first)
    thread.start()
    while "first" not in started:
        time.sleep(0.01)
    with lanes.start(starter(started, "second", 0.0, 0.0), lambda: None) as runner:
        runner.wait()
    thread.join()
    return started, ended["first"], started["second"] - started["first"]


def test_the_next_runner_starts_once_the_first_has_imported_not_once_it_ends():
    started, first_ended, after = run_two(first_says=True)
    assert 0.4 < after < 2.5, after  # after the first's imports (0.5 s), long before its probes end (3.5 s)
    assert started["second"] < first_ended


def test_a_runner_that_ends_without_saying_frees_its_lane_when_it_ends():
    started, first_ended, after = run_two(first_says=False)
    assert after >= 3.4 and started["second"] >= first_ended - 0.2, after


def test_a_runner_waiting_for_a_lane_gives_up_once_the_run_is_stopped():
    lanes, started = ImportLanes(1), {}
    with lanes.start(starter(started, "first", 5.0, 0.0), lambda: None) as runner:
        begun = time.monotonic()
        with pytest.raises(KeyboardInterrupt, match="interrupted"):
            lanes.start(starter(started, "second", 0.0, 0.0), lambda: "the run was interrupted")
        assert "second" not in started and time.monotonic() - begun < 2.5
        runner.kill()
        runner.wait()


def test_the_runner_says_once_and_hides_the_descriptor_from_what_it_starts(monkeypatch):
    read, write = os.pipe()
    monkeypatch.setenv(IMPORTED_FD, str(write))
    imported()
    assert os.read(read, 10) == b"." and IMPORTED_FD not in os.environ
    os.set_blocking(read, False)
    assert os.read(read, 10) == b""  # its end is closed (else BlockingIOError): nothing forked later holds the lane
    os.close(read)
    imported()  # a runner started without lanes: nothing to say


def test_twice_as_many_cells_are_alive_as_import_where_memory_holds_them():
    assert alive(2, 24 * GIB) == 4 and alive(2, 6 * GIB) == 3 and alive(2, 2 * GIB) == 2 and alive(1, 24 * GIB) == 2
