"""Tested releases in words: runs of neighbouring releases said by their ends and count (`transformers 4.57.6,
5.16.1–5.24.0 (9 releases)`), and where each override's conclusion changes (the glance)."""

from __future__ import annotations

from collections.abc import Sequence

from compat_matrix.host import grid
from compat_matrix.host.overrides import OverrideConclusions, SubjectConclusions
from compat_matrix.host.releases import Label, runs
from compat_matrix.host.wording.style import MARKDOWN, Style


def versions_text(labels: Sequence[str], order: Sequence[str], axis: bool = True) -> str:
    """`transformers 4.57.6, 5.16.1–5.24.0 (9 releases)`: oldest first, a run of more than three neighbouring tested
    versions (in `order`, newest first) as its ends and count, and the shared axis name said once (not at all
    without `axis`)."""
    tested = [run for run in runs(reversed(order), lambda label: label in labels) if run[0] in labels]
    read = [Label.read(label) for label in labels]
    shared = {label.package for label in read}
    simple = len(shared) == 1 and None not in shared

    def name(label: str) -> str:
        return Label.read(label).shown if simple else label

    said_ = [_stretch([name(label) for label in run]) for run in tested]
    return (f"{shared.pop()} " if simple and axis else "") + (", " if simple else "; ").join(said_)


def glance(answer: SubjectConclusions, style: Style = MARKDOWN) -> str:
    """Per audited override, in the grid's order, where its conclusion changes, oldest to newest (`m: redundant
    4.57.6, 5.14.1 · harmful 5.24.0`): each stretch starts at the first release it names, so a sweep's glance names
    the first release on which each override turns bad. It says what the grid says."""
    if not answer.overrides:
        return _runs([(row.label, row.conclusion.kind) for row in answer.rows])
    return "; ".join(f"{style.code(o.name)}: {stretches(o)}" for o in sorted(answer.overrides, key=grid.rank))


def stretches(override: OverrideConclusions) -> str:
    """`redundant 4.57.6, 5.14.1 · harmful 5.24.0`: one override's conclusions, oldest first."""
    return _runs([(label, c.kind) for label, c in override.by_release])


def _runs(labelled: list[tuple[str, str]]) -> str:
    """`same 4.57.6, 5.14.1 · differs 5.24.0` from (label, word) newest first: runs of one word, oldest first."""
    stretches_ = runs(reversed(labelled), lambda pair: pair[1])
    return " · ".join(f"{run[0][1]} {_stretch([Label.read(label).shown for label, _ in run])}" for run in stretches_)


LISTED = 3  # neighbouring tested versions named one by one; more are said by their ends and their count


def _stretch(versions: Sequence[str]) -> str:
    """Neighbouring tested versions, oldest first: `5.14.1`, `4.57.6, 5.14.1`, `4.57.6, 5.14.1, 5.24.0`,
    `5.16.1–5.24.0 (9 releases)`: every tested release can be counted, and "…" keeps one meaning, text left out."""
    if len(versions) <= LISTED:
        return ", ".join(versions)
    return f"{versions[0]}–{versions[-1]} ({len(versions)} releases)"
