"""The plan of a run, made once and handed down.

The process that starts a run (the command line, or the nox that runs `matrix`, `bisect` or one cell's session)
parses the matrix files, resolves every sweep and ranged axis value against the package index, and checks every
option: lanes, `--exclude-newer`, baselines, `--cell`, bisect's subject, axis, range and `--observation`. Bad input
of any kind is one BadInput, one line per problem, before anything runs. The plan (specs, cells, the releases each
cell installs, options) is then written to one file under the run's work folder, and only its path is passed on
(COMPAT_MATRIX_PLAN): the nested nox and each cell's nox session read it and nothing else. None of them parses a
matrix file or asks the index again, so what the cells install and what the report covers cannot drift apart.

    request_from(environ, home, noxfile)   what the variables ask for (COMPAT_MATRIX, COMPAT_MATRIX_REPORTS)
    load(files)                            the matrix files, parsed once
    make(request, loaded)                  the Plan, checked and resolved, or BadInput
    write(plan, folder) / read(path)       the plan file
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from packaging.version import Version

from compat_matrix.host import distributions, package_index, resolve
from compat_matrix.host.baseline import BaselineError, load_report
from compat_matrix.host.bisect_request import Bisect, bisection_of
from compat_matrix.host.cells import Cell, cells
from compat_matrix.host.exits import BadInput
from compat_matrix.host.folders import reports_folder
from compat_matrix.host.planned import SCHEMA, Expansion, Matrix, Plan
from compat_matrix.host.spec import MatrixError, MatrixSpec, load_all, matrix_files, show, timestamp
from compat_matrix.shared.results import write_json_atomic
from compat_matrix.shared.vocabulary import ConclusionKind

PLAN_VARIABLE = "COMPAT_MATRIX_PLAN"  # the one variable a run hands down: the path of its plan file
FILES_VARIABLE = "COMPAT_MATRIX"  # matrix files, separated by os.pathsep (default: matrix/*.toml)
REPORTS_VARIABLE = "COMPAT_MATRIX_REPORTS"  # one reports folder for every file
LANES_VARIABLE = "COMPAT_MATRIX_LANES"  # cells at once
CELL_MEMORY = 2 * 1024**3  # bytes one cell takes at most, about: torch, transformers, a tiny model
PLANS = ".compat-matrix"  # in the run's work folder (the environments' folder): one plan file per run


@dataclass(frozen=True)
class Request:
    """What a run is asked to do, before anything is checked: from the command line, or from nox's variables and a
    session's posargs."""

    home: Path  # the folder whose matrix/ and reports/ are the defaults
    noxfile: Path  # the noxfile whose sessions run the cells
    files: tuple[Path, ...]
    reports: Path | None = None  # one reports folder for every file
    lanes: int | None = None  # cells at once; None: COMPAT_MATRIX_LANES, else one per core
    cached: bool = False
    mutants: bool = False
    exclude_newer: str | None = None  # as typed: checked by make
    baselines: tuple[Path, ...] = ()
    cells: tuple[str, ...] = ()  # run just these cells (and write no report)
    runs: bool = False  # cells will run: plan their lanes and the releases they install
    report: bool = True  # write the reports afterwards
    bisect: Bisect | None = None
    fail_on: tuple[str, ...] = ()  # conclusions that fail the run, as typed: "harmful,could-not-run"


def request_from(environ: Mapping[str, str], home: Path, noxfile: Path) -> Request:
    """What the variables ask for: the files of COMPAT_MATRIX (else home/matrix/*.toml), COMPAT_MATRIX_REPORTS."""
    files = matrix_files(environ.get(FILES_VARIABLE), Path(home) / "matrix")
    reports = environ.get(REPORTS_VARIABLE)
    return Request(
        Path(home).resolve(), Path(noxfile).resolve(), tuple(files), Path(reports).resolve() if reports else None
    )


@dataclass(frozen=True)
class Loaded:
    """The matrix files, each parsed once, and the problems of those that could not be."""

    specs: tuple[MatrixSpec, ...]
    problems: tuple[str, ...]


def load(files: Sequence[Path]) -> Loaded:
    specs, problems = load_all(list(files))
    return Loaded(tuple(specs), tuple(problems))


