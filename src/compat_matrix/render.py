"""Render the report: markdown that pastes into a PR, JSON for machines, CSV for spreadsheets.

Pure functions that only format: the rows, their order and labels, the verdicts, the conclusions and the phrases
were all decided before (collect → verdict → conclude). Nothing here reads a file or the clock, so unchanged
results render to byte-identical files.
"""

from __future__ import annotations

import csv
import html
import io
import re
from dataclasses import dataclass, field
from typing import Any

from compat_matrix.baseline import Change
from compat_matrix.collect import Collected
from compat_matrix.conclude import Concluded, Override, SubjectConclusions
from compat_matrix.results import METHOD, SCHEMA, equal
from compat_matrix.spec import Subject
from compat_matrix.vocabulary import ConclusionKind
from compat_matrix.wording import Summary, advice_why, phrase, versions_text
from compat_matrix.yourtests import TEST_COLUMNS, TestsSeen

COLUMNS = {"override": "with override", "base": "base implementation"}
BASE_MEANING = (
    "*with override*: the class as shipped. *base implementation*: the class as if the audited methods were "
    "deleted from its source, so each resolves to the nearest class after it in its MRO that defines it."
)
LEGEND = " · ".join(f"`{kind.symbol}` {kind}" for kind in ConclusionKind)
GLANCE_ABOVE = 5  # versions: more than this, or more than one subject, and the report starts with a grid
VALUE_LIMIT = 400  # characters of one value in the details
TRUNCATED = (
    "*Details cut to fit. The full report, with every observation, is in the uploaded reports "
    "(`reports/<name>.md`, `.json` and `.csv`).*"
)


@dataclass(frozen=True)
class ReportMeta:
    name: str
    file: str  # the matrix file, as the reader should type it
    command: str  # reproduces the run
    subjects: tuple[Subject, ...]
    exclude_newer: str | None = None  # the run resolved and installed releases as of this moment


@dataclass(frozen=True)
class Report:
    """Everything the files show, decided: the collected rows and observations, each cell × subject concluded,
    per subject its conclusions (structured) and their summary (in words), unmet expectations and changes since a
    baseline (None: no baseline given)."""

    meta: ReportMeta
    collected: Collected
    rows: tuple[Concluded, ...]
    subjects: dict[str, SubjectConclusions]
    summaries: dict[str, Summary]
    unmet: tuple[str, ...] = ()
    changes: tuple[Change, ...] | None = None
    found: dict[str, str] = field(default_factory=dict)  # per module or package target: what the cells found there
    ranges: dict[str, str] = field(default_factory=dict)  # per subject: whether the declared range is honest


_MARKUP = re.compile(r"([\\*_\[\]~])")


def escape(text: Any) -> str:
    """Make any text safe inside a markdown table cell (or a line of its own): no `|`, newline, HTML or code span
    can break the row, and no emphasis, link or strikethrough can start in it."""
    text = html.escape(str(text), quote=False).replace("`", "&#96;").replace("|", "&#124;")
    text = _MARKUP.sub(r"\\\1", text)
    return "<br>".join(line.strip() for line in text.splitlines()) or " "


def inline(text: str) -> str:
    """A sentence of the report's own, whose backticks mark code, made safe: no HTML, no `|`, one line."""
    return " ".join(html.escape(text, quote=False).replace("|", "&#124;").split())


def fmt(value: Any, limit: int | None = None) -> str:
    """An observed value as a reader expects it: `True`, `2/2`, `use_reentrant=False, ...`, `a; b`; containers
    inside containers in brackets: `layers=[True, False]`, `other_flags={model.model=True}`."""
    if value is None:
        text = "—"
    elif isinstance(value, dict):
        text = ", ".join(f"{k}={_nested(v)}" for k, v in sorted(value.items())) or "{}"
    elif isinstance(value, list):
        text = "; ".join(_nested(v) for v in value) or "(none)"
    else:
        text = str(value)
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def _nested(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + fmt(value) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_nested(v) for v in value) + "]"
    return fmt(value)


