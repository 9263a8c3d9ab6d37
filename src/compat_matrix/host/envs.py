"""A cell's environment: install its pins with uv, run the probe runner in it, always leave a result file.

Called from the cell's nox session (uv backend), which has created the virtual environment. Whatever goes wrong
here becomes a labelled CellResult, so one bad cell never stops the matrix.

An environment is installed again when its fingerprint changes: the install arguments (with ranged axis values
pinned to the release the index offers today, `resolve.pins`) and the contents of local requirements. It is
installed in place, except when something it was installed with is no longer asked for (a requirement removed)
or `--exclude-newer` changed: then it is emptied first (`uv venv --clear`), so nothing stale stays in it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from compat_matrix.host.cells import (
    CELLS_DIR,
    LOCK,
    OVERRIDE,
    Cell,
    ignore_housekeeping,
    install_args,
    local_requirements,
    result_path,
    runner_request,
)
from compat_matrix.host.progress import INSTALLING, PROBING, STARTED, state_path, write_state
from compat_matrix.host.spec import MatrixSpec, is_local
from compat_matrix.shared.layout import KEPT, STAMP  # STAMP: the fingerprint installed, and what was asked
from compat_matrix.shared.results import (
    CRASHED,
    TIMED_OUT,
    CellResult,
    ResultFileError,
    read_cell_result,
    write_json_atomic,
    write_text_atomic,
)
from compat_matrix.shared.vocabulary import Status

INSTALL_FAILED = Status.INSTALL_FAILED
NO_INTERPRETER = Status.NO_INTERPRETER
REASON_LIMIT = 400
ENV_LOCKS = ".compat-matrix-locks"  # beside the environments: one lock each, held while a cell installs or runs
KEEP, IN_PLACE, FRESH = "keep", "in place", "fresh"  # how an environment is brought to what a cell asks for
_SKIP = {".git", ".nox", "__pycache__", "build", "dist", ".venv", ".pytest_cache", ".ruff_cache", ".hypothesis"}
# compat_matrix.cell and .shared need only the standard library, so the cell imports them from here, uninstalled.
PACKAGE = Path(__file__).resolve().parent.parent
SOURCE = PACKAGE.parent
RUNNER_PATH = "compat-matrix-path"  # in the cell's environment: a folder holding only a link to this package
# In the cell's environment: the bytecode its interpreter writes for the modules it imports (PYTHONPYCACHEPREFIX),
# whatever PYTHONDONTWRITEBYTECODE says, so a warm cell does not recompile torch and transformers on every run.
BYTECODE = "compat-matrix-bytecode"
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
    """The installer's complaint in one line: its message lines, decorations stripped, joined and cut. Where uv
    says that two requirements conflict, the package and both constraints first."""
    lines = [line.strip().strip(_DECORATION).strip() for line in output.splitlines()]
    useful = [line for line in lines if line and not line.startswith(("Using ", "Resolved ", "Prepared "))]
    text = " ".join(useful) or "installer failed without a message"
    text = conflict(text) or text
    return text if len(text) <= REASON_LIMIT else text[: REASON_LIMIT - 1] + "…"


# uv: "Because gliner>=0.2.29 depends on transformers>=4.51.3,<5.17.0 and you require transformers==5.24.0, …"
_CONFLICT = re.compile(
    r"Because (?P<who>[^\s,]+) depends on (?P<needs>[^\s,]+(?:,[<>=!~][^\s,]+)*)"
    r" and (?P<other>you require|[^\s,]+ depends on) (?P<wants>[^\s,]+(?:,[<>=!~][^\s,]+)*)"
)


def conflict(text: str) -> str | None:
    """`pins conflict: <who> requires <a>, <the cell or another package> requires <b>` from uv's explanation of a
    resolution that failed, naming how to lift a library's cap on an axis package; None when it says no such thing."""
    found = _CONFLICT.search(text)
    if found is None:
        return None
    other = found["other"]
    wants = "the cell pins" if other == "you require" else f"{other.removesuffix(' depends on')} requires"
    hint = ""
    with contextlib.suppress(InvalidRequirement):
        package = canonicalize_name(Requirement(found["needs"]).name)
        if other == "you require":
            hint = f' (to test it anyway, lift the cap: overrides = ["{package}"] in [matrix])'
    return f"pins conflict: {found['who']} requires {found['needs']}, {wants} {found['wants']}{hint}"


