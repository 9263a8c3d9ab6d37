"""Compare two reports (their JSON): versions that appeared or vanished; per audited override, conclusions that
changed on a release both reports tested (`_init_weights`: redundant → behaves differently on 5.24.0), and overrides
that are new or gone; then observations that carry a verdict and changed, appeared or vanished. Pure functions over
the report JSON (schema 1, 2 or 3), so a committed report is a baseline as it is; schema 3's release ids are read
as the labels they stand for (`labelled`), so that reports of different schemas compare.

What only informs is left out: `reached`, warnings and every observation that carries no verdict. A subject whose
reports hold no conclusion per override (schema 1 before it had them) is compared by its verdict per cell.

Rows are matched by installed version, not by what was asked for: "5.x" resolving to a newer release is a new
version, and the release it replaced a vanished one. Two cells that installed the same versions (say "5.x" and
"5.24.0") stay two rows, told apart by what they asked for.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compat_matrix.host.exits import BadInput
from compat_matrix.host.releases import Label, Release, early_label
from compat_matrix.shared.vocabulary import FAILING_CHANGES, ChangeKind

NEW, VANISHED, FLIPPED = ChangeKind.NEW, ChangeKind.VANISHED, ChangeKind.FLIPPED
CHANGED, APPEARED, GONE = ChangeKind.CHANGED, ChangeKind.APPEARED, ChangeKind.GONE
CONCLUDED, NEW_OVERRIDE, GONE_OVERRIDE = ChangeKind.CONCLUDED, ChangeKind.NEW_OVERRIDE, ChangeKind.GONE_OVERRIDE
SCHEMAS = (1, 2, 3)  # of the report JSON, each readable as a baseline
INFORMING = ("reached", "lines", "warnings")  # observations that never fail a baseline check, whatever they carry


class BaselineError(BadInput):
    """A baseline file that cannot be read as a compat-matrix report."""

    def __init__(self, problem: str):
        super().__init__([problem])


@dataclass(frozen=True)
class Change:
    kind: ChangeKind
    row: str  # e.g. "transformers 5.24.0, torch 2.13.0+cpu"
    detail: str
    # a conclusion that changed, as values: the override (`module:Class`, name) and its conclusion then and now
    target: str = ""
    name: str = ""
    was: str = ""
    now: str = ""

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "row": self.row, "detail": self.detail}

    def __str__(self) -> str:
        return ": ".join(part for part in (self.kind, self.row, self.detail) if part)


def load_report(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BaselineError(f"{path}: cannot read baseline report ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") not in SCHEMAS or not isinstance(data.get("cells"), list):
        raise BaselineError(f"{path}: not a compat-matrix report of schema {' or '.join(map(str, SCHEMAS))}")
    return data


def reports_in(paths: list[Path]) -> list[dict]:
    """The reports named, and those in the folders named (any other JSON file there, a bisection's answer, is
    not a report and is skipped)."""
    found = []
    for path in paths:
        if not path.is_dir():
            found.append(load_report(path))
            continue
        for file in sorted(path.glob("*.json")):
            with contextlib.suppress(BaselineError):
                found.append(load_report(file))
    return found


def baseline_for(path: Path, matrix: str) -> dict | None:
    """The baseline report of `matrix`: the file `path`, or `<matrix>.json` in the folder `path` (None where the
    folder has none)."""
    if path.is_dir():
        path = path / f"{matrix}.json"
        if not path.exists():
            return None
    found = load_report(path)
    if found.get("matrix") != matrix:
        raise BadInput([f"--baseline {path}: a report of matrix {found.get('matrix')!r}, not {matrix!r}"])
    return found


def row(cell: dict[str, Any]) -> str:
    """The installed versions of the cell's axes; what was asked for where nothing was installed."""
    resolved = cell.get("resolved") or {}
    return Label(tuple(Release.of(axis, resolved.get(axis), value) for axis, value in cell["requested"].items()))


def requested(cell: dict[str, Any]) -> str:
    return ", ".join(f"{axis} {value}" for axis, value in cell["requested"].items())


def label(cell: dict[str, Any], cells: list[dict[str, Any]]) -> str:
    """The cell's row, and what it asked for when another cell of its report installed the same versions."""
    shared = sum(row(c) == row(cell) for c in cells) > 1
    return f"{row(cell)} (requested {requested(cell)})" if shared else row(cell)


def match(old: list[dict], new: list[dict]) -> tuple[list[tuple[dict, dict]], list[dict], list[dict]]:
    """(old, new) pairs of cells that are the same row, the new cells without one, the old cells without one.

    A pair installed the same versions and asked for the same; failing that, it is the only old and the only new
    cell left with those versions."""
    pairs = []
    old_left, new_left = list(old), []
    for cell in new:
        same = next((c for c in old_left if row(c) == row(cell) and c["requested"] == cell["requested"]), None)
        if same is None:
            new_left.append(cell)
        else:
            pairs.append((same, cell))
            old_left.remove(same)
    for cell in list(new_left):
        candidates = [c for c in old_left if row(c) == row(cell)]
        if len(candidates) == 1 and sum(row(c) == row(cell) for c in new_left) == 1:
            pairs.append((candidates[0], cell))
            old_left.remove(candidates[0])
            new_left.remove(cell)
    return pairs, new_left, old_left


