"""A cell's environment: install its pins with uv, run the probe runner in it, always leave a result file.

Called from the cell's nox session (uv backend), which has created the virtual environment. Standard library only.
Whatever goes wrong here becomes a labelled CellResult, so one bad cell never stops the matrix.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path

from compat_matrix.cells import Cell, install_args, local_requirements, result_path, runner_request
from compat_matrix.results import (
    CRASHED,
    TIMED_OUT,
    CellResult,
    ResultFileError,
    read_cell_result,
    write_json_atomic,
)
from compat_matrix.spec import MatrixSpec
from compat_matrix.verdict import decide

INSTALL_FAILED = "install-failed"
NO_INTERPRETER = "interpreter not found"
REASON_LIMIT = 400
LOCK = ".lock"
STAMP = ".compat-matrix-installed"  # in the environment: the fingerprint of what was installed
_SKIP = {".git", ".nox", "__pycache__", "build", "dist", ".venv", ".pytest_cache", ".ruff_cache"}
# The in-environment modules need only the standard library, so the cell imports them from here, uninstalled.
SOURCE = Path(__file__).resolve().parent.parent
_DECORATION = " ×╰─▶│├╭╮╯┬┴┼|:-"


def uv_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """Variables that point uv at the machine's local wheels, which uv does not learn from pip's settings.

    pip's PIP_FIND_LINKS is whitespace-separated; uv's UV_FIND_LINKS is comma-separated. An explicit
    UV_FIND_LINKS wins.
    """
    links = environ.get("PIP_FIND_LINKS", "").split()
    if "UV_FIND_LINKS" in environ or not links:
        return {}
    return {"UV_FIND_LINKS": ",".join(links)}


def installer_reason(output: str) -> str:
    """The installer's complaint in one line: its message lines, decorations stripped, joined and cut."""
    lines = [line.strip().strip(_DECORATION).strip() for line in output.splitlines()]
    useful = [line for line in lines if line and not line.startswith(("Using ", "Resolved ", "Prepared "))]
    text = " ".join(useful) or "installer failed without a message"
    return text if len(text) <= REASON_LIMIT else text[: REASON_LIMIT - 1] + "…"


def failed_result(spec: MatrixSpec, cell: Cell, status: str, reason: str) -> CellResult:
    return CellResult(spec.name, cell.id, cell.requested, status=status, reason=reason)


def run_cell(spec: MatrixSpec, cell: Cell, python: Path, reports: Path, log=print, cached: bool = False) -> CellResult:
    """Install the cell's pins into the environment of `python` (unless it already has exactly them), run the
    probes, write and return the result. With `cached`, an earlier ok result with the same fingerprint is reused."""
    out = result_path(reports, cell)
    # SIGTERM (a CI runner, or nox stopping its parallel sessions) unwinds like Ctrl-C, so the runner's process
    # group is stopped on the way out and no half-written result is left: results are only ever renamed in whole.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    start = time.monotonic()
    environment = environment_key(spec, cell)
    key = fingerprint(environment, suite_key(), json.dumps(runner_request(spec, cell), sort_keys=True))
    previous = _previous(out) if cached else None
    if previous is not None and previous.status == "ok" and previous.cache_key == key:
        result = replace(previous, reused=True)
    else:
        deadline = start + spec.cell_timeout
        result = _install(spec, cell, python, environment, deadline, log) or _probe(spec, cell, python, out, deadline)
        result = replace(result, cache_key=key, seconds=round(time.monotonic() - start, 2))
    write_json_atomic(out, result.to_json())
    log(progress_line(result))
    return result


def progress_line(result: CellResult) -> str:
    """One line per finished cell: what got installed, how long it took, and the verdict material."""
    versions = ", ".join(f"{k} {v}" for k, v in result.resolved.items() if k != "python")
    subjects = ", ".join(f"{s.target.rsplit(':', 1)[-1]} {decide(s).verdict}" for s in result.subjects)
    parts = [result.cell, result.status + (" (reused)" if result.reused else ""), versions, subjects]
    parts += [f"{result.seconds:.1f} s" if result.seconds is not None else "", result.reason or ""]
    return " | ".join(p for p in parts if p)


