"""The report JSON (schema 3, documented in the README, its JSON Schema in report.schema.json beside this module):
the tested releases as records, then the answer per override, then per subject, then every cell with its subjects'
verdicts and observations; the release's health and the rows the first screen says as one line. Every reference to
a release is its record's `id` (`transformers=5.24.0`), never a label made for display, so that a bot joins
`by_release`, `cells[]`, `failed_on` and `errors` without parsing prose. Pure functions that only format, as
compat_matrix.host.render does for the markdown; every text plain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from compat_matrix.host import first_screen as screens
from compat_matrix.host import health, wording
from compat_matrix.host.baseline import INFORMING
from compat_matrix.host.collect import CellRow
from compat_matrix.host.conclude import Concluded
from compat_matrix.host.grid import Reached
from compat_matrix.host.overrides import OverrideConclusions, SubjectConclusions
from compat_matrix.host.releases import Label
from compat_matrix.host.tests_seen import TEST_COLUMNS, TestsSeen
from compat_matrix.host.wording import PLAIN, phrase
from compat_matrix.shared.results import Observation

if TYPE_CHECKING:  # the report value is render's; render imports this module
    from compat_matrix.host.render import Report

SCHEMA = (
    3  # of the report JSON; 2 keyed releases by display labels, 1 had no `status`, `counts` or per-override changes
)

Ids = Mapping[str, str]  # a row's label → its release record's id


def release_records(cells: Sequence[CellRow]) -> list[dict[str, Any]]:
    """One record per tested row (newest first, as the cells): its `id` (`transformers=5.24.0`; unique: a second
    cell that installed the same versions gets what it asked for added), every version its cell installed, what it
    asked for, its display `label`, and whether it is an early warning (a pre-release)."""
    records, seen = [], set()
    for cell in cells:
        label, r = Label.read(cell.label), cell.result
        rid = label.id
        if rid in seen:
            rid += ";requested:" + ",".join(f"{axis}={value}" for axis, value in r.requested.items())
        seen.add(rid)
        records.append(
            {
                "id": rid,
                "label": str(label),
                "versions": dict(r.resolved),
                "requested": r.requested,
                "early": label.early,
            }
        )
    return records


def ids_of(records: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Each label's id; where two rows read alike, the first (newest) one's."""
    return {r["label"]: r["id"] for r in reversed(records)}


def id_of(ids: Ids, label: str | None) -> str | None:
    """A label's id (a label from outside this report's rows: as its text reads)."""
    return None if label is None else ids.get(label) or Label.read(label).id


