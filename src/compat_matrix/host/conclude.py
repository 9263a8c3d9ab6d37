"""What deleting an override does, by documented rules: a conclusion per cell and subject and per audited method,
and across the tested releases advice per override, and whether a declared range is honest. Pure functions over
results and verdicts; standard library and packaging. Rules only: the conclusions are values (a kind, the
observations and errors behind it); compat_matrix.host.wording says them, in the words and escaping of each format.

The rules, per cell and subject (and per audited name, by the evidence about it alone: compat_matrix.shared.evidence):
- `redundant`: the verdict is `same` (per name: it ran as shipped in a probe that observed something, and no
  context shows a difference): deleting the override(s) changes nothing there;
- `harmful`: something errors with the override and runs without it (and nothing works only with it);
- `needed`: something runs with the override and errors without it (and nothing errors only with it);
- `behaves differently`: values differ with no such one-sided error (or errors on both sides);
- `orphaned` (per name): the release no longer defines, calls or reads what it overrides, and nothing differs;
- `inconclusive`: the verdict is `inconclusive` or `no probe` (per name: no evidence either way, and why);
- `could not run`: the cell or subject failed (`install-failed`, `crashed`, `timed-out`, …).
Across the tested releases, per override: Port where a release orphaned it (what it provided is gone there);
else Delete where every release is redundant or harmful (deleting fixes the harmful ones); Keep where any release
needs it; otherwise Review. A new conclusion kind is one member of
vocabulary.ConclusionKind and its rule here; a new advice one member of vocabulary.AdviceKind and its rule in
`advise`.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from compat_matrix.host.collect import SubjectRow
from compat_matrix.host.releases import early_label, public
from compat_matrix.host.shipped import ShippedChange, shipped_changes
from compat_matrix.host.spec import Declared
from compat_matrix.host.verdict import INSPECTS, Judged, Verdict
from compat_matrix.shared import evidence
from compat_matrix.shared.results import METHOD, Observation, SubjectResult, failure_in
from compat_matrix.shared.vocabulary import AdviceKind, ConclusionKind, ObservationName, Status, VerdictKind

HARMFUL, NEEDED, DIFFERENTLY = ConclusionKind.HARMFUL, ConclusionKind.NEEDED, ConclusionKind.DIFFERENTLY
UNKNOWN, COULD_NOT_RUN, REDUNDANT = ConclusionKind.UNKNOWN, ConclusionKind.COULD_NOT_RUN, ConclusionKind.REDUNDANT
ORPHANED = ConclusionKind.ORPHANED
ORDER = tuple(ConclusionKind)  # the order conclusions are listed in
_DEPRECATED = re.compile(r"deprecat", re.IGNORECASE)
_REPLACEMENT = re.compile(r"[Uu]se `([\w.]+)`")


@dataclass(frozen=True)
class Contrast:
    """One observation in which the variants differ: the kind of difference, and the error of a one-sided one."""

    kind: ConclusionKind  # HARMFUL, NEEDED or DIFFERENTLY
    observation: Observation  # its `base` is the variant compared with the class as shipped
    title: str  # what the report calls its probe
    error: str | None = None  # the one-sided error, `Type: message`


@dataclass(frozen=True)
class Fix:
    """What transformers passes an override on one release that it cannot take, and whether taking it fixes the
    class there: the `fixed X` variant (the override widened to take it and pass it on) ran where the class as
    shipped raised, and raised nothing there (`verified`); None where that variant did not run."""

    parameters: tuple[str, ...]  # the keyword arguments it cannot take (`a positional argument` for one by place)
    sites: tuple[
        str, ...
    ]  # transformers' calls that pass them: `tie_weights(missing_keys=…) at modeling_utils.py:4628`
    verified: bool | None = None
    still: str | None = None  # where not verified: what the widened override still raises, `Type: message`


@dataclass(frozen=True)
class Conclusion:
    """What deleting the audited method(s) does on one release, and the evidence behind it."""

    kind: ConclusionKind
    contrasts: tuple[Contrast, ...] = ()  # in ORDER of their kinds
    why: str | None = None  # inconclusive, orphaned or could not run: the reason, as the cell said it
    context: str | None = None  # for one audited name among several: the context that carried it (evidence)
    fix: Fix | None = None  # for one audited name: what it cannot take here, where transformers passes it that
    coupled: bool = False  # it differs only with the other overrides kept: deleting all of them changes nothing

    @property
    def shipped_works(self) -> bool:
        """Whether the class as shipped ran wherever deleting the override changes something: no contrast has an
        error on its side (an override that behaves differently and breaks nothing does its job)."""
        return not any(error_of(c.observation, c.observation.override) for c in self.contrasts)

    @property
    def breaks(self) -> tuple[Contrast, ...]:
        """The differences in what holds the audited API's contract (the layers a switch turns on, a reload that
        keeps every tensor): there the override gives what no correct one does."""
        return tuple(c for c in self.contrasts if c.kind == DIFFERENTLY and c.observation.contract)

    @property
    def does_its_job(self) -> bool:
        """Behaves differently on its own (not only beside the other overrides), and the class as shipped ran and
        kept every contract the probes check: what differs may be what the override is for."""
        return self.kind == DIFFERENTLY and self.shipped_works and not self.coupled and not self.breaks


def error_of(observation: Observation, value: Any) -> str | None:
    """The error a side shows in an observation: the probe's own `error`, or an entry recorded as "error: …"."""
    if observation.name == ObservationName.ERROR:
        return value if isinstance(value, str) else None
    return failure_in(value)