def table(header: list[str], rows: list[list[Any]]) -> str:
    """A GitHub-flavoured markdown table without padding; every cell escaped."""
    lines = ["| " + " | ".join(escape(h) if h else " " for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(escape(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def short_names(targets: list[str]) -> dict[str, str]:
    names = {t: t.rsplit(":", 1)[-1].rsplit(".", 1)[-1] for t in targets}
    return {t: n if list(names.values()).count(n) == 1 else t for t, n in names.items()}


def glance_grid(report: Report) -> list[str]:
    targets = [s.target for s in report.meta.subjects]
    labels = list(dict.fromkeys(r.label for r in report.rows))
    if len(targets) < 2 and len(labels) <= GLANCE_ABOVE:
        return []
    kinds = {(r.label, r.row.target): r.conclusion.kind for r in report.rows}
    names = short_names(targets)
    rows = [[label, *(kinds[label, t].symbol for t in targets)] for label in labels]
    return ["## At a glance", "", table(["", *(names[t] for t in targets)], rows), "", LEGEND, ""]


def subject_section(report: Report, subject: Subject) -> list[str]:
    rows = report.subjects[subject.target].rows
    summary = report.summaries[subject.target]
    ran = next((r.row.result for r in rows if r.row.result is not None and r.row.result.methods), None)
    methods = ", ".join(f"`{m}`" for m in report.subjects[subject.target].methods) or "none"
    out = [f"## `{subject.target.rsplit(':', 1)[-1]}`", "", f"`{subject.target}`, audited methods {methods}.", ""]
    out += [f"- {inline(line)}" for line in (*summary.lines, *summary.as_shipped, *summary.deprecations)] + [""]
    out += [f"**Recommendation:** {inline(summary.recommendation)}", ""]
    if subject.target in report.ranges:
        out += [f"**Declared range:** {inline(report.ranges[subject.target])}", ""]
    if summary.told_nothing:
        said = inline(summary.told_nothing)
        out += [f"Told nothing (both variants failed alike, or found nothing to look at): {said}", ""]
    if len(rows) > 1:
        out += [f"At a glance: {inline(summary.glance)}", ""]
    main = [
        [
            r.label,
            *((r.row.override_shown, r.row.base_shown) if r.verdict.ran else (r.verdict.verdict,) * 2),
            phrase(r.conclusion, r.verdict),
        ]
        for r in rows
    ]
    if len(main) > GLANCE_ABOVE:  # the grid lists every release; here neighbours that read alike share a row
        main = merged(main)
    out += [table(["", *COLUMNS.values(), "verdict"], main), ""]
    if summary.tests is not None:
        out += tests_section(summary.tests)
    if ran and ran.overrides:
        listed = ", ".join(f"`{o.name}` ({'audited' if o.audited else 'not audited'})" for o in ran.overrides)
        out += [f"Overrides of transformers methods: {listed}.", ""]
    return out


def merged(rows: list[list[str]]) -> list[list[str]]:
    """Neighbouring rows (newest first) whose cells but the label are equal, as one row labelled with their versions
    (`transformers 5.16.1 … 5.22.2`), so that a sweep's table stays short where nothing changes."""
    runs: list[list[list[str]]] = []
    for row in rows:
        if runs and runs[-1][-1][1:] == row[1:]:
            runs[-1].append(row)
        else:
            runs.append([row])
    order = [row[0] for row in rows]
    return [[versions_text([r[0] for r in run], order), *run[0][1:]] if len(run) > 1 else run[0] for run in runs]


def tests_section(seen: TestsSeen) -> list[str]:
    """The user's own tests: which need the override on each version, and which notice a broken one."""
    rows = [[label, *(", ".join(tests) or "—" for tests in columns)] for label, columns in seen.per_version]
    out = ["**Your tests**, with the override and without it:", "", table(["", *TEST_COLUMNS], rows), ""]
    if not seen.mutants:
        return [
            *out,
            "Run with `mutants = true` (or `nox -s matrix -- --mutants`) to learn which tests notice a "
            "broken override.",
            "",
        ]
    out += [f"**Which tests notice a broken override** ({len(seen.mutants)} broken versions):", ""]
    out += [table(["test", "catches"], [list(pair) for pair in seen.catches]), ""]
    notes = [
        f"- {escape(t)} catches none: it cannot tell a broken override from a working one." for t in seen.catch_none
    ]
    notes += [f"- {escape(test)} catches nothing that {escape(other)} does not." for test, other in seen.adds_nothing]
    return [*out, *notes, ""] if notes else out


def details(report: Report, subject: Subject) -> list[str]:
    frame = report.collected.observations
    observed = frame[frame["target"] == subject.target].to_dict("records")
    carrying = [o for o in observed if not o["same"] and o["carries"]]
    # equal with every audited method deleted, not with one of them deleted alone: evidence of the advice per method
    alone = [o for o in observed if o["same"] and o["carries"] and _differs_alone(o)]
    informing = [o for o in observed if not o["same"] and not o["carries"]]
    differing = carrying + alone + informing  # what decides the verdict first
    equal = [o for o in observed if o["same"] and o not in alone]
    methods = list(dict.fromkeys(m for o in differing for m in o["base_without"]))

    def name(o: dict[str, Any]) -> str:
        return o["name"] if o["carries"] else f"{o['name']} (informs)"

    said = (
        f"{len(observed)} observations, {len(carrying)} differ"
        + (f", {len(alone)} more with one method deleted alone" if alone else "")
        + (f" (and {len(informing)} that only inform)" if informing else "")
    )
    out = [f"<details><summary><code>{html.escape(subject.target)}</code>: {said}</summary>", ""]
    if differing:
        header = ["", "probe", "observation", *COLUMNS.values(), *(f"without {m}" for m in methods)]
        rows = [
            [
                o["label"],
                o["probe"],
                name(o),
                fmt(o["override"], VALUE_LIMIT),
                fmt(o["base"], VALUE_LIMIT),
                *(fmt(o["base_without"].get(m), VALUE_LIMIT) for m in methods),
            ]
            for o in differing
        ]
        out += [table(header, rows), ""]
    if equal:
        rows = [[o["label"], o["probe"], name(o), fmt(o["override"], VALUE_LIMIT)] for o in equal]
        out += [f"<details><summary>{len(equal)} equal observations</summary>", ""]
        out += [table(["", "probe", "observation", "both variants"], rows), "", "</details>", ""]
    return [*out, "</details>", ""]


def _differs_alone(o: dict[str, Any]) -> bool:
    return any(not equal(value, o["override"]) for value in o["base_without"].values())


def versions_table(collected: Collected) -> str:
    results = [c.result for c in collected.cells]
    packages = list(dict.fromkeys(p for r in results for p in r.resolved))
    rows = [
        [", ".join(f"{a} {v}" for a, v in r.requested.items()), r.status, *(r.resolved.get(p, "—") for p in packages)]
        for r in results
    ]
    return table(["requested", "status", *packages], rows)


def markdown(report: Report) -> str:
    meta = report.meta
    out = [f"# compat-matrix: {meta.name}", ""]
    if report.unmet:
        out += ["**Unmet expectations**", "", *(f"- {escape(line)}" for line in report.unmet), ""]
    out += glance_grid(report)
    groups: set[str] = set()
    for subject in meta.subjects:
        if subject.group in report.found and subject.group not in groups:
            groups.add(subject.group)
            out += [inline(report.found[subject.group]), ""]
        out += subject_section(report, subject)
    out += [BASE_MEANING, ""]
    if report.changes is not None:
        out += ["## Changed since baseline", ""]
        out += [f"- {escape(str(c))}" for c in report.changes] or ["No changes."]
        out += [""]
    out += ["## Details", ""]
    for subject in meta.subjects:
        out += details(report, subject)
    out += ["## Versions", "", versions_table(report.collected), ""]
    if meta.exclude_newer:
        out += [f"Releases as of {meta.exclude_newer} (`exclude_newer`): uploaded later, they were left out.", ""]
    out += ["## Reproduce", "", "```sh", meta.command, "```"]
    return "\n".join(out) + "\n"


def report_json(report: Report) -> dict[str, Any]:
    """The contract other tools read: schema, matrix, cells (newest first) with their subjects' verdicts."""
    cells = []
    for cell in report.collected.cells:
        r = cell.result
        mine = [s for s in report.rows if s.row.cell.cell == r.cell]
        cells.append(
            {
                "cell": r.cell,
                "requested": r.requested,
                "resolved": r.resolved,
                "status": r.status,
                "reason": r.reason,
                "subjects": [subject_json(s) for s in mine],
            }
        )
    data: dict[str, Any] = {
        "schema": SCHEMA,
        "matrix": report.meta.name,
        "file": report.meta.file,
        "command": report.meta.command,
        "exclude_newer": report.meta.exclude_newer,
        "unmet_expectations": list(report.unmet),
        "subjects": [
            {
                "target": target,
                "conclusions": list(summary.lines),
                "deprecations": list(summary.deprecations),
                "recommendation": summary.recommendation,
                "glance": summary.glance,
                "as_shipped": list(summary.as_shipped),
                "told_nothing": summary.told_nothing,
                "tests": tests_json(summary.tests),
            }
            for target, summary in report.summaries.items()
        ],
        "overrides": [override_json(o, answer) for answer in report.subjects.values() for o in answer.overrides],
        "cells": cells,
    }
    if report.found:  # module or package targets: what each stood for
        data["found"] = dict(report.found)
        groups = {subject.target: subject.group for subject in report.meta.subjects}
        for entry in data["subjects"]:
            entry["group"] = groups.get(entry["target"])
    if report.ranges:
        for entry in data["subjects"]:
            entry["declared_range"] = report.ranges.get(entry["target"])
    if report.changes is not None:
        data["changes_since_baseline"] = [c.to_json() for c in report.changes]
    return data


def override_json(override: Override, answer: SubjectConclusions) -> dict[str, Any]:
    """One audited override across the tested releases, for machines: the conclusion per release (and the context
    that carried it, with several audited names), the advice and why, in plain text."""
    order = [row.label for row in answer.rows]
    kinds = {o.name: o.kind for row in answer.rows if row.row.result for o in row.row.result.overrides}
    return {
        "target": override.target,
        "name": override.name,
        "kind": kinds.get(override.name, METHOD),
        "by_release": {label: str(conclusion.kind) for label, conclusion in override.by_release},
        "context": {label: c.context for label, c in override.by_release if c.context},
        "advice": str(override.advice.kind),
        "reason": advice_why(override.advice, order),
    }


def subject_json(row: Concluded) -> dict[str, Any]:
    ran, decided = row.row.result, row.verdict
    return {
        "target": row.row.target,
        "methods": list(ran.methods) if ran else [],
        "verdict": decided.verdict,
        "reason": decided.reason,
        "differs": list(decided.differs),
        "follows": list(decided.follows),
        "conclusion": row.conclusion.kind,
        "phrase": phrase(row.conclusion, row.verdict),
        "probes": list(ran.probes) if ran else [],
        "variants": list(ran.variants) if ran else [],
        "unprobed": list(ran.unprobed) if ran else [],
        "overrides": [o.to_json() for o in ran.overrides] if ran else [],
        "observations": [o.to_json() for o in ran.observations] if ran else [],
        "tests": [t.to_json() for t in ran.tests] if ran else [],
        "mutants": list(ran.mutants) if ran else [],
    }


def tests_json(seen: TestsSeen | None) -> dict[str, Any] | None:
    if seen is None:
        return None
    return {
        "per_version": {
            label: dict(zip(TEST_COLUMNS, map(list, columns), strict=True)) for label, columns in seen.per_version
        },
        "catches": dict(seen.catches),
        "catch_none": list(seen.catch_none),
        "adds_nothing": dict(seen.adds_nothing),
    }


def csv_text(collected: Collected) -> str:
    """Every observation, one row each, for spreadsheets; values spelled as in the markdown."""
    columns = ["label", "cell", "target", "probe", "name", "override", "base", "same", "carries"]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for o in collected.observations.to_dict("records"):
        values = map(fmt, (o["override"], o["base"], o["same"], o["carries"]))
        writer.writerow([inert(text) for text in (o["label"], o["cell"], o["target"], o["probe"], o["name"], *values)])
    return buffer.getvalue()


def inert(text: str) -> str:
    """`text` as a spreadsheet shows it, never runs it: text that starts like a formula (`=`, `+`, `-`, `@`, a tab
    or a carriage return; an error message of a user's library, say) gets a leading `'`. Numbers stay numbers."""
    if not text.startswith(("=", "+", "-", "@", "\t", "\r")):
        return text
    try:
        float(text)
        return text
    except ValueError:
        return "'" + text


def truncate(markdown: str, limit: int) -> str:
    """`markdown` in at most `limit` bytes (UTF-8): the details go first, then the versions; the grid, the
    conclusions and the tables at the top (and the unmet expectations and changes since the baseline) stay as long
    as they fit, and are cut at a line, with the note, only when they alone do not."""
    if len(markdown.encode()) <= limit:
        return markdown
    head, _, rest = markdown.partition("\n## Details\n")
    _, _, tail = rest.partition("\n## Versions\n")
    for candidate in (f"{head}\n{TRUNCATED}\n\n## Versions\n{tail}", f"{head}\n{TRUNCATED}\n"):
        if len(candidate.encode()) <= limit:
            return candidate
    kept, size = [], len(TRUNCATED.encode()) + 2
    for line in head.splitlines():
        size += len(line.encode()) + 1
        if size > limit:
            break
        kept.append(line)
    return "\n".join(kept) + f"\n\n{TRUNCATED}\n"
