"""Collect cell results into one long-form pandas DataFrame: a row per cell × subject × observation.

A cell or subject that produced no observations (it failed, or did not run) still has one row, with `probe` and
`name` empty, so every cell reaches the report.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from packaging.version import InvalidVersion, Version

from compat_matrix.cells import Cell, result_path
from compat_matrix.results import CellResult, ResultFileError, read_cell_result
from compat_matrix.spec import MatrixSpec
from compat_matrix.verdict import Verdict, decide

NOT_RUN = "not run"
DAMAGED = "damaged result"
COLUMNS = [
    "cell",
    "label",
    "rank",
    "cell_status",
    "cell_reason",
    "target",
    "subject_status",
    "subject_reason",
    "probe",
    "name",
    "override",
    "base",
    "same",
    "carries",
]


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


def collect(results: list[CellResult]) -> pd.DataFrame:
    axes = varying_axes(results)
    rows = []
    for rank, result in enumerate(newest_first(results, axes)):
        cell = {
            "cell": result.cell,
            "label": label(result, axes),
            "rank": rank,
            "cell_status": result.status,
            "cell_reason": result.reason,
        }
        if not result.subjects:
            rows.append({**cell, "target": None})
        for subject in result.subjects:
            head = {
                **cell,
                "target": subject.target,
                "subject_status": subject.status,
                "subject_reason": subject.reason,
            }
            if not subject.observations:
                rows.append(head)
            rows += [
                {
                    **head,
                    "probe": o.probe,
                    "name": o.name,
                    "override": o.override,
                    "base": o.base,
                    "same": o.same,
                    "carries": o.carries,
                }
                for o in subject.observations
            ]
    frame = pd.DataFrame(rows, columns=COLUMNS, dtype=object)
    return frame.where(frame.notna(), None)


def verdicts(results: list[CellResult]) -> pd.DataFrame:
    """One row per cell × subject, newest first: its label and its Verdict (`decided`), flattened into `verdict`,
    `reason` and `differs` for readers of the frame. A cell that ran no subject has one row, target None."""
    axes = varying_axes(results)
    rows = []
    for rank, result in enumerate(newest_first(results, axes)):
        cell = {"rank": rank, "cell": result.cell, "label": label(result, axes)}
        decided = [(s.target, decide(s, result)) for s in result.subjects] or [
            (None, Verdict(result.status, result.reason))
        ]
        rows += [
            {
                **cell,
                "target": target,
                "decided": v,
                "verdict": v.verdict,
                "reason": v.reason,
                "differs": list(v.differs),
            }
            for target, v in decided
        ]
    columns = ["rank", "cell", "label", "target", "decided", "verdict", "reason", "differs"]
    return pd.DataFrame(rows, columns=columns, dtype=object)
