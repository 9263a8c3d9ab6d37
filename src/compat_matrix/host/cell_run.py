"""One cell's run, called from the cell's nox session (uv backend), which has created the virtual environment: its
pins installed, the probe runner run in it, and always a result file left. Whatever goes wrong becomes a labelled
CellResult, so one bad cell never stops the matrix."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from compat_matrix.host import fallback, package_index
from compat_matrix.host.cells import Cell, install_args, runner_request
from compat_matrix.host.envs import BYTECODE, environment_for, failed_result, install
from compat_matrix.host.fingerprints import PACKAGE, fingerprint, inputs_key, installed_key, suite_key
from compat_matrix.host.folders import result_path
from compat_matrix.host.import_lanes import STOP_CHECK, ImportLanes
from compat_matrix.host.progress import PROBING, STARTED, state_path, write_state
from compat_matrix.host.spec import MatrixSpec
from compat_matrix.host.uv import installer_reason
from compat_matrix.shared.request import CellRequest
from compat_matrix.shared.results import (
    CRASHED,
    TIMED_OUT,
    CellResult,
    ResultFileError,
    read_cell_result,
    write_json_atomic,
)
from compat_matrix.shared.vocabulary import Status

NO_INTERPRETER = Status.NO_INTERPRETER
RUNNER_PATH = "compat-matrix-path"  # in the cell's environment: a folder holding only a link to this package


def run_cell(
    spec: MatrixSpec,
    cell: Cell,
    python: Path,
    reports: Path,
    log=print,
    cached: bool = False,
    pins: Mapping[str, str] | None = None,
    stopped: Callable[[], str | None] | None = None,
    lanes: ImportLanes | None = None,
) -> CellResult:
    """Install the cell's pins into the environment of `python` (unless it already has exactly them), run the
    probes, write and return the result. `pins`: the release each ranged axis value resolves to today, as the run's
    plan says (resolve.pins). With `cached`, an earlier ok result with the same fingerprint is reused. `stopped`:
    why the run no longer wants the cell, or None, asked every second while the probes run (KeyboardInterrupt then
    stops the runner with every subject it forked); by default, whether the process that started this one is gone.
    `lanes`: where the runner waits for a lane to import in (warm cells, host.import_lanes); None: it starts now."""
    out = result_path(reports, cell)
    stopped = stopped or orphaned(os.getppid())
    start = time.monotonic()
    pins, noted = installed_pins(spec, cell, pins, reports)
    request = runner_request(spec, cell)
    asked = json.dumps(request.to_json(), sort_keys=True)
    key = fingerprint(_environment(spec, cell, pins, reports), suite_key(), inputs_key(spec), asked)
    previous = _previous(out) if cached else None
    if previous is not None and previous.status == Status.OK and previous.cache_key == key:
        result = replace(previous, reused=True, notes=noted)
    else:
        how = (start + spec.cell_timeout, log, out, time.time(), reports)
        write_state(out, STARTED, how[3])
        try:
            with environment_for(python, _environment(spec, cell, pins, reports)) as python:
                result, pins, noted = install_newest(spec, cell, python, pins, how, noted)
                installed = time.monotonic()
                result = result or _probe(spec, cell, python, request, out, how, stopped, lanes)
            checked = ("environment check and install", round(installed - start, 3))
            result = replace(result, phases=(checked, *result.phases), notes=noted)
        finally:
            state_path(out).unlink(missing_ok=True)
        key = fingerprint(_environment(spec, cell, pins, reports), suite_key(), inputs_key(spec), asked)
        result = replace(result, cache_key=key, seconds=round(time.monotonic() - start, 2))
    write_json_atomic(out, result.to_json())
    return result


def installed_pins(
    spec: MatrixSpec, cell: Cell, pins: Mapping[str, str] | None, reports: Path
) -> tuple[dict[str, str], tuple[str, ...]]:
    """The pins the cell installs, and the note that says why where they are not `pins`: those that ran instead of
    `pins` a moment ago, where those could not be installed (compat_matrix.host.fallback)."""
    pins = dict(pins or {})
    found = fallback.remembered(reports, _environment(spec, cell, pins, reports))
    return (found[0], (found[1],)) if found else (pins, ())


def _environment(spec: MatrixSpec, cell: Cell, pins: Mapping[str, str], reports: Path) -> str:
    """The fingerprint of the environment that installs `cell` with `pins`."""
    return installed_key(spec, install_args(spec, cell, pins), reports)


def install_newest(
    spec: MatrixSpec, cell: Cell, python: Path, pins: dict[str, str], how: tuple[Any, ...], noted: tuple[str, ...] = ()
) -> tuple[CellResult | None, dict[str, str], tuple[str, ...]]:
    """Install the cell with `pins` into the environment of `python`: (None, the pins, notes) where it installed,
    else (the failure, …). Where they cannot be installed for want of a solution (and were not already a fallback,
    `noted`), the newest older release of a ranged value that installs (compat_matrix.host.fallback), with the note
    that says so, remembered. `how`: the install's deadline, log, progress file and start, and the reports folder."""
    deadline, log, out, started, reports = how

    def attempt(chosen: Mapping[str, str]) -> CellResult | None:
        wanted = (_environment(spec, cell, chosen, reports), install_args(spec, cell, chosen))
        return install(spec, cell, python, wanted, deadline, log, out, started)

    failed = attempt(pins)
    if failed is None or noted or not fallback.unsatisfiable(failed.reason or ""):
        return failed, pins, noted
    try:
        candidates = list(fallback.older(cell, pins, package_index.lookup(os.environ, spec.exclude_newer)))
    except package_index.ResolveError:
        return failed, pins, noted
    for older in candidates:
        result = attempt(older)
        if result is None:
            said = fallback.note(cell, pins, older, failed.reason or "")
            fallback.remember(reports, _environment(spec, cell, pins, reports), older, said)
            log(said)
            return None, older, (said,)
        if not fallback.unsatisfiable(result.reason or ""):
            break
    return failed, pins, noted


