"""The nox sessions of a matrix run: one per cell, `matrix` (every cell in parallel lanes, then the report) and
`bisect` (rounds of cells until the first release that differs).

    planned_run(home, noxfile, env)   what a noxfile's import registers sessions from: the plan the run handed down
                                    (COMPAT_MATRIX_PLAN), else the files the variables name, parsed here once
    register(run)                   one nox session per cell, `matrix` and `bisect`
    run_matrix(plan, envdir, ...)   the plan's cells in a nested nox, `lanes` at once, then the reports
    run_bisect(plan, envdir, ...)   the bisection's rounds (bisect.py chooses them), then its answer file

Both noxfiles use this: the one packaged with compat-matrix (what `compat-matrix run` starts, from any folder) and
this repository's, which adds its development sessions. Sessions only parse their posargs and print; the plan
(compat_matrix.host.plan), the report (compat_matrix.host.report) and the exit code (compat_matrix.host.exits) are
decided elsewhere.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path

import nox
from packaging.version import Version

from compat_matrix.host import bisection, cell_run, cells, console, envs, exits, folders, plan, progress, uv, verdict
from compat_matrix.host.exits import BadInput, Outcome
from compat_matrix.host.plan import Plan
from compat_matrix.host.prerelease import PRE
from compat_matrix.host.warm_cells import ready_cells, run_ready
from compat_matrix.shared.results import write_json_atomic, write_text_atomic
from compat_matrix.shared.vocabulary import Status

REPORT_NEEDS = ("pandas", "packaging")  # imported by the report, which runs in nox's own Python
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
class PlannedRun:
    """What a noxfile's import knows: the plan its sessions come from (None: the input is bad, and `problems` says
    why); and, where this process is the first of its run, what was asked and the files as parsed, so that a
    session can plan its run with its own options without reading them again."""

    plan: Plan | None
    problems: tuple[str, ...] = ()
    request: plan.Request | None = None  # None: the plan was handed down
    loaded: plan.Loaded | None = None

    @property
    def names(self) -> frozenset[str]:
        specs = self.loaded.specs if self.loaded else [m.spec for m in self.plan.matrices] if self.plan else []
        return frozenset(s.name for s in specs)


def planned_run(home: Path, noxfile: Path, environ: Mapping[str, str]) -> PlannedRun:
    handed = environ.get(plan.PLAN_VARIABLE)
    if handed:
        try:
            return PlannedRun(plan.read(Path(handed)))
        except BadInput as exc:
            return PlannedRun(None, tuple(exc.problems))
    request = plan.request_from(environ, home, noxfile)
    loaded = plan.load(request.files)
    try:
        return PlannedRun(plan.make(request, loaded, environ), (), request, loaded)
    except BadInput as exc:
        return PlannedRun(None, tuple(exc.problems), request, loaded)


def noxfile_in(envdir: Path, packaged: Path) -> Path:
    """A copy of the packaged noxfile in `envdir`, for nox to run: nox works in its noxfile's folder, and uv refuses
    to work inside its own cache, which is where `uvx` keeps compat-matrix."""
    folders.ignore_housekeeping(Path(envdir), folders.ENVIRONMENTS_IGNORED)
    copy = Path(envdir) / "compat-matrix-noxfile.py"
    text = Path(packaged).read_text(encoding="utf-8")
    if not copy.exists() or copy.read_text(encoding="utf-8") != text:
        write_text_atomic(copy, text)
    return copy


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


def register(run: PlannedRun, with_matrix: bool = True) -> None:
    """One session per cell (what CI shards on), and `matrix` and `bisect`."""
    nox.options.default_venv_backend = "uv"
    nox.options.reuse_venv = "yes"
    os.environ.update(uv.uv_environment(os.environ))
    for matrix, cell in run.plan.cells() if run.plan else ():
        cell_session(run.plan, matrix, cell)
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


def cell_session(run: Plan, matrix: plan.Matrix, cell: cells.Cell) -> None:
    """The session of one cell. It fails when the cell could not run; its result file says why either way."""

    def session_of_cell(session: nox.Session) -> None:
        pins, unpinned = (run.pins, run.unpinned) if run.pins is not None else planned_now(matrix, cell)
        if cell.id in unpinned and PRE in cell.requested.values():  # no requirement says "the newest pre-release"
            session.log(progress.line(cell_run.write_skipped(matrix.spec, cell, matrix.reports, unpinned[cell.id])))
            return
        if cell.id in unpinned:
            session.log(
                f"package index not readable ({unpinned[cell.id]}): installing {', '.join(cell.pins)} as requested"
            )
        # SIGTERM (a CI runner, or nox stopping its parallel sessions) unwinds like Ctrl-C, so the runner's process
        # group is stopped on the way out and no half-written result is left: results are only ever renamed whole.
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        python = Path(session.bin) / "python"
        result = cell_run.run_cell(
            matrix.spec, cell, python, matrix.reports, log=session.log, cached=run.cached, pins=pins.get(cell.id)
        )
        if not run.handed_down:  # run on its own: no one else tells that it finished
            session.log(progress.line(result))
        why = verdict.fails_run(result)
        if why:
            what = "ran, but not all its classes" if result.status == Status.OK else "could not run"
            session.error(f"{cell.id} {what}: {why}" + (f": {result.reason}" if result.reason else ""))

    def unavailable(session: nox.Session) -> None:
        cell_run.write_unavailable(matrix.spec, cell, matrix.reports)
        session.error(f"{cell.id} could not run: {cell_run.NO_INTERPRETER}: python {cell.python}")

    def skipped(session: nox.Session) -> None:
        session.log(progress.line(cell_run.write_skipped(matrix.spec, cell, matrix.reports, run.unpinned[cell.id])))

    if run.pins is not None and cell.id in run.unpinned and PRE in cell.requested.values():
        nox.session(name=cell.id, python=False, default=False, allow_parallel=True)(skipped)  # no environment
    elif cell.python and not envs.python_available(cell.python):
        nox.session(name=cell.id, python=False, default=False, allow_parallel=True)(unavailable)
    else:
        nox.session(name=cell.id, python=cell.python, default=False, allow_parallel=True)(session_of_cell)


def planned_now(matrix: plan.Matrix, cell: cells.Cell) -> tuple[dict, dict]:
    """The releases a cell run on its own installs (`nox -s cell:…`): this process is the first of its run."""
    return plan.pinned([(matrix, cell)], plan.Lookups(os.environ))


class Posargs(argparse.ArgumentParser):
    """A session's posargs: a problem is bad input, said in one line, before anything runs."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise BadInput([f"{self.prog}: {message}"])