def compare(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    """Every change from `old` to `new`, in ChangeKind's order: versions, conclusions per override, observations."""
    pairs, added, removed = match(old["cells"], new["cells"])
    changes = [Change(NEW, label(c, new["cells"]), "") for c in added]
    changes += [Change(VANISHED, label(c, old["cells"]), "") for c in removed]
    concluded, judged = _compare_overrides(labelled(old).get("overrides"), labelled(new).get("overrides"))
    changes += concluded
    for before, after in pairs:
        changes += _compare_cell(label(after, new["cells"]), before, after, judged)
    return sorted(changes, key=lambda c: list(ChangeKind).index(c.kind))


RELEASE_KEYED = ("by_release", "context")  # an override's records keyed by release


def labelled(report: dict[str, Any]) -> dict[str, Any]:
    """`report` with its overrides' releases (`by_release` keys, `context` keys, `errors[].release`) as the labels
    of schema 2 (`transformers 5.24.0`), where schema 3 names them by id (`transformers=5.24.0`); as it is
    otherwise."""
    if not isinstance(report.get("releases"), list) or not isinstance(report.get("overrides"), list):
        return report
    labels = {r["id"]: r["label"] for r in report["releases"]}

    def relabelled(override: dict[str, Any]) -> dict[str, Any]:
        keyed = {
            key: {labels.get(k, k): v for k, v in override.get(key, {}).items()} for key in ("by_release", "context")
        }
        errors = [{**e, "release": labels.get(e.get("release"), e.get("release"))} for e in override.get("errors", ())]
        return {**override, **keyed, "errors": errors}

    return {**report, "overrides": [relabelled(o) for o in report["overrides"]]}


def _compare_overrides(old: Any, new: Any) -> tuple[list[Change], frozenset[str]]:
    """The conclusions per override and release that changed, and the overrides new or gone; and the subjects
    compared this way (both reports hold their overrides)."""
    if not isinstance(old, list) or not isinstance(new, list):
        return [], frozenset()
    before = {(o["target"], o["name"]): o for o in old}
    after = {(o["target"], o["name"]): o for o in new}
    judged = frozenset(t for t, _ in before) & frozenset(t for t, _ in after)
    changes = []
    for key, o in after.items():
        target, name = key
        if target not in judged:
            continue
        was = before.get(key)
        if was is None:
            changes.append(Change(NEW_OVERRIDE, "", f"{target} {name}: {_conclusions(o)}"))
            continue
        for release, conclusion in o["by_release"].items():
            previous = was["by_release"].get(release)
            if previous is not None and previous != conclusion:
                detail = f"{target} {name}: {previous} → {conclusion}"
                changes.append(Change(CONCLUDED, release, detail, target, name, previous, conclusion))
    for key, o in before.items():
        if key[0] in judged and key not in after:
            changes.append(Change(GONE_OVERRIDE, "", f"{key[0]} {key[1]}: {_conclusions(o)} → gone"))
    return changes, judged


def _conclusions(override: dict[str, Any]) -> str:
    """`harmful on transformers 5.0.0, transformers 5.24.0; redundant on …`."""
    on: dict[str, list[str]] = {}
    for release, conclusion in override["by_release"].items():
        on.setdefault(conclusion, []).append(release)
    return "; ".join(f"{conclusion} on {', '.join(releases)}" for conclusion, releases in on.items())


def _compare_cell(
    r: str, old: dict[str, Any], new: dict[str, Any], judged: frozenset[str] = frozenset()
) -> list[Change]:
    changes = []
    previous = {s["target"]: s for s in old["subjects"]}
    for subject in new["subjects"]:
        was = previous.get(subject["target"])
        if was is None:
            continue
        target = subject["target"]
        if target not in judged and was["verdict"] != subject["verdict"]:
            changes.append(Change(FLIPPED, r, f"{target}: {was['verdict']} → {subject['verdict']}"))
        before = _carrying(was["observations"])
        after = _carrying(subject["observations"])
        for key, (override, base) in after.items():
            name = f"{target} {key[0]}.{key[1]}"
            if key not in before:
                changes.append(Change(APPEARED, r, f"{name}: override {_short(override)}, base {_short(base)}"))
            elif before[key] != (override, base):
                old_override, old_base = before[key]
                changes.append(
                    Change(
                        CHANGED,
                        r,
                        f"{name}: override {_short(old_override)} → {_short(override)}, "
                        f"base {_short(old_base)} → {_short(base)}",
                    )
                )
        for key, (override, base) in before.items():
            if key not in after:
                name = f"{target} {key[0]}.{key[1]}"
                changes.append(Change(GONE, r, f"{name}: was override {_short(override)}, base {_short(base)}"))
    return changes


def _carrying(observations: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[Any, Any]]:
    """The observations that carry a verdict, by (probe, name), with their two values."""
    return {
        (o["probe"], o["name"]): (o["override"], o["base"])
        for o in observations
        if o.get("carries", True) and o["name"] not in INFORMING
    }


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 120 else text[:119] + "…"


def failing(changes: list[Change]) -> bool:
    """Whether any change fails a baseline check; one on a pre-release's row only warns."""
    return any(c.kind in FAILING_CHANGES and not early_label(c.row) for c in changes)
