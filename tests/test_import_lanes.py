"""Import lanes: a warm cell's runner starts once fewer than `width` runners are importing, and frees its lane as
soon as it says its imports are done (the runner's `imported`) or ends, not when its probes end. The runners here
are small Python processes that do what a runner does with the descriptor."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from compat_matrix.cell.runner import imported
from compat_matrix.host import cell_run
from compat_matrix.host.import_lanes import YIELDED, ImportLanes
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
    lanes, started, ended = ImportLanes(1, 2), {}, {}

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
    lanes, started = ImportLanes(1, 2), {}
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


def niceness(pid: int) -> int:  # 0: this process
    return os.getpriority(os.PRIO_PROCESS, pid)


def waiting_runner(folder):
    """A spawn for ImportLanes that starts runners as cells start theirs (cell_run.start_runner), each forking a child
    (a subject) whose pid it prints, then "importing" until told (`said()`); and that telling."""
    forks = "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); print(c.pid, flush=True)"
    wait = "while not os.path.exists(sys.argv[1]): time.sleep(0.02)"
    code = f"import os, subprocess, sys, time; {forks}\n{wait}\n{SAYS}; time.sleep(30)"
    spawned = []

    def spawn(variables, fds):
        spawned.append(folder / f"imported-{len(spawned)}")
        return cell_run.start_runner([sys.executable, "-c", code, str(spawned[-1])], {**os.environ, **variables}, fds)

    def said() -> None:  # the last runner started is done importing
        spawned[-1].touch()

    return spawn, said


def until_yielded(pid: int) -> int:
    deadline = time.monotonic() + 5
    while niceness(pid) != YIELDED and time.monotonic() < deadline:
        time.sleep(0.05)
    return niceness(pid)


def test_once_every_runner_has_started_those_done_importing_yield_to_those_still_importing(tmp_path):
    """The first runner, done importing while the second cell waits for its lane, keeps its priority; once the second
    has started, the first yields with its child; the second, still importing, keeps its priority until it says it
    is done. Both in this session, a process group each."""
    lanes, base, (spawn, said) = ImportLanes(1, 2), niceness(0), waiting_runner(tmp_path)
    first = lanes.start(spawn, lambda: None)
    try:
        assert os.getsid(first.pid) == os.getsid(0) and os.getpgid(first.pid) == first.pid
        child = int(first.stdout.readline())
        said()
        time.sleep(0.5)
        assert (niceness(first.pid), niceness(child)) == (base, base)  # a cell still waits for a lane
        second = lanes.start(spawn, lambda: None)
        try:
            assert (niceness(first.pid), niceness(child), niceness(second.pid)) == (YIELDED, YIELDED, base)
            said()
            assert until_yielded(second.pid) == YIELDED
        finally:
            os.killpg(second.pid, signal.SIGKILL)
            second.wait()
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()


def test_a_cell_that_ends_without_a_runner_no_longer_waits_for_a_lane(tmp_path):
    """Of two cells, one reused (it ends, no runner started): the other's runner yields once done importing."""
    lanes, (spawn, said) = ImportLanes(1, 2), waiting_runner(tmp_path)
    reused = threading.Thread(target=lanes.ended)
    reused.start()
    reused.join()
    runner = lanes.start(spawn, lambda: None)
    try:
        said()
        assert until_yielded(runner.pid) == YIELDED
    finally:
        os.killpg(runner.pid, signal.SIGKILL)
        runner.wait()