def _previous(path: Path) -> CellResult | None:
    try:
        return read_cell_result(path)
    except ResultFileError:
        return None


def _probe(
    spec: MatrixSpec,
    cell: Cell,
    python: Path,
    asked: CellRequest,
    out: Path,
    how: tuple[Any, ...],
    stopped: Callable[[], str | None],
    lanes: ImportLanes | None,
) -> CellResult:
    """The probe runner run in the environment of `python` with the request `asked`, to its end, the deadline or
    the run's end (`stopped`), started once one of `lanes` is free. `how`: the deadline, log, progress file and
    start (install_newest)."""
    deadline, started = how[0], how[3]
    request = out.with_suffix(".request.json")
    write_json_atomic(request, asked.to_json())
    # The runner writes a file of its own: the result file appears once, whole, with its fingerprint and duration,
    # so whoever watches the run tells each cell once.
    raw = out.with_suffix(".runner.json")
    out.unlink(missing_ok=True)
    raw.unlink(missing_ok=True)
    env = runner_environment(python.parent.parent)
    command = [str(python), "-m", "compat_matrix.cell", str(request), str(raw)]
    asked_at, begun = time.monotonic(), []

    def spawn(variables: Mapping[str, str] | None = None, fds: tuple[int, ...] = ()) -> subprocess.Popen[str]:
        begun.append(time.monotonic())
        write_state(out, PROBING, started)
        return start_runner(command, {**env, **(variables or {})}, fds)

    with lanes.start(spawn, stopped) if lanes else spawn() as runner:
        try:
            stdout, stderr = awaited(runner, max(1.0, deadline - time.monotonic()), stopped)
        except subprocess.TimeoutExpired:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.communicate()
            return failed_result(spec, cell, TIMED_OUT, f"probes exceeded the cell limit of {spec.cell_timeout:g}s")
        except BaseException:
            os.killpg(runner.pid, signal.SIGKILL)
            raise
    done = subprocess.CompletedProcess(command, runner.returncode, stdout, stderr)
    if done.returncode != 0 or not raw.exists():
        sys.stderr.write(done.stderr[-4000:])
        why = f"signal {-done.returncode}" if done.returncode < 0 else f"exit code {done.returncode}"
        tail = installer_reason(done.stderr.strip().splitlines()[-1]) if done.stderr.strip() else ""
        return failed_result(spec, cell, CRASHED, f"probe runner ended with {why}" + (f": {tail}" if tail else ""))
    try:
        result = CellResult.from_json(json.loads(raw.read_text(encoding="utf-8")))
    finally:
        raw.unlink(missing_ok=True)
    outside = round(time.monotonic() - begun[0] - (result.seconds or 0.0), 3)
    waited = (("wait for a lane to import in", round(begun[0] - asked_at, 3)),) if lanes else ()
    return replace(result, phases=(*waited, ("start the interpreter, write the result", outside), *result.phases))


