"""Collect cell results into ordered, labelled rows, once: the later steps only add to them.

- `cells`: one CellRow per cell, newest first;
- `subjects`: one SubjectRow per cell × subject of the matrix (a cell that ran no subject still has one for each);
- `observations`: the long form, a pandas frame of one row per cell × subject × observation (for the details, the
  CSV and any grouping).
Every row carries its `rank` (newest first) and `label` (`transformers 5.24.0`, a releases.Label: its releases
with it).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd

from compat_matrix.host.releases import Label, Release
from compat_matrix.host.spec import Subject
from compat_matrix.probes import registry
from compat_matrix.shared.results import OK, CellResult, Discovery, SubjectResult

OBSERVATION_COLUMNS = [
    "rank", "cell", "label", "target", "probe", "name", "override", "base", "carries", "base_without", "same"
]  # fmt: skip


@dataclass(frozen=True)
class CellRow:
    rank: int  # 0 for the newest release
    label: Label  # "transformers 5.24.0"
    result: CellResult


@dataclass(frozen=True)
class SubjectRow:
    rank: int
    label: Label
    target: str  # "module:Class", as the matrix file names it
    result: SubjectResult | None  # None: the cell ran no such subject
    cell: CellResult
    override_shown: str  # the probes' summary for the main table: "enable→True, disable→False"
    base_shown: str


@dataclass(frozen=True)
class Collected:
    cells: tuple[CellRow, ...]
    subjects: tuple[SubjectRow, ...]
    observations: pd.DataFrame

    def of(self, target: str) -> tuple[SubjectRow, ...]:
        """The rows of one subject, newest first."""
        return tuple(row for row in self.subjects if row.target == target)


def varying_axes(results: list[CellResult]) -> list[str]:
    """The axes whose requested value differs between cells: they name the rows (the first axis if none does)."""
    axes = list(dict.fromkeys(axis for r in results for axis in r.requested))
    varying = [a for a in axes if len({r.requested.get(a) for r in results}) > 1]
    return varying or axes[:1]


def releases(result: CellResult, axes: list[str]) -> tuple[Release, ...]:
    """The releases of a cell along the axes that name the rows: what it installed, and what it asked for."""
    return tuple(Release.of(axis, result.resolved.get(axis), result.requested.get(axis, "?")) for axis in axes)


def label(result: CellResult, axes: list[str]) -> Label:
    """`transformers 5.14.1`: the installed version where known (`5.25.0rc1 (pre-release)`), else what was asked
    for."""
    return Label(releases(result, axes))


def newest_first(results: list[CellResult], axes: list[str]) -> list[CellResult]:
    """Rows ordered by version, newest first, along the naming axes in order; ties keep cell order."""

    def key(r: CellResult) -> tuple:
        return tuple(release.rank for release in releases(r, axes))

    return sorted(results, key=key, reverse=True)


def shown(subject: SubjectResult | None, variant: str) -> str:
    """`enable→True, disable→False`: the observations the probes mark as their summary, for one variant (as the
    cell said, or, for results from before it did, as this registry says)."""
    if subject is None:
        return ""
    summaries = subject.summaries or tuple((p.name, *p.summary) for p in registry().values() if p.summary)
    parts = []
    for probe, tag, name in summaries:
        values = {o.name: getattr(o, variant) for o in subject.observations if o.probe == probe}
        if values.get("error") is not None:
            parts.append(f"{tag}→error")
        elif name in values:
            parts.append(f"{tag}→{values[name]}")
    return ", ".join(parts)


def collect(results: list[CellResult], subjects: tuple[Subject, ...]) -> Collected:
    axes = varying_axes(results)
    cells, rows, observations = [], [], []
    for rank, result in enumerate(newest_first(results, axes)):
        label_ = label(result, axes)
        cells.append(CellRow(rank, label_, result))
        ran = {s.target: s for s in result.subjects}
        for subject in subjects:
            found = ran.get(subject.target)
            shown_ = (shown(found, "override"), shown(found, "base"))
            rows.append(SubjectRow(rank, label_, subject.target, found, result, *shown_))
            where = {"rank": rank, "cell": result.cell, "label": label_, "target": subject.target}
            observations += [{**where, **o.to_json(), "same": o.same} for o in (found.observations if found else ())]
    frame = pd.DataFrame(observations, columns=OBSERVATION_COLUMNS, dtype=object)
    return Collected(tuple(cells), tuple(rows), frame)


def expand(subjects: tuple[Subject, ...], results: list[CellResult]) -> tuple[Subject, ...]:
    """The report's subjects: the matrix file's, each module or package target replaced by the classes the cells
    found in it (in the order of their modules, those of the newest cell first), each keeping the target's other
    keys and naming it as its `group`. A target that some cell could not look into (or found nothing in) stays a
    subject of its own, so that its rows say why."""
    out: list[Subject] = []
    named = {s.target for s in subjects if not s.package}  # a class named on its own keeps its own keys
    ordered = newest_first(results, varying_axes(results))
    for subject in subjects:
        if not subject.package:
            out.append(subject)
            continue
        found = list(
            dict.fromkeys(
                s.target for r in ordered for s in r.subjects if s.group == subject.target and ":" in s.target
            )
        )
        taken = named | {s.target for s in out}
        for target in [t for t in found if t not in taken] or ([] if found else [subject.target]):
            out.append(replace(subject, target=target, exclude=(), group=subject.target))
    return tuple(out)


def discoveries(subject: str, results: list[CellResult]) -> list[tuple[CellResult, Discovery]]:
    """What each cell found in a module or package target, newest first."""
    ordered = newest_first(results, varying_axes(results))
    return [(r, d) for r in ordered for d in r.discovered if d.target == subject]


def stand_ins(result: CellResult, subjects: tuple[Subject, ...]) -> CellResult:
    """`result` with a subject for every class of its package targets that it did not run because it could not look
    into the package (its import failed): that failure, under the class's name."""
    ran = {s.target for s in result.subjects}
    failed = {s.target: s for s in result.subjects if s.group == s.target}
    more = [
        replace(failed[s.group], target=s.target)
        for s in subjects
        if s.group in failed and s.target not in ran and failed[s.group].status != OK
    ]
    return replace(result, subjects=(*result.subjects, *more)) if more else result
