"""Render the report: markdown that pastes into a PR, and JSON for machines. Pure functions; no I/O here."""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from typing import Any

import pandas as pd

from compat_matrix.baseline import Change
from compat_matrix.collect import newest_first, varying_axes
from compat_matrix.probes import registry
from compat_matrix.results import SCHEMA, CellResult
from compat_matrix.spec import Subject
from compat_matrix.verdict import phrase

COLUMNS = {"override": "with override", "base": "base implementation"}
BASE_MEANING = (
    "*with override*: the class as shipped. *base implementation*: the class as if the audited methods were "
    "deleted from its source, so each resolves to the nearest class after it in its MRO that defines it."
)


@dataclass(frozen=True)
class ReportMeta:
    name: str
    file: str  # the matrix file, as the reader should type it
    command: str  # reproduces the run
    subjects: tuple[Subject, ...]


def escape(text: str) -> str:
    """Make any text safe inside a markdown table cell: no `|`, newline, HTML or code span can break the row."""
    text = html.escape(str(text), quote=False).replace("`", "&#96;").replace("|", "&#124;")
    return "<br>".join(line.strip() for line in text.splitlines()) or " "


def fmt(value: Any) -> str:
    """An observed value as a reader expects it: `True`, `2/2`, `use_reentrant=False, ...`, `a; b`."""
    if value is None:
        return "—"
    if isinstance(value, dict):
        return ", ".join(f"{k}={fmt(v)}" for k, v in sorted(value.items())) or "{}"
    if isinstance(value, list):
        return "; ".join(fmt(v) for v in value) or "(none)"
    return str(value)


def table(frame: pd.DataFrame) -> str:
    safe = frame.map(escape)
    safe.columns = [escape(c) if c else " " for c in frame.columns]
    return safe.to_markdown(index=False, disable_numparse=True)


def summary(group: pd.DataFrame, variant: str) -> str:
    """`enable→True, disable→False`: the observations the probes mark as their summary, for one variant."""
    parts = []
    for probe in registry().values():
        if probe.summary is None:
            continue
        label, name = probe.summary
        rows = group[group["probe"] == probe.name]
        errors = rows[rows["name"] == "error"][variant]
        values = rows[rows["name"] == name][variant]
        if errors.notna().any():
            parts.append(f"{label}→error")
        elif len(values):
            parts.append(f"{label}→{fmt(values.iloc[0])}")
    return ", ".join(parts)


def main_table(frame: pd.DataFrame, verdicts: pd.DataFrame, target: str) -> str:
    rows = []
    for _, v in verdicts[(verdicts["target"] == target) | verdicts["target"].isna()].iterrows():
        group = frame[(frame["cell"] == v["cell"]) & (frame["target"] == v["target"])]
        ran = v["decided"].ran
        cells = {col: summary(group, variant) if ran else v["verdict"] for variant, col in COLUMNS.items()}
        rows.append({"": v["label"], **cells, "verdict": phrase(v["decided"])})
    return table(pd.DataFrame(rows, columns=["", *COLUMNS.values(), "verdict"]))


def details_table(frame: pd.DataFrame, target: str) -> tuple[str, int, int]:
    observed = frame[(frame["target"] == target) & frame["probe"].notna()]
    rows = [
        {
            "": r["label"],
            "probe": r["probe"],
            "observation": r["name"],
            COLUMNS["override"]: fmt(r["override"]),
            COLUMNS["base"]: fmt(r["base"]),
            "same": ("yes" if r["same"] else "**no**") + ("" if r["carries"] else " (informs)"),
        }
        for _, r in observed.iterrows()
    ]
    columns = ["", "probe", "observation", *COLUMNS.values(), "same"]
    differing = sum(row["same"] == "**no**" for row in rows)
    return table(pd.DataFrame(rows, columns=columns)), len(rows), differing


def versions_table(results: list[CellResult]) -> str:
    packages = list(dict.fromkeys(p for r in results for p in r.resolved))
    axes = varying_axes(results)
    rows = []
    for r in newest_first(results, axes):
        requested = ", ".join(f"{a} {v}" for a, v in r.requested.items())
        rows.append(
            {
                "requested": requested,
                "status": r.status + (" (reused)" if r.reused else ""),
                "seconds": fmt(r.seconds),
                **{p: r.resolved.get(p, "—") for p in packages},
            }
        )
    return table(pd.DataFrame(rows, columns=["requested", "status", "seconds", *packages]))