def contrast(observation: Observation, title: str) -> Contrast:
    on_override, on_base = error_of(observation, observation.override), error_of(observation, observation.base)
    if on_override and not on_base:
        return Contrast(HARMFUL, observation, title, on_override)
    if on_base and not on_override:
        return Contrast(NEEDED, observation, title, on_base)
    return Contrast(DIFFERENTLY, observation, title)


def from_contrasts(contrasts: list[Contrast]) -> Conclusion:
    """harmful, needed or behaves differently, by the rules above; redundant when nothing differs. Harmful only where
    nothing else differs in what the code does: a value that differs elsewhere (the logits, a reloaded model's
    attributes) is behaviour that deleting the override changes too, whatever the errors say."""
    if not contrasts:
        return Conclusion(REDUNDANT)
    kinds = {c.kind for c in contrasts}
    if HARMFUL in kinds and NEEDED not in kinds and not _behaviour(contrasts):
        kind = HARMFUL
    elif NEEDED in kinds and HARMFUL not in kinds:
        kind = NEEDED
    else:
        kind = DIFFERENTLY
    return Conclusion(kind, tuple(sorted(contrasts, key=lambda c: ORDER.index(c.kind))))


def _behaviour(contrasts: list[Contrast]) -> list[Contrast]:
    """The values that differ where the code ran and did not fail on one side: not warnings, not what a probe that
    only reads the class saw (a signature that cannot take what a release passes: the error itself shows it), not
    what a probe that failed on one side recorded besides."""
    one_sided = {c.observation.probe for c in contrasts if c.kind in (HARMFUL, NEEDED)}
    return [
        c
        for c in contrasts
        if c.kind == DIFFERENTLY
        and c.observation.name != ObservationName.WARNINGS
        and c.observation.probe not in INSPECTS | one_sided
    ]


def _title(observation: Observation, titles: dict[str, str]) -> str:
    return titles.get(observation.probe, observation.probe.replace("_", " "))


def conclude(subject: SubjectResult | None, verdict: Verdict, titles: dict[str, str]) -> Conclusion:
    """The conclusion for one cell and subject: what deleting every audited method does."""
    if verdict.verdict == VerdictKind.SAME:
        return Conclusion(REDUNDANT)
    if verdict.verdict in (VerdictKind.INCONCLUSIVE, VerdictKind.NO_PROBE):
        return Conclusion(UNKNOWN, why=verdict.reason or verdict.verdict)
    if verdict.verdict != VerdictKind.DIFFERS or subject is None:
        why = f"{verdict.verdict}: {verdict.reason}" if verdict.reason else verdict.verdict
        return Conclusion(COULD_NOT_RUN, why=why)
    differing = [o for o in subject.observations if evidence.counts(o)]
    return from_contrasts([contrast(o, _title(o, titles)) for o in differing])


