"""The report stage: from the cells' result files to the written report, as a list of steps (the way nox lists its
workflow):

    load results → collect → verdicts → conclusions → render → write

`report(matrix)` runs the steps for one planned matrix, `run(plan)` for every matrix of a plan; `make_report` is
the pure middle (collect → verdicts → conclusions) on results in hand. `outcome` reduces what was written to what
the exit code needs (compat_matrix.host.exits.code), and `console` to the lines a run prints. Nothing here prints.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from compat_matrix.host import (
    collect,
    conclude,
    cut,
    first_screen,
    grid,
    health,
    overrides,
    range_check,
    render,
    tests_seen,
    verdict,
    wording,
)
from compat_matrix.host.baseline import Change, compare, failing, load_report
from compat_matrix.host.cells import Cell
from compat_matrix.host.exits import Outcome
from compat_matrix.host.folders import LOGS, ignore_housekeeping, read_result
from compat_matrix.host.plan import Matrix, Plan
from compat_matrix.host.releases import early_label
from compat_matrix.host.spec import Declared, MatrixSpec, display_path
from compat_matrix.probes import titles
from compat_matrix.shared.results import CellResult, write_json_atomic, write_text_atomic
from compat_matrix.shared.vocabulary import ConclusionKind, Status


@dataclass(frozen=True)
class Written:
    """One matrix's report, written: its files, what they say, and what the exit code needs from it."""

    name: str
    paths: tuple[Path, ...]
    markdown: str
    timings: str  # one line per cell with its duration: console, job summary and run log, never the report files
    unmet: tuple[str, ...]
    changes: tuple[Change, ...] | None  # since the baseline; None: no baseline given
    could_not_run: tuple[str, ...]  # `cell (why)`, each cell once
    cells: int
    failed_on: tuple[str, ...] = ()  # overrides that reached a `--fail-on` conclusion, and where
    title: str = ""
    glances: tuple[str, ...] = ()  # per override: where its conclusion changes
    partly: int = 0  # of the cells that could not run, those that ran but where some class could not


def run(plan: Plan) -> list[Written]:
    return [report(matrix, plan.fail_on) for matrix in plan.matrices]


def report(matrix: Matrix, fail_on: Sequence[ConclusionKind] = ()) -> Written:
    """One matrix's report, step by step."""
    results = load_results(matrix.spec, matrix.cells, matrix.reports)
    baseline = load_report(matrix.baseline) if matrix.baseline else None  # checked when the run was planned
    since = display_path(matrix.baseline) if matrix.baseline else None
    decided = make_report(matrix.spec, results, baseline, fail_on, matrix.declared, since)
    files = rendered(decided)
    return write(matrix, files, decided, results)


def load_results(spec: MatrixSpec, planned: tuple[Cell, ...] | list[Cell], reports: Path) -> list[CellResult]:
    """The result of every planned cell, in cell order; a missing or damaged file becomes a labelled result."""
    return [read_result(spec.name, cell, reports) for cell in planned]


def make_report(
    spec: MatrixSpec,
    results: list[CellResult],
    baseline: dict | None = None,
    fail_on: Sequence[ConclusionKind] = (),
    declared: Sequence[Declared] = (),
    since: str | None = None,
) -> render.Report:
    """collect → verdicts → conclusions (per row, then per subject) → the grid, summaries in plain words, the
    overrides that reached a `fail_on` conclusion, what breaks for the class as shipped (the release's health) and
    what the first screen holds, and what changed since `baseline`: everything the files show,
    decided, for render to format. A module or package target stands for the classes the cells found in it;
    `declared`: the ranges the requirements declare for the axes swept over them; `since`: the baseline's name, as
    its reader knows it (its file)."""
    expanded = collect.expand(spec.subjects, results)
    results = [collect.stand_ins(r, expanded) for r in results]
    collected = collect.collect(results, expanded)
    judged = verdict.decide_all(collected.subjects)
    rows = conclude.conclusions(judged, titles())
    subjects = {
        s.target: overrides.of_subject(s.target, s.methods, [r for r in rows if r.row.target == s.target])
        for s in expanded
    }
    subjects = overrides.inherited(subjects)  # an abstract base's override is deleted for all who inherit it
    summaries = {
        target: wording.summarize(
            answer, tests_seen.seen_tests([(r.label, r.row.result) for r in answer.rows]), wording.PLAIN
        )
        for target, answer in subjects.items()
    }
    decision = grid.make(list(subjects.values()))
    file = display_path(spec.path)
    meta = render.ReportMeta(spec.name, file, reproduce(spec, file), expanded, spec.exclude_newer)
    unmet = tuple(verdict.unmet_expectations(judged, expanded))
    order = [c.label for c in collected.cells]
    failed = tuple(reached(decision, fail_on, order))
    found = {s.target: tuple(d for _, d in collect.discoveries(s.target, results)) for s in spec.subjects if s.package}
    ranges = {target: tuple(range_check.range_checks(answer, declared)) for target, answer in subjects.items()}
    broken = health.breakages(rows)
    said = health.statements(broken, [s.target for s in expanded], order, spec.name)
    screen = first_screen.make(decision, broken, said)
    decided = render.Report(
        meta,
        collected,
        rows,
        subjects,
        summaries,
        decision,
        unmet,
        None,
        tuple(fail_on),
        failed,
        found,
        ranges,
        broken,
        screen,
    )
    if baseline is None:
        return decided
    changes = tuple(compare(baseline, render.report_json(decided)))
    return replace(decided, changes=changes, since=since or decided.since)


