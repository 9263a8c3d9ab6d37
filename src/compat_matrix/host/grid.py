"""The decision grid, the first thing a report shows: what to do with each audited override, decided before render
formats it. Pure functions over the conclusions.

- One row per audited override, of every subject of the matrix, sorted by what it asks of the maintainer: harmful
  on some release first, then Port (a release stopped using it, so what it provided is gone there: as urgent as a
  breakage, and it needs work, not a deletion), Review, Keep, Delete; ties keep the matrix file's order (subjects,
  then audited names). A subject with nothing audited gets one row of its own conclusions.
- One column per tested release, oldest first, or per stretch of neighbouring releases on which every row reads
  alike (the same conclusion), so that a sweep of 25 releases stays a few columns wide where nothing changes. A
  pre-release (compat_matrix.host.prerelease) is always a column of its own: it warns about the next release.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from compat_matrix.host.advice import advise
from compat_matrix.host.conclude import COULD_NOT_RUN, OnRelease
from compat_matrix.host.overrides import OverrideConclusions, SubjectConclusions
from compat_matrix.host.releases import Label, runs
from compat_matrix.shared.vocabulary import AdviceKind, ConclusionKind

ORDER = (AdviceKind.FIX, AdviceKind.PORT, AdviceKind.REVIEW, AdviceKind.KEEP, AdviceKind.DELETE)  # after harmful


def rank(override: OverrideConclusions) -> int:
    """Where an override's row goes: 0 harmful on some release, then its advice in ORDER."""
    return 0 if override.harmful else 1 + ORDER.index(override.advice.kind)


@dataclass(frozen=True)
class Row:
    override: OverrideConclusions
    cells: tuple[ConclusionKind, ...]  # one per column

    @property
    def nothing_audited(self) -> bool:
        return not self.override.name


@dataclass(frozen=True)
class Grid:
    columns: tuple[tuple[str, ...], ...]  # the release labels of each column, oldest first
    rows: tuple[Row, ...]
    several: bool  # rows of several subjects: each names its class

    @property
    def labels(self) -> tuple[str, ...]:
        """Every tested release, oldest first."""
        return tuple(label for column in self.columns for label in column)

    @property
    def kinds(self) -> tuple[ConclusionKind, ...]:
        """The conclusions the grid shows, in the vocabulary's order (for its legend)."""
        seen = {kind for row in self.rows for kind in row.cells}
        return tuple(kind for kind in ConclusionKind if kind in seen)

    def counts(self) -> dict[str, int]:
        """Overrides per advice, every advice named."""
        counted = Counter(row.override.advice.kind for row in self.rows if not row.nothing_audited)
        return {str(kind): counted.get(kind, 0) for kind in AdviceKind}


@dataclass(frozen=True)
class Reached:
    """An override that reached a `--fail-on` conclusion: where (`labels`, oldest first; a pre-release's column
    only warns, so never one) and the line the report says it in
    (`CharacterCausalLMWrapper.gradient_checkpointing_enable: harmful on transformers 5.24.0`)."""

    override: OverrideConclusions
    kind: ConclusionKind
    labels: tuple[str, ...]
    line: str

    def __str__(self) -> str:
        return self.line


def overrides(subject: SubjectConclusions) -> tuple[OverrideConclusions, ...]:
    """The subject's audited overrides; for a subject with none, one nameless row of its own conclusions."""
    if subject.overrides:
        return subject.overrides
    by_release = tuple(OnRelease(r.label, r.conclusion) for r in subject.rows)
    return (OverrideConclusions(subject.target, "", by_release, advise(by_release)),)


def make(subjects: Sequence[SubjectConclusions]) -> Grid:
    every = [o for subject in subjects for o in overrides(subject)]
    return of(sorted(every, key=rank), len(subjects) > 1)  # stable: the matrix file's order among equals


def of(ordered: Sequence[OverrideConclusions], several: bool) -> Grid:
    """The grid of `ordered`'s rows, in that order; its columns merged over those rows alone."""
    labels = list(dict.fromkeys(label for o in ordered for label, _ in o.oldest_first))
    kinds = [{label: c.kind for label, c in o.by_release} for o in ordered]

    def reads(label: str) -> tuple:
        """What a column shows of a release: each row's conclusion; a pre-release keeps a column of its own."""
        return (*(k.get(label, COULD_NOT_RUN) for k in kinds), label if Label.read(label).early else None)

    columns = runs(labels, reads)
    rows = tuple(
        Row(o, tuple(k.get(c[0], COULD_NOT_RUN) for c in columns)) for o, k in zip(ordered, kinds, strict=True)
    )
    return Grid(tuple(map(tuple, columns)), rows, several)