def start_runner(command: list[str], environ: Mapping[str, str], fds: tuple[int, ...] = ()) -> subprocess.Popen[str]:
    """A probe runner, its output piped: in a process group of its own, so that a cell past its limit is stopped
    with every subject it forked, and in this process's session, where the priorities of import_lanes count."""
    pipe = subprocess.PIPE
    return subprocess.Popen(command, stdout=pipe, stderr=pipe, text=True, env=environ, pass_fds=fds, process_group=0)


def awaited(runner: subprocess.Popen[str], seconds: float, stopped: Callable[[], str | None]) -> tuple[str, str]:
    """The runner's output once it ends; TimeoutExpired after `seconds`; KeyboardInterrupt (the caller stops the
    runner) once `stopped()` says why the run no longer wants it."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return runner.communicate(timeout=max(0.0, min(STOP_CHECK, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                raise
            why = stopped()
            if why:
                raise KeyboardInterrupt(why) from None


def orphaned(parent: int) -> Callable[[], str | None]:
    """`stopped` for a cell's nox worker: a parallel nox stopped by Ctrl-C or SIGTERM does not stop a worker it was
    starting just then, and that worker, left behind (reparented), would wait for its cell to its limit."""
    return lambda: f"the process that started this cell ({parent}) is gone" if os.getppid() != parent else None


def runner_environment(home: Path) -> dict[str, str]:
    """The variables of the probe runner in the environment `home`: compat_matrix importable from there alone, its
    own bytecode, no model hub."""
    return {
        **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
        **bytecode_environment(home),
        "PYTHONPATH": str(runner_path(home)),
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        # One order for sets of strings in every run: transformers prints them in error messages (the shared tensors
        # of a save), and a re-run whose results are unchanged must leave the report byte-identical.
        "PYTHONHASHSEED": "0",
        # Tiny models: one thread per cell is fastest, and cells already run one per core.
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    }


def bytecode_environment(environment: Path) -> dict[str, str]:
    """Variables that make the cell's interpreter write and read bytecode in a folder of the environment: writing
    costs a cold cell a fraction of a second, and a warm one imports torch and transformers twice as fast. The
    folder is the environment's own, so no `__pycache__` appears in your checkout (your probe modules, your tests)."""
    return {"PYTHONPYCACHEPREFIX": str(environment / BYTECODE)}


def runner_path(environment: Path) -> Path:
    """A folder in the cell's environment that holds only compat_matrix (a link to this package), for the runner's
    PYTHONPATH: installed as a tool, compat-matrix sits beside pandas, numpy and nox, which the cell must not see."""
    folder = environment / RUNNER_PATH
    link = folder / "compat_matrix"
    folder.mkdir(exist_ok=True)
    if not (link.is_symlink() and link.resolve() == PACKAGE):
        fresh = folder / f".compat_matrix.{os.getpid()}"
        fresh.unlink(missing_ok=True)
        fresh.symlink_to(PACKAGE, target_is_directory=True)
        os.replace(fresh, link)
    return folder


def write_unavailable(spec: MatrixSpec, cell: Cell, reports: Path) -> CellResult:
    return write_failed(spec, cell, reports, NO_INTERPRETER, f"no Python {cell.python} on this machine")


def write_skipped(spec: MatrixSpec, cell: Cell, reports: Path, reason: str) -> CellResult:
    """The result of a cell with nothing to install (`pre` with no pre-release to stand for), saying why."""
    return write_failed(spec, cell, reports, Status.SKIPPED, reason)


def write_failed(spec: MatrixSpec, cell: Cell, reports: Path, status: str, reason: str) -> CellResult:
    result = failed_result(spec, cell, status, reason)
    write_json_atomic(result_path(reports, cell), result.to_json())
    return result
