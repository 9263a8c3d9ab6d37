"""What to do with one override, by documented rules, from its conclusion on every tested release (compat_matrix.host.
conclude): Port where a release orphaned it after one where it did something worth keeping (what it provided is
gone there; not where it broke a contract or was harmful on those older releases: porting would port the bug;
releases older than those that read it are left out of the advice); Fix where it breaks only where transformers
passes it what it cannot take and does its job elsewhere; Keep where any release needs it (and it is harmful on
none), or it does its job wherever it behaves differently (and elsewhere changes nothing or is not established);
Delete where every release is redundant or harmful (deleting fixes the harmful ones, and what raises there is no
`raise` of its own) and every tested release ran; otherwise Review. A new advice is one member of
vocabulary.AdviceKind and its rule in `advise`. Fix also where it breaks a release only where transformers passes it
what it cannot take, the change was verified there and deleting it fails there too (so Delete is no way out), and
elsewhere it runs as shipped."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from compat_matrix.host.conclude import (
    COULD_NOT_RUN,
    DIFFERENTLY,
    HARMFUL,
    NEEDED,
    ORPHANED,
    REDUNDANT,
    UNKNOWN,
    Conclusion,
)
from compat_matrix.host.releases import early_label
from compat_matrix.shared.evidence import statements_text
from compat_matrix.shared.vocabulary import AdviceKind, ConclusionKind


@dataclass(frozen=True)
class Advice:
    """What to do with one override, and the tested releases behind it, per conclusion kind."""

    kind: AdviceKind
    releases: tuple[tuple[ConclusionKind, tuple[str, ...]], ...]  # labels, newest first; kinds in first-seen order
    caveat: str | None = None  # why it is Review where the conclusions alone say Delete (results.SubjectResult)

    def on(self, kind: ConclusionKind) -> tuple[str, ...]:
        return dict(self.releases).get(kind, ())

    @property
    def nothing_ran(self) -> bool:
        return not {kind for kind, _ in self.releases} - {COULD_NOT_RUN}


def advise(rows: Sequence[tuple[str, Conclusion]], caveat: str | None = None) -> Advice:
    """The advice for one override from its conclusion on every tested release ((label, conclusion), newest first);
    with a `caveat` (the probes ran on stand-ins, or on a model with nothing in it), never Delete but Review."""
    advice = _advise(rows)
    if caveat is not None and (advice.kind == AdviceKind.DELETE or advice.caveat):  # what the probes ran on, first
        return Advice(AdviceKind.REVIEW, advice.releases, caveat)
    return advice


def _gone_later(rows: Sequence[tuple[str, Conclusion]]) -> bool:
    """Whether a release it is orphaned on is newer than one it did something on (rows newest first)."""
    kinds = [c.kind for _, c in rows]
    return ORPHANED in kinds and bool({NEEDED, DIFFERENTLY, HARMFUL} & set(kinds[kinds.index(ORPHANED) :]))


def _worked_before(rows: Sequence[tuple[str, Conclusion]]) -> bool:
    """Whether, on the releases older than the newest one it is orphaned on (up to an older stretch where it is
    orphaned too) where it did something, what it did is worth porting: it was needed, or behaved differently
    without breaking a contract or the class as shipped (colpali's
    `_checkpoint_conversion_mapping`, whose keys lose a layer in the class's own reload on 5.3, is no Port)."""
    kinds = [c.kind for _, c in rows]
    start = kinds.index(ORPHANED)
    end = next((i for i in range(start + 1, len(kinds)) if kinds[i] == ORPHANED and kinds[i - 1] != ORPHANED), None)
    older = [c for _, c in rows[start:end] if c.kind in (NEEDED, DIFFERENTLY, HARMFUL)]  # up to an older orphaning
    return all(c.kind == NEEDED or (c.kind == DIFFERENTLY and not c.breaks and not _broken(c)) for c in older)


def _advise(rows: Sequence[tuple[str, Conclusion]]) -> Advice:
    # a pre-release that did not run (none to stand for, or it would not install) is no tested release
    rows = [(label, c) for label, c in rows if not (c.kind == COULD_NOT_RUN and early_label(label))]
    by_kind: dict[ConclusionKind, list[str]] = {}
    for label, conclusion in rows:
        by_kind.setdefault(conclusion.kind, []).append(label)
    releases = tuple((kind, tuple(labels)) for kind, labels in by_kind.items())
    ran = set(by_kind) - {COULD_NOT_RUN}
    # Delete rests on every tested release: one that could not run may differ, one that did not audit it never
    # deleted it (the subject's own code may read it there)
    everywhere = COULD_NOT_RUN not in by_kind and not any(c.untested for _, c in rows)
    if not ran:
        return Advice(AdviceKind.REVIEW, releases)
    if ORPHANED in ran and ran & {NEEDED, DIFFERENTLY, HARMFUL}:
        if _gone_later(rows):  # what it did on some release is gone on a newer one: port it, unless it broke there
            return Advice(AdviceKind.PORT if _worked_before(rows) else AdviceKind.REVIEW, releases)
        # read only from some release on (trl's `loss_is_scaled_for_ga`, read from 5.19): advise by those, but
        # Delete only where the older releases deleted it too (one that did not audit it never ran without it)
        advised = _advise([(label, c) for label, c in rows if c.kind != ORPHANED])
        kind = AdviceKind.REVIEW if advised.kind == AdviceKind.DELETE and not everywhere else advised.kind
        return replace(advised, kind=kind, releases=releases)
    if ORPHANED in ran and not ran - {ORPHANED, REDUNDANT}:
        # it did nothing on any tested release: Delete where another release shows that, else ask
        return Advice(AdviceKind.DELETE if REDUNDANT in ran and everywhere else AdviceKind.REVIEW, releases)
    if _fixes(rows) and (any(c.kind == NEEDED or c.does_its_job for _, c in rows) or _only_way(rows)):
        return Advice(AdviceKind.FIX, releases)  # it breaks where it cannot take what is passed, and works elsewhere
    if NEEDED in ran and HARMFUL not in ran:
        return Advice(AdviceKind.KEEP, releases)
    if ran <= {REDUNDANT, HARMFUL}:
        # where what raises is a refusal of its own (a `raise` in its code), deleting it drops a guard the probes
        # cannot judge: Review
        refuses = any(c.raised_by_it for _, c in rows if c.kind == HARMFUL)
        if not everywhere or refuses:
            return Advice(AdviceKind.REVIEW, releases)
        unran = _never_ran(rows)  # what deleting it would drop that no probe ran, on any release
        if unran:
            return Advice(AdviceKind.REVIEW, releases, f"{statements_text(unran)} as shipped in any probe")
        return Advice(AdviceKind.DELETE, releases)
    if DIFFERENTLY in ran and ran <= {NEEDED, DIFFERENTLY, REDUNDANT, UNKNOWN} and _does_its_job(rows):
        return Advice(AdviceKind.KEEP, releases)  # deleting it loses what it does where it does it
    return Advice(AdviceKind.REVIEW, releases)


def _never_ran(rows: Sequence[tuple[str, Conclusion]]) -> tuple[tuple[tuple[int, str], ...], ...]:
    """The statements of the override that ran as shipped on no release (a redundant one ran them all): Delete
    vouches only for code that ran, where it is harmful too (span-marker's `from_pretrained`, whose reload raises as
    shipped, and whose branch for a new model from an encoder and labels no probe takes); runs of the newest."""
    harmful = [c for _, c in rows if c.kind == HARMFUL]
    if not harmful or any(c.kind == REDUNDANT for _, c in rows):
        return ()
    unran = set.intersection(*({s for run in c.never_ran for s in run} for c in harmful))
    runs = (tuple(s for s in run if s in unran) for run in harmful[0].never_ran)
    return tuple(run for run in runs if run)


def _does_its_job(rows: Sequence[tuple[str, Conclusion]]) -> bool:
    """Whether it does its job wherever it behaves differently: there deleting it loses what it does, whatever a
    release where it changes nothing or where the probes could not establish it says (as a release that needs it)."""
    return all(c.does_its_job for _, c in rows if c.kind == DIFFERENTLY)


def _broken(conclusion: Conclusion) -> bool:
    """Whether the class as shipped breaks there because of the override: it is harmful, it behaves differently and
    raises as shipped, or the class as shipped could not bind a call of it, deleting it fails too and the change
    was verified (Fix.only_way)."""
    kind = conclusion.kind
    fails_either_way = conclusion.fix is not None and conclusion.fix.only_way
    return kind == HARMFUL or (kind == DIFFERENTLY and not conclusion.shipped_works) or fails_either_way


def _fixes(rows: Sequence[tuple[str, Conclusion]]) -> bool:
    """Whether taking what transformers passes would fix every release where the class as shipped breaks because of
    the override (`_broken`): each has a Fix."""
    broken = [c for _, c in rows if _broken(c)]
    return bool(broken) and all(c.fix is not None for c in broken)


def _only_way(rows: Sequence[tuple[str, Conclusion]]) -> bool:
    """Fix where deleting is no way out: on every release where the class as shipped breaks, the change was
    verified and the base implementation raises too; on every other, the class runs as shipped and deleting it
    changes nothing or loses what it does (nothing passes it what it cannot take there, so the change is idle)."""
    broken = [c for _, c in rows if _broken(c)]
    rest = [c for _, c in rows if not _broken(c)]
    fine = all(c.kind in (REDUNDANT, NEEDED) or c.does_its_job for c in rest)
    return bool(broken) and all(c.fix is not None and c.fix.only_way for c in broken) and fine
