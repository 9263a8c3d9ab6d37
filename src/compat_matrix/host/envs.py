"""A cell's environment: brought to exactly what the cell installs with uv, shared with another that holds it, held by a
lock while it is installed into or run, and stamped with what it holds.

An environment is installed again when its fingerprint changes: the install arguments (with ranged axis values
pinned to the release the index offers today, `resolve.pins`) and the contents of local requirements. It is
installed in place, except when something it was installed with is no longer asked for (a requirement removed)
or `--exclude-newer` changed: then it is emptied first (`uv venv --clear`), so nothing stale stays in it."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from compat_matrix.host.cells import OVERRIDE, Cell, install_args
from compat_matrix.host.fallback import unsatisfiable
from compat_matrix.host.fingerprints import environment_key, installed_key
from compat_matrix.host.folders import LOCK, ignore_housekeeping
from compat_matrix.host.progress import INSTALLING, state_path, write_state
from compat_matrix.host.spec import MatrixSpec, is_local
from compat_matrix.host.uv import installer_reason, uv_args, uv_binary, uv_environment
from compat_matrix.shared.layout import KEPT, STAMP  # STAMP: the fingerprint installed, and what was asked
from compat_matrix.shared.results import TIMED_OUT, CellResult, write_json_atomic
from compat_matrix.shared.vocabulary import Status

INSTALL_FAILED = Status.INSTALL_FAILED
ENV_LOCKS = ".compat-matrix-locks"  # beside the environments: one lock each, held while a cell installs or runs
KEEP, IN_PLACE, FRESH = "keep", "in place", "fresh"  # how an environment is brought to what a cell asks for
# In the cell's environment: the bytecode its interpreter writes for the modules it imports (PYTHONPYCACHEPREFIX),
# whatever PYTHONDONTWRITEBYTECODE says, so a warm cell does not recompile torch and transformers on every run.
BYTECODE = "compat-matrix-bytecode"


def failed_result(spec: MatrixSpec, cell: Cell, status: str, reason: str) -> CellResult:
    return CellResult(spec.name, cell.id, cell.requested, status=status, reason=reason)


def asked(args: Iterable[str]) -> frozenset[str]:
    """What an install asks for, versions apart: each requirement's distribution (a local project by its path) and
    each installer option that stays. A new release of something still asked for is installed in place."""
    out = set()
    for arg in args:
        if arg.startswith("--reinstall-package="):
            continue
        if arg.startswith(OVERRIDE):  # what is overridden stays asked for whatever release it is pinned to
            with contextlib.suppress(InvalidRequirement):
                arg = OVERRIDE + canonicalize_name(Requirement(arg.removeprefix(OVERRIDE)).name)
            out.add(arg)
            continue
        try:
            out.add(arg if arg.startswith("-") or is_local(arg) else canonicalize_name(Requirement(arg).name))
        except InvalidRequirement:
            out.add(arg)
    return frozenset(out)


@dataclass(frozen=True)
class Stamp:
    """What an environment was installed with: its fingerprint, and what was asked for (None: a stamp of an
    earlier compat-matrix, which did not say)."""

    key: str
    asked: frozenset[str] | None = None

    def to_json(self) -> dict:
        return {"key": self.key, "asked": sorted(self.asked or ())}


def install_kind(stamp: Stamp | None, environment: str, args: Iterable[str]) -> str:
    """How to bring an environment with `stamp` to the fingerprint `environment`: KEEP it as it is, install IN_PLACE
    (new, or everything it holds is still asked for: a new release, an added requirement, changed local code), or
    empty it first (FRESH: something it was installed with is no longer asked for, the installer's options changed
    (`--exclude-newer`: what it installed before may be newer), or its stamp does not say)."""
    if stamp is None:
        return IN_PLACE
    if stamp.key == environment:
        return KEEP
    wanted = asked(args)
    if stamp.asked is None or not stamp.asked <= wanted or _options(stamp.asked) != _options(wanted):
        return FRESH
    return IN_PLACE


def _options(names: Iterable[str]) -> set[str]:
    return {name for name in names if name.startswith("-")}


def read_stamp(environment: Path) -> Stamp | None:
    try:
        text = (environment / STAMP).read_text(encoding="utf-8")
    except OSError:
        return None
    try:
        data = json.loads(text)
        return Stamp(str(data["key"]), frozenset(map(str, data["asked"])))
    except (ValueError, KeyError, TypeError):
        return Stamp(text.strip())  # the plain fingerprint written before stamps said what was asked for


def find_environment(
    envdir: Path, spec: MatrixSpec, cell: Cell, reports: Path, pins: Mapping[str, str] | None = None
) -> Path | None:
    """The interpreter of an environment in `envdir` installed with exactly the cell's pins, if there is one."""
    return environment_with(Path(envdir), environment_key(spec, cell, reports, pins))