def matrix_options(posargs: Sequence[str]) -> dict[str, object]:
    """`nox -s matrix -- [--cached] [--mutants] [--exclude-newer DATE] [--baseline OLD.json] [--fail-on KINDS]`, as
    Request fields."""
    parser = Posargs(prog="nox -s matrix --", add_help=False)
    parser.add_argument("--cached", action="store_true")
    parser.add_argument("--mutants", action="store_true")
    parser.add_argument("--exclude-newer")
    parser.add_argument("--baseline", type=Path, action="append", default=[])
    parser.add_argument("--fail-on", action="append", default=[])
    args = parser.parse_args(list(posargs))
    return {
        "cached": args.cached,
        "mutants": args.mutants,
        "exclude_newer": args.exclude_newer,
        "baselines": tuple(args.baseline),
        "fail_on": tuple(args.fail_on),
    }


def session_plan(run: PlannedRun, **asked: object) -> Plan:
    """The plan of a session's run: what the noxfile's variables asked for, with the session's own options."""
    if run.request is None or run.loaded is None:
        raise BadInput(list(run.problems) or ["a plan handed down runs only its cells"])
    return plan.make(replace(run.request, runs=True, **asked), run.loaded)  # type: ignore[arg-type]


def matrix_session(session: nox.Session, run: PlannedRun) -> None:
    """`nox -s matrix [-- --cached --mutants --exclude-newer DATE --baseline OLD.json --fail-on KINDS]`: ends nox
    with the documented exit code."""
    envdir = Path(session.env_dir).parent
    argv = forwarded(sys.argv)
    finish(exits.guarded(lambda: run_matrix(session_plan(run, **matrix_options(session.posargs)), envdir, argv)))


