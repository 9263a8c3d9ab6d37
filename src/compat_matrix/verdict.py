"""Decide, per cell and subject: `same` when every observation is equal for both variants, else `differs`.

A cell or subject that could not run gets its failure kind as the verdict, and its reason.
"""

from __future__ import annotations

import pandas as pd

from compat_matrix.results import OK, CellResult
from compat_matrix.spec import Subject

SAME = "same"
DIFFERS = "differs"


def verdicts(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per cell × subject, in the frame's row order: verdict, reason, and the observations that differ."""
    rows = []
    for (rank, cell, target), group in frame.groupby(["rank", "cell", "target"], sort=True, dropna=False):
        first = group.iloc[0]
        observed = group[group["probe"].notna()]
        differs = [
            f"{p}.{n}"
            for p, n, same in zip(observed["probe"], observed["name"], observed["same"], strict=True)
            if not same
        ]
        if first["cell_status"] != OK:
            verdict, reason = first["cell_status"], first["cell_reason"]
        elif first["subject_status"] != OK:
            verdict, reason = first["subject_status"], first["subject_reason"]
        else:
            verdict, reason = (DIFFERS if differs else SAME), None
        rows.append(
            {
                "rank": rank,
                "cell": cell,
                "label": first["label"],
                "target": target if isinstance(target, str) else None,
                "verdict": verdict,
                "reason": reason,
                "differs": differs,
            }
        )
    columns = ["rank", "cell", "label", "target", "verdict", "reason", "differs"]
    return pd.DataFrame(rows, columns=columns, dtype=object)


def phrase(verdict: str, differs: list[str], reason: str | None) -> str:
    """The verdict in one short phrase: `same`, `differs: probe (name, name)`, or `install-failed: why`."""
    if verdict == DIFFERS:
        by_probe: dict[str, list[str]] = {}
        for item in differs:
            probe, _, name = item.partition(".")
            by_probe.setdefault(probe, []).append(name)
        return "differs: " + "; ".join(f"{p} ({', '.join(names)})" for p, names in by_probe.items())
    return f"{verdict}: {reason}" if reason else verdict


def unmet_expectations(verdicts: pd.DataFrame, results: list[CellResult], subjects: tuple[Subject, ...]) -> list[str]:
    """One line per cell and subject whose verdict is not the one the matrix file expects for its version."""
    by_cell = {r.cell: r for r in results}
    by_target = {s.target: s for s in subjects}
    unmet = []
    for v in verdicts.to_dict("records"):
        result = by_cell[v["cell"]]
        axis = next(iter(result.requested), None)
        for subject in [by_target[v["target"]]] if v["target"] else subjects:
            expected = subject.expected(result.resolved.get(axis))
            if expected and v["verdict"] != expected:
                got = phrase(v["verdict"], v["differs"], v["reason"])
                unmet.append(f"{v['label']}: {subject.target} expected {expected}, got {got}")
    return unmet
