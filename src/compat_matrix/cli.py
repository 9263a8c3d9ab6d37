"""`compat-matrix`: run a matrix, and the host-side steps as commands. The library does the work; this turns
errors into one-line messages and documented exit codes (compat_matrix.exits).

Exit codes: 0 every cell ran and every expectation held; 1 an expectation or baseline check failed; 2 bad input (a
matrix or baseline file, an option): nothing ran; 3 a cell could not run; 4 an unexpected error, whose traceback is
written to a file.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from compat_matrix import __version__, bisect, cells, collect, conclude, exits, render, resolve, verdict
from compat_matrix.baseline import BaselineError, compare, failing, load_report
from compat_matrix.probes import titles
from compat_matrix.results import OK, CellResult, write_json_atomic, write_text_atomic
from compat_matrix.spec import MatrixError, MatrixSpec, load_all

EXIT_OK = exits.OK
EXIT_UNMET = exits.UNMET
EXIT_BAD_MATRIX = exits.BAD_INPUT
EXIT_CELL_FAILED = exits.CELL_FAILED
EXIT_UNEXPECTED = exits.UNEXPECTED
SUMMARY_LIMIT = 1_000_000  # GitHub's step summary holds 1 MiB
LOGS = ".logs"  # inside the reports folder: what changes from run to run (durations), not committed
BASELINE_HELP = "an earlier report, or a folder of them: add what changed; flipped verdicts or changed values exit 1"
NOXFILE = Path(__file__).resolve().with_name("noxfile.py")  # the sessions `run` starts (from a copy in --envdir)


def display_path(path: Path) -> str:
    """`path` relative to the working directory when it lies below it, else absolute."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path.resolve())


@dataclass(frozen=True)
class Built:
    markdown: str
    data: dict
    csv: str
    code: int
    timings: str  # one line per cell with its duration: console, job summary and run log, never the report files
    why: tuple[str, ...] = ()  # what the exit code is for: the cells that could not run, or the unmet checks


def make_report(spec: MatrixSpec, results: list[CellResult], baseline: dict | None = None) -> render.Report:
    """The report path, one way: collect (ordered, labelled frames) → verdicts → conclusions → summaries."""
    collected = collect.collect(results, spec.subjects)
    subjects = conclude.add_conclusions(verdict.add_verdicts(collected.subjects), titles())
    unmet = tuple(verdict.unmet_expectations(subjects, spec.subjects))
    file = display_path(spec.path)
    newer = f" -- --exclude-newer={spec.exclude_newer}" if spec.exclude_newer else ""
    command = f"COMPAT_MATRIX={file} nox -s matrix{newer}"
    meta = render.ReportMeta(spec.name, file, command, spec.subjects, spec.exclude_newer)
    report = render.Report(
        meta, replace(collected, subjects=subjects), conclude.summaries(subjects, spec.subjects), unmet
    )
    if baseline is None:
        return report
    return replace(report, changes=tuple(compare(baseline, render.report_json(report))))


def build_report(spec: MatrixSpec, reports: Path, baseline: dict | None = None) -> Built:
    """Markdown, JSON and CSV for one matrix from its cell result files, and the exit code they call for."""
    results = collect.load_results(spec, cells.cells(spec), reports)
    report = make_report(spec, results, baseline)
    for line in report.unmet:
        print(f"unmet expectation: {line}")
    for change in report.changes or ():
        print(f"since baseline: {change}")
    failed = [f"{r.cell} ({r.status})" for r in results if r.status != OK]
    failed += [f"{r.cell} ({s.target} {s.status})" for r in results for s in r.subjects if s.status != OK]
    checks = [*report.unmet, *(str(c) for c in report.changes or () if failing([c]))]
    code = EXIT_CELL_FAILED if failed else EXIT_UNMET if checks else EXIT_OK
    data = render.report_json(report)
    why = tuple(failed if failed else checks)
    return Built(render.markdown(report), data, render.csv_text(report.collected), code, timings(results), why)