def bisect_session(session: nox.Session, run: PlannedRun) -> None:
    """`nox -s bisect -- --subject M:C --range SPEC [--observation P.N | --method NAME]`: ends nox with the
    documented exit code."""

    def bisected() -> Outcome:
        parser = Posargs(prog="nox -s bisect --", add_help=False)
        bisection.add_arguments(parser)
        args = parser.parse_args(session.posargs)
        asked = plan.Bisect(args.range, args.subject, args.axis, args.observation, args.method)
        made = session_plan(run, exclude_newer=args.exclude_newer, bisect=asked, report=False)
        return run_bisect(made, Path(session.env_dir).parent, forwarded(sys.argv))

    finish(exits.guarded(bisected), always=False)


def finish(outcome: Outcome, always: bool = True) -> None:
    """Say what the outcome was (problems, then the line of its exit code) and end nox with that code."""
    for problem in outcome.bad_input:
        print(f"error: {problem}", file=sys.stderr)
    code = exits.code(outcome)
    if always or code:
        print(exits.line(outcome), file=sys.stderr if outcome.unexpected else sys.stdout, flush=True)
    if code:
        sys.exit(code)


def run_matrix(run: Plan, envdir: Path, nox_options: Sequence[str]) -> Outcome:
    """Run the plan's cells in parallel lanes, then the reports (unless the plan writes none: then the outcome is
    the cells' alone). One run at a time per reports folder."""
    missing = [name for name in REPORT_NEEDS if importlib.util.find_spec(name) is None]
    if run.report and missing:  # say so before any cell runs, not with a traceback at the end
        raise BadInput(
            [
                f"the report needs {', '.join(missing)} in this Python ({sys.executable}): "
                "python -m pip install -e <compat-matrix checkout>, or run `compat-matrix run`"
            ]
        )
    selected = run.to_run()
    folders = sorted({m.reports for m, _ in selected} | ({m.reports for m in run.matrices} if run.report else set()))
    with ExitStack() as stack:
        for folder in folders:
            stack.enter_context(envs.run_lock(folder, log=console.say))
        if run.report:  # its imports (pandas) overlap the cells
            threading.Thread(target=importlib.import_module, args=("compat_matrix.host.report",), daemon=True).start()
        interrupted = bool(selected) and run_cells(run, selected, envdir, nox_options, run.lanes)
        if not run.report:
            return replace(cells_outcome(selected), interrupted=interrupted)
        from compat_matrix.host import report

        written = report.run(run)
        for line in report.console(written):
            console.say(line)
        return replace(report.outcome(written), interrupted=interrupted)


def run_cells(
    run: Plan, selected: Sequence[tuple[plan.Matrix, cells.Cell]], envdir: Path, nox_options: Sequence[str], width: int
) -> bool:
    """The cells, `width` at once, the newest transformers first, with a line per finished cell: the warm ones from
    this process (warm_cells), then the others' sessions in a nested nox that reads the plan (so one cell never
    stops another); returns whether the run was interrupted (Ctrl-C, SIGTERM)."""
    newest = sorted(selected, key=lambda chosen: cells.newest_first(chosen[1]), reverse=True)
    watched = progress.tracked([(c.id, folders.result_path(m.reports, c)) for m, c in selected])
    watcher = progress.Watcher(watched, width, console.say, progress.line)
    ready = ready_cells(run, newest, envdir, nox_options)
    if ready and run_ready(run, ready, width, watcher.tick):
        return True
    rest = [cell.id for _, cell in newest if cell.id not in {c.id for _, c, _ in ready}]
    if not rest:
        return False
    path = plan.write(run, envdir)
    nested = [sys.executable, "-m", "nox", "-f", str(run.noxfile), "--envdir", str(envdir), *nox_options]
    nested += ["--parallel", str(min(width, len(rest))), "-s", *rest]
    try:
        environ = host_bytecode(plan.nested_environ(os.environ, path), envdir)
        _, interrupted = console.run_watched(nested, environ, watcher.tick, progress.shown)
    finally:
        path.unlink(missing_ok=True)
    return interrupted


