"""The nox sessions of a matrix run: one per cell, and `matrix` (every cell in parallel lanes, then the report).

    plan(home, noxfile, environ)    the matrix files (COMPAT_MATRIX, else home/matrix/*.toml), their cells (sweeps
                                    expanded from the package index), and where their reports go
                                    (COMPAT_MATRIX_REPORTS, else each file's reports folder)
    register(plan)                  one nox session per cell, `matrix` and `bisect`
    run_matrix(plan, ...)           the cells in parallel lanes (a nested nox on `plan.noxfile`), then the report
    run_bisect(plan, argv, ...)     rounds of cells (bisect.py chooses them) until the first release that differs

Both noxfiles use this: the one packaged with compat-matrix (what `compat-matrix run` starts, from any folder) and
this repository's, which adds its development sessions. The nested nox rebuilds the same plan from the variables
`run_matrix` hands it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path

import nox

from compat_matrix import bisect, cells, envs, exits, progress, resolve, spec
from compat_matrix.results import write_json_atomic, write_text_atomic

FILES_VARIABLE = "COMPAT_MATRIX"  # matrix files, separated by os.pathsep
REPORTS_VARIABLE = "COMPAT_MATRIX_REPORTS"  # one reports folder for every file
HOME_VARIABLE = "COMPAT_MATRIX_HOME"  # the folder whose matrix/ and reports/ are the defaults
LANES_VARIABLE = "COMPAT_MATRIX_LANES"  # cells at once
CACHED_VARIABLE = "COMPAT_MATRIX_CACHED"  # "1": reuse results whose fingerprint is unchanged (`--cached`)
MUTANTS_VARIABLE = "COMPAT_MATRIX_MUTANTS"  # "1": run the tests against broken overrides too (`--mutants`)
EXCLUDE_NEWER_VARIABLE = resolve.EXCLUDE_NEWER_VARIABLE  # `--exclude-newer` of one run
EXTRA_VARIABLE = "COMPAT_MATRIX_EXTRA_CELLS"  # cells beyond the files' own (bisect's releases), as JSON
REPORT_NEEDS = ("pandas", "packaging")  # imported by the report, which runs in nox's own Python
CELL_MEMORY = 2 * 1024**3  # bytes one cell takes at most, about: torch, transformers, a tiny model
# Options of the nox that runs `matrix` that the cells' nox needs too, and whether each takes a value.
FORWARDED = {
    "--reuse-venv": True,
    "-r": False,
    "--reuse-existing-virtualenvs": False,
    "--no-reuse-existing-virtualenvs": False,
    "-R": False,
    "--no-install": False,
}


@dataclass(frozen=True)
class Plan:
    home: Path
    noxfile: Path  # the noxfile whose sessions run the cells
    files: tuple[Path, ...]
    specs: tuple[spec.MatrixSpec, ...]
    problems: tuple[str, ...]  # a bad file runs nothing; the report command says what is wrong
    override: Path | None  # one reports folder for every file
    extra: tuple[cells.Cell, ...] = ()  # cells beyond the files' own: releases a bisection tests

    def folder(self, matrix: spec.MatrixSpec) -> Path:
        return self.override or cells.reports_folder(matrix.path, self.home)

    @property
    def cells(self) -> list[tuple[spec.MatrixSpec, cells.Cell]]:
        if self.problems:
            return []
        listed = [(s, c) for s in self.specs for c in cells.cells(s)]
        ids = {c.id for _, c in listed}
        by_name = {s.name: s for s in self.specs}
        return listed + [(by_name[c.matrix], c) for c in self.extra if c.matrix in by_name and c.id not in ids]

    def environ(self) -> dict[str, str]:
        """The variables that make a nox on `noxfile` plan exactly this run."""
        environ = {**os.environ, FILES_VARIABLE: os.pathsep.join(map(str, self.files)), HOME_VARIABLE: str(self.home)}
        environ.pop(REPORTS_VARIABLE, None)
        environ.pop(EXTRA_VARIABLE, None)
        extra = json.dumps([[c.matrix, [list(pair) for pair in c.axes]] for c in self.extra])
        return (
            environ
            | ({REPORTS_VARIABLE: str(self.override)} if self.override else {})
            | ({EXTRA_VARIABLE: extra} if self.extra else {})
        )


def plan(home: Path, noxfile: Path, environ: Mapping[str, str]) -> Plan:
    """The run that the variables describe. Sweeps are expanded here, at the noxfile's import, from the index's
    answer (kept a few minutes, so that `nox -l`, the run and its nested nox ask once); an index that cannot be
    read when a sweep needs it is a problem of the run (exit code 2)."""
    files = spec.matrix_files(environ.get(FILES_VARIABLE), Path(home) / "matrix")
    loaded, problems = spec.load_all(files)
    specs, more = resolve.for_run(loaded, environ)
    if environ.get(MUTANTS_VARIABLE) == "1":
        specs = [replace(s, mutants=True) for s in specs]
    reports = environ.get(REPORTS_VARIABLE)
    extra, wrong = extra_cells(environ.get(EXTRA_VARIABLE, ""))
    return Plan(
        Path(home).resolve(),
        Path(noxfile).resolve(),
        tuple(files),
        tuple(specs),
        tuple(problems + more + wrong),
        Path(reports).resolve() if reports else None,
        extra,
    )


def extra_cells(text: str) -> tuple[tuple[cells.Cell, ...], list[str]]:
    """The cells COMPAT_MATRIX_EXTRA_CELLS names: `[[matrix, [[axis, value], ...]], ...]`."""
    if not text.strip():
        return (), []
    try:
        return tuple(cells.Cell(str(m), tuple((str(a), str(v)) for a, v in axes)) for m, axes in json.loads(text)), []
    except (ValueError, TypeError) as exc:
        return (), [f"{EXTRA_VARIABLE} = {spec.show(text)}: not a list of [matrix, [[axis, value], ...]] ({exc})"]


def noxfile_in(envdir: Path, packaged: Path) -> Path:
    """A copy of the packaged noxfile in `envdir`, for nox to run: nox works in its noxfile's folder, and uv refuses
    to work inside its own cache, which is where `uvx` keeps compat-matrix."""
    copy = Path(envdir) / "compat-matrix-noxfile.py"
    text = Path(packaged).read_text(encoding="utf-8")
    if not copy.exists() or copy.read_text(encoding="utf-8") != text:
        write_text_atomic(copy, text)
    return copy


def lanes(environ: Mapping[str, str], cpus: int, memory: int) -> int:
    """Cells at once: COMPAT_MATRIX_LANES, else one per core, and no more than the memory holds (CELL_MEMORY each)."""
    value = environ.get(LANES_VARIABLE, "").strip()
    if value:
        if not (value.isascii() and value.isdecimal()) or int(value) < 1:
            raise ValueError(f"{LANES_VARIABLE} = {spec.show(value)}: a whole number of cells at once, at least 1")
        return int(value)
    return max(1, min(cpus, memory // CELL_MEMORY))


def physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return CELL_MEMORY * (os.cpu_count() or 1)


def forwarded(argv: Sequence[str]) -> list[str]:
    """The options in a nox command line (up to `--`) that the cells' nox must get too."""
    args = list(argv[1:])
    args = args[: args.index("--")] if "--" in args else args
    out: list[str] = []
    for index, arg in enumerate(args):
        name, equals, _ = arg.partition("=")
        if name in FORWARDED:
            takes_value = FORWARDED[name] and not equals and index + 1 < len(args)
            out += [arg, args[index + 1]] if takes_value else [arg]
    return out