def conclude_method(subject: SubjectResult | None, verdict: Verdict, method: str, titles: dict[str, str]) -> Conclusion:
    """What deleting `method` does, by the evidence about it alone (compat_matrix.shared.evidence): in the context that
    shows a difference, redundant only where it ran as shipped in a probe that observed something, orphaned where
    the release gives it nothing to override, else inconclusive, saying why."""
    if subject is None or not verdict.ran or verdict.verdict == VerdictKind.NO_PROBE:
        return conclude(subject, verdict, titles)
    judged = evidence.judge(subject, method)
    if judged.verdict == evidence.DIFFERS:
        found = from_contrasts([contrast(o, _title(o, titles)) for o in judged.differing])
        coupled = judged.context == evidence.WITH_REST and _alike_all_deleted(subject, judged.differing)
        return replace(found, context=judged.context, fix=fix_of(subject, method), coupled=coupled)
    if judged.verdict == evidence.SAME:
        jointly = evidence.together(subject) if method in evidence.redundant(subject) else ()
        if jointly:  # each alone changes nothing, but deleting them all at once does
            found = from_contrasts([contrast(o, _title(o, titles)) for o in jointly])
            return replace(found, kind=DIFFERENTLY, context=evidence.TOGETHER)
        return Conclusion(REDUNDANT, context=judged.context)
    if judged.verdict == evidence.ORPHANED:
        return Conclusion(ORPHANED, why=judged.reason)
    return Conclusion(UNKNOWN, why=judged.reason)


def _alike_all_deleted(subject: SubjectResult, differing: Sequence[Observation]) -> bool:
    """Whether every observation that differs with one override deleted is the same as shipped with all of them
    deleted: its difference comes from the others (an enable that sets a mark its own disable reads)."""
    shipped = {(o.probe, o.name): o for o in subject.observations}
    return all((o.probe, o.name) in shipped and shipped[o.probe, o.name].same for o in differing)


_UNEXPECTED = re.compile(r"\b(\w+)\(\) got an unexpected keyword argument '(\w+)'")
_POSITIONAL = re.compile(r"\b(\w+)\(\) takes \d+ positional arguments? but \d+ (?:were|was) given")
_KEYWORD = re.compile(r"(\w+)=…")


def fix_of(subject: SubjectResult, method: str) -> Fix | None:
    """What transformers passes `method` here that it cannot take, from the errors of the class as shipped (a call
    it cannot bind) and from transformers' calls of it; with the `fixed` variant's verdict on it. None where
    nothing is passed that it cannot take."""
    sites = _cannot_take(subject, method)
    passed = {k for site in sites for k in _KEYWORD.findall(site.partition(" at ")[0])}
    missing = _signature_gap(subject, method)  # of what a site passes, what the override cannot take by name
    parameters = passed & missing if missing is not None else set()
    bound = []  # the observations where the class as shipped could not bind a call of it
    for o in subject.observations:
        error = error_of(o, o.override)
        found = [m.group(2) for m in _UNEXPECTED.finditer(error or "") if m.group(1) == method]
        positional = any(m.group(1) == method for m in _POSITIONAL.finditer(error or ""))
        if found or positional:
            bound.append(o)
            parameters |= set(found) | ({"a positional argument"} if positional else set())
    if not parameters:
        return None
    tried = [o for o in subject.observations if method in dict(o.fixed)]
    if not tried:
        return Fix(tuple(sorted(parameters)), sites)
    still = _still(tried, bound, method)
    return Fix(tuple(sorted(parameters)), sites, still is None, still)


def _still(tried: list[Observation], bound: list[Observation], method: str) -> str | None:
    """What the widened override still raises, where the class as shipped could not bind a call of it or where
    the class as shipped ran; None where it raises nothing of the kind."""
    for o in tried:
        error = error_of(o, dict(o.fixed)[method])
        if error and (o in bound or not error_of(o, o.override)):
            return error
    return None


def _signature_gap(subject: SubjectResult, method: str) -> set[str] | None:
    """The names of the base's parameters that the override as shipped cannot take (the `signature` probe), or
    None where that probe did not look."""
    for o in subject.observations:
        if o.probe == "signature" and o.name == method and isinstance(o.override, dict):
            return {str(p).split(" (")[0] for p in o.override.get("cannot_take") or ()}
    return None