HOST_BYTECODE = "compat-matrix-host-bytecode"  # in the envdir: the bytecode of the nox processes a run starts


def host_bytecode(environ: Mapping[str, str], envdir: Path) -> dict[str, str]:
    """`environ` for the nested nox and its workers, with bytecode written and read in a folder of the envdir (one
    of your own PYTHONPYCACHEPREFIX kept): where PYTHONDONTWRITEBYTECODE is set, each of them compiled nox and
    compat-matrix from source (`nox -l`: 0.45 s, 0.23 s from bytecode), as the cells' runners would torch
    (cell_run.bytecode_environment)."""
    kept = {k: v for k, v in environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {"PYTHONPYCACHEPREFIX": str(envdir / HOST_BYTECODE)} | kept


def cells_outcome(selected: Sequence[tuple[plan.Matrix, cells.Cell]]) -> Outcome:
    """The outcome of cells run without a report: each that could not run, once."""
    failed = []
    for matrix, cell in selected:
        why = verdict.fails_run(folders.read_result(matrix.spec.name, cell, matrix.reports))
        if why:
            failed.append(f"{cell.id} ({why})")
    return Outcome(cells=len(selected), could_not_run=tuple(failed), checked=False)


def run_bisect(run: Plan, envdir: Path, nox_options: Sequence[str]) -> Outcome:
    """Rounds of cells, each release of a round in a lane of its own, until the first release in the range whose
    outcome for the subject differs from the range's oldest; then reports/<matrix>.bisect.json."""
    asked = run.bisection
    if asked is None:
        raise BadInput(["no bisection in the plan"])
    matrix = run.matrix(asked.matrix)

    def test(versions: list[Version]) -> dict[Version, str]:
        selected = [(matrix, asked.cell(v)) for v in versions]
        with envs.run_lock(matrix.reports, log=console.say):
            if run_cells(run, selected, envdir, nox_options, min(run.lanes, len(selected))):
                raise KeyboardInterrupt
        found, failed = {}, []
        for version, (_, cell) in zip(versions, selected, strict=True):
            result = folders.read_result(matrix.spec.name, cell, matrix.reports)
            why = verdict.could_not_run(result, asked.target)
            if why:
                failed.append(f"{cell.id} ({why})")
            else:
                found[version] = bisection.outcome(result, asked.target, asked.observation, asked.method)
        if failed:
            raise bisection.CouldNotRun(failed)
        return found

    releases = [Version(r) for r in asked.releases]
    try:
        answer = bisection.bisect(releases, test, run.lanes, log=console.say, axis=asked.axis)
    except bisection.CouldNotRun as exc:
        return Outcome(could_not_run=tuple(exc.failed), checked=False)
    if answer.contradicted:
        console.say("note: the outcomes change more than once in the range; the answer is one release where they do")
    if (asked.observation or asked.method) and set(answer.tested.values()) == {bisection.ABSENT}:
        console.say(f"note: no tested release observed {asked.observation or asked.method}")
    path = matrix.reports / f"{matrix.spec.name}.bisect.json"
    what = (asked.target, asked.axis, asked.range, asked.observation, matrix.spec.exclude_newer, asked.method)
    write_json_atomic(path, bisection.answer_json(answer, matrix.spec.name, *what))
    console.say(f"tested {exits.plural(len(answer.tested), 'release')} in {exits.plural(len(answer.rounds), 'round')}")
    console.say(f"wrote {path}")
    console.say(bisection.answer_line(answer, asked.axis, asked.range))
    return Outcome(cells=len(answer.tested), checked=False)