def register(run: Plan, with_matrix: bool = True) -> None:
    """One session per cell (what CI shards on), and `matrix`."""
    nox.options.default_venv_backend = "uv"
    nox.options.reuse_venv = "yes"
    os.environ.update(envs.uv_environment(os.environ))
    for matrix_spec, cell in run.cells:
        cell_session(matrix_spec, cell, run.folder(matrix_spec))
    if not with_matrix:
        return

    def matrix(session: nox.Session) -> None:
        """Run every cell of the matrix files, then write their reports (<name>.md, .json and .csv)."""
        matrix_session(session, run)

    nox.session(name="matrix", python=False)(matrix)

    def bisect(session: nox.Session) -> None:
        """Find the first release in a range whose verdict for a subject differs: -- --subject M:C --range SPEC."""
        bisect_session(session, run)

    nox.session(name="bisect", python=False, default=False)(bisect)


def cell_session(matrix_spec: spec.MatrixSpec, cell: cells.Cell, reports: Path) -> None:
    """The session of one cell. It fails when the cell could not run; its result file says why either way."""

    def run(session: nox.Session) -> None:
        python = Path(session.bin) / "python"
        cached = os.environ.get(CACHED_VARIABLE) == "1"
        try:  # today's releases: a ranged value such as 5.x is installed as the release it resolves to now
            pins = resolve.pins(cell, resolve.lookup(os.environ, matrix_spec.exclude_newer))
        except resolve.ResolveError as exc:
            session.log(f"package index not readable ({exc}): installing {', '.join(cell.pins)} as requested")
            pins = None
        result = envs.run_cell(matrix_spec, cell, python, reports, log=session.log, cached=cached, pins=pins)
        why = envs.could_not_run(result)
        if why:
            session.error(f"{cell.id} could not run: {why}")

    def unavailable(session: nox.Session) -> None:
        envs.write_unavailable(matrix_spec, cell, reports)
        session.error(f"{cell.id} could not run: {envs.NO_INTERPRETER}: python {cell.python}")

    if cell.python and not envs.python_available(cell.python):
        nox.session(name=cell.id, python=False, default=False, allow_parallel=True)(unavailable)
    else:
        nox.session(name=cell.id, python=cell.python, default=False, allow_parallel=True)(run)


