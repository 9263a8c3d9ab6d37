"""Warm cells, run from the process of the run itself: a cell whose environment already holds exactly what it
installs needs nothing of nox (no environment to make, nothing to install), so its runner is started from a thread
here, `width` at once, instead of from a nox worker of its own (a process of 0.2 core-seconds that starts the runner
a quarter of a second later). The others, and every cell of a run whose nox options recreate environments, go to the
nested nox as before.

    ready_cells(run, selected, envdir, options)   the warm cells, each with the interpreter of its environment
    run_ready(run, ready, width, tick)      run them; whether Ctrl-C or SIGTERM cut the run short
"""

from __future__ import annotations

import platform
import signal
import threading
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path

from compat_matrix.host import cell_run, console, envs, plan
from compat_matrix.host.cells import Cell
from compat_matrix.host.import_lanes import ImportLanes

# nox options that make a session's environment anew, which only nox does: with them every cell goes to nox.
RECREATING = ("--no-reuse-existing-virtualenvs", "--reuse-venv=no", "--reuse-venv=never")

Ready = tuple[plan.Matrix, Cell, Path]  # a warm cell and the interpreter it runs with


def recreates(options: Sequence[str]) -> bool:
    """Whether the nox options (nox_sessions.forwarded) ask for environments made anew."""
    pairs = zip(options, [*options[1:], ""], strict=False)  # each option with the one after it
    return any(a in RECREATING or (a == "--reuse-venv" and f"{a}={b}" in RECREATING) for a, b in pairs)


def ready_cells(
    run: plan.Plan, selected: Sequence[tuple[plan.Matrix, Cell]], envdir: Path, options: Sequence[str]
) -> list[Ready]:
    """The cells of `selected` (in their order) that an environment in `envdir` holds exactly, with the Python their
    nox session would make theirs with: the cell's `python`, else the one running nox."""
    if run.pins is None or recreates(options):
        return []
    found = []
    for matrix, cell in selected:
        if cell.id in run.unpinned:  # nox's session says why it installs what was asked, or skips the cell
            continue
        pins, _ = cell_run.installed_pins(matrix.spec, cell, run.pins.get(cell.id), matrix.reports)
        python = envs.find_environment(envdir, matrix.spec, cell, matrix.reports, pins)
        if python is not None and same_python(envs.python_of(python.parent.parent), cell.python):
            found.append((matrix, cell, python))
    return found


def same_python(installed: str | None, asked: str | None) -> bool:
    """Whether an environment's Python (`3.11.7`) is the one a cell asks for (`3.11`, or None: this one)."""
    wanted = asked or platform.python_version()
    return installed is not None and (installed == wanted or installed.startswith(wanted + "."))


def alive(width: int, memory: int) -> int:
    """How many warm cells may be alive at once, `width` of them importing: twice as many, as `memory` holds."""
    return max(width, min(2 * width, memory // plan.CELL_MEMORY))


def run_ready(run: plan.Plan, cells: Sequence[Ready], width: int, tick: Callable[[], None]) -> bool:
    """Run the warm cells, `width` importing at once, calling `tick` about every second; whether Ctrl-C or SIGTERM
    (passed on as Ctrl-C, as a cell's nox worker does) cut the run short. Then every runner still going is stopped
    (within import_lanes.STOP_CHECK) with what it forked, and its cell is left without a result, as the nested nox
    leaves it."""
    stop = threading.Event()

    def stopped() -> str | None:
        return "the run was interrupted" if stop.is_set() else None

    def one(matrix: plan.Matrix, cell: Cell, python: Path) -> None:
        pins = run.pins.get(cell.id) if run.pins else None
        try:
            cell_run.run_cell(matrix.spec, cell, python, matrix.reports, console.say, run.cached, pins, stopped, lanes)
        except KeyboardInterrupt:
            pass
        except Exception:  # as nox tells a session that raised: the cell has no result, the run goes on
            console.say(f"{cell.id} raised:\n{traceback.format_exc()}")
        finally:
            lanes.ended()

    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    lanes = ImportLanes(width, len(cells))
    threads = ThreadPoolExecutor(alive(width, plan.physical_memory()), thread_name_prefix="cell")
    running: set[Future] = {threads.submit(one, *ready) for ready in cells}
    try:
        while running:
            _, running = wait(running, timeout=1.0, return_when=FIRST_COMPLETED)
            tick()
        return False
    except KeyboardInterrupt:
        stop.set()
        return True
    finally:
        threads.shutdown(wait=True, cancel_futures=True)
        signal.signal(signal.SIGTERM, previous)
        tick()
