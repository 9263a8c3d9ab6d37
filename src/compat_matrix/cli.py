"""`compat-matrix`: the host-side steps as commands. The library does the work; this turns errors into one-line
messages and documented exit codes.

Exit codes: 0 every cell ran and every expectation held; 1 an expectation failed; 2 a bad matrix file (nothing ran);
3 a cell could not run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from compat_matrix import cells, collect, render, verdict
from compat_matrix.results import OK, write_json_atomic
from compat_matrix.spec import MatrixError, MatrixSpec, load_all

EXIT_OK = 0
EXIT_UNMET = 1
EXIT_BAD_MATRIX = 2
EXIT_CELL_FAILED = 3


def display_path(path: Path) -> str:
    """`path` relative to the working directory when it lies below it, else absolute."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path.resolve())


def build_report(spec: MatrixSpec, reports: Path) -> tuple[str, dict, int]:
    """Markdown and JSON for one matrix from its cell result files, and the exit code they call for."""
    results = collect.load_results(spec, cells.cells(spec), reports)
    frame = collect.collect(results)
    decided = verdict.verdicts(frame)
    unmet = verdict.unmet_expectations(decided, results, spec.subjects)
    file = display_path(spec.path)
    meta = render.ReportMeta(spec.name, file, f"COMPAT_MATRIX={file} nox -s matrix", spec.subjects)
    for r in results:
        print(f"{r.cell}: {r.status}" + (f" ({r.reason})" if r.reason else ""))
    for line in unmet:
        print(f"unmet expectation: {line}")
    failed = any(r.status != OK or any(s.status != OK for s in r.subjects) for r in results)
    code = EXIT_CELL_FAILED if failed else EXIT_UNMET if unmet else EXIT_OK
    return (
        render.markdown(frame, decided, results, meta, unmet),
        render.report_json(decided, results, meta, unmet),
        code,
    )


def write_report(reports: Path, name: str, text: str, data: dict) -> list[Path]:
    md, js = reports / f"{name}.md", reports / f"{name}.json"
    reports.mkdir(parents=True, exist_ok=True)
    tmp = md.with_suffix(".md.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, md)
    write_json_atomic(js, data)
    return [md, js]


def cmd_report(args: argparse.Namespace) -> int:
    specs = _load(args.files)
    codes = [EXIT_OK]
    for spec in specs:
        text, data, code = build_report(spec, args.reports)
        paths = write_report(args.reports, spec.name, text, data)
        print(f"wrote {', '.join(display_path(p) for p in paths)}")
        codes.append(code)
    return max(codes)


def cmd_list(args: argparse.Namespace) -> int:
    specs = _load(args.files)
    listed = [
        {"session": c.id, "matrix": s.name, "file": display_path(s.path), "requested": c.requested}
        for s in specs
        for c in cells.cells(s)
    ]
    print(json.dumps(listed, indent=2) if args.json else "\n".join(item["session"] for item in listed))
    return EXIT_OK


def cmd_validate(args: argparse.Namespace) -> int:
    for spec in _load(args.files):
        print(f"{display_path(spec.path)}: ok, {len(cells.cells(spec))} cells")
    return EXIT_OK


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
    report.set_defaults(run=cmd_report)
    listing = sub.add_parser("list", help="the cells of the matrix files, one nox session each")
    listing.add_argument("files", nargs="+", type=Path, metavar="FILE.toml")
    listing.add_argument("--json", action="store_true", help="as JSON, for a CI job matrix")
    listing.set_defaults(run=cmd_list)
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


if __name__ == "__main__":
    sys.exit(main())