def environment_with(envdir: Path, key: str, interpreter: str | None = None) -> Path | None:
    """The interpreter of an environment in `envdir` whose stamp says it holds exactly `key` (and, if given, whose
    Python is `interpreter`, as its pyvenv.cfg says), if there is one."""
    for path in sorted(envdir.glob(f"*/{STAMP}")):
        stamp = read_stamp(path.parent)
        if stamp is not None and stamp.key == key and interpreter in (None, python_of(path.parent)):
            return path.parent / "bin" / "python"
    return None


def python_of(environment: Path) -> str | None:
    """The version of the Python an environment was made with (its pyvenv.cfg's `version_info`)."""
    try:
        lines = (environment / "pyvenv.cfg").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    pairs = (line.partition("=") for line in lines)
    return next((value.strip() for name, _, value in pairs if name.strip() == "version_info"), None)


@contextlib.contextmanager
def environment_for(python: Path, key: str) -> Iterator[Path]:
    """The interpreter a cell runs in, held for it: its own environment's, unless that does not hold `key` and
    another environment beside it does. Then that one is shared (cells of other matrices with the same pins and
    requirements, an integration test's and the default matrix's): no install, and its bytecode is already written.
    An environment that may be installed into is held exclusively; one that is only run, shared."""
    own = python.parent.parent
    stamp = read_stamp(own)
    ready = stamp is not None and stamp.key == key
    other = None if ready else environment_with(own.parent, key, python_of(own) or "unknown")
    if other is not None:
        with _held(other.parent.parent, exclusive=False):
            found = read_stamp(other.parent.parent)
            if found is not None and found.key == key:  # still what it was when chosen
                yield other
                return
    with _held(own, exclusive=not ready):
        yield python