def make(request: Request, loaded: Loaded | None = None, environ: Mapping[str, str] = os.environ) -> Plan:
    """The plan of the run `request` asks for (from the files as `loaded`, else loading them); BadInput listing
    every problem. Sweeps are expanded from the index's answer (kept a few minutes: package_index.lookup); with
    `request.runs`, each cell's ranged values are resolved too, and an index that cannot be read then only means
    that a cell installs what was asked for."""
    loaded = loaded or load(request.files)
    problems = list(loaded.problems)
    lookups = Lookups(environ)
    matrices = _matrices(loaded.specs, request, lookups, problems)
    if problems:
        raise BadInput(problems)
    matrices = _with_baselines(matrices, request.baselines, problems)
    ids = {c.id for m in matrices for c in m.cells}
    problems += [
        f"--cell {cell!r}: no such cell (`compat-matrix list` shows them)" for cell in request.cells if cell not in ids
    ]
    cores = os.cpu_count() or 1
    width = _checked(lambda: request.lanes or lanes(environ, cores, physical_memory()), problems) if request.runs else 1
    bisection = _checked(lambda: bisection_of(request.bisect, matrices, lookups), problems) if request.bisect else None
    fail_on = fail_on_kinds(request.fail_on, problems)
    if problems:
        raise BadInput(problems)
    plan = Plan(
        request.home,
        request.noxfile,
        request.files,
        tuple(matrices),
        width or 1,
        request.cached or request.bisect is not None,  # a bisection reuses the results of earlier runs
        tuple(request.cells) or None,
        request.report and not request.cells and not bisection,
        bisection=bisection,
        fail_on=fail_on,
    )
    if not request.runs:
        return plan
    pins, unpinned = pinned(plan.cells(), lookups)
    return replace(plan, pins=pins, unpinned=unpinned)


def _matrices(specs: Sequence[MatrixSpec], request: Request, lookups: Lookups, problems: list[str]) -> list[Matrix]:
    """Each spec as the run uses it: the run's --exclude-newer and --mutants applied, its sweeps expanded into
    releases, its cells, its reports folder. Problems go to `problems`."""
    newer = _timestamp(request.exclude_newer, problems)
    matrices = []
    for raw in specs:
        matrix_spec = replace(raw, exclude_newer=newer or raw.exclude_newer, mutants=raw.mutants or request.mutants)
        releases_of = lookups(matrix_spec.exclude_newer)
        try:
            declared = tuple(distributions.declared_ranges(matrix_spec, lookups.metadata(matrix_spec.exclude_newer)))
            swept = resolve.expansions(matrix_spec, releases_of, declared)
        except MatrixError as exc:
            problems += exc.problems
            continue
        expanded = resolve.with_releases(matrix_spec, swept)
        sweeps = tuple(Expansion(package, str(sweep), tuple(map(str, found))) for package, sweep, found in swept)
        folder = request.reports or reports_folder(matrix_spec.path, request.home)
        matrices.append(Matrix(expanded, tuple(cells(expanded)), folder, sweeps=sweeps, declared=declared))
    return matrices