def matrix_session(session: nox.Session, run: Plan) -> None:
    """`nox -s matrix [-- --cached --mutants --baseline OLD.json]`: ends nox with the documented exit code."""
    cached = "--cached" in session.posargs
    newer, posargs = option_value(session.posargs, "--exclude-newer")
    if "--mutants" in posargs or newer is not None:
        os.environ.update({MUTANTS_VARIABLE: "1"} if "--mutants" in posargs else {})
        os.environ.update({EXCLUDE_NEWER_VARIABLE: newer} if newer is not None else {})
        run = plan(run.home, run.noxfile, run.environ())
    options = [arg for arg in posargs if arg not in ("--cached", "--mutants")]
    envdir = Path(session.env_dir).parent
    code = guarded(lambda: run_matrix(run, None, envdir, forwarded(sys.argv), options, cached))
    if code:
        sys.exit(code)


def option_value(args: Sequence[str], name: str) -> tuple[str | None, list[str]]:
    """The value of `name VALUE` or `name=VALUE` in `args` (the last one wins), and the other arguments."""
    value, rest, index = None, [], 0
    while index < len(args):
        arg = args[index]
        if arg == name and index + 1 < len(args):
            value, index = args[index + 1], index + 2
            continue
        if arg.startswith(f"{name}="):
            value = arg.partition("=")[2]
        else:
            rest.append(arg)
        index += 1
    return value, rest


def guarded(body: Callable[[], int]) -> int:
    """`body()`'s exit code; an unexpected error is exit code 4 and one line saying where its traceback is."""
    try:
        return body()
    except Exception as exc:
        print(exits.unexpected(exc), file=sys.stderr, flush=True)
        return exits.UNEXPECTED


def run_matrix(
    run: Plan,
    ids: Sequence[str] | None,
    envdir: Path,
    nox_options: Sequence[str],
    report_options: Sequence[str],
    cached: bool,
    report: bool = True,
) -> int:
    """Run the cells (`ids`, else all) in parallel lanes, then the report (unless `report` is false: then the exit
    code is 0 or 3, from the cells alone). One run at a time per reports folder."""
    missing = [name for name in REPORT_NEEDS if importlib.util.find_spec(name) is None]
    if report and missing:  # say so before any cell runs, not with a traceback (exit 1) at the end
        print(
            f"error: the report needs {', '.join(missing)} in this Python ({sys.executable}): "
            "python -m pip install -e <compat-matrix checkout>, or run `compat-matrix run`",
            file=sys.stderr,
        )
        print(exits.exit_line(exits.BAD_INPUT, []), flush=True)
        return exits.BAD_INPUT
    try:
        width = lanes(os.environ, os.cpu_count() or 1, physical_memory())
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        print(exits.exit_line(exits.BAD_INPUT, []), flush=True)
        return exits.BAD_INPUT
    selected = [(s, c) for s, c in run.cells if ids is None or c.id in ids]
    folders = sorted({run.folder(s) for s, _ in selected}) or [run.override or run.home / "reports"]
    command = [sys.executable, "-m", "compat_matrix.cli", "report", "--wait"]
    command += [*(["--reports", str(run.override)] if run.override else []), *map(str, run.files), *report_options]
    path = os.pathsep.join(p for p in (str(envs.SOURCE), os.environ.get("PYTHONPATH")) if p)
    with ExitStack() as stack:
        for folder in folders:
            stack.enter_context(envs.run_lock(folder, log=envs.say))
        # Started first, so that its imports (pandas) overlap the cells; it reads the results once told to.
        environ = {**os.environ, "PYTHONPATH": path}
        merge = (
            subprocess.Popen(command, stdin=subprocess.PIPE, text=True, cwd=run.home, env=environ) if report else None
        )
        interrupted = False
        try:
            if selected:
                interrupted = run_cells(run, selected, envdir, nox_options, width, cached)
        finally:
            if merge:
                merge.communicate("go\n")
    if interrupted:
        return exits.INTERRUPTED
    return merge.returncode if merge else cells_code(run, selected)


