"""Each audited override across the tested releases, concluded (`OverrideConclusions`: its conclusion per release,
its advice, where it first changed, the errors behind it, its deprecation), and a subject's (`SubjectConclusions`);
an override that several subjects inherit from one abstract base is advised on for all of them."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from compat_matrix.host.advice import Advice, advise
from compat_matrix.host.conclude import COULD_NOT_RUN, HARMFUL, NEEDED, ORPHANED, Concluded, Conclusion, OnRelease
from compat_matrix.host.shipped import ShippedChange, shipped_changes
from compat_matrix.shared.results import METHOD
from compat_matrix.shared.vocabulary import AdviceKind


@dataclass(frozen=True)
class Failure:
    """One error behind a harmful or needed conclusion: on which release, on which side (`override`: the class with
    the override, `base`: with it deleted), and the observations (`probe.name`) that show it."""

    release: str
    variant: str
    type: str
    message: str
    observations: tuple[str, ...]

    @property
    def error(self) -> str:
        """`Type: message`, as the observations spell it."""
        return f"{self.type}: {self.message}" if self.message else self.type


@dataclass(frozen=True)
class Deprecated:
    """An audited name that the base implementation warns is deprecated: from which tested release, and what to use
    instead (None: the warning does not say)."""

    since: str
    replacement: str | None


@dataclass(frozen=True)
class OverrideConclusions:
    """One audited override of one subject across the tested releases: a conclusion per release, by the evidence
    about it alone, and the advice."""

    target: str
    name: str
    by_release: tuple[OnRelease, ...]  # newest first
    advice: Advice
    kind: str = METHOD  # what the name is: METHOD or ATTRIBUTE (compat_matrix.shared.results)
    deprecated: Deprecated | None = None

    @property
    def oldest_first(self) -> tuple[OnRelease, ...]:
        return tuple(reversed(self.by_release))

    @property
    def untested(self) -> tuple[str, ...]:
        """The releases (oldest first) where no class of transformers defines what it overrides, so that deleting
        it never ran there (trl's `loss_is_scaled_for_ga` before 5.19: the library's own code may read it)."""
        return tuple(label for label, c in self.oldest_first if c.untested)

    @property
    def changes(self) -> tuple[str | None, str | None]:
        """(first_changed, last_same) over the releases that ran, oldest first: the first release whose conclusion
        is not the oldest's, and the release before it (where none changes: None, and the newest). Releases where
        it could not run are left out; (None, None) where none ran."""
        ran = [r for r in self.oldest_first if r.conclusion.kind != COULD_NOT_RUN]
        if not ran:
            return None, None
        reference = ran[0].conclusion.kind
        for before, now in itertools.pairwise(ran):
            if now.conclusion.kind != reference:
                return now.label, before.label
        return None, ran[-1].label

    @property
    def harmful(self) -> bool:
        return any(r.conclusion.kind == HARMFUL for r in self.by_release)

    def failures(self) -> tuple[Failure, ...]:
        """The errors behind its harmful and needed conclusions, oldest release first; contrasts that raise the same
        error on a release are one failure, naming each observation."""
        found = []
        for label, conclusion in self.oldest_first:
            if conclusion.kind not in (HARMFUL, NEEDED):
                continue
            seen: dict[str, list[str]] = {}
            for c in conclusion.contrasts:
                if c.kind == conclusion.kind and c.error:
                    seen.setdefault(c.error, []).append(f"{c.observation.probe}.{c.observation.name}")
            variant = "override" if conclusion.kind == HARMFUL else "base"
            for error, observations in seen.items():
                kind, _, message = error.partition(":")
                found.append(Failure(label, variant, kind.strip(), message.strip(), tuple(observations)))
        return tuple(found)


@dataclass(frozen=True)
class SubjectConclusions:
    """One subject of the matrix across its tested releases, concluded."""

    target: str
    methods: tuple[str, ...]  # the audited names, as the cells ran them (else as the matrix file names them)
    rows: tuple[Concluded, ...]  # newest first
    overrides: tuple[OverrideConclusions, ...]  # one per audited name
    as_shipped: tuple[ShippedChange, ...] = ()  # what fails or changes about the class as shipped across releases

    @property
    def per_method(self) -> bool:
        """Whether each method is said apart: there are several."""
        return len(self.methods) > 1


def of_subject(target: str, methods: tuple[str, ...], rows: Sequence[Concluded]) -> SubjectConclusions:
    """`rows`: the subject's concluded rows, newest first; `methods`: the matrix file's, for a subject never run."""
    ran = tuple(dict.fromkeys(m for r in reversed(rows) if r.row.result is not None for m in r.row.result.methods))
    methods = ran or methods  # with `methods` left out, each release audits what overrides something there
    kinds = {o.name: o.kind for r in rows if r.row.result is not None for o in r.row.result.overrides}
    caveat = next((r.row.result.caveat for r in rows if r.row.result is not None and r.row.result.caveat), None)
    overrides = []
    for method in methods:
        by_release = tuple(OnRelease(r.label, _on(r, method)) for r in rows)
        kind, deprecated = kinds.get(method, METHOD), deprecated_since(rows, method)
        overrides.append(OverrideConclusions(target, method, by_release, advise(by_release, caveat), kind, deprecated))
    changes = shipped_changes([(r.label, r.row.result if r.verdict.ran else None) for r in reversed(rows)])
    return SubjectConclusions(target, methods, tuple(rows), tuple(overrides), changes)


def inherited(subjects: Mapping[str, SubjectConclusions]) -> dict[str, SubjectConclusions]:
    """Where several subjects inherit one override from the same abstract base of their library (its `via`), the
    base variant deletes it there, for every one of them: Delete only where each of them reads Delete; otherwise
    Review, with a caveat naming those where it does not (a subject whose factory is missing counts: nothing says
    what deleting it does there)."""
    shared: dict[tuple[str, str], list[tuple[str, OverrideConclusions]]] = {}
    for target, answer in subjects.items():
        vias = {o.name: o.via for r in answer.rows if r.row.result is not None for o in r.row.result.overrides}
        for override in answer.overrides:
            if vias.get(override.name):
                shared.setdefault((vias[override.name], override.name), []).append((target, override))
    demoted: dict[tuple[str, str], Advice] = {}
    for (via, _), members in shared.items():
        others = [(t, o) for t, o in members if o.advice.kind != AdviceKind.DELETE]
        if not others or len(others) == len(members):
            continue
        said = ", ".join(_reads(t, o) for t, o in others)
        caveat = f"it is deleted from {via.rsplit('.', 1)[-1]}, which gives it to {said} too"
        for target, override in members:
            if override.advice.kind == AdviceKind.DELETE:
                demoted[target, override.name] = Advice(AdviceKind.REVIEW, override.advice.releases, caveat)
    if not demoted:
        return dict(subjects)
    return {
        target: replace(
            answer,
            overrides=tuple(replace(o, advice=demoted.get((target, o.name), o.advice)) for o in answer.overrides),
        )
        for target, answer in subjects.items()
    }


def _reads(target: str, override: OverrideConclusions) -> str:
    """`SentenceTransformerTrainer (Review)`, or `(could not run)`."""
    return f"{target.rsplit(':', 1)[-1]} ({'could not run' if override.advice.nothing_ran else override.advice.kind})"


def _on(row: Concluded, method: str) -> Conclusion:
    """What deleting `method` does on one release; a name another release audits that this one did not discover
    (the subject defines it, but no class of transformers does here) is orphaned here."""
    audited = row.row.result is not None and method in row.row.result.methods
    if row.verdict.ran and not audited:
        return Conclusion(ORPHANED, why=f"no class of transformers defines {method}", untested=True)
    return row.of(method)


def deprecated_since(rows: Sequence[Concluded], method: str) -> Deprecated | None:
    """The first tested release (`rows` newest first) whose base implementation warns that `method` is deprecated."""
    for row in reversed(rows):
        found = next((d for d in row.deprecations if d.method == method), None)
        if found is not None:
            return Deprecated(row.label, found.replacement)
    return None