def fail_on_kinds(typed: Sequence[str], problems: list[str]) -> tuple[ConclusionKind, ...]:
    """The conclusions `--fail-on` names (comma-separated, repeatable, `could-not-run` or `could not run`), in the
    vocabulary's order; a word that is none goes to `problems`, with the closest one."""
    known = {kind.option: kind for kind in ConclusionKind}
    found: set[ConclusionKind] = set()
    for text in typed:
        for word in (w.strip() for w in text.split(",")):
            key = "-".join(word.lower().split())
            if key in known:
                found.add(known[key])
                continue
            close = difflib.get_close_matches(key, list(known), n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"one of {', '.join(known)}"
            problems.append(f"--fail-on {show(word)}: not a conclusion; {hint}")
    return tuple(kind for kind in ConclusionKind if kind in found)


def _checked(check: Callable[[], Any], problems: list[str]) -> Any:
    """`check()`, or None with its problems added to `problems`."""
    try:
        return check()
    except BadInput as exc:
        problems += exc.problems
        return None


class Lookups:
    """One `package_index.lookup` per `exclude_newer` value: each package is asked of the index once per plan."""

    def __init__(self, environ: Mapping[str, str]):
        self.environ = environ
        self.made: dict[str | None, Callable[[str], tuple[Version, ...]]] = {}
        self.read: dict[str | None, Callable[[str], distributions.Metadata]] = {}

    def __call__(self, exclude_newer: str | None) -> Callable[[str], tuple[Version, ...]]:
        if exclude_newer not in self.made:
            self.made[exclude_newer] = package_index.lookup(self.environ, exclude_newer)
        return self.made[exclude_newer]

    def metadata(self, exclude_newer: str | None) -> Callable[[str], distributions.Metadata]:
        """What a requirement's distribution declares (distributions.requires), each read once per plan."""
        if exclude_newer not in self.read:
            self.read[exclude_newer] = distributions.metadata_reader(self.environ, exclude_newer)
        return self.read[exclude_newer]


def _timestamp(value: str | None, problems: list[str]) -> str | None:
    if not value:
        return None
    try:
        return timestamp(value)
    except ValueError as exc:
        problems.append(f"--exclude-newer = {show(value)}: {exc}")
        return None


def pinned(
    planned: Sequence[tuple[Matrix, Cell]], lookups: Callable[[str | None], Callable[[str], Sequence[Version]]]
) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """The release each ranged axis value of each cell installs today (resolve.pins), by cell id; and, for the
    cells whose values could not be resolved (an index that cannot be read, or `pre` with no pre-release to stand
    for: resolve.unresolved), why."""
    pins, unpinned = {}, {}
    for matrix, cell in planned:
        releases_of = lookups(matrix.spec.exclude_newer)
        try:
            pins[cell.id] = resolve.pins(cell, releases_of)
            why = resolve.unresolved(cell, releases_of)
        except package_index.ResolveError as exc:
            why = str(exc)
        if why:
            unpinned[cell.id] = why
    return pins, unpinned


def lanes(environ: Mapping[str, str], cpus: int, memory: int) -> int:
    """Cells at once: COMPAT_MATRIX_LANES, else one per core, and no more than the memory holds (CELL_MEMORY each)."""
    value = environ.get(LANES_VARIABLE, "").strip()
    if value:
        if not (value.isascii() and value.isdecimal()) or int(value) < 1:
            raise BadInput([f"{LANES_VARIABLE} = {show(value)}: a whole number of cells at once, at least 1"])
        return int(value)
    return max(1, min(cpus, memory // CELL_MEMORY))


def physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return CELL_MEMORY * (os.cpu_count() or 1)


def _with_baselines(matrices: list[Matrix], paths: Sequence[Path], problems: list[str]) -> list[Matrix]:
    """Each matrix with its baseline: a report file, or a folder standing for the `<name>.json` of every matrix
    being reported that it holds. Each is read now, before any report is rewritten (a baseline may be the report)."""
    names = {m.spec.name for m in matrices}
    files = []
    for path in paths:
        path = Path(path).resolve()
        files += (
            [path / f"{n}.json" for n in sorted(names) if (path / f"{n}.json").exists()] if path.is_dir() else [path]
        )
    found: dict[str, Path] = {}
    for path in files:
        try:
            matrix = load_report(path).get("matrix")
        except BaselineError as exc:
            problems.append(str(exc))
            continue
        if matrix not in names:
            problems.append(f"{path}: baseline of matrix {matrix!r}, which is not being reported")
        else:
            found[matrix] = path
    return [replace(m, baseline=found.get(m.spec.name)) for m in matrices]


def write(plan: Plan, folder: Path) -> Path:
    """The plan in a file of its own under `folder` (the run's work folder), for the processes it starts."""
    path = Path(folder) / PLANS / f"plan-{os.getpid()}.json"
    write_json_atomic(path, plan.to_json())
    return path


def read(path: Path) -> Plan:
    """The plan a run handed down; BadInput naming the file when it cannot be read."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if data.get("schema") != SCHEMA:
            raise ValueError(f"schema {data.get('schema')!r}, expected {SCHEMA}")
        return replace(Plan.from_json(data), handed_down=True)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BadInput([f"{PLAN_VARIABLE} = {show(str(path))}: not a plan of compat-matrix ({exc})"]) from None


def nested_environ(environ: Mapping[str, str], path: Path) -> dict[str, str]:
    """The environment of a process the run starts: the plan's path in place of every variable of the run."""
    run = {FILES_VARIABLE, REPORTS_VARIABLE, LANES_VARIABLE, PLAN_VARIABLE}
    return {k: v for k, v in environ.items() if k not in run} | {PLAN_VARIABLE: str(path)}
