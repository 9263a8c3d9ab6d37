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

import ast
import difflib
import inspect
import json
import os
import re
import textwrap
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from packaging.version import Version

from compat_matrix.host import resolve
from compat_matrix.host.baseline import BaselineError, load_report
from compat_matrix.host.cells import Cell, cells
from compat_matrix.host.exits import BadInput
from compat_matrix.host.folders import reports_folder
from compat_matrix.host.spec import (
    PYTHON,
    Declared,
    MatrixError,
    MatrixSpec,
    Subject,
    axis_specifier,
    load_all,
    matrix_files,
    show,
    timestamp,
)
from compat_matrix.shared.results import write_json_atomic
from compat_matrix.shared.vocabulary import ConclusionKind, ObservationName

SCHEMA = 1
PLAN_VARIABLE = "COMPAT_MATRIX_PLAN"  # the one variable a run hands down: the path of its plan file
FILES_VARIABLE = "COMPAT_MATRIX"  # matrix files, separated by os.pathsep (default: matrix/*.toml)
REPORTS_VARIABLE = "COMPAT_MATRIX_REPORTS"  # one reports folder for every file
LANES_VARIABLE = "COMPAT_MATRIX_LANES"  # cells at once
CELL_MEMORY = 2 * 1024**3  # bytes one cell takes at most, about: torch, transformers, a tiny model
PLANS = ".compat-matrix"  # in the run's work folder (the environments' folder): one plan file per run


@dataclass(frozen=True)
class Bisect:
    """What `bisect` is asked, as typed."""

    range: str
    subject: str | None = None
    axis: str | None = None
    observation: str | None = None
    method: str | None = None  # bisect on this audited override's conclusion


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


class Expansion(NamedTuple):
    """What one sweep of a matrix file stood for when the run was planned."""

    package: str
    sweep: str  # as said: "every minor in >=5.14"
    releases: tuple[str, ...]


@dataclass(frozen=True)
class Matrix:
    """One matrix file as the run uses it."""

    spec: MatrixSpec  # sweeps expanded into releases; the run's exclude_newer and mutants applied
    cells: tuple[Cell, ...]  # what its report covers, in file order
    reports: Path
    baseline: Path | None = None  # an earlier report of this matrix, checked
    sweeps: tuple[Expansion, ...] = ()
    declared: tuple[Declared, ...] = ()  # the ranges the requirements declare for axes swept over them


@dataclass(frozen=True)
class Bisection:
    """A bisection, checked: its matrix, subject and axis exist, and its range's releases, oldest first, each with
    the cell that tests it (the other axes at their first value)."""

    matrix: str
    target: str
    axis: str
    range: str
    observation: str | None
    releases: tuple[str, ...]
    cells: tuple[Cell, ...]
    method: str | None = None

    def cell(self, release: Version) -> Cell:
        return self.cells[self.releases.index(str(release))]


@dataclass(frozen=True)
class Plan:
    home: Path
    noxfile: Path
    files: tuple[Path, ...]
    matrices: tuple[Matrix, ...]
    lanes: int = 1
    cached: bool = False
    selected: tuple[str, ...] | None = None  # the cells to run; None: every cell of the matrices
    report: bool = True
    # The release each ranged axis value of a cell installs (`{"transformers": "5.24.0"}` for `5.x`), by cell id,
    # and why a cell installs its values as requested instead (the index could not be read). None: not planned
    # (the plan lists cells; a cell run on its own resolves them when it starts).
    pins: Mapping[str, Mapping[str, str]] | None = None
    unpinned: Mapping[str, str] = field(default_factory=dict)
    bisection: Bisection | None = None
    handed_down: bool = False  # read from its file: the process that wrote it tells each finished cell
    fail_on: tuple[ConclusionKind, ...] = ()  # an override with one of these conclusions on any release fails the run

    def matrix(self, name: str) -> Matrix:
        return next(m for m in self.matrices if m.spec.name == name)

    def cells(self) -> list[tuple[Matrix, Cell]]:
        """Every cell the run may run, each once: the matrices' cells, then those only a bisection tests."""
        listed = [(m, c) for m in self.matrices for c in m.cells]
        if self.bisection:
            known = {c.id for _, c in listed}
            matrix = self.matrix(self.bisection.matrix)
            listed += [(matrix, c) for c in self.bisection.cells if c.id not in known]
        return listed

    def to_run(self) -> list[tuple[Matrix, Cell]]:
        return [(m, c) for m, c in self.cells() if self.selected is None or c.id in self.selected]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "home": str(self.home),
            "noxfile": str(self.noxfile),
            "files": list(map(str, self.files)),
            "matrices": [
                {
                    "spec": m.spec.to_json(),
                    "cells": [_cell_json(c) for c in m.cells],
                    "reports": str(m.reports),
                    "baseline": str(m.baseline) if m.baseline else None,
                    "sweeps": [[package, sweep, list(releases)] for package, sweep, releases in m.sweeps],
                    "declared": [d.to_json() for d in m.declared],
                }
                for m in self.matrices
            ],
            "lanes": self.lanes,
            "cached": self.cached,
            "selected": None if self.selected is None else list(self.selected),
            "report": self.report,
            "pins": None if self.pins is None else {cell: dict(p) for cell, p in self.pins.items()},
            "unpinned": dict(self.unpinned),
            "bisection": None if self.bisection is None else _bisection_json(self.bisection),
            "fail_on": [str(kind) for kind in self.fail_on],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Plan:
        matrices = tuple(
            Matrix(
                MatrixSpec.from_json(m["spec"]),
                tuple(map(_cell, m["cells"])),
                Path(m["reports"]),
                Path(m["baseline"]) if m["baseline"] else None,
                tuple(Expansion(package, sweep, tuple(releases)) for package, sweep, releases in m["sweeps"]),
                tuple(Declared.from_json(d) for d in m.get("declared", ())),
            )
            for m in data["matrices"]
        )
        bisection = data["bisection"]
        return cls(
            Path(data["home"]),
            Path(data["noxfile"]),
            tuple(map(Path, data["files"])),
            matrices,
            int(data["lanes"]),
            bool(data["cached"]),
            None if data["selected"] is None else tuple(data["selected"]),
            bool(data["report"]),
            data["pins"],
            dict(data["unpinned"]),
            None if bisection is None else _bisection(bisection),
            fail_on=tuple(ConclusionKind(kind) for kind in data.get("fail_on", ())),
        )