def reached(decision: grid.Grid, fail_on: Sequence[ConclusionKind], order: Sequence[str]) -> list[grid.Reached]:
    """`CharacterCausalLMWrapper.gradient_checkpointing_enable: harmful on transformers 5.24.0`: every override (in
    the grid's order) that reaches a `fail_on` conclusion on some tested release, once per conclusion; a
    pre-release's column only warns."""
    found = []
    for row in decision.rows:
        for kind in fail_on:
            labels = [label for label, c in row.override.oldest_first if c.kind == kind and not early_label(label)]
            if labels:
                name = wording.name_of(row.override, True, wording.PLAIN)
                line = f"{name}: {kind} on {wording.versions_text(labels, order)}"
                found.append(grid.Reached(row.override, kind, tuple(labels), line))
    return found


REPRODUCE_HERE = "COMPAT_MATRIX={file} nox -s matrix{options}"  # in a checkout of compat-matrix
REPRODUCE = "compat-matrix run {file}{options}"  # anywhere else


def reproduce(spec: MatrixSpec, file: str) -> str:
    """The command that reproduces the run where its reader is: `nox -s matrix` in a checkout of compat-matrix (the
    noxfile beside the matrix folder is this project's), `compat-matrix run FILE` anywhere else."""
    newer = f"--exclude-newer={spec.exclude_newer}" if spec.exclude_newer else ""
    if in_checkout(Path(spec.path)):
        return REPRODUCE_HERE.format(file=file, options=f" -- {newer}" if newer else "")
    return REPRODUCE.format(file=file, options=f" {newer}" if newer else "")


def in_checkout(path: Path) -> bool:
    """Whether a matrix file lies in a checkout of compat-matrix: some folder above it has this project's noxfile
    (one that registers its sessions with compat_matrix.host.nox_sessions) and src/compat_matrix."""
    for folder in Path(path).resolve().parents:
        if (folder / "src" / "compat_matrix").is_dir() and (folder / "noxfile.py").is_file():
            return True
    return False


@dataclass(frozen=True)
class Files:
    markdown: str
    data: dict[str, Any]
    csv: str
    evidence: str | None = None  # the evidence that does not fit in the markdown (render.documents)


def rendered(decided: render.Report) -> Files:
    markdown, evidence = render.documents(decided)
    return Files(markdown, render.report_json(decided), render.csv_text(decided.collected), evidence)


def write(matrix: Matrix, files: Files, decided: render.Report, results: list[CellResult]) -> Written:
    """The report files, and the run's timings in a log of their own beside them (not a report file)."""
    reports, name = matrix.reports, matrix.spec.name
    md, js, csv = (reports / f"{name}{suffix}" for suffix in (".md", ".json", ".csv"))
    reports.mkdir(parents=True, exist_ok=True)
    ignore_housekeeping(reports)
    write_text_atomic(md, files.markdown)
    write_text_atomic(csv, files.csv)
    write_json_atomic(js, files.data)
    beside = reports / render.evidence_file(name)
    if files.evidence is not None:
        write_text_atomic(beside, files.evidence)
    else:
        beside.unlink(missing_ok=True)  # a longer report's, from an earlier run
    said = timings(results)
    write_text_atomic(reports / LOGS / f"{name}.log", said + "\n")
    stopped = [(r, why) for r in results if (why := verdict.fails_run(r))]
    failed = tuple(f"{r.cell} ({why})" for r, why in stopped)
    several = decided.grid.several
    glances = tuple(  # a line per row of the grid: where its conclusion changes
        f"{wording.name_of(row.override, several, wording.PLAIN)}: {wording.stretches(row.override)}"
        for row in decided.grid.rows
    )
    return Written(
        name,
        (md, js, csv, *([beside] if files.evidence is not None else [])),
        files.markdown,
        said,
        decided.unmet,
        decided.changes,
        failed,
        len(results),
        tuple(map(str, decided.failed_on)),
        decided.title,
        glances,
        sum(r.status == Status.OK for r, _ in stopped),
    )


def timings(results: list[CellResult]) -> str:
    lines = []
    for r in results:
        took = f"{r.seconds:.1f} s" + (", reused" if r.reused else "") if r.seconds is not None else "no timing"
        lines.append(f"{r.cell}: {r.status} ({took})" + (f": {r.reason}" if r.reason else ""))
    return "\n".join(lines)


def job_summary(written: Written, limit: int) -> str:
    """The markdown cut to `limit` bytes, tables first, with the timings after it: for a CI job's summary."""
    timings = f"\n<details><summary>Timings</summary>\n\n```\n{written.timings}\n```\n\n</details>\n"
    return cut.truncate(written.markdown, limit - len(timings)) + timings


def outcome(written: list[Written]) -> Outcome:
    """What the reports call for: the cells that could not run, and the checks that failed (unmet expectations,
    overrides that reached a `--fail-on` conclusion, and changes since the baseline that fail)."""
    failed_checks = [
        *(line for w in written for line in w.unmet),
        *(f"--fail-on: {line}" for w in written for line in w.failed_on),
        *(str(c) for w in written for c in w.changes or () if failing([c])),
    ]
    return Outcome(
        cells=sum(w.cells for w in written),
        could_not_run=tuple(item for w in written for item in w.could_not_run),
        partly=sum(w.partly for w in written),
        failed_checks=tuple(failed_checks),
    )


def console(written: list[Written], with_timings: bool = False) -> list[str]:
    """What a run prints once its reports are written (the timings only where no line per cell was printed)."""
    lines = []
    for w in written:
        lines += [w.title, *(f"  {glance}" for glance in w.glances)] if w.title else []
        lines += [f"unmet expectation: {line}" for line in w.unmet]
        lines += [f"fails on: {line}" for line in w.failed_on]
        lines += [f"since baseline: {change}" for change in w.changes or ()]
        lines += [w.timings] if with_timings else []
        lines.append(f"wrote {', '.join(display_path(p) for p in w.paths)}")
    return lines