def _cannot_take(subject: SubjectResult, method: str) -> tuple[str, ...]:
    for o in subject.observations:
        if o.probe == "transformers_calls" and o.name == method and isinstance(o.override, dict):
            return tuple(o.override.get("cannot_take") or ())
    return ()


@dataclass(frozen=True)
class Deprecation:
    method: str
    replacement: str | None  # what the warning says to use instead


def deprecations(subject: SubjectResult | None) -> tuple[Deprecation, ...]:
    """Every deprecation warning of the base implementation that names an audited method, e.g. a FutureWarning
    "`x` is deprecated … Use `y` instead"."""
    if subject is None:
        return ()
    texts = sorted({w for o in subject.observations if o.name == ObservationName.WARNINGS for w in o.base or ()})
    found = []
    for method in subject.methods:
        text = next((t for t in texts if f"`{method}`" in t and _DEPRECATED.search(t)), None)
        if text is not None:
            replacement = _REPLACEMENT.search(text)
            found.append(Deprecation(method, replacement.group(1) if replacement else None))
    return tuple(found)


class Alone(NamedTuple):
    """What deleting one audited method alone does on a release."""

    method: str
    conclusion: Conclusion


class OnRelease(NamedTuple):
    """One override's conclusion on one tested release."""

    label: str  # "transformers 5.24.0"
    conclusion: Conclusion


@dataclass(frozen=True)
class Concluded:
    """One cell × subject, concluded: what the conclusions step adds to a judged row."""

    row: SubjectRow
    verdict: Verdict
    conclusion: Conclusion  # what deleting every audited method does
    per_method: tuple[Alone, ...] = ()
    deprecations: tuple[Deprecation, ...] = ()

    @property
    def label(self) -> str:
        return self.row.label

    told_nothing: tuple[tuple[str, str], ...] = ()  # (probe, why) of the probes that observed nothing here

    def of(self, method: str) -> Conclusion:
        """What deleting `method` does here, by the evidence about it."""
        return dict(self.per_method).get(method, self.conclusion)


def conclusions(judged: Sequence[Judged], titles: dict[str, str]) -> tuple[Concluded, ...]:
    """Every judged row concluded. `titles`: what to call each probe, where the cell did not say."""
    out = []
    for row, verdict in judged:
        named = {**titles, **dict(row.result.titles)} if row.result is not None else titles
        methods = row.result.methods if row.result is not None else ()
        per_method = tuple(Alone(m, conclude_method(row.result, verdict, m, named)) for m in methods)
        conclusion = conclude(row.result, verdict, named)
        silent = evidence.told_nothing(row.result) if row.result is not None and verdict.ran else ()
        out.append(Concluded(row, verdict, conclusion, per_method, deprecations(row.result), silent))
    return tuple(out)


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
    if caveat is not None and advice.kind == AdviceKind.DELETE:
        return Advice(AdviceKind.REVIEW, advice.releases, caveat)
    return advice


def _advise(rows: Sequence[tuple[str, Conclusion]]) -> Advice:
    # a pre-release that did not run (none to stand for, or it would not install) is no tested release
    rows = [(label, c) for label, c in rows if not (c.kind == COULD_NOT_RUN and early_label(label))]
    by_kind: dict[ConclusionKind, list[str]] = {}
    for label, conclusion in rows:
        by_kind.setdefault(conclusion.kind, []).append(label)
    releases = tuple((kind, tuple(labels)) for kind, labels in by_kind.items())
    ran = set(by_kind) - {COULD_NOT_RUN}
    everywhere = COULD_NOT_RUN not in by_kind  # Delete rests on every tested release: one that could not run may differ
    if not ran:
        return Advice(AdviceKind.REVIEW, releases)
    if ORPHANED in ran and ran & {NEEDED, DIFFERENTLY, HARMFUL}:
        return Advice(AdviceKind.PORT, releases)  # what it did on some release is gone on another
    if ORPHANED in ran and not ran - {ORPHANED, REDUNDANT}:
        # it did nothing on any tested release: Delete where another release shows that, else ask
        return Advice(AdviceKind.DELETE if REDUNDANT in ran and everywhere else AdviceKind.REVIEW, releases)
    if _fixes(rows) and any(c.kind == NEEDED or c.does_its_job for _, c in rows):
        return Advice(AdviceKind.FIX, releases)  # it breaks where it cannot take what is passed, and works elsewhere
    if NEEDED in ran and HARMFUL not in ran:
        return Advice(AdviceKind.KEEP, releases)
    if ran <= {REDUNDANT, HARMFUL}:
        return Advice(AdviceKind.DELETE if everywhere else AdviceKind.REVIEW, releases)
    if ran <= {NEEDED, DIFFERENTLY} and all(c.does_its_job for _, c in rows if c.kind == DIFFERENTLY):
        return Advice(AdviceKind.KEEP, releases)  # it does its job wherever it ran: deleting it changes that
    return Advice(AdviceKind.REVIEW, releases)