def failed_result(spec: MatrixSpec, cell: Cell, status: str, reason: str) -> CellResult:
    return CellResult(spec.name, cell.id, cell.requested, status=status, reason=reason)


def run_cell(
    spec: MatrixSpec,
    cell: Cell,
    python: Path,
    reports: Path,
    log=print,
    cached: bool = False,
    pins: Mapping[str, str] | None = None,
) -> CellResult:
    """Install the cell's pins into the environment of `python` (unless it already has exactly them), run the
    probes, write and return the result. `pins`: the release each ranged axis value resolves to today, as the run's
    plan says (resolve.pins). With `cached`, an earlier ok result with the same fingerprint is reused."""
    out = result_path(reports, cell)
    # SIGTERM (a CI runner, or nox stopping its parallel sessions) unwinds like Ctrl-C, so the runner's process
    # group is stopped on the way out and no half-written result is left: results are only ever renamed in whole.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    start = time.monotonic()
    args = install_args(spec, cell, pins)
    environment = environment_key(spec, cell, reports, pins)
    request = json.dumps(runner_request(spec, cell), sort_keys=True)
    key = fingerprint(environment, suite_key(), inputs_key(spec), request)
    previous = _previous(out) if cached else None
    if previous is not None and previous.status == Status.OK and previous.cache_key == key:
        result = replace(previous, reused=True)
    else:
        deadline = start + spec.cell_timeout
        started = time.time()
        write_state(out, STARTED, started)
        try:
            with environment_for(python, environment) as python:
                result = _install(spec, cell, python, (environment, args), deadline, log, out, started)
                installed = time.monotonic()
                result = result or _probe(spec, cell, python, out, deadline, started)
            checked = ("environment check and install", round(installed - start, 3))
            result = replace(result, phases=(checked, *result.phases))
        finally:
            state_path(out).unlink(missing_ok=True)
        result = replace(result, cache_key=key, seconds=round(time.monotonic() - start, 2))
    write_json_atomic(out, result.to_json())
    return result