def _cell_json(cell: Cell) -> list[Any]:
    return [cell.matrix, [list(pair) for pair in cell.axes]]


def _cell(data: list[Any]) -> Cell:
    matrix, axes = data
    return Cell(str(matrix), tuple((str(a), str(v)) for a, v in axes))


def _bisection_json(b: Bisection) -> dict[str, Any]:
    return {
        "matrix": b.matrix,
        "target": b.target,
        "axis": b.axis,
        "range": b.range,
        "observation": b.observation,
        "releases": list(b.releases),
        "cells": [_cell_json(c) for c in b.cells],
        "method": b.method,
    }


def _bisection(data: dict[str, Any]) -> Bisection:
    cells_ = tuple(map(_cell, data["cells"]))
    return Bisection(
        data["matrix"],
        data["target"],
        data["axis"],
        data["range"],
        data["observation"],
        tuple(data["releases"]),
        cells_,
        data.get("method"),
    )


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
    every problem. Sweeps are expanded from the index's answer (kept a few minutes: resolve.lookup); with
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
    bisection = _checked(lambda: _bisection_of(request.bisect, matrices, lookups), problems) if request.bisect else None
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
            declared = tuple(resolve.declared_ranges(matrix_spec, lookups.metadata(matrix_spec.exclude_newer)))
            swept = resolve.expansions(matrix_spec, releases_of, declared)
        except MatrixError as exc:
            problems += exc.problems
            continue
        expanded = resolve.expand(matrix_spec, releases_of, declared)
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
    """One `resolve.lookup` per `exclude_newer` value: each package is asked of the index once per plan."""

    def __init__(self, environ: Mapping[str, str]):
        self.environ = environ
        self.made: dict[str | None, Callable[[str], tuple[Version, ...]]] = {}
        self.read: dict[str | None, Callable[[str], resolve.Metadata]] = {}

    def __call__(self, exclude_newer: str | None) -> Callable[[str], tuple[Version, ...]]:
        if exclude_newer not in self.made:
            self.made[exclude_newer] = resolve.lookup(self.environ, exclude_newer)
        return self.made[exclude_newer]

    def metadata(self, exclude_newer: str | None) -> Callable[[str], resolve.Metadata]:
        """What a requirement's distribution declares (resolve.requires), each read once per plan."""
        if exclude_newer not in self.read:
            self.read[exclude_newer] = resolve.metadata_reader(self.environ, exclude_newer)
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
        except resolve.ResolveError as exc:
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


def _bisection_of(asked: Bisect, matrices: Sequence[Matrix], lookups: Lookups) -> Bisection:
    """The matrix, subject, axis and releases a bisection is about; BadInput, one line, for the first problem."""
    subjects = [(m, subject.target) for m in matrices for subject in m.spec.subjects]
    wanted = asked.subject or (subjects[0][1] if len(subjects) == 1 else None)
    if wanted is None:
        raise BadInput([f"--subject: which one? ({', '.join(t for _, t in subjects)})"])
    found = [m for m, target in subjects if target == wanted or _found_in(wanted, target)]
    if len(found) != 1:
        why = "not a subject of the matrix" if not found else "a subject of several matrices: name one file"
        raise BadInput([f"--subject {show(wanted)}: {why} (subjects: {', '.join(t for _, t in subjects)})"])
    matrix = found[0]
    packages = [a.package for a in matrix.spec.axes if a.package != PYTHON]
    axis = asked.axis or ("transformers" if "transformers" in packages else next(iter(packages), ""))
    if axis not in packages:
        raise BadInput([f"--axis {show(axis)}: not a package axis of {matrix.spec.path} ({', '.join(packages)})"])
    if asked.observation is not None and asked.method is not None:
        raise BadInput(["--method and --observation: bisect on one of them"])
    if asked.observation is not None:
        _check_observation(asked.observation, matrix.spec)
    if asked.method is not None:
        _check_method(asked.method, next(s for s in matrix.spec.subjects if s.target == wanted))
    try:
        allowed = axis_specifier(asked.range)
    except ValueError as exc:
        raise BadInput([f"--range {show(asked.range)}: {exc}"]) from None
    try:
        versions = lookups(matrix.spec.exclude_newer)(axis)
    except resolve.ResolveError as exc:
        raise BadInput([f"--range {show(asked.range)}: cannot list the releases of {axis}: {exc}"]) from None
    releases = list(allowed.filter(versions))
    if not releases:
        newest = f"the newest is {versions[-1]}" if versions else "there is none"
        raise BadInput([f"--range {show(asked.range)}: no release of {axis} in it ({newest})"])
    base = {a.package: a.values[0] for a in matrix.spec.axes}
    tested = tuple(
        Cell(matrix.spec.name, tuple((a, str(release) if a == axis else v) for a, v in base.items()))
        for release in releases
    )
    listed = tuple(map(str, releases))
    return Bisection(matrix.spec.name, wanted, axis, asked.range, asked.observation, listed, tested, asked.method)


