"""`compat-matrix`: run a matrix, and the host-side steps as commands. The library does the work; this turns
errors into one-line messages and documented exit codes (compat_matrix.host.exits).

Exit codes: 0 every cell ran and every expectation held; 1 an expectation or baseline check failed; 2 bad input (a
matrix or baseline file, an option): nothing ran; 3 a cell could not run; 4 an unexpected error, whose traceback is
written to a file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from compat_matrix import __version__
from compat_matrix.host import bisection, cut, exits, factories, folders, gh, plan, render, resolve
from compat_matrix.host.baseline import baseline_for, compare, failing, load_report, reports_in
from compat_matrix.host.exits import BadInput, Outcome
from compat_matrix.host.spec import display_path, matrix_files

EXIT_OK = exits.OK
EXIT_UNMET = exits.UNMET
EXIT_BAD_MATRIX = exits.BAD_INPUT
EXIT_CELL_FAILED = exits.CELL_FAILED
EXIT_UNEXPECTED = exits.UNEXPECTED
SUMMARY_LIMIT = 1_000_000  # GitHub's step summary holds 1 MiB: `report --summary` writes there
COMMENT_LIMIT = 65_536  # characters in a GitHub comment (bytes are never fewer): what `summary` prints is posted
BASELINE_HELP = "an earlier report, or a folder of them: add what changed; flipped verdicts or changed values exit 1"
FAIL_ON_HELP = (
    "exit 1 when an override has one of these conclusions on any release: harmful, needed, orphaned, could-not-run, "
    "behaves-differently, inconclusive, redundant (comma-separated, repeatable)"
)
NOXFILE = Path(__file__).resolve().with_name("noxfile.py")  # the sessions `run` starts (from a copy in --envdir)
ALWAYS, FAILING, NEVER = "always", "failing", "never"  # when a command's last line says what its exit code means


def asked(args: argparse.Namespace, **more: object) -> plan.Request:
    """What the options ask for: the files (default matrix/*.toml), --reports and the options every command takes."""
    files = tuple(f.resolve() for f in args.files) or tuple(matrix_files(None, Path.cwd() / "matrix"))
    reports = getattr(args, "reports", None)
    return plan.Request(
        Path.cwd(),
        NOXFILE,
        files,
        reports.resolve() if reports else None,
        lanes=getattr(args, "lanes", None),
        exclude_newer=getattr(args, "exclude_newer", None),
        baselines=tuple(getattr(args, "baseline", ())),
        **more,  # type: ignore[arg-type]
    )


def cmd_run(args: argparse.Namespace) -> Outcome:
    """The cells of the matrix files in parallel lanes, each in its own environment, then the reports: what
    `nox -s matrix` does in this repository, from any folder."""
    from compat_matrix.host import nox_sessions  # imports nox: only the commands that run cells need it

    options = {
        "cached": args.cached,
        "mutants": args.mutants,
        "cells": tuple(args.cell),
        "fail_on": tuple(args.fail_on),
    }
    made = plan.make(asked(args, **options, runs=True))
    envdir = (args.envdir or Path.cwd() / ".nox").resolve()
    return nox_sessions.run_matrix(replace(made, noxfile=nox_sessions.noxfile_in(envdir, NOXFILE)), envdir, [])


def cmd_bisect(args: argparse.Namespace) -> Outcome:
    """The first release in a range whose verdict (or one observation, or one override's conclusion) for a subject
    differs from the oldest's."""
    from compat_matrix.host import nox_sessions

    wanted = plan.Bisect(args.range, args.subject, args.axis, args.observation, args.method)
    made = plan.make(asked(args, bisect=wanted, runs=True, report=False))
    envdir = (args.envdir or Path.cwd() / ".nox").resolve()
    return nox_sessions.run_bisect(replace(made, noxfile=nox_sessions.noxfile_in(envdir, NOXFILE)), envdir, [])


def cmd_report(args: argparse.Namespace) -> Outcome:
    from compat_matrix.host import report

    made = plan.make(asked(args, fail_on=tuple(args.fail_on)))
    written = report.run(made)
    for line in report.console(written, with_timings=True):
        print(line)
    if args.summary:
        with open(args.summary, "a", encoding="utf-8") as summary:
            summary.writelines(report.job_summary(w, args.limit // len(written)) for w in written)
    return report.outcome(written)


def cmd_summary(args: argparse.Namespace) -> Outcome:
    reports = without_evidence(args.reports)
    for path in reports:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise BadInput([f"{path}: cannot read the report ({exc})"]) from None
        print(cut.truncate(text, args.limit // len(reports)))
    return Outcome()


def without_evidence(paths: list[Path]) -> list[Path]:
    """The reports of `paths` (`reports/*.md`), less the evidence files beside those of them that name one: the
    summary cuts the evidence first anyway."""
    given = set(paths)
    beside = {p.with_name(render.evidence_file(p.name.removesuffix(".md"))) for p in given}
    return [p for p in paths if p not in beside]


def cmd_diff(args: argparse.Namespace) -> Outcome:
    changes = compare(load_report(args.old), load_report(args.new))
    for change in changes:
        print(change)
    print(f"{len(changes)} changes" if changes else "no changes")
    return Outcome(failed_checks=tuple(str(c) for c in changes if failing([c])))


def cmd_watch(args: argparse.Namespace) -> Outcome:
    """What to do about each matrix's one issue (compat_matrix.host.watch): printed as JSON, or with --gh done."""
    from compat_matrix.host import watch  # imports pandas (the report's labels): only this command needs it

    reports = reports_in(args.reports)
    try:
        issues = gh.listed(watch.LIST) if args.gh else gh.issues_in(args.issues) if args.issues else []
    except gh.Failed as exc:
        return Outcome(failed_checks=(str(exc),))
    decisions = []
    for new in reports:
        old = baseline_for(args.baseline, new["matrix"])
        if old is None:
            print(f"{new['matrix']}: no baseline in {args.baseline}: commit its report to watch it", file=sys.stderr)
        issue = watch.open_issue(new["matrix"], issues)
        decisions.append(watch.decide(old, new, issue, args.run_url or "", args.reports_at or ""))
    if not args.gh:
        print(json.dumps([d.to_json() for d in decisions], indent=2, ensure_ascii=False))
        return Outcome()
    failed = []
    for decision in decisions:
        print(f"{decision.matrix}: {decision.action}" + (f": {decision.title}" if decision.title else ""))
        try:
            for command, stdin in watch.gh_calls(decision):
                gh.run(command, stdin)
        except gh.Failed as exc:
            failed.append(str(exc))
    return Outcome(failed_checks=tuple(failed))


def cmd_list(args: argparse.Namespace) -> Outcome:
    made = plan.make(asked(args))
    for matrix in made.matrices:
        for package, sweep, releases in matrix.sweeps:
            print(f"{display_path(matrix.spec.path)}: {package} {sweep}: {', '.join(releases)}", file=sys.stderr)
        for line in found_lines(matrix):
            print(f"{display_path(matrix.spec.path)}: {line}", file=sys.stderr)
    listed = [
        {"session": c.id, "matrix": m.spec.name, "file": display_path(m.spec.path), "requested": c.requested}
        for m in made.matrices
        for c in m.cells
    ]
    if args.json:
        print(json.dumps(listed, separators=(",", ":")) if args.compact else json.dumps(listed, indent=2))
    else:
        print("\n".join(item["session"] for item in listed))
    return Outcome()


def cmd_init(args: argparse.Namespace) -> Outcome:
    """A starter matrix file for a package: written, validated, and the command that runs it."""
    from compat_matrix.host import starter

    asked = starter.Asked(
        args.package,
        args.source,
        tuple(args.transformers),
        tuple(args.extra),
        args.output,
        args.force,
        args.factory_template,
    )
    envdir = (args.envdir or Path.cwd() / ".nox").resolve()
    written = starter.init(asked, envdir, os.environ, log=lambda line: print(line, file=sys.stderr))
    for line in written.validated:
        print(line, file=sys.stderr)
    print(f"wrote {display_path(written.path)}; run it:")
    print(written.command)
    return Outcome()


def found_lines(matrix: plan.Matrix) -> list[str]:
    """What each module or package target of a matrix stood for in its cells' last results (the cells find its
    classes when they run, where the package is installed)."""
    targets = [s.target for s in matrix.spec.subjects if s.package]
    if not targets:
        return []
    results = [folders.read_result(matrix.spec.name, c, matrix.reports) for c in matrix.cells]
    lines = []
    for target in targets:
        seen = [(r, d) for r in results for d in r.discovered if d.target == target]
        if not seen:
            lines.append(f"{target}: its classes are found in each cell when it runs (no result yet)")
            continue
        found = list(dict.fromkeys(t for _, d in seen for t in d.subjects))
        where = f"in the last results of {exits.plural(len(seen), 'cell')}"
        lines.append(f"{target}: {', '.join(found) or 'no class to audit'} ({where})")
    return lines


def cmd_validate(args: argparse.Namespace) -> Outcome:
    loaded = plan.load(args.files)
    if loaded.problems:
        raise BadInput(loaded.problems)
    checked = resolve.validate(loaded.specs, os.environ, args.offline)
    for warning in [*checked.warnings, *(w for spec in loaded.specs for w in factories.unplaced(spec))]:
        print(f"warning: {warning}", file=sys.stderr)
    if checked.lines:
        print("\n".join(checked.lines))
    if checked.problems:
        raise BadInput(checked.problems)
    return Outcome()


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
        name: str,
        handler: Callable,
        summary: str,
        description: str,
        codes: tuple[int, ...],
        last_line: str = NEVER,
        ok: str = exits.MEANINGS[exits.OK],
        unmet: str = exits.MEANINGS[exits.UNMET],
    ) -> argparse.ArgumentParser:
        """A subcommand; `ok` and `unmet` say what exit codes 0 and 1 mean for it, `last_line` when it prints the
        exit line."""
        meaning = {**exits.MEANINGS, exits.OK: ok, exits.UNMET: unmet}
        meanings = "\n".join(f"  {code:<3} {meaning[code]}" for code in sorted({*codes, exits.UNEXPECTED}))
        made = sub.add_parser(
            name,
            help=summary,
            description=f"{summary}.\n\n{description}",
            epilog=f"exit codes:\n{meanings}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        made.set_defaults(run=handler, last_line=last_line)
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
        ALWAYS,
    )
    run.add_argument("files", nargs="*", type=Path, metavar="FILE.toml", help="matrix files (default: matrix/*.toml)")
    run.add_argument("--reports", type=Path, metavar="DIR", help="one folder for the reports of every file")
    run.add_argument("--baseline", type=Path, action="append", default=[], metavar="OLD.json", help="as for `report`")
    run.add_argument("--cached", action="store_true", help="reuse a cell's result while its fingerprint is unchanged")
    run.add_argument("--mutants", action="store_true", help="also run the subjects' tests against broken overrides")
    run.add_argument("--envdir", type=Path, metavar="DIR", help="where the environments are kept (default: ./.nox)")
    run.add_argument("--lanes", type=positive, metavar="N", help="cells at once (default: COMPAT_MATRIX_LANES)")
    run.add_argument(
        "--cell",
        action="append",
        default=[],
        metavar="ID",
        help="run only this cell (repeatable; `compat-matrix list` names them) and write no report: exit 0 or 3",
    )

    run.add_argument("--exclude-newer", metavar="DATE", help="resolve and install releases as of this date (UTC)")
    run.add_argument("--fail-on", action="append", default=[], metavar="KINDS", help=FAIL_ON_HELP)

    bisecting = command(
        "bisect",
        cmd_bisect,
        "find the first release in a range whose verdict for a subject differs",
        "Tests the range's oldest release and then as few releases as it can, every lane a round, until the first\n"
        "release whose verdict (or --observation, or --method's conclusion) differs from the oldest's; assumes it\n"
        "changes once in the range.\n"
        "Other axes stay at their first value. Reuses environments and results of earlier runs; prints each round\n"
        "and writes DIR/<name>.bisect.json. The same as `nox -s bisect -- ...` in compat-matrix's repository.",
        (exits.OK, exits.BAD_INPUT, exits.CELL_FAILED, exits.INTERRUPTED),
        FAILING,
        "answered (also when nothing in the range differs)",
    )
    bisecting.add_argument(
        "files", nargs="*", type=Path, metavar="FILE.toml", help="matrix files (default: matrix/*.toml)"
    )
    bisection.add_arguments(bisecting)
    bisecting.add_argument("--reports", type=Path, metavar="DIR", help="folder for the answer (default: as for `run`)")
    bisecting.add_argument(
        "--envdir", type=Path, metavar="DIR", help="where the environments are kept (default: ./.nox)"
    )
    bisecting.add_argument("--lanes", type=positive, metavar="N", help="cells at once (default: COMPAT_MATRIX_LANES)")

    report = command(
        "report",
        cmd_report,
        "merge the cells' result files into the reports",
        "Writes DIR/<name>.md, .json and .csv from the result files in DIR/.cells/; a cell without one is `not run`.",
        (exits.OK, exits.UNMET, exits.BAD_INPUT, exits.CELL_FAILED),
        ALWAYS,
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
    report.add_argument("--fail-on", action="append", default=[], metavar="KINDS", help=FAIL_ON_HELP)
    report.add_argument("--summary", type=Path, help="also append the markdown, cut to --limit bytes, to this file")
    report.add_argument("--limit", type=int, default=SUMMARY_LIMIT, help="bytes for --summary (default: 1,000,000)")

    listing = command(
        "list",
        cmd_list,
        "list the cells of the matrix files, one nox session each",
        "Prints one cell id a line, or with --json the cells with their matrix, file and requested versions. On\n"
        "standard error: what each sweep stands for, and the classes each module or package target stood for in\n"
        "the cells' last results.",
        (exits.OK, exits.BAD_INPUT),
        ok="listed",
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
        ok="nothing changed that fails",
    )
    diff.add_argument("old", type=Path, metavar="OLD.json", help="the earlier report")
    diff.add_argument("new", type=Path, metavar="NEW.json", help="the later report")

    watching = command(
        "watch",
        cmd_watch,
        "say what to do about each matrix's one GitHub issue, from the baseline and a new report",
        "Compares each new report with its baseline (a committed report, or a folder of them) and decides: open an\n"
        "issue titled with the change, update the open one, comment when it changes again, close it when the\n"
        "answers are back to the baseline, or nothing. Prints the decisions as JSON (with the gh calls that carry\n"
        "them out), or with --gh reads the open issues and makes the calls (GH_TOKEN, GH_REPO as gh reads them).",
        (exits.OK, exits.UNMET, exits.BAD_INPUT),
        FAILING,
        "decided (and with --gh, done)",
        "a gh call failed",
    )
    watching.add_argument(
        "reports", nargs="+", type=Path, metavar="NEW.json", help="the new reports, or folders of them"
    )
    watching.add_argument(
        "--baseline", type=Path, required=True, metavar="PATH", help="the committed report, or a folder of them"
    )
    watching.add_argument(
        "--issues", type=Path, metavar="FILE", help="the open issues, as `gh issue list --json number,title,body`"
    )
    watching.add_argument("--gh", action="store_true", help="read the open issues with gh and make the calls")
    watching.add_argument("--run-url", metavar="URL", help="this run, linked from the issue")
    watching.add_argument("--reports-at", metavar="TEXT", help="where the new reports are, said in the issue")

    summary = command(
        "summary",
        cmd_summary,
        "print reports cut to a size, tables first",
        "For a CI summary or a pull-request comment: the details go first, the tables never.",
        (exits.OK, exits.BAD_INPUT),
        ok="printed",
    )
    summary.add_argument("reports", nargs="+", type=Path, metavar="REPORT.md", help="markdown reports")
    summary.add_argument(
        "--limit",
        type=int,
        default=COMMENT_LIMIT,
        help="bytes in all (default: 65,536, a pull-request comment's limit)",
    )

    init = command(
        "init",
        cmd_init,
        "write a starter matrix file for a package",
        "Installs the package (its newest release, or the checkout of --from) with the newest transformers release\n"
        "it allows and torch as this machine offers it, finds every class it defines that subclasses transformers\n"
        "and overrides something of it, and writes matrix/<package>.toml: the requirement, the declared range of\n"
        "transformers swept (its lowest allowed release and the newest of every minor), torch pinned, a subject per\n"
        "class. Validates it and prints the command that runs it. The environments it installs (for the newest\n"
        "release the package allows, and for the other end of the axis) are kept in --envdir, and the run's cells\n"
        "for those releases use them.",
        (exits.OK, exits.BAD_INPUT),
        ok="written",
    )
    init.add_argument(
        "package", metavar="PACKAGE", help="the distribution's name on the package index, or a release of it (x==1.2)"
    )
    init.add_argument("--from", dest="source", type=Path, metavar="PATH", help="a local checkout to use instead")
    init.add_argument(
        "--transformers",
        action="append",
        default=[],
        metavar="VALUE",
        help="test these transformers values instead of the declared range (repeatable: --transformers declared "
        "--transformers 5.x); the package's own cap is lifted where they lie outside it",
    )
    init.add_argument(
        "--extra", action="append", default=[], metavar="REQ", help="what the package imports without declaring it"
    )
    init.add_argument("--output", type=Path, metavar="FILE", help="where to write it (default: matrix/PACKAGE.toml)")
    init.add_argument("--force", action="store_true", help="write over an existing file")
    init.add_argument(
        "--factory-template",
        action="store_true",
        help="also write <matrix>_factories.py beside the file: a factory to fill in for each class the default "
        "factory could not build (its error, the dataset columns a trainer asked for)",
    )
    init.add_argument("--envdir", type=Path, metavar="DIR", help="where the environments are kept (default: ./.nox)")

    validate = command(
        "validate",
        cmd_validate,
        "check matrix files",
        "Every problem on its own line, naming the file, the key and the value. Unless --offline, every axis value\n"
        "is also resolved against the package index uv uses (UV_DEFAULT_INDEX, UV_INDEX_URL, else PyPI, and\n"
        "UV_FIND_LINKS or PIP_FIND_LINKS folders), so a release that does not exist is reported before anything\n"
        "is installed.",
        (exits.OK, exits.BAD_INPUT),
        ok="every file is valid",
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
    outcome = exits.guarded(lambda: args.run(args))
    for problem in outcome.bad_input:
        print(f"error: {problem}", file=sys.stderr)
    code = exits.code(outcome)
    if outcome.unexpected:
        print(outcome.unexpected, file=sys.stderr)
    elif args.last_line == ALWAYS or (args.last_line == FAILING and code):
        print(exits.line(outcome), flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