def outcome(built: list[Built]) -> tuple[int, str]:
    """The exit code of a report over several matrices, and the last line that says what it means."""
    code = max((b.code for b in built), default=EXIT_OK)
    why = [item for b in built if b.code == code for item in b.why]
    if code == EXIT_CELL_FAILED:
        return code, exits.exit_line(code, why, f"{exits.plural(len(why), 'cell')} could not run")
    if code == EXIT_UNMET:
        return code, exits.exit_line(code, why, f"{exits.plural(len(why), 'expectation')} or baseline checks failed")
    return code, exits.exit_line(code, why)


def timings(results: list[CellResult]) -> str:
    lines = []
    for r in results:
        took = f"{r.seconds:.1f} s" + (", reused" if r.reused else "") if r.seconds is not None else "no timing"
        lines.append(f"{r.cell}: {r.status} ({took})" + (f": {r.reason}" if r.reason else ""))
    return "\n".join(lines)


def write_report(reports: Path, name: str, built: Built) -> list[Path]:
    """The report files, and the run's timings in a log of their own beside them (not a report file)."""
    md, js, csv = (reports / f"{name}{suffix}" for suffix in (".md", ".json", ".csv"))
    reports.mkdir(parents=True, exist_ok=True)
    write_text_atomic(md, built.markdown)
    write_text_atomic(csv, built.csv)
    write_json_atomic(js, built.data)
    write_text_atomic(reports / LOGS / f"{name}.log", built.timings + "\n")
    return [md, js, csv]


