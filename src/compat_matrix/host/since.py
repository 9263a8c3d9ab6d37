"""The report read against a baseline, as a pull request's comment: what changed first, the rest collapsed.

- Nothing changed: one line (`No change since reports/x.json — CharacterCausalLMWrapper: delete 2 of 3 overrides,
  1 harmful on 5.24.0`), and the whole report collapsed under it.
- Something changed: the report's title, then the changed rows only (per override and stretch of releases: the
  conclusion then and now, and the advice now), the changes that only inform (versions, overrides new or gone) a
  line each, the observations behind them collapsed, and the whole report collapsed.

Each fact once: what the table says is not said again by a `--fail-on` line on top. Pure functions over the decided
report and its markdown body (compat_matrix.host.render makes both).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from compat_matrix.host import wording
from compat_matrix.host.baseline import Change, failing
from compat_matrix.host.grid import Reached
from compat_matrix.host.markup import Md, escape, inline, table
from compat_matrix.host.overrides import OverrideConclusions
from compat_matrix.host.releases import axis_of, runs
from compat_matrix.shared.vocabulary import ChangeKind, ConclusionKind

if TYPE_CHECKING:  # the report value is render's; render imports this module
    from compat_matrix.host.render import Report

WHOLE_REPORT = "<details><summary>The whole report"  # what the comment collapses under its first lines
OBSERVED = (ChangeKind.CHANGED, ChangeKind.APPEARED, ChangeKind.GONE)  # the evidence behind a changed conclusion


@dataclass(frozen=True)
class Flip:
    """One override's conclusion that changed on a stretch of releases (oldest first): then and now."""

    target: str
    name: str
    labels: tuple[str, ...]
    was: str
    now: str


def flips(changes: Sequence[Change], order: Sequence[str]) -> list[Flip]:
    """The conclusions that changed, per override and stretch of neighbouring releases that changed alike, in the
    order the changes came (the grid's is the report's; the baseline's is the matrix file's)."""
    by_override: dict[tuple[str, str], list[Change]] = {}
    for c in changes:
        if c.kind == ChangeKind.CONCLUDED:
            by_override.setdefault((c.target, c.name), []).append(c)
    out = []
    oldest_first = list(reversed(order))
    for (target, name), found in by_override.items():
        ordered = sorted(found, key=lambda c: oldest_first.index(c.row) if c.row in oldest_first else len(order))
        for run in runs(ordered, lambda c: (c.was, c.now)):
            out.append(Flip(target, name, tuple(c.row for c in run), run[0].was, run[0].now))
    return out


def said_by(found: Reached, shown: Sequence[Flip]) -> bool:
    """Whether the changed rows already say that `found` reached its conclusion, on every release it did."""
    key = (found.override.target, found.override.name)
    now = {label for f in shown if (f.target, f.name) == key and f.now == found.kind for label in f.labels}
    return set(found.labels) <= now


def harmful_clause(report: Report) -> str:
    """`1 harmful on 5.24.0`: how many overrides are harmful and where; empty where none is."""
    harmful = [row.override for row in report.grid.rows if row.override.harmful]
    if not harmful:
        return ""
    labels = list(
        dict.fromkeys(label for o in harmful for label, c in o.oldest_first if c.kind == ConclusionKind.HARMFUL)
    )
    return f"{len(harmful)} harmful on {wording.versions_text(labels, report.order, axis=False)}"


def fails_clause(report: Report) -> str:
    """`fails --fail-on harmful`, `fails 1 unmet expectation`: why the run fails, where it does; else empty."""
    parts = []
    if report.failed_on:
        kinds = ",".join(dict.fromkeys(f.kind.option for f in report.failed_on))
        parts.append(f"`--fail-on {kinds}`")
    if report.unmet:
        parts.append(f"{len(report.unmet)} unmet expectation{'s' if len(report.unmet) > 1 else ''}")
    return f"fails {' and '.join(parts)}" if parts else ""


def unchanged_line(report: Report) -> str:
    """The one line of a comment whose baseline says the same: what it says, once."""
    said = [inline(report.title_in(wording.MARKDOWN))]
    said += [part for part in (harmful_clause(report), fails_clause(report)) if part]
    return f"No change since `{report.since}` — " + ", ".join(said)


def override_of(report: Report, flip: Flip) -> OverrideConclusions | None:
    overrides = (row.override for row in report.grid.rows)
    return next((o for o in overrides if (o.target, o.name) == (flip.target, flip.name)), None)


def flip_row(report: Report, flip: Flip) -> list[object]:
    """`gradient_checkpointing_enable` | 5.24.0 | = redundant | ✗ harmful | **Delete**: …: the row of the grid,
    for the releases where its conclusion changed."""
    override, order = override_of(report, flip), report.order
    where = wording.versions_text(list(flip.labels), order, axis=False)
    if override is None:  # not in the grid: a report whose subject has nothing audited now
        return [flip.name or flip.target, where, _kind(flip.was), _kind(flip.now), ""]
    advice = Md(f"**{override.advice.kind}**: {wording.reason(override, order)}")
    return [Md(wording.name_of(override, report.grid.several)), where, _kind(flip.was), _kind(flip.now), advice]


def _kind(text: str) -> str:
    """`= redundant`: a conclusion as the grid shows it; anything else as it is."""
    try:
        return wording.cell(ConclusionKind(text))
    except ValueError:
        return text


def changed_lines(report: Report) -> list[str]:
    """The changed rows first, a `--fail-on` line for what they do not say, the changes that only inform a line
    each, and the observations behind them collapsed."""
    changes = list(report.changes or ())
    shown = flips(changes, report.order)
    fails = " (fails the run)" if failing(changes) else ""
    out = [f"**Changed since `{report.since}`**{fails}:", ""]
    if shown:
        header = ["override", axis_of(report.order), "was", "now", "advice"]
        out += [table(header, [flip_row(report, f) for f in shown]), ""]
    unsaid = [f for f in report.failed_on if not said_by(f, shown)]
    if unsaid:
        kinds = ",".join(kind.option for kind in report.fail_on)
        out += [f"**Fails the run** (`--fail-on {kinds}`): " + "; ".join(escape(f) for f in unsaid), ""]
    others = [c for c in changes if c.kind != ChangeKind.CONCLUDED and c.kind not in OBSERVED]
    out += [*(f"- {escape(str(c))}" for c in others), ""] if others else []
    observed = [c for c in changes if c.kind in OBSERVED]
    if observed:
        count = f"{len(observed)} observation{'s' if len(observed) > 1 else ''} changed"
        out += [f"<details><summary>{count}</summary>", "", *(f"- {escape(str(c))}" for c in observed), ""]
        out += ["</details>", ""]
    return out


def comment(report: Report, title: str, body: Sequence[str]) -> list[str]:
    """The report against its baseline: the line or the changed rows on top, `body` (the report below its title)
    collapsed."""
    if not report.changes:
        top = [f"# {unchanged_line(report)}", ""]
        summary = "the grid, the evidence and the versions"
    else:
        top = [f"# {title}", "", *changed_lines(report)]
        summary = "as it stands: the grid, the evidence and the versions"
    return [*top, f"{WHOLE_REPORT}, {summary}</summary>", "", *body, "</details>"]
