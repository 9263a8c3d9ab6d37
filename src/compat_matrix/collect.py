"""Collect cell results into ordered, labelled pandas frames, once: the rest of the report path only adds columns.

- `cells`: one row per cell, newest first;
- `subjects`: one row per cell × subject of the matrix (a cell that ran no subject still has a row for each);
- `observations`: the long form, one row per cell × subject × observation.
Every row carries its `rank` (newest first) and `label` (`transformers 5.24.0`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from packaging.version import InvalidVersion, Version

from compat_matrix.cells import Cell, result_path
from compat_matrix.probes import registry
from compat_matrix.results import CellResult, ResultFileError, SubjectResult, read_cell_result
from compat_matrix.spec import MatrixSpec, Subject

OBSERVATION_COLUMNS = [
    "rank", "cell", "label", "target", "probe", "name", "override", "base", "carries", "base_without", "same"
]  # fmt: skip
NOT_RUN = "not run"
DAMAGED = "damaged result"


@dataclass(frozen=True)
class Collected:
    cells: pd.DataFrame
    subjects: pd.DataFrame
    observations: pd.DataFrame


def load_results(spec: MatrixSpec, cells: list[Cell], reports: Path) -> list[CellResult]:
    """The result of every cell, in cell order; a missing or damaged file becomes a labelled result."""
    results = []
    for cell in cells:
        path = result_path(reports, cell)
        try:
            results.append(read_cell_result(path))
        except ResultFileError as exc:
            status, reason = (NOT_RUN, "no result file") if not path.exists() else (DAMAGED, str(exc))
            results.append(CellResult(spec.name, cell.id, cell.requested, status=status, reason=reason))
    return results


def varying_axes(results: list[CellResult]) -> list[str]:
    """The axes whose requested value differs between cells: they name the rows (the first axis if none does)."""
    axes = list(dict.fromkeys(axis for r in results for axis in r.requested))
    varying = [a for a in axes if len({r.requested.get(a) for r in results}) > 1]
    return varying or axes[:1]


def label(result: CellResult, axes: list[str]) -> str:
    """`transformers 5.14.1`: the installed version where known, else what was asked for."""
    parts = []
    for axis in axes:
        installed = result.resolved.get(axis)
        parts.append(f"{axis} {installed}" if installed else f"{axis} {result.requested.get(axis, '?')} (requested)")
    return ", ".join(parts)


def _version_key(text: str | None) -> tuple[int, Version]:
    try:
        return (1, Version(str(text).split("+")[0]))
    except InvalidVersion:
        return (0, Version("0"))


def newest_first(results: list[CellResult], axes: list[str]) -> list[CellResult]:
    """Rows ordered by version, newest first, along the naming axes in order; ties keep cell order."""

    def key(r: CellResult) -> tuple:
        return tuple(_version_key(r.resolved.get(a) or r.requested.get(a)) for a in axes)

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
        where = {"rank": rank, "cell": result.cell, "label": label(result, axes)}
        cells.append({**where, "result": result})
        ran = {s.target: s for s in result.subjects}
        for subject in subjects:
            found = ran.get(subject.target)
            rows.append(
                {
                    **where,
                    "target": subject.target,
                    "result": found,
                    "cell_result": result,
                    "override_shown": shown(found, "override"),
                    "base_shown": shown(found, "base"),
                }
            )
            observations += [
                {**where, "target": subject.target, **o.to_json(), "same": o.same}
                for o in (found.observations if found else ())
            ]
    return Collected(
        pd.DataFrame(cells, columns=["rank", "cell", "label", "result"], dtype=object),
        pd.DataFrame(
            rows,
            columns=["rank", "cell", "label", "target", "result", "cell_result", "override_shown", "base_shown"],
            dtype=object,
        ),
        pd.DataFrame(observations, columns=OBSERVATION_COLUMNS, dtype=object),
    )
