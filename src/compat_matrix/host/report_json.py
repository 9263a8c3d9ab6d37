"""The report JSON (schema 2, documented in the README): the answer per override first, then per subject, then
every cell with its subjects' verdicts and observations; the release's health and the rows the first screen says as
one line. Pure functions that only format, as compat_matrix.host.render does for the markdown; every text plain.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from compat_matrix.host import first_screen as screens
from compat_matrix.host import health, wording
from compat_matrix.host.conclude import Concluded
from compat_matrix.host.overrides import OverrideConclusions
from compat_matrix.host.tests_seen import TEST_COLUMNS, TestsSeen
from compat_matrix.host.wording import PLAIN, phrase

if TYPE_CHECKING:  # the report value is render's; render imports this module
    from compat_matrix.host.render import Report

SCHEMA = 2  # of the report JSON; 1 had no `status`, `counts` or the per-override changes and errors


def report_json(report: Report) -> dict[str, Any]:
    """The contract other tools read (schema 2, documented in the README): the answer per override first, then per
    subject, then every cell (newest first) with its subjects' verdicts and observations. Every text is plain."""
    cells = []
    for cell in report.collected.cells:
        r = cell.result
        mine = [s for s in report.rows if s.row.cell.cell == r.cell]
        cells.append(
            {
                "cell": r.cell,
                "requested": r.requested,
                "resolved": r.resolved,
                "status": r.outcome,
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
        "title": report.title,
        "health": [health_json(b) for b in report.health],
        "groups": [group_json(g, report) for g in report.first.groups],
        "status": report.status,
        "counts": report.grid.counts(),
        "fail_on": [str(k) for k in report.fail_on],
        "failed_on": list(report.failed_on),
        "unmet_expectations": list(report.unmet),
        "overrides": [
            override_json(o, report.order, report.grid.several)
            for answer in report.subjects.values()
            for o in answer.overrides
        ],
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
        "cells": cells,
    }
    if report.found:  # module or package targets: what each stood for
        data["found"] = {target: wording.found_line(target, found, PLAIN) for target, found in report.found.items()}
        groups = {subject.target: subject.group for subject in report.meta.subjects}
        for entry in data["subjects"]:
            entry["group"] = groups.get(entry["target"])
    if any(report.ranges.values()):
        for entry in data["subjects"]:
            checks = report.ranges.get(entry["target"], ())
            entry["declared_range"] = [wording.range_line(check, PLAIN) for check in checks]
    if report.changes is not None:
        data["changes_since_baseline"] = [c.to_json() for c in report.changes]
    return data


def health_json(breakage: health.Breakage) -> dict[str, Any]:
    """What breaks for one class as shipped (`target` null: the cell itself), at which stage, where and with what."""
    return {
        "target": breakage.target,
        "releases": list(breakage.releases),
        "stage": str(breakage.stage),
        "error": breakage.error,
    }


def group_json(group: screens.Group, report: Report) -> dict[str, Any]:
    """Rows the first screen says as one line: their advice, classes, overrides and the line, plain."""
    return {
        "advice": str(group.advice),
        "targets": list(group.targets),
        "overrides": [wording.name_of(o, True, PLAIN) for o in group.overrides],
        "line": screens.line(group, report.order, report.grid.several, PLAIN),
    }


def override_json(override: OverrideConclusions, order: Sequence[str], several: bool = False) -> dict[str, Any]:
    """One audited override across the tested releases, for machines: its conclusion on each (oldest first) and the
    context that carried it, the advice and its reason (the grid's words), where it first changed, the errors
    behind its harmful and needed conclusions, and its deprecation."""
    first_changed, last_same = override.changes
    return {
        "target": override.target,
        "name": override.name,
        "kind": override.kind,
        "by_release": {label: str(c.kind) for label, c in override.oldest_first},
        "context": {label: c.context for label, c in override.oldest_first if c.context},
        "advice": str(override.advice.kind),
        "reason": wording.reason(override, order, PLAIN),
        "caveat": override.advice.caveat,
        "first_changed": first_changed,
        "last_same": last_same,
        "errors": [
            {
                "release": f.release,
                "variant": f.variant,
                "type": f.type,
                "message": f.message,
                "observations": list(f.observations),
            }
            for f in override.failures()
        ],
        "deprecated": (
            {"since": override.deprecated.since, "replacement": override.deprecated.replacement}
            if override.deprecated
            else None
        ),
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
        "per_method": {method: str(c.kind) for method, c in row.per_method},
        "phrase": phrase(row.conclusion, row.verdict, PLAIN),
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