def _check_method(method: str, subject: Subject) -> None:
    """Refuse a `--method` that is not one of the subject's audited names (where the matrix file lists them; else
    any name a class could define)."""
    if subject.methods and method not in subject.methods:
        close = difflib.get_close_matches(method, list(subject.methods), n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"audited: {', '.join(subject.methods)}"
        raise BadInput([f"--method {show(method)}: not an audited name of {subject.target}; {hint}"])
    if not method.isidentifier():
        raise BadInput([f"--method {show(method)}: not a name a class could define"])


def _found_in(wanted: str, target: str) -> bool:
    """Whether a class (`module:Class`) lies in a module or package target, where the cells find it."""
    module = wanted.partition(":")[0]
    return ":" not in target and ":" in wanted and (module == target or module.startswith(f"{target}."))


_OBSERVATION = re.compile(r"\w+\.\S+")


def _check_observation(observation: str, matrix_spec: MatrixSpec) -> None:
    """Refuse an `--observation` that no probe of the run can make: a probe that does not exist, or a name that
    the probe never returns (where its source says which names it returns)."""
    if not _OBSERVATION.fullmatch(observation):
        raise BadInput([f"--observation {show(observation)}: as probe.name, e.g. trainer_step.default"])
    probe, name = observation.split(".", 1)
    known = probe_names(matrix_spec)
    if known is None or probe not in known:
        if known is not None:
            close = difflib.get_close_matches(probe, list(known), n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"probes: {', '.join(known)}"
            raise BadInput([f"--observation {show(observation)}: no probe {probe!r} in this run; {hint}"])
        return
    names = known[probe]
    if names is not None and name not in names:
        raise BadInput([f"--observation {show(observation)}: {probe} observes {', '.join(sorted(names))}"])


def probe_names(matrix_spec: MatrixSpec) -> dict[str, frozenset[str] | None] | None:
    """The probes a matrix's cells run, each with the observation names it can make (None: names it makes up as
    it runs); None when a probe module named by its module name hides which probes it registers."""
    from compat_matrix.probes import registry

    found: dict[str, frozenset[str] | None] = {name: _returned(p.func) for name, p in registry().items()}
    for ref in matrix_spec.probes:
        if not ref.endswith(".py"):
            return None
        try:
            tree = ast.parse(Path(ref).read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            return None  # the cell will say what is wrong with it
        found[Path(ref).name] = None  # a module that fails to import is an observation named after it
        found |= {node.name: _names(node) for node in ast.walk(tree) if _registers(node)}
    return found


def _registers(node: ast.AST) -> bool:
    """Whether `node` is a function decorated with `@probe(...)` (or `@<module>.probe(...)`)."""
    if not isinstance(node, ast.FunctionDef):
        return False
    calls = [d.func for d in node.decorator_list if isinstance(d, ast.Call)]
    return any(getattr(f, "id", None) == "probe" or getattr(f, "attr", None) == "probe" for f in calls)


def _returned(func: Callable[..., Any]) -> frozenset[str] | None:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return None
    node = tree.body[0]
    return _names(node) if isinstance(node, ast.FunctionDef) else None


def _names(function: ast.FunctionDef) -> frozenset[str] | None:
    """The names a probe function returns: the keys of the dict displays in its own `return`s, with the names every
    probe call may add (but `lines`, made on the class as shipped alone: nothing to compare); None when it returns
    anything else (a helper's answer, a dict made as it runs)."""
    names: set[str] = set(ObservationName) - {ObservationName.LINES}
    for node in _own_returns(function):
        keys = node.value.keys if isinstance(node.value, ast.Dict) else [None]
        if not all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in keys):
            return None
        names |= {k.value for k in keys}
    return frozenset(names)


def _own_returns(node: ast.AST) -> Iterator[ast.Return]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue  # a nested function's returns are its own
        if isinstance(child, ast.Return):
            yield child
        yield from _own_returns(child)


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
