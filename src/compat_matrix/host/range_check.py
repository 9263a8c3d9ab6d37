"""Whether a declared range is honest for one subject: every tested release that breaks it (an audited override
harmful there, unless on every release the error is its own, or the class as shipped unimportable) lies outside the
range, and the range the measurements support."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from compat_matrix.host.conclude import COULD_NOT_RUN, HARMFUL
from compat_matrix.host.overrides import OverrideConclusions, SubjectConclusions
from compat_matrix.host.releases import public
from compat_matrix.host.spec import Declared
from compat_matrix.shared.vocabulary import Status

IMPORT_FAILED = Status.IMPORT_FAILED  # a subject's status: the class as shipped cannot be imported on that release


@dataclass(frozen=True)
class RangeCheck:
    """Whether a declared range is honest for one subject: every tested release (oldest first) that breaks the
    subject lies outside it. A release breaks it where an audited override is harmful, or where the class as
    shipped cannot be imported; a cell that could not run tells nothing."""

    declared: Declared
    tested: tuple[str, ...]  # versions of the package that told something, oldest first
    harmful: tuple[tuple[str, tuple[str, ...]], ...]  # (override, versions where it is harmful)
    unimportable: tuple[str, ...]  # versions where the class as shipped cannot be imported
    supported: str | None  # what the measurements support, tested releases at both ends: ">=a,<=c"

    @property
    def breaking(self) -> tuple[str, ...]:
        found = {v for _, versions in self.harmful for v in versions} | set(self.unimportable)
        return tuple(v for v in self.tested if v in found)

    @property
    def allowed(self) -> tuple[str, ...]:
        """The tested versions the declared range allows."""
        spec = SpecifierSet(self.declared.specifier)
        return tuple(v for v in self.tested if spec.contains(Version(v), prereleases=True))

    @property
    def honest(self) -> bool:
        return not set(self.breaking) & set(self.allowed)

    @property
    def beyond(self) -> tuple[str, ...]:
        """Tested versions outside the declared range on which nothing breaks: the range could allow them."""
        return tuple(v for v in self.tested if v not in self.allowed and v not in self.breaking)


def range_checks(answer: SubjectConclusions, declared: Sequence[Declared]) -> list[RangeCheck]:
    """A check of every declared range against one subject's tested releases."""
    return [range_check(answer, d) for d in declared]


def range_check(answer: SubjectConclusions, declared: Declared) -> RangeCheck:
    versions: dict[str, str] = {}  # label → version of the declared package
    broken: list[str] = []
    for row in answer.rows:
        version = _version(row.row.cell.resolved.get(declared.package))
        result = row.row.result
        if version is None:
            continue
        if row.verdict.ran:
            versions[row.label] = version
        elif result is not None and result.status == IMPORT_FAILED and row.row.cell.status == Status.OK:
            versions[row.label] = version
            broken.append(version)
    tested = tuple(sorted(set(versions.values()), key=Version))
    # not where the probes ran on stand-ins, nor where on every release that ran what raised is the override's own
    # (a refusal, a key its inputs lacked): the report itself does not stand by those
    breaking = [
        (o, [label for label, c in o.by_release if c.kind == HARMFUL and label in versions])
        for o in answer.overrides
        if o.advice.caveat is None and not _own_everywhere(o)
    ]
    harmful = tuple(
        (o.name, tuple(sorted({versions[label] for label in labels}, key=Version))) for o, labels in breaking if labels
    )
    bad = {v for _, vs in harmful for v in vs} | set(broken)
    good = [v for v in tested if v not in bad]
    supported = None
    if good:  # from the oldest tested release that runs to the last one before the first that breaks: both tested
        above = [v for v in tested if v in bad and Version(v) > Version(good[0])]
        upto = [v for v in good if not above or Version(v) < Version(above[0])]
        supported = f"=={good[0]}" if good[0] == upto[-1] else f">={good[0]},<={upto[-1]}"
    return RangeCheck(declared, tested, harmful, tuple(sorted(set(broken), key=Version)), supported)


def _own_everywhere(override: OverrideConclusions) -> bool:
    """Whether on every release that ran it the class as shipped raised an error of the override's own: its
    probes' inputs, not a release, decide that (colpali's `forward` wants a mask no probe gives)."""
    ran = [c for _, c in override.by_release if c.kind != COULD_NOT_RUN]
    return bool(ran) and all(c.kind == HARMFUL and c.raised_by_it for c in ran)


def _version(text: str | None) -> str | None:
    version = public(text)
    return None if version is None else str(version)
