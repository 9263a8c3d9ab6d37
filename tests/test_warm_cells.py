"""Warm cells run from the run's own process: only a cell whose environment holds exactly what it installs, with
the Python its nox session would use, and none where nox is asked to make environments anew; cut short by SIGTERM,
its runner is stopped and no result is left, as the nested nox leaves it. The environments here are folders with
a stamp and a stand-in interpreter: nothing is installed."""

from __future__ import annotations

import json
import os
import platform
import signal
import threading
import time
from dataclasses import replace
from pathlib import Path

from compat_matrix.host import plan
from compat_matrix.host.fingerprints import environment_key
from compat_matrix.host.folders import result_path
from compat_matrix.host.progress import state_path
from compat_matrix.host.warm_cells import ready_cells, recreates, run_ready, same_python
from compat_matrix.shared.layout import STAMP

MATRIX = """
[matrix]
name = "demo"

[axes]
transformers = ["5.14.1", "4.57.6"]
torch = ["2.13.0"]

[[subjects]]
target = "a.b:C"
methods = ["m"]
"""
SLEEPER = '#!/bin/sh\necho $$ > "$(dirname "$0")/../runner.pid"\nexec sleep 60\n'  # a runner that never ends


def planned(folder: Path) -> plan.Plan:
    path = folder / "m.toml"
    path.write_text(MATRIX)
    request = plan.request_from({"COMPAT_MATRIX": str(path)}, folder, folder / "noxfile.py")
    return plan.make(replace(request, runs=True))


def environment(envdir: Path, name: str, key: str, python: str = platform.python_version()) -> Path:
    """A folder that passes for an environment installed with `key`: its interpreter never returns."""
    home = envdir / name
    (home / "bin").mkdir(parents=True)
    (home / "pyvenv.cfg").write_text(f"home = /usr/bin\nversion_info = {python}\n")
    (home / STAMP).write_text(json.dumps({"key": key, "asked": []}))
    interpreter = home / "bin" / "python"
    interpreter.write_text(SLEEPER)
    interpreter.chmod(0o755)
    return interpreter


def key_of(run: plan.Plan, index: int) -> str:
    matrix, cell = run.cells()[index]
    return environment_key(matrix.spec, cell, matrix.reports, run.pins.get(cell.id))


def test_only_a_cell_whose_environment_holds_exactly_its_pins_runs_from_the_run(tmp_path, answered):
    run = planned(tmp_path)
    envdir = tmp_path / ".nox"
    warm = environment(envdir, "a", key_of(run, 0))
    environment(envdir, "b", key_of(run, 1), python="3.9.18")  # another Python than nox's session would use
    environment(envdir, "c", "not what any cell installs")
    assert [(cell.id, python) for _, cell, python in ready_cells(run, run.cells(), envdir, [])] == [
        (run.cells()[0][1].id, warm)
    ]
    for options in (["--no-reuse-existing-virtualenvs"], ["--reuse-venv", "no"], ["--reuse-venv=never"]):
        assert ready_cells(run, run.cells(), envdir, options) == [], options
    assert not recreates(["-r"]) and not recreates(["--reuse-venv", "yes"]) and not recreates([])


def test_a_python_is_the_one_asked_for_at_a_version_boundary():
    assert same_python("3.11.7", "3.11") and same_python("3.11.7", "3.11.7")
    assert not same_python("3.11.7", "3.1") and not same_python(None, "3.11") and not same_python("3.10.4", "3.11")
    assert same_python(platform.python_version(), None)


def test_a_warm_cell_cut_short_by_sigterm_stops_its_runner_and_leaves_no_result(tmp_path, answered):
    run = planned(tmp_path)
    matrix, cell = run.cells()[0]
    python = environment(tmp_path / ".nox", "a", key_of(run, 0))
    pid_file = python.parent.parent / "runner.pid"

    def terminate_once_running() -> None:
        deadline = time.monotonic() + 30
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)

    ticks, before = [], signal.getsignal(signal.SIGTERM)
    threading.Thread(target=terminate_once_running, daemon=True).start()
    started = time.monotonic()
    assert run_ready(run, [(matrix, cell, python)], 2, lambda: ticks.append(1)) is True
    assert time.monotonic() - started < 20 and ticks
    runner = int(pid_file.read_text())
    try:
        os.kill(runner, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive, "the runner outlived the run"
    out = result_path(matrix.reports, cell)
    assert not out.exists() and not state_path(out).exists()
    assert signal.getsignal(signal.SIGTERM) is before  # the handler of the run's caller is back