def cmd_report(args: argparse.Namespace) -> int:
    if args.wait:
        wait_for_go()
    specs = _for_run(_load(args.files))
    baselines = _baselines(args.baseline, specs)
    built = []
    for spec in specs:
        folder = args.reports or cells.reports_folder(spec.path, Path.cwd())
        built.append(build_report(spec, folder, baselines.get(spec.name)))
        print(built[-1].timings)
        paths = write_report(folder, spec.name, built[-1])
        print(f"wrote {', '.join(display_path(p) for p in paths)}")
        if args.summary:
            timings = f"\n<details><summary>Timings</summary>\n\n```\n{built[-1].timings}\n```\n\n</details>\n"
            with open(args.summary, "a", encoding="utf-8") as summary:
                summary.write(render.truncate(built[-1].markdown, args.limit // len(specs) - len(timings)) + timings)
    code, line = outcome(built)
    print(line, flush=True)
    return code


def wait_for_go() -> None:
    """Block until a line (or end of input) arrives on standard input. Interrupts are ignored meanwhile: whoever
    started this process stops the cells first and then lets the report be written."""
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        sys.stdin.readline()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _baselines(paths: list[Path], specs: list[MatrixSpec]) -> dict[str, dict]:
    """Baseline reports by matrix name, read before any report is rewritten (a baseline may be the report).
    A folder stands for the `<name>.json` of every matrix being reported that it holds."""
    names = {s.name for s in specs}
    files = []
    for path in paths:
        files += (
            [path / f"{n}.json" for n in sorted(names) if (path / f"{n}.json").exists()] if path.is_dir() else [path]
        )
    loaded = {}
    for path in files:
        data = load_report(path)
        if data.get("matrix") not in names:
            raise BaselineError(f"{path}: baseline of matrix {data.get('matrix')!r}, which is not being reported")
        loaded[data["matrix"]] = data
    return loaded


def cmd_summary(args: argparse.Namespace) -> int:
    for path in args.reports:
        print(render.truncate(path.read_text(encoding="utf-8"), args.limit // len(args.reports)))
    return EXIT_OK


def cmd_diff(args: argparse.Namespace) -> int:
    changes = compare(load_report(args.old), load_report(args.new))
    for change in changes:
        print(change)
    print(f"{len(changes)} changes" if changes else "no changes")
    return EXIT_UNMET if failing(changes) else EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    loaded = _load(args.files)
    for spec in loaded:
        lookup = resolve.lookup(os.environ, spec.exclude_newer)
        try:
            found = resolve.expansions(spec, lookup)
        except MatrixError:
            continue  # said below, by _for_run
        for package, sweep, versions in found:
            print(f"{display_path(spec.path)}: {package} {sweep}: {', '.join(map(str, versions))}", file=sys.stderr)
    specs = _for_run(loaded)
    listed = [
        {"session": c.id, "matrix": s.name, "file": display_path(s.path), "requested": c.requested}
        for s in specs
        for c in cells.cells(s)
    ]
    if args.json:
        print(json.dumps(listed, separators=(",", ":")) if args.compact else json.dumps(listed, indent=2))
    else:
        print("\n".join(item["session"] for item in listed))
    return EXIT_OK


def cmd_validate(args: argparse.Namespace) -> int:
    specs = _load(args.files)
    problems: list[str] = []
    for spec in specs:
        if args.offline:
            count = (
                "sweeps, listed from the package index" if spec.sweeps else exits.plural(len(cells.cells(spec)), "cell")
            )
            print(f"{display_path(spec.path)}: {count}")
            continue
        lookup = resolve.lookup(os.environ, spec.exclude_newer)
        try:
            expanded = resolve.expand(spec, lookup)
            lines, found = resolve.check_axes(expanded, lookup)
        except resolve.ResolveError as exc:
            print(f"warning: axes not checked against the package index: {exc} (--offline skips it)", file=sys.stderr)
            continue
        except MatrixError as exc:
            problems += exc.problems
            continue
        print(f"{display_path(spec.path)}: {exits.plural(len(cells.cells(expanded)), 'cell')}")
        print("\n".join(f"  {line}" for line in lines))
        problems += found
    if problems:
        raise MatrixError(problems)
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    """The cells of the matrix files in parallel lanes, each in its own environment, then the reports: what
    `nox -s matrix` does in this repository, from any folder."""
    from compat_matrix import sessions  # imports nox: only the commands that run cells need it

    run = _planned(args)
    ids = {cell.id for _, cell in run.cells}
    unknown = [cell for cell in args.cell if cell not in ids]
    if unknown:
        raise MatrixError([f"--cell {cell!r}: no such cell (`compat-matrix list` shows them)" for cell in unknown])
    options = [f"--baseline={b.resolve()}" for b in args.baseline]
    envdir = (args.envdir or Path.cwd() / ".nox").resolve()
    run = replace(run, noxfile=sessions.noxfile_in(envdir, NOXFILE))
    return sessions.run_matrix(run, args.cell or None, envdir, [], options, args.cached, report=not args.cell)


def cmd_bisect(args: argparse.Namespace) -> int:
    """The first release in a range whose verdict (or one observation) for a subject differs from the oldest's."""
    from compat_matrix import sessions

    run = _planned(args)
    try:
        sessions.bisect_target(run, args)  # bad input is said before anything is written
    except ValueError as exc:
        raise MatrixError(str(exc).splitlines()) from None
    envdir = (args.envdir or Path.cwd() / ".nox").resolve()
    run = replace(run, noxfile=sessions.noxfile_in(envdir, NOXFILE))
    return sessions.run_bisect(run, args, envdir, [])


def _planned(args: argparse.Namespace):
    """The run that the options describe (files, --reports, --lanes, --mutants, --exclude-newer), planned as the
    cells' nox plans it (the options that the cells need too go to this process's environment); MatrixError when it
    cannot run."""
    from compat_matrix import sessions

    environ = dict(os.environ)
    if args.files:
        environ[sessions.FILES_VARIABLE] = os.pathsep.join(str(f.resolve()) for f in args.files)
    if args.reports:
        environ[sessions.REPORTS_VARIABLE] = str(args.reports.resolve())
    if args.lanes:
        os.environ[sessions.LANES_VARIABLE] = str(args.lanes)
    if getattr(args, "mutants", False):
        os.environ[sessions.MUTANTS_VARIABLE] = environ[sessions.MUTANTS_VARIABLE] = "1"
    if args.exclude_newer:
        os.environ[sessions.EXCLUDE_NEWER_VARIABLE] = environ[sessions.EXCLUDE_NEWER_VARIABLE] = args.exclude_newer
    run = sessions.plan(Path.cwd(), NOXFILE, environ)
    if run.problems:
        raise MatrixError(list(run.problems))
    return run


def _load(files: list[Path]) -> list[MatrixSpec]:
    specs, problems = load_all(files)
    if problems:
        raise MatrixError(problems)
    return specs


def _for_run(specs: list[MatrixSpec]) -> list[MatrixSpec]:
    """The specs as a run uses them (the run's --exclude-newer, sweeps expanded); MatrixError for what stops it."""
    ready, problems = resolve.for_run(specs, os.environ)
    if problems:
        raise MatrixError(problems)
    return ready


def parser() -> argparse.ArgumentParser:
    return _parsers()[0]


def subcommands() -> dict[str, argparse.ArgumentParser]:
    """Every subcommand's parser, by name (for the test that checks their help)."""
    return _parsers()[1]


def _parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    top = argparse.ArgumentParser(
        prog="compat-matrix",
        description="Run a compatibility matrix of transformers releases, and the steps of a run as commands.",
        epilog=exits.EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    top.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    made_by_name: dict[str, argparse.ArgumentParser] = {}

    def command(
        name: str, handler: Callable, summary: str, description: str, codes: tuple[int, ...]
    ) -> argparse.ArgumentParser:
        meanings = "\n".join(f"  {code:<3} {exits.MEANINGS[code]}" for code in sorted({*codes, exits.UNEXPECTED}))
        made = sub.add_parser(
            name,
            help=summary,
            description=f"{summary}.\n\n{description}",
            epilog=f"exit codes:\n{meanings}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        made.set_defaults(run=handler)
        made_by_name[name] = made
        return made

    run_codes = (exits.OK, exits.UNMET, exits.BAD_INPUT, exits.CELL_FAILED, exits.INTERRUPTED)
    run = command(
        "run",
        cmd_run,
        "run every cell of the matrix files, then write their reports",
        "Each cell gets its own uv environment (kept in --envdir and reused while its pins and local requirements\n"
        "are unchanged); cells run side by side (COMPAT_MATRIX_LANES, default one per core, at most one per 2 GiB).\n"
        "Reports go to DIR/<name>.md, .json and .csv: by default ./reports for the files in ./matrix, else\n"
        "reports/ beside each file. The same as `nox -s matrix` in compat-matrix's repository.",
        run_codes,
    )
    run.add_argument("files", nargs="*", type=Path, metavar="FILE.toml", help="matrix files (default: matrix/*.toml)")
    run.add_argument("--reports", type=Path, metavar="DIR", help="one folder for the reports of every file")
    run.add_argument("--baseline", type=Path, action="append", default=[], metavar="OLD.json", help="as for `report`")
    run.add_argument("--cached", action="store_true", help="reuse a cell's result while its fingerprint is unchanged")
    run.add_argument("--mutants", action="store_true", help="also run the subjects' tests against broken overrides")
    run.add_argument("--envdir", type=Path, metavar="DIR", help="where the environments are kept (default: ./.nox)")
    run.add_argument("--lanes", type=positive, metavar="N", help="cells at once (sets COMPAT_MATRIX_LANES)")
    run.add_argument(
        "--cell",
        action="append",
        default=[],
        metavar="ID",
        help="run only this cell (repeatable; `compat-matrix list` names them) and write no report: exit 0 or 3",
    )

    run.add_argument("--exclude-newer", metavar="DATE", help="resolve and install releases as of this date (UTC)")

    bisecting = command(
        "bisect",
        cmd_bisect,
        "find the first release in a range whose verdict for a subject differs",
        "Tests the range's oldest release and then as few releases as it can, every lane a round, until the first\n"
        "release whose verdict (or --observation) differs from the oldest's; assumes it changes once in the range.\n"
        "Other axes stay at their first value. Reuses environments and results of earlier runs; prints each round\n"
        "and writes DIR/<name>.bisect.json. The same as `nox -s bisect -- ...` in compat-matrix's repository.",
        (exits.OK, exits.BAD_INPUT, exits.CELL_FAILED, exits.INTERRUPTED),
    )
    bisecting.add_argument(
        "files", nargs="*", type=Path, metavar="FILE.toml", help="matrix files (default: matrix/*.toml)"
    )
    bisect.add_arguments(bisecting)
    bisecting.add_argument("--reports", type=Path, metavar="DIR", help="folder for the answer (default: as for `run`)")
    bisecting.add_argument(
        "--envdir", type=Path, metavar="DIR", help="where the environments are kept (default: ./.nox)"
    )
    bisecting.add_argument("--lanes", type=positive, metavar="N", help="cells at once (sets COMPAT_MATRIX_LANES)")

    report = command(
        "report",
        cmd_report,
        "merge the cells' result files into the reports",
        "Writes DIR/<name>.md, .json and .csv from the result files in DIR/.cells/; a cell without one is `not run`.",
        (exits.OK, exits.UNMET, exits.BAD_INPUT, exits.CELL_FAILED),
    )
    report.add_argument("files", nargs="+", type=Path, metavar="FILE.toml", help="matrix files")
    report.add_argument("--reports", type=Path, metavar="DIR", help="folder of reports (default: as for `run`)")
    report.add_argument(
        "--baseline",
        type=Path,
        action="append",
        default=[],
        metavar="OLD.json",
        help=BASELINE_HELP,
    )
    report.add_argument("--summary", type=Path, help="also append the markdown, cut to --limit bytes, to this file")
    report.add_argument("--limit", type=int, default=SUMMARY_LIMIT, help="bytes for --summary (default: 1,000,000)")
    report.add_argument("--wait", action="store_true", help=argparse.SUPPRESS)  # internal: `run` starts it early

    listing = command(
        "list",
        cmd_list,
        "list the cells of the matrix files, one nox session each",
        "Prints one cell id a line, or with --json the cells with their matrix, file and requested versions.",
        (exits.OK, exits.BAD_INPUT),
    )
    listing.add_argument("files", nargs="+", type=Path, metavar="FILE.toml", help="matrix files")
    listing.add_argument("--json", action="store_true", help="as JSON, for a CI job matrix")
    listing.add_argument("--compact", action="store_true", help="JSON on one line (for $GITHUB_OUTPUT)")

    diff = command(
        "diff",
        cmd_diff,
        "say what changed between two reports",
        "New or vanished versions (they inform), flipped verdicts and changed, new or vanished observations (they\n"
        "fail).",
        (exits.OK, exits.UNMET, exits.BAD_INPUT),
    )
    diff.add_argument("old", type=Path, metavar="OLD.json", help="the earlier report")
    diff.add_argument("new", type=Path, metavar="NEW.json", help="the later report")

    summary = command(
        "summary",
        cmd_summary,
        "print reports cut to a size, tables first",
        "For a CI summary or a pull-request comment: the details go first, the tables never.",
        (exits.OK, exits.BAD_INPUT),
    )
    summary.add_argument("reports", nargs="+", type=Path, metavar="REPORT.md", help="markdown reports")
    summary.add_argument("--limit", type=int, default=SUMMARY_LIMIT, help="bytes in all (default: 1,000,000)")

    validate = command(
        "validate",
        cmd_validate,
        "check matrix files",
        "Every problem on its own line, naming the file, the key and the value. Unless --offline, every axis value\n"
        "is also resolved against the package index uv uses (UV_DEFAULT_INDEX, UV_INDEX_URL, else PyPI, and\n"
        "UV_FIND_LINKS or PIP_FIND_LINKS folders), so a release that does not exist is reported before anything\n"
        "is installed.",
        (exits.OK, exits.BAD_INPUT),
    )
    validate.add_argument("files", nargs="+", type=Path, metavar="FILE.toml", help="matrix files")
    validate.add_argument("--offline", action="store_true", help="do not ask the package index")
    return top, made_by_name


def positive(text: str) -> int:
    if not (text.isascii() and text.isdecimal()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a whole number, at least 1: {text!r}")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except MatrixError as exc:
        for line in exc.problems:
            print(f"error: {line}", file=sys.stderr)
        return EXIT_BAD_MATRIX
    except (BaselineError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_MATRIX
    except KeyboardInterrupt:
        return exits.INTERRUPTED
    except Exception as exc:
        print(exits.unexpected(exc), file=sys.stderr)
        return EXIT_UNEXPECTED


if __name__ == "__main__":
    sys.exit(main())
