"""What deleting an override does, by documented rules: a conclusion per cell and subject and per audited method.
Pure functions over results and verdicts; standard library and packaging. Rules only: the conclusions are values (a
kind, the observations and errors behind it); compat_matrix.host.wording says them, in the words and escaping of
each format.

The rules, per cell and subject (and per audited name, by the evidence about it alone: compat_matrix.shared.evidence):
- `redundant`: the verdict is `same` (per name: it ran as shipped in a probe that observed something, and no
  context shows a difference): deleting the override(s) changes nothing there;
- `harmful`: something errors with the override and runs without it (and nothing works only with it);
- `needed`: something runs with the override and errors without it (and nothing errors only with it);
- `behaves differently`: values differ with no such one-sided error (or errors on both sides);
- `orphaned` (per name): the release no longer defines, calls or reads what it overrides, and nothing differs;
- `inconclusive`: the verdict is `inconclusive` or `no probe` (per name: no evidence either way, and why);
- `could not run`: the cell or subject failed (`install-failed`, `crashed`, `timed-out`, …).
A new conclusion kind is one member of vocabulary.ConclusionKind and its rule here. Across the tested releases:
the advice (compat_matrix.host.advice), each override and subject concluded (compat_matrix.host.overrides), whether
a declared range is honest (compat_matrix.host.range_check).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from compat_matrix.host.collect import SubjectRow
from compat_matrix.host.verdict import INSPECTS, READS, Judged, Verdict
from compat_matrix.shared import evidence
from compat_matrix.shared.results import Observation, SubjectResult, failure_in
from compat_matrix.shared.vocabulary import ConclusionKind, ObservationName, VerdictKind

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
    probes: tuple[str, ...] = ()  # what the report calls each probe the `fixed` variant ran in, in the cell's order
    deleting_fails: bool = False  # with it deleted, every call the class as shipped could not bind fails too
    passes_on: bool = True  # its code calls a function of its own name (`super().tie_weights()`): pass them on there

    @property
    def only_way(self) -> bool:
        """Verified where deleting the override is no way out: the change makes the class run there, and the
        base implementation raises there too (ai2-olmo's `tie_weights` on 5.x: without it, `AttributeError`)."""
        return bool(self.verified) and self.deleting_fails


@dataclass(frozen=True)
class Conclusion:
    """What deleting the audited method(s) does on one release, and the evidence behind it."""

    kind: ConclusionKind
    contrasts: tuple[Contrast, ...] = ()  # in ORDER of their kinds
    why: str | None = None  # inconclusive, orphaned or could not run: the reason, as the cell said it
    context: str | None = None  # for one audited name among several: the context that carried it (evidence)
    fix: Fix | None = None  # for one audited name: what it cannot take here, where transformers passes it that
    coupled: bool = False  # it differs only with the other overrides kept: deleting all of them changes nothing
    # orphaned because the release did not audit it (no class of transformers defines it there): deleting it never
    # ran there, and the subject's own code may read it (trl's `loss_is_scaled_for_ga`, read by its __init__ on 4.x)
    untested: bool = False
    # where the class as shipped raised: the override's own `raise` of that error that ran there, `(line, text)`
    raised_by_it: tuple[int, str] | None = None
    refused: tuple[str, ...] = ()  # the probes whose error as shipped is the override's own (own_raises)
    # where deleting it changes something: runs of its statements that ran as shipped in no probe (evidence.never_ran)
    never_ran: tuple[tuple[tuple[int, str], ...], ...] = ()

    @property
    def shipped_works(self) -> bool:
        """Whether the class as shipped ran wherever deleting the override changes something: no contrast has an
        error on its side (an override that behaves differently and breaks nothing does its job)."""
        return not any(error_of(c.observation, c.observation.override) for c in self.contrasts)

    @property
    def breaks(self) -> tuple[Contrast, ...]:
        """The differences in what holds the audited API's contract (the layers a switch turns on, a reload that
        keeps every tensor): there the override gives what no correct one does. Not where it gives more than the
        base and keeps what the base gives (keeps_contract), nor anywhere on a release where the base loses a contract
        the override keeps (`base_loses`): a base that fails one contract is no reference for the others (adapters'
        `gradient_checkpointing_enable` on 4.57, without which no layer of a model with frozen embeddings is
        recomputed: the kwargs it gives torch's checkpoint instead are how it keeps that contract)."""
        if any(base_loses(c.observation) for c in self.contrasts):
            return ()
        return tuple(
            c
            for c in self.contrasts
            if c.kind == DIFFERENTLY and c.observation.contract and not keeps_contract(c.observation)
        )

    @property
    def does_its_job(self) -> bool:
        """Behaves differently in what the class does when it runs (not only in what a probe that reads the class
        saw: a signature, transformers' calls), and the class as shipped ran and kept every contract the probes
        check: what differs may be what the override is for. Beside the other overrides only (coupled) where
        deleting it alone loses a contract the class as shipped keeps (`keeps_alone`): gliner's `training_step`,
        without which two accumulated batches no longer equal one of both. Its own refusals aside (`refused`: a probe
        whose input its own `raise` turns down, as adapters' `gradient_checkpointing_enable` refuses
        `use_reentrant=True`): that is a decision of its own, not a break, and the probes it took must show its job."""
        rest = [c for c in self.contrasts if c.observation.probe not in self.refused]
        if self.refused and not rest:
            return False
        read_only = bool(rest) and all(c.observation.probe in INSPECTS for c in rest)
        runs = not any(error_of(c.observation, c.observation.override) for c in rest)
        works = runs and (not self.coupled or self.keeps_alone) and not self.breaks
        return self.kind == DIFFERENTLY and not read_only and works

    @property
    def keeps_alone(self) -> bool:
        """Whether deleting it alone loses what the class as shipped keeps of a contract (keeps_contract)."""
        return any(keeps_contract(c.observation) for c in self.contrasts)


ACCESSORS, LOGGED = "no_arguments", ("trainer_log", "keys")  # the probes whose contract an override may exceed
ACCUMULATED = ("trainer_accumulation", "as_one_batch")  # an accumulated step that equals one batch of both
RECOMPUTED = ("backward_through_checkpointed_model", "recomputed_layers")  # `2/2`: layers run again in backward
# The observations of a reload that hold or fail its contract whole: every tensor survived, nothing was missing or
# unexpected, the outputs were the same (True, or nothing listed) — else what was lost.
RELOAD, WHOLE = "save_and_load", ("loading_info", "state_survived", "same_outputs")
NOTHING_FOUND = "(subject)"  # an accessor that returns the model itself: the base's "there is none" (get_decoder)


def whole(value: Any) -> bool:
    """Whether a reload's observation (WHOLE) holds its contract: True, or a mapping that lists nothing."""
    if isinstance(value, dict):
        return bool(value) and all(isinstance(v, (list, dict)) and not v for v in value.values())
    return value is True


def keeps_contract(observation: Observation) -> bool:
    """Whether a difference in a contract's observation gives what the base gives and more: a reload the override
    keeps whole where the base's loses something (adapters' `save_pretrained`, without which the adapter's weights
    come back unexpected); an accessor (`get_decoder`, `get_input_embeddings`, …) that finds a module of the subject,
    which a training forward pass uses, where the base finds nothing (None, or the model itself); a `log` that logs
    every key the base logs and more; a step accumulated over two batches that equals one over both, where the
    base's does not (trl's `loss_is_scaled_for_ga`). None of them is broken; what it adds may be what the override
    is for; a checkpointed backward that recomputes every layer, where the base's recomputes fewer."""
    override, base = observation.override, observation.base
    if (observation.probe, observation.name) == RECOMPUTED:
        return _every(override) and not _every(base)
    if observation.probe == RELOAD and observation.name in WHOLE:
        return whole(override) and not whole(base)
    if observation.probe == ACCESSORS and observation.name.startswith("get_") and isinstance(override, dict):
        nothing = base is None or (isinstance(base, dict) and base.get("module") == NOTHING_FOUND)
        module = override.get("module")
        inside = isinstance(module, str) and module != NOTHING_FOUND and not module.endswith("outside the subject")
        return nothing and inside and override.get("used_in_forward") is True
    if (observation.probe, observation.name) == ACCUMULATED:
        return override is True
    if (observation.probe, observation.name) == LOGGED and isinstance(override, list) and isinstance(base, list):
        return set(base) < set(override)
    return False


def _every(value: Any) -> bool:
    """Whether a fraction as the probes record it (`2/2`) is all of at least one."""
    part, _, whole_ = str(value).partition("/")
    return part.isdigit() and part == whole_ and int(part) > 0


def base_loses(observation: Observation) -> bool:
    """Whether the base loses a contract the override keeps in this observation (keeps_contract): not a `log` that
    logs more, where the base's keys are all there."""
    return keeps_contract(observation) and (observation.probe, observation.name) != LOGGED


def error_of(observation: Observation, value: Any) -> str | None:
    """The error a side shows in an observation: the probe's own `error`, or an entry recorded as "error: …"."""
    if observation.name == ObservationName.ERROR:
        return value if isinstance(value, str) else None
    return failure_in(value)


def contrast(observation: Observation, title: str) -> Contrast:
    """Harmful where only the class as shipped errors, needed where only the base does, else behaves differently;
    always behaves differently in a probe that reads an attribute (READS): a getter that raises there is no error of
    the class's, and the class as shipped does not run there (`shipped_works`)."""
    on_override, on_base = error_of(observation, observation.override), error_of(observation, observation.base)
    if observation.probe in READS:
        return Contrast(DIFFERENTLY, observation, title)
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
    return from_contrasts([contrast(o, _title(o, titles)) for o in evidence.differing(subject.observations)])


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
        own = own_raises(subject, method, found.contrasts)
        code = evidence.code_of(subject, method)
        return replace(
            found,
            context=judged.context,
            fix=fix_of(subject, method, titles),
            coupled=coupled,
            raised_by_it=own[0][1:] if own else None,
            refused=tuple(probe for probe, _, _ in own),
            never_ran=evidence.never_ran(code, evidence.ran_as_shipped(subject, method)) if code else (),
        )
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


def own_raises(subject: SubjectResult, method: str, contrasts: Sequence[Contrast]) -> tuple[tuple[str, int, str], ...]:
    """Where the class as shipped raised in a probe and the base did not: a `raise` of that error's type in the
    override's own code that ran as shipped in that probe (adapters' `gradient_checkpointing_enable`, whose `raise
    ValueError(` refuses `use_reentrant=True`), or for `KeyError: 'k'` its own lookup of that key (colpali's
    `forward`, whose `kwargs["attention_mask"]` wants an input the probe does not give): per such probe, (the probe,
    the line, its text without its comment)."""
    code = evidence.code_of(subject, method)
    if code is None:
        return ()
    statements = {line: text for _, unit in code.units for line, text in unit}
    ran = {o.probe: o.override for o in subject.observations if o.name == evidence.LINES}
    found: dict[str, tuple[str, int, str]] = {}
    for c in contrasts:
        if c.kind != HARMFUL or not c.error or c.observation.probe in found:
            continue
        lines = (ran.get(c.observation.probe) or {}).get(method, {})
        for line in sorted(n for numbers in lines.values() for n in numbers):
            if _raises(statement := evidence.uncommented(statements.get(line, "")), c.error):
                found[c.observation.probe] = (c.observation.probe, line, statement)
                break
    return tuple(found.values())


def _raises(statement: str, error: str) -> bool:
    """Whether `statement` (without its comment) raises `error` (`Type: message`) itself: a `raise Type`, or for
    `KeyError: 'k'` an unguarded load of that key (`kwargs["k"]`; not a store, `kwargs["k"] = v`, nor one behind
    `"k" in kwargs`)."""
    kind, _, message = error.partition(":")
    raise_of = f"raise {kind}"
    if statement == raise_of or statement.startswith((raise_of + "(", raise_of + " ")):
        return True
    key = message.strip()  # as KeyError says it: quoted, `'attention_mask'`
    if kind != "KeyError" or not (len(key) > 2 and key[0] == key[-1] == "'"):
        return False
    code = statement.replace('"', "'")
    loads = re.search(rf"[\w)\]]\[\s*{re.escape(key)}\s*\](?!\s*=(?!=))", code)
    return bool(loads) and not re.search(rf"{re.escape(key)}\s+in\b", code)


_UNEXPECTED = re.compile(r"\b(\w+)\(\) got an unexpected keyword argument '(\w+)'")
_POSITIONAL = re.compile(r"\b(\w+)\(\) takes \d+ positional arguments? but \d+ (?:were|was) given")
_KEYWORD = re.compile(r"(\w+)=…")


def fix_of(subject: SubjectResult, method: str, titles: dict[str, str] | None = None) -> Fix | None:
    """What transformers passes `method` here that it cannot take, from the errors of the class as shipped (a call
    it cannot bind) and from transformers' calls of it; with the `fixed` variant's verdict on it and the probes it
    ran in (named by `titles`). None where nothing is passed that it cannot take."""
    sites = _cannot_take(subject, method)
    passed = {k for site in sites for k in _KEYWORD.findall(site.partition(" at ")[0])}
    missing = _signature_gap(subject, method)  # of what a site passes, what the override cannot take by name
    parameters = passed & missing if missing is not None else set()
    bound = []  # the observations where the class as shipped could not bind a call of it
    for o in subject.observations:
        error = None if evidence.misfit(o) else error_of(o, o.override)  # the probe's inputs: not transformers'
        found = [m.group(2) for m in _UNEXPECTED.finditer(error or "") if m.group(1) == method]
        positional = any(m.group(1) == method for m in _POSITIONAL.finditer(error or ""))
        if found or positional:
            bound.append(o)
            parameters |= set(found) | ({"a positional argument"} if positional else set())
    if not parameters:
        return None
    code = evidence.code_of(subject, method)
    passes_on = code is None or any(f".{method}(" in text for _, statements in code.units for _, text in statements)
    tried = [o for o in subject.observations if method in dict(o.fixed)]
    if not tried:
        return Fix(tuple(sorted(parameters)), sites, passes_on=passes_on)
    still = _still(tried, bound, method)
    ran_in = tuple(dict.fromkeys(_title(o, titles or {}) for o in tried))
    fails = bool(bound) and all(error_of(o, _deleted(o, method, len(subject.methods) < 2)) for o in bound)
    return Fix(tuple(sorted(parameters)), sites, still is None, still, ran_in, fails, passes_on)


def _deleted(observation: Observation, method: str, alone: bool) -> Any:
    """The value with `method` deleted and the rest as shipped; where that variant did not run the probe, it ran
    the code of the class as shipped (evidence)."""
    return observation.base if alone else dict(observation.without).get(method, observation.override)


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