def fingerprint(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def tree_key(path: Path) -> str:
    """The contents of a local requirement: every file's path and bytes, less caches and build output."""
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file() and not _skipped(p.relative_to(path).parts)):
        digest.update(str(file.relative_to(path)).encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()[:16]


def _skipped(parts: tuple[str, ...]) -> bool:
    return any(part in _SKIP or part.endswith(".egg-info") for part in parts)


def environment_key(spec: MatrixSpec, cell: Cell) -> str:
    """What the environment must hold: the install arguments, and the contents of local requirements."""
    return fingerprint(json.dumps(install_args(spec, cell)), *(tree_key(p) for p in local_requirements(spec)))


def suite_key() -> str:
    """The in-environment code that produced a result: a change to any probe makes earlier results stale."""
    package = SOURCE / "compat_matrix"
    return fingerprint(*(f.read_text(encoding="utf-8") for f in sorted(package.glob("*.py"))))


def _previous(path: Path) -> CellResult | None:
    try:
        return read_cell_result(path)
    except ResultFileError:
        return None


def _install(spec: MatrixSpec, cell: Cell, python: Path, environment: str, deadline: float, log) -> CellResult | None:
    stamp = python.parent.parent / STAMP
    if stamp.exists() and stamp.read_text() == environment:
        return None  # a warm environment with exactly these pins: nothing to install
    stamp.unlink(missing_ok=True)
    uv = shutil.which("uv") or "uv"
    command = [uv, "pip", "install", "--python", str(python), *install_args(spec, cell)]
    log(" ".join(command))
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            env={**os.environ, **uv_environment(os.environ)},
            timeout=max(1.0, deadline - time.monotonic()),
        )
    except subprocess.TimeoutExpired:
        return failed_result(spec, cell, TIMED_OUT, f"install exceeded the cell limit of {spec.cell_timeout:g}s")
    if done.returncode != 0:
        log(done.stderr.strip())
        return failed_result(spec, cell, INSTALL_FAILED, installer_reason(done.stderr + done.stdout))
    stamp.write_text(environment)
    return None


def _probe(spec: MatrixSpec, cell: Cell, python: Path, out: Path, deadline: float) -> CellResult:
    request = out.with_suffix(".request.json")
    write_json_atomic(request, runner_request(spec, cell))
    out.unlink(missing_ok=True)
    env = {
        **os.environ,
        "PYTHONPATH": str(SOURCE),
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        # Tiny models: one thread per cell is fastest, and cells already run one per core.
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    }
    command = [str(python), "-m", "compat_matrix.runner", str(request), str(out)]
    # Its own process group, so that a cell past its limit is stopped with every subject it forked.
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    ) as runner:
        try:
            stdout, stderr = runner.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.communicate()
            return failed_result(spec, cell, TIMED_OUT, f"probes exceeded the cell limit of {spec.cell_timeout:g}s")
        except BaseException:
            os.killpg(runner.pid, signal.SIGKILL)
            raise
    done = subprocess.CompletedProcess(command, runner.returncode, stdout, stderr)
    if done.returncode != 0 or not out.exists():
        sys.stderr.write(done.stderr[-4000:])
        why = f"signal {-done.returncode}" if done.returncode < 0 else f"exit code {done.returncode}"
        tail = installer_reason(done.stderr.strip().splitlines()[-1]) if done.stderr.strip() else ""
        return failed_result(spec, cell, CRASHED, f"probe runner ended with {why}" + (f": {tail}" if tail else ""))
    return CellResult.from_json(json.loads(out.read_text(encoding="utf-8")))


def python_available(version: str) -> bool:
    """Whether uv finds an interpreter for `version` on this machine, without downloading one."""
    uv = shutil.which("uv") or "uv"
    found = subprocess.run([uv, "python", "find", "--no-python-downloads", version], capture_output=True, text=True)
    return found.returncode == 0


def write_unavailable(spec: MatrixSpec, cell: Cell, reports: Path) -> CellResult:
    result = failed_result(spec, cell, NO_INTERPRETER, f"no Python {cell.python} on this machine")
    write_json_atomic(result_path(reports, cell), result.to_json())
    return result


@contextlib.contextmanager
def run_lock(reports: Path, log=print) -> Iterator[None]:
    """One matrix run at a time per reports folder: a second run waits, saying for whom, instead of mixing files."""
    reports.mkdir(parents=True, exist_ok=True)
    path = reports / LOCK
    with open(path, "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            log(f"waiting: another compat-matrix run ({handle.read().strip() or 'unknown'}) holds {path}")
            fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}\n")
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def run_interruptibly(command: list[str], env: dict[str, str], grace: float = 60.0) -> bool:
    """Run `command` (a nested nox running cells) to its end; return whether it was interrupted.

    Ctrl-C reaches the whole foreground process group, the nested nox included, which then stops its cells.
    SIGTERM (a CI runner) reaches only this process: it is passed on to the nested nox as the SIGINT that nox
    understands, since a nox killed by SIGTERM leaves its cells running. Either way this waits for the cells to
    be stopped, `grace` seconds at most."""
    terminated = False

    def on_sigterm(signum: int, frame: object) -> None:
        nonlocal terminated
        terminated = True
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    process = subprocess.Popen(command, env=env)
    try:
        process.wait()
        return False
    except KeyboardInterrupt:
        if terminated:
            process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        return True
    finally:
        signal.signal(signal.SIGTERM, previous)