def fingerprint(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def tree_key(path: Path, skip: Collection[Path] = ()) -> str:
    """The contents of a local requirement: every file of its code (`local_files`), path and bytes."""
    digest = hashlib.sha256()
    for file in local_files(path, skip):
        digest.update(str(file.relative_to(path)).encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()[:16]


def local_files(path: Path, skip: Collection[Path] = ()) -> list[Path]:
    """The files of a local requirement that make its code: in a git checkout what git tracks or would track (its
    .gitignore honoured), elsewhere every file; never caches, build output, virtual environments, the folders in
    `skip` (this run's reports; a file there, the matrix file itself) or other compat-matrix reports folders (their
    reports and lock change every run)."""
    listed = _git_files(path)
    if listed is None:
        listed = [Path(top) / name for top, dirs, names in os.walk(path) for name in names]
    kept: dict[Path, bool] = {Path(folder).resolve(): False for folder in skip}
    files = set(kept)
    return sorted(
        f
        for f in listed
        if _kept_folder(f.parent, path, kept) and f.is_file() and not f.is_symlink() and f.resolve() not in files
    )


def _git_files(path: Path) -> list[Path] | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(path), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return [path / name for name in done.stdout.decode("utf-8", "surrogateescape").split("\0") if name]


def _kept_folder(folder: Path, root: Path, kept: dict[Path, bool]) -> bool:
    """Whether files in `folder` (below `root`) are code: no folder on the way is a cache, an environment or a
    reports folder."""
    if folder in kept:
        return kept[folder]
    if folder == root or root not in folder.parents:
        kept[folder] = True
        return True
    name = folder.name
    own = not (
        name in _SKIP or name.endswith(".egg-info") or (folder / "pyvenv.cfg").exists() or (folder / CELLS_DIR).is_dir()
    )
    kept[folder] = own and _kept_folder(folder.parent, root, kept)
    return kept[folder]


def environment_key(
    spec: MatrixSpec, cell: Cell, reports: Path | None = None, pins: Mapping[str, str] | None = None
) -> str:
    """What the environment must hold: the install arguments (ranged values pinned as `pins` say), and the contents
    of local requirements (less the reports folder and the matrix file, when they sit inside one of them: what the
    file asks for is in the arguments)."""
    skip = [*([reports] if reports else []), Path(spec.path)]
    args = json.dumps(install_args(spec, cell, pins))
    return fingerprint(args, *(tree_key(p, skip) for p in local_requirements(spec)))


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


def inputs_key(spec: MatrixSpec) -> str:
    """The contents of the matrix's own probe modules and of the tests its subjects name: an edit to them makes
    earlier results stale (for `--cached`), as an edit to compat-matrix's probes does."""
    paths = [Path(ref) for ref in spec.probes if ref.endswith(".py")]
    paths += [Path(test.partition("::")[0]) for subject in spec.subjects for test in subject.tests]
    keys = [tree_key(p) if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()[:16] for p in paths if p.exists()]
    return fingerprint(*keys)


def suite_key() -> str:
    """The in-environment code that produced a result: a change to any probe makes earlier results stale."""
    return fingerprint(*(f.read_text(encoding="utf-8") for f in sorted(PACKAGE.rglob("*.py"))))


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


def uv_binary() -> str:
    """The uv that nox's uv backend uses too: the one installed with compat-matrix, else the one on PATH."""
    try:
        import uv  # the `uv` package from PyPI ships the binary and says where it is

        return uv.find_uv_bin()
    except (ImportError, FileNotFoundError):
        return shutil.which("uv") or "uv"


def _previous(path: Path) -> CellResult | None:
    try:
        return read_cell_result(path)
    except ResultFileError:
        return None


def _install(
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
    (home / STAMP).unlink(missing_ok=True)
    # Installed files may keep the size and mtime of those they replace; their bytecode must not outlive them, nor
    # what the probes kept about the release (the call sites they parsed).
    shutil.rmtree(home / BYTECODE, ignore_errors=True)
    shutil.rmtree(home / KEPT, ignore_errors=True)
    write_state(out, INSTALLING, started)
    commands = [[uv_binary(), "pip", "install", "--python", str(python), *uv_args(args, home)]]
    if how == FRESH:
        commands.insert(0, [uv_binary(), "venv", "--clear", "--quiet", "--python", str(python), str(home)])
    for command in commands:
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
    why = mismatched_builds(installed(python), import_error(python))
    if why:
        return failed_result(spec, cell, INSTALL_FAILED, why)
    write_json_atomic(home / STAMP, Stamp(environment, asked(args)).to_json())
    return None


OVERRIDES = "compat-matrix-overrides.txt"  # in the environment: the overrides uv gets (`--override`)


def uv_args(args: list[str], home: Path) -> list[str]:
    """The install arguments as uv takes them: the overrides (cells.OVERRIDE + a requirement) in a file of the
    environment, given with `--override`."""
    overrides = [arg.removeprefix(OVERRIDE) for arg in args if arg.startswith(OVERRIDE)]
    rest = [arg for arg in args if not arg.startswith(OVERRIDE)]
    if not overrides:
        return rest
    write_text_atomic(home / OVERRIDES, "\n".join(overrides) + "\n")
    return [*rest, "--override", str(home / OVERRIDES)]


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


def _probe(spec: MatrixSpec, cell: Cell, python: Path, out: Path, deadline: float, started: float) -> CellResult:
    write_state(out, PROBING, started)
    request = out.with_suffix(".request.json")
    write_json_atomic(request, runner_request(spec, cell))
    # The runner writes a file of its own: the result file appears once, whole, with its fingerprint and duration,
    # so whoever watches the run tells each cell once.
    raw = out.with_suffix(".runner.json")
    out.unlink(missing_ok=True)
    raw.unlink(missing_ok=True)
    env = runner_environment(python.parent.parent)
    command = [str(python), "-m", "compat_matrix.cell", str(request), str(raw)]
    begun = time.monotonic()
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
    if done.returncode != 0 or not raw.exists():
        sys.stderr.write(done.stderr[-4000:])
        why = f"signal {-done.returncode}" if done.returncode < 0 else f"exit code {done.returncode}"
        tail = installer_reason(done.stderr.strip().splitlines()[-1]) if done.stderr.strip() else ""
        return failed_result(spec, cell, CRASHED, f"probe runner ended with {why}" + (f": {tail}" if tail else ""))
    try:
        result = CellResult.from_json(json.loads(raw.read_text(encoding="utf-8")))
    finally:
        raw.unlink(missing_ok=True)
    outside = round(time.monotonic() - begun - (result.seconds or 0.0), 3)
    return replace(result, phases=(("start the interpreter, write the result", outside), *result.phases))


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
    environment, args = environment_key(spec, cell, reports, pins), install_args(spec, cell, pins)
    out = home / "compat-matrix-init.json"  # where _install says that it is installing
    with _held(home, exclusive=True):
        failed = _install(spec, cell, python, (environment, args), time.monotonic() + spec.cell_timeout, log, out, 0)
    state_path(out).unlink(missing_ok=True)
    return python, failed.reason if failed else None


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


def python_available(version: str) -> bool:
    """Whether uv finds an interpreter for `version` on this machine, without downloading one."""
    found = subprocess.run(
        [uv_binary(), "python", "find", "--no-python-downloads", version], capture_output=True, text=True
    )
    return found.returncode == 0


def write_unavailable(spec: MatrixSpec, cell: Cell, reports: Path) -> CellResult:
    return write_failed(spec, cell, reports, NO_INTERPRETER, f"no Python {cell.python} on this machine")


def write_skipped(spec: MatrixSpec, cell: Cell, reports: Path, reason: str) -> CellResult:
    """The result of a cell with nothing to install (`pre` with no pre-release to stand for), saying why."""
    return write_failed(spec, cell, reports, Status.SKIPPED, reason)


def write_failed(spec: MatrixSpec, cell: Cell, reports: Path, status: str, reason: str) -> CellResult:
    result = failed_result(spec, cell, status, reason)
    write_json_atomic(result_path(reports, cell), result.to_json())
    return result


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


_OUTPUT = threading.Lock()


def say(line: str) -> None:
    """Print one whole line; lines of several threads never mix."""
    with _OUTPUT:
        sys.stdout.write(line if line.endswith("\n") else line + "\n")
        sys.stdout.flush()


def run_watched(
    command: list[str],
    env: Mapping[str, str],
    tick: Callable[[], None] = lambda: None,
    shown: Callable[[str], bool] = lambda line: True,
    grace: float = 60.0,
) -> tuple[int, bool]:
    """Run `command` (a nox running cells) to its end, passing on the lines of its output that are `shown` and
    calling `tick` about every second; return its exit code and whether it was interrupted.

    Ctrl-C reaches the whole foreground process group, the nox included, which then stops its cells. SIGTERM (a
    CI runner) reaches only this process: it is passed on to the nox as the SIGINT that nox understands, since a
    nox killed by SIGTERM leaves its cells running. Either way this waits for the cells to be stopped, `grace`
    seconds at most. The output goes through a pipe, so nox prints plain lines that `tick`'s lines can join."""
    terminated = False

    def on_sigterm(signum: int, frame: object) -> None:
        nonlocal terminated
        terminated = True
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    process = subprocess.Popen(
        command, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    )
    forward = threading.Thread(target=lambda: [say(line) for line in process.stdout if shown(line)], daemon=True)
    forward.start()
    interrupted = False
    try:
        while process.poll() is None:
            try:
                process.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                tick()
    except KeyboardInterrupt:
        interrupted = True
        if terminated:
            process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
        forward.join(timeout=10)
    tick()
    return process.returncode, interrupted
