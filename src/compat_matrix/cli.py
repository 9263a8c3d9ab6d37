"""`compat-matrix`: the host-side steps as commands. The library does the work; this turns errors into one-line
messages and documented exit codes.

Exit codes: 0 every cell ran and every expectation held; 1 an expectation or baseline check failed; 2 a bad matrix
or baseline file (nothing ran); 3 a cell could not run.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from compat_matrix import cells, collect, conclude, render, verdict
from compat_matrix.baseline import BaselineError, compare, failing, load_report
from compat_matrix.probes import registry, titles
from compat_matrix.results import OK, CellResult, write_json_atomic, write_text_atomic
from compat_matrix.spec import MatrixError, MatrixSpec, load_all

EXIT_OK = 0
EXIT_UNMET = 1
EXIT_BAD_MATRIX = 2
EXIT_CELL_FAILED = 3
SUMMARY_LIMIT = 1_000_000  # GitHub's step summary holds 1 MiB
LOGS = ".logs"  # inside the reports folder: what changes from run to run (durations), not committed


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


def make_report(spec: MatrixSpec, results: list[CellResult], baseline: dict | None = None) -> render.Report:
    """The report path, one way: collect (ordered, labelled frames) → verdicts → conclusions → summaries."""
    collected = collect.collect(results, spec.subjects)
    subjects = conclude.add_conclusions(verdict.add_verdicts(collected.subjects), titles())
    unmet = tuple(verdict.unmet_expectations(subjects, spec.subjects))
    file = display_path(spec.path)
    meta = render.ReportMeta(spec.name, file, f"COMPAT_MATRIX={file} nox -s matrix", spec.subjects)
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
    failed = any(r.status != OK or any(s.status != OK for s in r.subjects) for r in results)
    code = EXIT_CELL_FAILED if failed else EXIT_UNMET if report.unmet or failing(report.changes or []) else EXIT_OK
    data = render.report_json(report)
    return Built(render.markdown(report), data, render.csv_text(report.collected), code, timings(results))


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
    specs = _load(args.files)
    baselines = _baselines(args.baseline, specs)
    codes = [EXIT_OK]
    for spec in specs:
        built = build_report(spec, args.reports, baselines.get(spec.name))
        print(built.timings)
        paths = write_report(args.reports, spec.name, built)
        print(f"wrote {', '.join(display_path(p) for p in paths)}")
        if args.summary:
            timings = f"\n<details><summary>Timings</summary>\n\n```\n{built.timings}\n```\n\n</details>\n"
            with open(args.summary, "a", encoding="utf-8") as summary:
                summary.write(render.truncate(built.markdown, args.limit // len(specs) - len(timings)) + timings)
        codes.append(built.code)
    return max(codes)


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
    specs = _load(args.files)
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
    for spec in _load(args.files):
        print(f"{display_path(spec.path)}: ok, {len(cells.cells(spec))} cells")
        for line in unprobed_methods(spec):
            print(f"warning: {line}", file=sys.stderr)
    return EXIT_OK


def unprobed_methods(spec: MatrixSpec) -> list[str]:
    """One line per audited method that no built-in probe exercises: its subject can only be `inconclusive`."""
    exercised = {m for probe in registry().values() for m in probe.exercises}
    return [
        f"{display_path(spec.path)}: subjects[{index}].methods: {method!r}: no probe exercises it, so the verdict "
        "can only be inconclusive"
        for index, subject in enumerate(spec.subjects)
        for method in subject.methods
        if method not in exercised
    ]


def _load(files: list[Path]) -> list[MatrixSpec]:
    specs, problems = load_all(files)
    if problems:
        raise MatrixError(problems)
    return specs


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="compat-matrix", description=__doc__.splitlines()[0])
    sub = top.add_subparsers(dest="command", required=True)
    report = sub.add_parser("report", help="merge cell result files into reports/<name>.md and .json")
    report.add_argument("files", nargs="+", type=Path, metavar="FILE.toml")
    report.add_argument("--reports", type=Path, default=Path("reports"), help="folder of reports (default: reports)")
    report.add_argument(
        "--baseline",
        type=Path,
        action="append",
        default=[],
        metavar="OLD.json",
        help="an earlier report, or a folder of them: add what changed; flipped verdicts or changed values exit 1",
    )
    report.add_argument("--summary", type=Path, help="also append the markdown, cut to --limit bytes, to this file")
    report.add_argument("--wait", action="store_true", help="read one line of standard input before starting")
    report.add_argument("--limit", type=int, default=SUMMARY_LIMIT, help="bytes for --summary (default: 1,000,000)")
    report.set_defaults(run=cmd_report)
    listing = sub.add_parser("list", help="the cells of the matrix files, one nox session each")
    listing.add_argument("files", nargs="+", type=Path, metavar="FILE.toml")
    listing.add_argument("--json", action="store_true", help="as JSON, for a CI job matrix")
    listing.add_argument("--compact", action="store_true", help="JSON on one line (for $GITHUB_OUTPUT)")
    listing.set_defaults(run=cmd_list)
    diff = sub.add_parser("diff", help="what changed between two reports; exit 1 if verdicts or values changed")
    diff.add_argument("old", type=Path, metavar="OLD.json")
    diff.add_argument("new", type=Path, metavar="NEW.json")
    diff.set_defaults(run=cmd_diff)
    summary = sub.add_parser("summary", help="print reports cut to a size, tables first (for a CI summary or comment)")
    summary.add_argument("reports", nargs="+", type=Path, metavar="REPORT.md")
    summary.add_argument("--limit", type=int, default=SUMMARY_LIMIT, help="bytes in all (default: 1,000,000)")
    summary.set_defaults(run=cmd_summary)
    validate = sub.add_parser("validate", help="check matrix files; every problem on its own line")
    validate.add_argument("files", nargs="+", type=Path, metavar="FILE.toml")
    validate.set_defaults(run=cmd_validate)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except MatrixError as exc:
        for line in exc.problems:
            print(f"error: {line}", file=sys.stderr)
        return EXIT_BAD_MATRIX
    except BaselineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_MATRIX


if __name__ == "__main__":
    sys.exit(main())