def markdown(
    frame: pd.DataFrame,
    verdicts: pd.DataFrame,
    results: list[CellResult],
    meta: ReportMeta,
    unmet: list[str] = (),
    changes: list[Change] | None = None,
) -> str:
    out = [f"# compat-matrix: {meta.name}", ""]
    if unmet:
        out += ["**Unmet expectations**", "", *(f"- {escape(line)}" for line in unmet), ""]
    for subject in meta.subjects:
        ran = next((s for r in results for s in r.subjects if s.target == subject.target and s.methods), None)
        methods = ", ".join(f"`{m}`" for m in (ran.methods if ran else subject.methods)) or "none"
        out += [f"`{subject.target}`, audited methods {methods}.", "", main_table(frame, verdicts, subject.target), ""]
        if ran and ran.overrides:
            listed = ", ".join(
                f"`{n}` ({'probed' if probed else 'no probe covers it'})" for n, _, probed in ran.overrides
            )
            out += [f"Overrides of transformers methods: {listed}.", ""]
    out += [BASE_MEANING, ""]
    if changes is not None:
        out += ["## Changed since baseline", ""]
        out += [f"- {escape(str(c))}" for c in changes] or ["No changes."]
        out += [""]
    out += ["## Details", ""]
    for subject in meta.subjects:
        text, count, differing = details_table(frame, subject.target)
        out += [
            f"<details><summary><code>{html.escape(subject.target)}</code>: {count} observations, "
            f"{differing} differ</summary>",
            "",
            text,
            "",
            "</details>",
            "",
        ]
    out += [
        "## Versions",
        "",
        versions_table(results),
        "",
        "## Reproduce",
        "",
        "```sh",
        meta.command,
        "```",
        "",
    ]
    return "\n".join(out)


def report_json(
    verdicts: pd.DataFrame, results: list[CellResult], meta: ReportMeta, unmet: list[str] = ()
) -> dict[str, Any]:
    """The contract other tools read: schema, matrix, cells (newest first) with their subjects' verdicts."""
    decided = {(v["cell"], v["target"]): v for v in verdicts.to_dict("records")}
    cells = []
    for r in newest_first(results, varying_axes(results)):
        by_target = {s.target: s for s in r.subjects}
        subjects = []
        for subject in meta.subjects:
            v = decided.get((r.cell, subject.target), decided.get((r.cell, None)))
            ran = by_target.get(subject.target)
            subjects.append(
                {
                    "target": subject.target,
                    "methods": list(subject.methods),
                    "verdict": v["verdict"],
                    "reason": v["reason"],
                    "differs": list(v["differs"]),
                    "probes": list(ran.probes) if ran else [],
                    "observations": [o.to_json() for o in ran.observations] if ran else [],
                }
            )
        cells.append(
            {
                "cell": r.cell,
                "requested": r.requested,
                "resolved": r.resolved,
                "status": r.status + (" (reused)" if r.reused else ""),
                "reason": r.reason,
                "seconds": r.seconds,
                "subjects": subjects,
            }
        )
    return {
        "schema": SCHEMA,
        "matrix": meta.name,
        "file": meta.file,
        "command": meta.command,
        "unmet_expectations": list(unmet),
        "cells": cells,
    }


def csv_text(frame: pd.DataFrame) -> str:
    """Every observation, one row each, for spreadsheets; lists and dicts as JSON."""
    columns = ["label", "cell", "target", "probe", "name", "override", "base", "same", "cell_status", "cell_reason"]
    out = frame.sort_values("rank", kind="stable")[columns].copy()
    for column in ("override", "base"):
        out[column] = out[column].map(lambda v: v if v is None or isinstance(v, str) else json.dumps(v, sort_keys=True))
    return out.to_csv(index=False, lineterminator="\n")


TRUNCATED = "*Details truncated to fit; the full report is in the uploaded reports.*"


def truncate(markdown: str, limit: int) -> str:
    """`markdown` in at most `limit` bytes (UTF-8): the details go first, then the versions; the tables at the top
    (and the unmet expectations and changes since the baseline) are never cut."""
    if len(markdown.encode()) <= limit:
        return markdown
    head, _, rest = markdown.partition("## Details")
    _, _, tail = rest.partition("## Versions")
    for candidate in (f"{head}{TRUNCATED}\n\n## Versions{tail}", f"{head}{TRUNCATED}\n"):
        if len(candidate.encode()) <= limit:
            return candidate
    return f"{head}{TRUNCATED}\n"