def report_json(report: Report) -> dict[str, Any]:
    """The contract other tools read (schema 3, documented in the README and in report.schema.json): the releases,
    the answer per override, then per subject, then every cell (newest first) with its subjects' verdicts and
    observations. Releases are referenced by id; every text is plain."""
    releases = release_records(report.collected.cells)
    ids = ids_of(releases)
    cells = []
    for cell, record in zip(report.collected.cells, releases, strict=True):
        r = cell.result
        mine = [s for s in report.rows if s.row.cell.cell == r.cell]
        cells.append(
            {
                "cell": r.cell,
                "release": record["id"],
                "requested": r.requested,
                "resolved": r.resolved,
                "status": r.outcome,
                "reason": r.reason,
                "notes": list(r.notes),
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
        "releases": releases,
        "health": [health_json(b, ids) for b in report.health],
        "groups": [group_json(g, report) for g in report.first.groups],
        "status": report.status,
        "counts": report.grid.counts(),
        "fail_on": [k.option for k in report.fail_on],
        "failed_on": [failed_json(f, ids) for f in report.failed_on],
        "unmet_expectations": list(report.unmet),
        "overrides": [
            override_json(o, report.order, report.grid.several, ids)
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
                "told_nothing": told_nothing_json(report.subjects[target], ids),
                "tests": tests_json(summary.tests, ids),
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
        data["changes_since_baseline"] = [{**c.to_json(), "release": ids.get(c.row)} for c in report.changes]
    return data


def failed_json(found: Reached, ids: Ids) -> dict[str, Any]:
    """An override that reached a `--fail-on` conclusion: its class (`module:Class`), name, the conclusion as the
    option spells it, and the releases (ids, oldest first)."""
    return {
        "target": found.override.target,
        "name": found.override.name,
        "conclusion": found.kind.option,
        "releases": [id_of(ids, label) for label in found.labels],
    }


def told_nothing_json(answer: SubjectConclusions, ids: Ids) -> list[dict[str, Any]]:
    """The probes that told nothing (both variants failed alike, or found nothing to look at), one record per probe
    and reason: the probe, its title, why, and where (ids, oldest first)."""
    titles = wording.probe_titles(answer)
    where: dict[tuple[str, str], list[str]] = {}
    for row in reversed(answer.rows):
        for probe, why in row.told_nothing:
            where.setdefault((probe, why), []).append(id_of(ids, row.label) or row.label)
    return [
        {"probe": probe, "title": titles.get(probe, probe.replace("_", " ")), "why": why, "releases": releases}
        for (probe, why), releases in where.items()
    ]


def health_json(breakage: health.Breakage, ids: Ids) -> dict[str, Any]:
    """What breaks for one class as shipped (`target` null: the cell itself), at which stage, where and with what."""
    return {
        "target": breakage.target,
        "releases": [id_of(ids, label) for label in breakage.releases],
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


def override_json(
    override: OverrideConclusions, order: Sequence[str], several: bool = False, ids: Ids | None = None
) -> dict[str, Any]:
    """One audited override across the tested releases, for machines: its conclusion on each (by release id, oldest
    first) and the context that carried it, the advice and its reason (the grid's words), where it first changed,
    the errors behind its harmful and needed conclusions, and its deprecation."""
    ids = ids or {}
    first_changed, last_same = override.changes
    deprecated = override.deprecated
    return {
        "target": override.target,
        "name": override.name,
        "kind": override.kind,
        "by_release": {id_of(ids, label): str(c.kind) for label, c in override.oldest_first},
        "context": {id_of(ids, label): c.context for label, c in override.oldest_first if c.context},
        "advice": str(override.advice.kind),
        "reason": wording.reason(override, order, PLAIN),
        "caveat": override.advice.caveat,
        "first_changed": id_of(ids, first_changed),
        "last_same": id_of(ids, last_same),
        "errors": [
            {
                "release": id_of(ids, f.release),
                "variant": f.variant,
                "type": f.type,
                "message": f.message,
                "observations": list(f.observations),
            }
            for f in override.failures()
        ],
        "deprecated": (
            {"since": id_of(ids, deprecated.since), "replacement": deprecated.replacement} if deprecated else None
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
        "conclusion": subject_conclusion(row),
        "per_method": {method: str(c.kind) for method, c in row.per_method},
        "phrase": phrase(row.conclusion, row.verdict, PLAIN),
        "probes": list(ran.probes) if ran else [],
        "variants": list(ran.variants) if ran else [],
        "unprobed": list(ran.unprobed) if ran else [],
        "overrides": [o.to_json() for o in ran.overrides] if ran else [],
        "observations": [observation_json(o) for o in ran.observations] if ran else [],
        "tests": [t.to_json() for t in ran.tests] if ran else [],
        "mutants": list(ran.mutants) if ran else [],
    }


def subject_conclusion(row: Concluded) -> str | None:
    """The subject's conclusion, never at odds with its audited names': theirs where they all agree (or the
    subject's own where it has none), else null (read `per_method`)."""
    kinds = {str(c.kind) for _, c in row.per_method}
    if not row.per_method:
        return str(row.conclusion.kind)
    return kinds.pop() if len(kinds) == 1 else None


def observation_json(o: Observation) -> dict[str, Any]:
    """An observation as the cell wrote it, with `carries` false where it never decides a conclusion (warnings,
    what ran, the lines that ran), whatever the probe said."""
    data = o.to_json()
    return {**data, "carries": bool(data["carries"]) and o.name not in INFORMING}


def tests_json(seen: TestsSeen | None, ids: Ids) -> dict[str, Any] | None:
    if seen is None:
        return None
    return {
        "per_version": {
            id_of(ids, label): dict(zip(TEST_COLUMNS, map(list, columns), strict=True))
            for label, columns in seen.per_version
        },
        "catches": dict(seen.catches),
        "catch_none": list(seen.catch_none),
        "adds_nothing": dict(seen.adds_nothing),
    }