def _fixes(rows: Sequence[tuple[str, Conclusion]]) -> bool:
    """Whether taking what transformers passes would fix every release where the class as shipped breaks: each
    harmful release, and each where it behaves differently and raises as shipped, has a Fix."""
    broken = [c for _, c in rows if c.kind == HARMFUL or (c.kind == DIFFERENTLY and not c.shipped_works)]
    return bool(broken) and all(c.fix is not None for c in broken)


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
class Override:
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
    overrides: tuple[Override, ...]  # one per audited name
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
        overrides.append(Override(target, method, by_release, advise(by_release, caveat), kind, deprecated))
    changes = shipped_changes([(r.label, r.row.result if r.verdict.ran else None) for r in reversed(rows)])
    return SubjectConclusions(target, methods, tuple(rows), tuple(overrides), changes)


def inherited(subjects: Mapping[str, SubjectConclusions]) -> dict[str, SubjectConclusions]:
    """Where several subjects inherit one override from the same abstract base of their library (its `via`), the
    base variant deletes it there, for every one of them: Delete only where each of them reads Delete; otherwise
    Review, with a caveat naming those where it does not (a subject whose factory is missing counts: nothing says
    what deleting it does there)."""
    shared: dict[tuple[str, str], list[tuple[str, Override]]] = {}
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


def _reads(target: str, override: Override) -> str:
    """`SentenceTransformerTrainer (Review)`, or `(could not run)`."""
    return f"{target.rsplit(':', 1)[-1]} ({'could not run' if override.advice.nothing_ran else override.advice.kind})"


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
    harmful = tuple(  # not where the probes ran on stand-ins: the report itself does not stand by those
        (o.name, tuple(sorted({versions[label] for label, c in o.by_release if c.kind == HARMFUL}, key=Version)))
        for o in answer.overrides
        if o.advice.caveat is None and any(c.kind == HARMFUL and label in versions for label, c in o.by_release)
    )
    bad = {v for _, vs in harmful for v in vs} | set(broken)
    good = [v for v in tested if v not in bad]
    supported = None
    if good:  # from the oldest tested release that runs to the last one before the first that breaks: both tested
        above = [v for v in tested if v in bad and Version(v) > Version(good[0])]
        upto = [v for v in good if not above or Version(v) < Version(above[0])]
        supported = f"=={good[0]}" if good[0] == upto[-1] else f">={good[0]},<={upto[-1]}"
    return RangeCheck(declared, tested, harmful, tuple(sorted(set(broken), key=Version)), supported)


def _version(text: str | None) -> str | None:
    version = public(text)
    return None if version is None else str(version)


def _on(row: Concluded, method: str) -> Conclusion:
    """What deleting `method` does on one release; a name another release audits that this one did not discover
    (the subject defines it, but no class of transformers does here) is orphaned here."""
    audited = row.row.result is not None and method in row.row.result.methods
    if row.verdict.ran and not audited:
        return Conclusion(ORPHANED, why=f"no class of transformers defines {method}")
    return row.of(method)


def deprecated_since(rows: Sequence[Concluded], method: str) -> Deprecated | None:
    """The first tested release (`rows` newest first) whose base implementation warns that `method` is deprecated."""
    for row in reversed(rows):
        found = next((d for d in row.deprecations if d.method == method), None)
        if found is not None:
            return Deprecated(row.label, found.replacement)
    return None
