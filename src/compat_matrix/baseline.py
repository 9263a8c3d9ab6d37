"""Compare two reports (their JSON): versions that appeared or vanished, verdicts that flipped, observations
whose values changed. Pure functions over the report JSON, so a committed report is a baseline as it is.

Rows are matched by installed version, not by what was asked for: "5.x" resolving to a newer release is a new
version, and the release it replaced a vanished one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NEW = "new version"
VANISHED = "vanished version"
FLIPPED = "verdict flipped"
CHANGED = "observation changed"
FAILING = (FLIPPED, CHANGED)  # what makes a baseline check fail; new and vanished versions only inform


class BaselineError(ValueError):
    """A baseline file that cannot be read as a compat-matrix report."""


@dataclass(frozen=True)
class Change:
    kind: str
    row: str  # e.g. "transformers 5.24.0, torch 2.13.0+cpu"
    detail: str

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "row": self.row, "detail": self.detail}

    def __str__(self) -> str:
        return f"{self.kind}: {self.row}" + (f": {self.detail}" if self.detail else "")


def load_report(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BaselineError(f"{path}: cannot read baseline report ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != 1 or not isinstance(data.get("cells"), list):
        raise BaselineError(f"{path}: not a compat-matrix report of schema 1")
    return data


def row(cell: dict[str, Any]) -> str:
    """The installed versions of the cell's axes; what was asked for where nothing was installed."""
    resolved = cell.get("resolved") or {}
    return ", ".join(
        f"{axis} {resolved[axis]}" if axis in resolved else f"{axis} {value} (requested)"
        for axis, value in cell["requested"].items()
    )


def compare(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    before = {row(c): c for c in old["cells"]}
    after = {row(c): c for c in new["cells"]}
    changes = [Change(NEW, r, "") for r in after if r not in before]
    changes += [Change(VANISHED, r, "") for r in before if r not in after]
    for r in (r for r in after if r in before):
        changes += _compare_cell(r, before[r], after[r])
    return changes


def _compare_cell(r: str, old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    changes = []
    previous = {s["target"]: s for s in old["subjects"]}
    for subject in new["subjects"]:
        was = previous.get(subject["target"])
        if was is None:
            continue
        if was["verdict"] != subject["verdict"]:
            changes.append(Change(FLIPPED, r, f"{subject['target']}: {was['verdict']} → {subject['verdict']}"))
        values = {(o["probe"], o["name"]): (o["override"], o["base"]) for o in was["observations"]}
        for o in subject["observations"]:
            key = (o["probe"], o["name"])
            if key in values and values[key] != (o["override"], o["base"]):
                old_pair = values[key]
                changes.append(
                    Change(
                        CHANGED,
                        r,
                        f"{subject['target']} {o['probe']}.{o['name']}: "
                        f"override {_short(old_pair[0])} → {_short(o['override'])}, "
                        f"base {_short(old_pair[1])} → {_short(o['base'])}",
                    )
                )
    return changes


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 120 else text[:119] + "…"


def failing(changes: list[Change]) -> bool:
    return any(c.kind in FAILING for c in changes)