def run_cells(
    run: Plan,
    selected: Sequence[tuple[spec.MatrixSpec, cells.Cell]],
    envdir: Path,
    nox_options: Sequence[str],
    width: int,
    cached: bool,
) -> bool:
    """The cells' sessions in a nested nox (so one cell never stops another), `width` at once, with a progress
    line per finished cell; returns whether the run was interrupted (Ctrl-C, SIGTERM)."""
    nested = [sys.executable, "-m", "nox", "-f", str(run.noxfile), "--envdir", str(envdir), *nox_options]
    nested += ["--parallel", str(width), "-s", *(cell.id for _, cell in selected)]
    environ = run.environ() | {CACHED_VARIABLE: "1" if cached else "0"}
    watched = progress.tracked([(c.id, cells.result_path(run.folder(s), c)) for s, c in selected])
    watcher = progress.Watcher(watched, width, envs.say, envs.progress_line)
    _, interrupted = envs.run_watched(nested, environ, watcher.tick)
    return interrupted


def cells_code(run: Plan, selected: Sequence[tuple[spec.MatrixSpec, cells.Cell]]) -> int:
    """0 when every selected cell ran, else 3; says so in one line."""
    failed = []
    for matrix_spec, cell in selected:
        path = cells.result_path(run.folder(matrix_spec), cell)
        try:
            why = envs.could_not_run(envs.read_cell_result(path))
        except envs.ResultFileError as exc:
            why = f"no usable result ({exc})"
        if why:
            failed.append(f"{cell.id} ({why})")
    code = exits.CELL_FAILED if failed else exits.OK
    what = (
        f"{exits.plural(len(failed), 'cell')} could not run" if failed else f"{exits.plural(len(selected), 'cell')} ran"
    )
    print(exits.exit_line(code, failed, what), flush=True)
    return code


def bisect_session(session: nox.Session, run: Plan) -> None:
    """`nox -s bisect -- --subject M:C --range SPEC [--observation P.N]`: ends nox with the documented exit code."""
    parser = argparse.ArgumentParser(prog="nox -s bisect --", description="Find the first release that differs.")
    bisect.add_arguments(parser)
    options = parser.parse_args(session.posargs)
    if options.exclude_newer is not None:
        os.environ[EXCLUDE_NEWER_VARIABLE] = options.exclude_newer
        run = plan(run.home, run.noxfile, run.environ())
    code = guarded(lambda: run_bisect(run, options, Path(session.env_dir).parent, forwarded(sys.argv)))
    if code:
        sys.exit(code)


def _bad_input(problems: Sequence[str]) -> int:
    for line in problems:
        print(f"error: {line}", file=sys.stderr)
    print(exits.exit_line(exits.BAD_INPUT, []), flush=True)
    return exits.BAD_INPUT


