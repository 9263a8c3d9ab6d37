"""Decide, per cell and subject, what the observations say. Pure functions.

- `same`: probes observed the audited behaviour (every audited method ran on the shipped side in a probe that
  did not call itself inconclusive) and every observation that carries a verdict is equal for both variants;
- `differs`: some observation that carries a verdict differs; the per-method bases say which overrides it
  follows (deleting that one alone reproduces it);
- `inconclusive`: nothing differs, but something audited was never observed (say why);
- `no probe`: no probe exercises any audited method;
- a failure kind (`install-failed`, `crashed`, `timed-out`, …) when the cell or subject could not run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from compat_matrix.host import prerelease
from compat_matrix.host.spec import Subject
from compat_matrix.probes import registry
from compat_matrix.shared import evidence
from compat_matrix.shared.results import CellResult, Observation, SubjectResult, failure_in
from compat_matrix.shared.vocabulary import RAN, ObservationName, Status, VerdictKind

if TYPE_CHECKING:  # the report's rows, which import pandas: the progress lines need none
    from compat_matrix.host.collect import SubjectRow

OK = Status.OK
SAME, DIFFERS = VerdictKind.SAME, VerdictKind.DIFFERS
REACHED, ERROR, WARNINGS = ObservationName.REACHED, ObservationName.ERROR, ObservationName.WARNINGS
INSPECTS = frozenset(name for name, p in registry().items() if p.inspects)  # probes that read the class, not run it
READS = frozenset(name for name, p in registry().items() if p.reads)  # probes that read an instance's attribute
QUIET = INSPECTS | READS  # probes that cannot show that the class runs: a class may fail in all the others
FAMILIES = (None, "model", "trainer")  # subject kinds with probes of their own (compat_matrix.probes); None: unknown


@dataclass(frozen=True)
class Verdict:
    verdict: str  # a VerdictKind where the cell and subject ran, else the Status that stopped them
    reason: str | None = None
    differs: tuple[str, ...] = ()  # "probe.observation" of every carrying observation that differs
    follows: tuple[str, ...] = ()  # the audited methods whose deletion alone reproduces a difference
    per_method: bool = False  # whether the per-method bases ran, so that `follows` is known

    @property
    def ran(self) -> bool:
        return self.verdict in RAN

    @property
    def following(self) -> str:
        """` [follows m]` where the per-method bases ran (` [only with all deleted]` if none alone differs)."""
        if not self.per_method:
            return ""
        return f" [follows {', '.join(self.follows)}]" if self.follows else " [only with all deleted]"


def decide(subject: SubjectResult, cell: CellResult | None = None) -> Verdict:
    if cell is not None and cell.status != OK:
        return Verdict(cell.status, cell.reason)
    if subject.status != OK:
        return Verdict(subject.status, subject.reason)
    if not subject.methods:
        why = subject.reason or "the class overrides no method of transformers"
        return Verdict(VerdictKind.NO_PROBE, f"nothing to audit: {why}")
    if not subject.probes and subject.kind not in FAMILIES:
        return Verdict(VerdictKind.NO_PROBE, f"no probe family covers a subject of this kind ({subject.kind})")
    if not subject.probes:
        return Verdict(VerdictKind.NO_PROBE, f"no probe exercises {_names(subject.methods)}")
    broken = evidence.broken_as_shipped(subject, QUIET)
    if broken is not None:
        return Verdict(
            Status.FAILS_AS_SHIPPED, f"every probe that runs it fails, with its overrides and without: {broken}"
        )
    differing = [o for o in subject.observations if o.carries and not o.same]
    if differing:
        per_method = len(subject.methods) > 1 and any(o.without for o in differing)
        if len(subject.methods) == 1:
            follows = subject.methods
        else:
            follows = _follows(differing, subject.methods) if per_method else ()
        return Verdict(DIFFERS, None, tuple(f"{o.probe}.{o.name}" for o in differing), follows, per_method)
    judged = [evidence.judge(subject, m) for m in subject.methods]
    alone = [j for j in judged if j.verdict == evidence.DIFFERS]
    if alone:  # deleting all changes nothing, deleting one of them alone does (or some together)
        differs = tuple(dict.fromkeys(f"{o.probe}.{o.name}" for j in alone for o in j.differing))
        return Verdict(DIFFERS, None, differs, tuple(j.name for j in alone), per_method=True)
    why = unobserved(subject) or "; ".join(j.reason or j.verdict for j in judged if j.verdict != evidence.SAME)
    return Verdict(VerdictKind.INCONCLUSIVE, why) if why else Verdict(SAME)


def could_not_run(result: CellResult, target: str | None = None) -> str | None:
    """Why a cell counts as one that could not run (exit code 3), or None when it ran: its status, or every subject
    (only `target`, if given) that could not run with its status. The one place this is decided."""
    if result.status != OK:
        return str(result.status)
    subjects = [s for s in result.subjects if target is None or s.target == target]
    if target is not None and not subjects:
        return f"{target} {Status.NOT_RUN}"
    failed = [s for s in subjects if s.status != OK]
    if len(failed) > SHOWN_SUBJECTS:  # a package's classes: how many, by status, and the first
        counts: dict[str, int] = {}
        for s in failed:
            counts[s.status] = counts.get(s.status, 0) + 1
        said = ", ".join(f"{n} {status}" for status, n in counts.items())
        return f"{len(failed)} subjects ({said}): {failed[0].target} {failed[0].status}, …"
    return ", ".join(f"{s.target} {s.status}" for s in failed) or None


SHOWN_SUBJECTS = 3  # subjects named in why a cell could not run


def fails_run(result: CellResult) -> str | None:
    """Why a cell fails the run it is part of (exit code 3), or None: `could_not_run`, except that an early warning
    (a cell that asked for `pre` or installed a pre-release: compat_matrix.host.prerelease) never does by itself."""
    return None if prerelease.early(result.requested, result.resolved) else could_not_run(result)


def _follows(differing: list[Observation], methods: tuple[str, ...]) -> tuple[str, ...]:
    """The audited methods that, deleted alone, change some differing observation."""
    hit = {method for o in differing for method, value in o.without if value != o.override}
    return tuple(m for m in methods if m in hit)


def unobserved(subject: SubjectResult) -> str | None:
    """Why the probes did not observe every audited method (None if they did): a method no probe exercises, or
    one that never ran on the shipped side in a probe that observed something."""
    unprobed = [m for m in subject.methods if m in subject.unprobed]
    if unprobed:
        return f"no probe exercises {_names(unprobed)}"
    by_probe: dict[str, dict[str, Observation]] = {}
    for o in subject.observations:
        by_probe.setdefault(o.probe, {})[o.name] = o
    ran: set[str] = set()
    vacuous: list[str] = []
    for probe, observations in by_probe.items():
        empty = observations.get(ObservationName.INCONCLUSIVE)
        if empty is not None and empty.override and empty.base:
            vacuous.append(f"{probe}: {empty.override}")
            continue
        # Evidence: the audited method ran on the shipped side, and the probe observed something that carries
        # (a value, or an error), not only warnings.
        reached = observations.get(REACHED)
        if reached and any(o.carries and o.name != WARNINGS for o in observations.values()):
            ran |= set(reached.override or ())
    missing = [m for m in subject.methods if m not in ran]
    if not missing:
        return None
    why = f"{_names(missing)} never ran in a probe that observed something"
    return why + (f" ({'; '.join(vacuous)})" if vacuous else "")


def _names(methods: list[str] | tuple[str, ...]) -> str:
    return ", ".join(methods)


def phrase(verdict: Verdict) -> str:
    """The verdict in one short phrase: `same`, `differs: probe (name, name) [follows m]`, `inconclusive: why`."""
    if verdict.verdict == DIFFERS:
        by_probe: dict[str, list[str]] = {}
        for item in verdict.differs:
            probe, _, name = item.partition(".")
            by_probe.setdefault(probe, []).append(name)
        return "differs: " + "; ".join(f"{p} ({', '.join(n)})" for p, n in by_probe.items()) + verdict.following
    return f"{verdict.verdict}: {verdict.reason}" if verdict.reason else verdict.verdict


class Judged(NamedTuple):
    """One cell × subject with its verdict: what the verdicts step adds to a collected row."""

    row: SubjectRow
    verdict: Verdict


def decide_all(rows: Sequence[SubjectRow]) -> tuple[Judged, ...]:
    """The verdict of every collected row; a cell that ran without the subject did not run it."""
    return tuple(Judged(row, _decided(row)) for row in rows)


def _decided(row: SubjectRow) -> Verdict:
    if row.result is None and row.cell.status == OK:
        return Verdict(Status.NOT_RUN, "no result for it")
    return decide(row.result, row.cell) if row.result is not None else Verdict(row.cell.status, row.cell.reason)


def unmet_expectations(judged: Sequence[Judged], expected: tuple[Subject, ...]) -> list[str]:
    """One line per cell and subject whose verdict is not the one the matrix file expects for its version, or
    whose expected catches did not differ (a catch counts only where the base side ran that probe without error)."""
    by_target = {s.target: s for s in expected}
    unmet = []
    for row, verdict in judged:
        if not verdict.ran:
            continue  # a cell or subject that could not run is its own row, and exit code 3, whatever was expected
        if prerelease.early(row.cell.requested, row.cell.resolved):
            continue  # a pre-release warns; what was expected holds for releases
        cell, subject = row.cell, by_target[row.target]
        want = subject.expected(cell.resolved.get(next(iter(cell.requested), None)))
        where = f"{row.label}: {subject.target}"
        if want and verdict.verdict != want:
            unmet.append(f"{where} expected {want}, got {phrase(verdict)}")
        elif want == DIFFERS and row.result is not None:
            unmet += [f"{where} expected {catch} to differ: {why}" for catch, why in missed(row.result, subject)]
    return unmet


def missed(subject: SubjectResult, expected: Subject) -> list[tuple[str, str]]:
    """The catches the matrix file names for `expected` that this result does not show, and why."""
    observed = {f"{o.probe}.{o.name}": o for o in subject.observations}
    base_errors = {o.probe for o in subject.observations if o.name == ERROR and o.base is not None}
    out = []
    for catch in expected.catches:
        o = observed.get(catch)
        if o is None:
            out.append((catch, "not observed"))
        elif not o.carries:
            out.append((catch, "only informs: it cannot make the verdict differ"))
        elif o.same:
            out.append((catch, f"both {o.override!r}"))
        elif o.probe in base_errors or failure_in(o.base) is not None:
            out.append((catch, "the base implementation errored in that probe, which proves nothing"))
    return out