@contextlib.contextmanager
def _held(environment: Path, exclusive: bool) -> Iterator[None]:
    """The environment held by a lock beside it (an install that empties the environment must not take its lock)."""
    locks = environment.parent / ENV_LOCKS
    locks.mkdir(exist_ok=True)
    with open(locks / f"{environment.name}.lock", "a", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def install(
    spec: MatrixSpec,
    cell: Cell,
    python: Path,
    wanted: tuple[str, list[str]],
    deadline: float,
    log,
    out: Path,
    started: float,
) -> CellResult | None:
    """Bring the environment to `wanted` (its fingerprint, and the install arguments): nothing to do when its stamp
    says it holds exactly that; installed in place when everything it holds is still asked for; else emptied first."""
    environment, args = wanted
    home = python.parent.parent
    how = install_kind(read_stamp(home), environment, args)
    if how == KEEP:
        return None  # a warm environment with exactly these pins: nothing to install
    held = (home / STAMP).read_bytes() if how == IN_PLACE and (home / STAMP).exists() else None
    (home / STAMP).unlink(missing_ok=True)
    write_state(out, INSTALLING, started)
    # Each command made when it runs: the overrides file uv_args writes into the environment must come after the
    # `uv venv --clear` that empties it.
    commands = [lambda: [uv_binary(), "pip", "install", "--python", str(python), *uv_args(args, home)]]
    if how == FRESH:
        commands.insert(0, lambda: [uv_binary(), "venv", "--clear", "--quiet", "--python", str(python), str(home)])
    for made in commands:
        command = made()
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
            why = installer_reason(done.stderr + done.stdout)
            if held is not None and unsatisfiable(why):  # uv found no solution and changed nothing: still warm
                (home / STAMP).write_bytes(held)
            return failed_result(spec, cell, INSTALL_FAILED, why)
    # Installed files may keep the size and mtime of those they replace; their bytecode must not outlive them, nor
    # what the probes kept about the release (the call sites they parsed).
    shutil.rmtree(home / BYTECODE, ignore_errors=True)
    shutil.rmtree(home / KEPT, ignore_errors=True)
    why = mismatched_builds(installed(python), import_error(python))
    if why:
        return failed_result(spec, cell, INSTALL_FAILED, why)
    write_json_atomic(home / STAMP, Stamp(environment, asked(args)).to_json())
    return None


BUILT_AGAINST_TORCH = ("torchvision", "torchaudio", "torchtext")  # each build loads only beside its own torch build


def installed(python: Path) -> dict[str, str]:
    """The distributions in the environment of `python`, by canonical name, with their versions (uv's list)."""
    done = subprocess.run(
        [uv_binary(), "pip", "list", "--python", str(python), "--format", "json"], capture_output=True, text=True
    )
    try:
        return {canonicalize_name(p["name"]): p["version"] for p in json.loads(done.stdout)}
    except (ValueError, KeyError, TypeError):
        return {}


def mismatched_builds(versions: Mapping[str, str], import_error: Callable[[str], str | None]) -> str | None:
    """Why a package built against torch cannot load beside the installed torch (a CUDA torchvision from the
    package index beside a CPU torch from local wheels: `torchvision::nms does not exist`), or None. A build whose
    local label (`+cpu`) differs from torch's may still load (one without CUDA extensions, one built from source):
    only one that then fails to import (`import_error(name)`: its error, or None) is refused, with that error."""
    torch = versions.get("torch")
    if torch is None:
        return None
    label = Version(torch).local
    for name in BUILT_AGAINST_TORCH:
        if name in versions and Version(versions[name]).local != label and (error := import_error(name)):
            build = f"a {label} build" if label else "a build of the package index"
            return (
                f"{name} {versions[name]} cannot load beside torch {torch} ({error}): it is not {build}; install "
                f"both from one source (a {name} wheel beside the torch wheel in the find-links folder, or uv's "
                "torch backend: UV_TORCH_BACKEND=cpu)"
            )
    return None


def import_error(python: Path) -> Callable[[str], str | None]:
    """`import_error(name)`: the last line of what importing `name` in the environment of `python` raised, or None
    when it imports."""

    def error(name: str) -> str | None:
        done = subprocess.run([str(python), "-c", f"import {name}"], capture_output=True, text=True, env=_plain_env())
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        return None if done.returncode == 0 else (lines[-1].strip() if lines else f"exit code {done.returncode}")

    return error


def _plain_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def prepared(
    home: Path, spec: MatrixSpec, cell: Cell, reports: Path, pins: Mapping[str, str] | None = None, log=print
) -> tuple[Path, str | None]:
    """An environment at `home`, made if need be, holding exactly what `cell` installs (as a cell's would, stamp
    and all, so that the cell shares it later instead of installing again); its interpreter, and why it could not
    be installed (None when it was)."""
    python = home / "bin" / "python"
    if not python.exists():
        wanted = ["--python", cell.python] if cell.python else ["--python", sys.executable]
        done = subprocess.run([uv_binary(), "venv", "--quiet", *wanted, str(home)], capture_output=True, text=True)
        if done.returncode != 0:
            return python, installer_reason(done.stderr + done.stdout)
    args = install_args(spec, cell, pins)
    environment = installed_key(spec, args, reports)
    out = home / "compat-matrix-init.json"  # where install says that it is installing
    with _held(home, exclusive=True):
        failed = install(spec, cell, python, (environment, args), time.monotonic() + spec.cell_timeout, log, out, 0)
    state_path(out).unlink(missing_ok=True)
    return python, failed.reason if failed else None


def python_available(version: str) -> bool:
    """Whether uv finds an interpreter for `version` on this machine, without downloading one."""
    found = subprocess.run(
        [uv_binary(), "python", "find", "--no-python-downloads", version], capture_output=True, text=True
    )
    return found.returncode == 0


@contextlib.contextmanager
def run_lock(reports: Path, log=print) -> Iterator[None]:
    """One matrix run at a time per reports folder: a second run waits, saying for whom, instead of mixing files."""
    reports.mkdir(parents=True, exist_ok=True)
    ignore_housekeeping(reports)
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