def run_bisect(run: Plan, options: argparse.Namespace, envdir: Path, nox_options: Sequence[str]) -> int:
    """Rounds of cells, each release of a round in a lane of its own, until the first release in `options.range`
    whose outcome for `options.subject` differs from the range's oldest; then reports/<matrix>.bisect.json.
    Exit codes: 0 answered, 2 bad input, 3 a cell could not run, 130 interrupted. The run's --exclude-newer is
    already in `run` (COMPAT_MATRIX_EXCLUDE_NEWER)."""
    if run.problems:
        return _bad_input(run.problems)
    try:
        matrix_spec, target, axis, releases = bisect_target(run, options)
        width = lanes(os.environ, os.cpu_count() or 1, physical_memory())
    except ValueError as exc:
        return _bad_input(str(exc).splitlines())
    base = {a.package: a.values[0] for a in matrix_spec.axes}
    folder = run.folder(matrix_spec)

    def cell_of(version: object) -> cells.Cell:
        return cells.Cell(matrix_spec.name, tuple((a, str(version) if a == axis else v) for a, v in base.items()))

    def test(versions: list) -> dict:
        tried = replace(run, extra=tuple(cell_of(v) for v in versions))
        selected = [(matrix_spec, cell_of(v)) for v in versions]
        with envs.run_lock(folder, log=envs.say):
            if run_cells(tried, selected, envdir, nox_options, min(width, len(selected)), cached=True):
                raise KeyboardInterrupt
        found, failed = {}, []
        for version, (_, cell) in zip(versions, selected, strict=True):
            try:
                result = envs.read_cell_result(cells.result_path(folder, cell))
            except envs.ResultFileError as exc:
                failed.append(f"{cell.id} (no usable result: {exc})")
                continue
            why = bisect.failure(result, target)
            if why:
                failed.append(f"{cell.id} ({why})")
            else:
                found[version] = bisect.outcome(result, target, options.observation)
        if failed:
            raise bisect.CouldNotRun(failed)
        return found

    try:
        answer = bisect.bisect(releases, test, width, log=envs.say, axis=axis)
    except bisect.CouldNotRun as exc:
        print(exits.exit_line(exits.CELL_FAILED, exc.failed, f"{exits.plural(len(exc.failed), 'cell')} could not run"))
        return exits.CELL_FAILED
    except KeyboardInterrupt:
        print(exits.exit_line(exits.INTERRUPTED, []), flush=True)
        return exits.INTERRUPTED
    if answer.contradicted:
        envs.say("note: the outcomes change more than once in the range; the answer is one release where they do")
    if options.observation and set(answer.tested.values()) == {bisect.ABSENT}:
        envs.say(f"note: no tested release observed {options.observation}")
    path = folder / f"{matrix_spec.name}.bisect.json"
    what = (target, axis, options.range, options.observation, matrix_spec.exclude_newer)
    write_json_atomic(path, bisect.answer_json(answer, matrix_spec.name, *what))
    envs.say(f"tested {exits.plural(len(answer.tested), 'release')} in {exits.plural(len(answer.rounds), 'round')}")
    envs.say(f"wrote {path}")
    envs.say(bisect.answer_line(answer, axis, options.range))
    return exits.OK


def bisect_target(run: Plan, options: argparse.Namespace) -> tuple[spec.MatrixSpec, str, str, list]:
    """The matrix, subject, axis and releases a bisection is about; ValueError (one line each) for bad input."""
    subjects = [(s, subject.target) for s in run.specs for subject in s.subjects]
    wanted = options.subject or (subjects[0][1] if len(subjects) == 1 else None)
    if wanted is None:
        raise ValueError(f"--subject: which one? ({', '.join(t for _, t in subjects)})")
    found = [s for s, target in subjects if target == wanted]
    if len(found) != 1:
        why = "not a subject of the matrix" if not found else "a subject of several matrices: name one file"
        raise ValueError(f"--subject {spec.show(wanted)}: {why} (subjects: {', '.join(t for _, t in subjects)})")
    matrix_spec = found[0]
    packages = [a.package for a in matrix_spec.axes if a.package != spec.PYTHON]
    axis = options.axis or ("transformers" if "transformers" in packages else next(iter(packages), ""))
    if axis not in packages:
        raise ValueError(f"--axis {spec.show(axis)}: not a package axis of {matrix_spec.path} ({', '.join(packages)})")
    if options.observation is not None and not re.fullmatch(r"\w+\.\S+", options.observation):
        raise ValueError(f"--observation {spec.show(options.observation)}: as probe.name, e.g. trainer_step.default")
    try:
        allowed = spec.axis_specifier(options.range)
    except ValueError as exc:
        raise ValueError(f"--range {spec.show(options.range)}: {exc}") from None
    try:
        versions = resolve.lookup(os.environ, matrix_spec.exclude_newer)(axis)
    except resolve.ResolveError as exc:
        raise ValueError(f"--range {spec.show(options.range)}: cannot list the releases of {axis}: {exc}") from None
    releases = list(allowed.filter(versions))
    if not releases:
        newest = f"the newest is {versions[-1]}" if versions else "there is none"
        raise ValueError(f"--range {spec.show(options.range)}: no release of {axis} in it ({newest})")
    return matrix_spec, wanted, axis, releases
