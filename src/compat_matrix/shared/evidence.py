"""What the observations of one subject in one cell say about each audited name: the evidence, per name and in two
contexts, that deleting it changes something or nothing. Pure functions.

- With one audited name X, the one context compares the class as shipped with X deleted.
- With several, X is judged "with the rest as shipped" (the class as shipped against `base without X`) and "with
  the rest deleted" (`only X` against the class with every audited name deleted). The second is what sees an
  override whose effect another, crashing, override hides in the first.
- A probe is evidence about X in a context only where X ran on the side that keeps it and the probe observed
  something: not where both compared sides failed identically, even in part (an error before X mattered says
  nothing about X, and what else the probe saw may not have depended on X), nor where both found nothing to look
  at. Such probes "told nothing". Nor is one side's failure in a probe that raised on the other side (`differing`):
  two different errors in one probe say only that the class cannot run it either way.
- X is `same` only with evidence of it having run as shipped, every statement of its code included (the functions
  it defines inside too: the hook it registers), in probes that observed something, and no difference in any
  context; the probes vouch only for the code they ran (a branch for an evaluator, a parameter group, a dataset
  shape they never took). A probe whose inputs the class as shipped cannot bind (its forward refuses the token ids
  or labels, or wants other inputs) is no evidence either way: the probe does not fit the class. It is `orphaned`
  where the release no longer defines, calls or reads it and nothing differs but warnings (transformers may warn
  about the very override it no longer uses); else `inconclusive`, saying why. An attribute whose effect the
  probes cannot see (UNSEEN) is never `same`: one that only decides how checkpoints with other keys load (the
  probes reload what the class itself saved), the name of the model's main input (the probes feed token ids), and
  those that decide what happens on several devices, in half precision or with another cache; nor is a method
  that gives `from_pretrained` a mapping of checkpoint keys.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from compat_matrix.shared.results import ATTRIBUTE, Code, Observation, SubjectResult, failure_in
from compat_matrix.shared.variants import Variant
from compat_matrix.shared.vocabulary import ConclusionKind, ObservationName, VerdictKind

# What one name's evidence says: the verdicts' words, and the conclusion's for a name the release gives nothing to
SAME, DIFFERS, INCONCLUSIVE = VerdictKind.SAME, VerdictKind.DIFFERS, VerdictKind.INCONCLUSIVE
ORPHANED = ConclusionKind.ORPHANED
# Attributes whose effect the probes cannot see, and why: a round trip of the class's own checkpoint cannot show that
# deleting one that decides how a checkpoint with other keys loads (a base model's, another library's, an older
# release's) changes nothing; transformers takes the input `main_input_name` names as the model's own (`generate`,
# the `Trainer`'s count of tokens), which for a model of other inputs (`past_values`, `pixel_values`) the probes'
# token ids never are; and tiny models on one CPU, in float32, generating with the default cache, never meet what
# the others decide.
_CHECKPOINTS = "decides how checkpoints with other keys load; the probes reload only what the class saved"
_DEVICES = (
    "decides how the model is split or placed across devices (device_map, parallelism, FSDP); the probes use one CPU"
)
_HALF = "decides which modules stay in float32 where the model loads in half precision; the probes load it in float32"
_CACHES = "decides whether generate may use a static or quantized cache or compile; the probes use the default cache"
UNSEEN = {
    "_keys_to_ignore_on_load_unexpected": _CHECKPOINTS,
    "_keys_to_ignore_on_load_missing": _CHECKPOINTS,
    "_checkpoint_conversion_mapping": _CHECKPOINTS,
    "base_model_prefix": _CHECKPOINTS,
    "main_input_name": (
        "names the input that generate and the Trainer's count of tokens take as the model's own; the probes give "
        "token ids, not this model's inputs"
    ),
    **dict.fromkeys(
        ("_no_split_modules", "_skip_keys_device_placement", "_tp_plan", "_pp_plan", "_ep_plan", "is_parallelizable"),
        _DEVICES,
    ),
    **dict.fromkeys(("_keep_in_fp32_modules", "_keep_in_fp32_modules_strict"), _HALF),
    **dict.fromkeys(("_supports_static_cache", "_supports_quantized_cache", "_can_compile_fullgraph"), _CACHES),
}
ALONE = "deleted"  # the one context of a single audited name
WITH_REST = "the rest as shipped"  # X deleted, the other audited names kept
WITHOUT_REST = "the rest deleted"  # X kept alone, the other audited names deleted
TOGETHER = "deleted together"  # X and the other names judged redundant one by one, deleted at once
JOINED = ", "  # between the names of the variant that deletes several (`base without A, B`), as variants names it
ERROR, WARNINGS, REACHED = ObservationName.ERROR, ObservationName.WARNINGS, ObservationName.REACHED
INCONCLUSIVE_OBSERVATION = ObservationName.INCONCLUSIVE
LINES = ObservationName.LINES  # as shipped: per audited name and unit of its code, the statements that ran


@dataclass(frozen=True)
class Judgement:
    """What one subject's observations in one cell say about deleting one audited name.

    `differing`: the observations that differ in `context`, as pairs with the name (`override`) and without it
    (`base`); `told_nothing`: (probe, why) of the probes that were no evidence about the name."""

    name: str
    verdict: str  # SAME, DIFFERS, ORPHANED or INCONCLUSIVE
    context: str | None = None  # the context that carried the verdict
    differing: tuple[Observation, ...] = ()
    reason: str | None = None
    told_nothing: tuple[tuple[str, str], ...] = ()
    never_ran: tuple[tuple[tuple[int, str], ...], ...] = ()  # runs of its statements that never ran (never_ran)


def never_ran(code: Code, ran: dict[str, set[int]]) -> tuple[tuple[tuple[int, str], ...], ...]:
    """The statements of `code` that never ran, as runs of neighbouring statements of one unit (each statement
    its line and text), in source order."""
    runs: list[list[tuple[int, str]]] = []
    for key, statements in code.units:
        gap = True
        for line, text in statements:
            if line in ran.get(key, ()):
                gap = True
            elif gap:
                runs.append([(line, text)])
                gap = False
            else:
                runs[-1].append((line, text))
    return tuple(tuple(run) for run in runs)


def ran_as_shipped(subject: SubjectResult, name: str) -> dict[str, set[int]]:
    """Per unit of the code of `name`, the statements that ran as shipped in any probe (where it raised too)."""
    ran: dict[str, set[int]] = {}
    for o in subject.observations:
        if o.name == LINES and isinstance(o.override, dict):
            for key, numbers in (o.override.get(name) or {}).items():
                ran.setdefault(key, set()).update(numbers)
    return ran


def statements_text(runs: tuple[tuple[tuple[int, str], ...], ...], limit: int = 3) -> str:
    """`lines 412–418 never ran (`if self.evaluator is not None:` …)`: each run of statements with the text of
    its first, the first `limit` of them."""
    said = []
    for run in runs[:limit]:
        first, last = run[0][0], run[-1][0]
        where = f"line {first}" if first == last else f"lines {first}–{last}"
        text = run[0][1] if len(run[0][1]) <= 60 else run[0][1][:59] + "…"
        said.append(f"{where} (`{text}`{' …' if len(run) > 1 else ''})")
    more = f", and {len(runs) - limit} more" if len(runs) > limit else ""
    return f"{', '.join(said)}{more} never ran"


def _failed(observation: Observation, value: Any) -> bool:
    return (observation.name == ERROR and value is not None) or failure_in(value) is not None


def by_probe(observations: Iterable[Observation]) -> dict[str, dict[str, Observation]]:
    found: dict[str, dict[str, Observation]] = {}
    for o in observations:
        found.setdefault(o.probe, {})[o.name] = o
    return found


def empty_handed(observations: dict[str, Observation], partly: bool = False) -> str | None:
    """Why a probe told nothing when its two sides are `override` and `base`: both found nothing to look at, or
    every observation that carries (warnings apart) failed on both, alike or not (with `partly`, any one did: what
    else the probe observed may not have depended on what failed; so does each side failing at a step of its own,
    where what the other side gave there is no difference: never_got_there); None if it observed something. Two
    different errors say only that the class cannot run that probe either way."""
    nothing = observations.get(INCONCLUSIVE_OBSERVATION)
    if nothing is not None and nothing.override and nothing.base:
        return str(nothing.override)
    carrying = [o for o in observations.values() if o.carries and o.name != WARNINGS]
    failed = [o for o in carrying if _both_failed(o)]
    if failed and (partly or len(failed) == len(carrying)):
        first = failed[0]
        return str(first.override if first.name == ERROR else failure_in(first.override))
    shipped = next((o for o in carrying if _failed(o, o.override)), None)
    if partly and shipped and any(_failed(o, o.base) for o in carrying):  # each side failed at a step of its own
        return str(shipped.override if shipped.name == ERROR else failure_in(shipped.override))
    return None


def broken_as_shipped(subject: SubjectResult, inspects: frozenset[str]) -> str | None:
    """The error of a class that cannot run at all: every probe that runs it (not those in `inspects`, which only
    read the class or an attribute of an instance) failed as shipped and with the audited names deleted, whatever
    the errors; None otherwise. Such a class is not a source of differences: it could not run there (the error as
    shipped says why)."""
    errors = []
    for probe, observations in by_probe(subject.observations).items():
        if probe in inspects:
            continue
        failing = [o for o in observations.values() if o.carries and o.name != WARNINGS and _failed(o, o.override)]
        both = [o for o in failing if _failed(o, o.base)]
        if not both:
            return None
        first = both[0]
        errors.append(str(first.override if first.name == ERROR else failure_in(first.override)))
    return max(errors, key=errors.count) if errors else None


def told_nothing(subject: SubjectResult) -> tuple[tuple[str, str], ...]:
    """(probe, why) of every probe in which the class as shipped and with the audited names deleted failed
    identically, even in part, or found nothing to look at, and nothing else differed but warnings: no evidence of
    anything, listed so that the report can say so."""
    return tuple(
        (probe, why)
        for probe, observations in by_probe(subject.observations).items()
        if (why := empty_handed(observations, partly=True)) is not None
        and not any(counts(o) for o in observations.values())
    )


_MISSING = object()  # a per-name variant that did not run the probe: it ran its reference's code there


def _context(observations: Iterable[Observation], name: str, context: str) -> list[Observation]:
    """The observations of one context as (with `name`: override, without it: base) pairs; where the variant did
    not run a probe, it ran the same code as its reference, so its value is the reference's."""
    pairs = []
    for o in observations:
        if context == ALONE:
            pairs.append(o)
        elif context == WITH_REST:
            value = dict(o.without).get(name, _MISSING)
            pairs.append(
                Observation(
                    o.probe,
                    o.name,
                    o.override,
                    o.override if value is _MISSING else value,
                    o.carries,
                    contract=o.contract,
                )
            )
        else:
            value = dict(o.alone).get(name, _MISSING)
            shifted = o.base if value is _MISSING else value
            pairs.append(Observation(o.probe, o.name, shifted, o.base, o.carries, contract=o.contract))
    return pairs


# The class as shipped refusing the probe's own inputs: a forward of other inputs (simpletransformers'
# RerankingModel(inputs_embeds, attention_mask, token_type_ids), granite-tsfm's past_values) or one that takes no
# labels, called with the probe's token ids and labels. The probe does not fit the class: no evidence either way.
_MISFIT = re.compile(
    r"\bforward\(\) (?:got an unexpected keyword argument '(?:input_ids|labels|attention_mask)'"
    r"|missing \d+ required positional arguments?:)"
)


def misfit(o: Observation) -> bool:
    """Whether the class as shipped could not bind the probe's own inputs here (its forward refused the token
    ids, labels or mask the probe gives, or wants positional inputs the probe does not give)."""
    text = o.override if o.name == ERROR and isinstance(o.override, str) else failure_in(o.override)
    return bool(text and _MISFIT.search(text))


def _both_failed(o: Observation) -> bool:
    """Both sides failed, or the probe did not fit the class as shipped (misfit): either way no difference."""
    return (_failed(o, o.override) and _failed(o, o.base)) or misfit(o)


def counts(o: Observation) -> bool:
    """A difference that counts: a carrying value, or one side finding nothing to look at where the other did; never
    warnings alone (the values are what the code does), nor two different errors (the class cannot run it either
    way)."""
    return (
        (o.carries or o.name == INCONCLUSIVE_OBSERVATION) and o.name != WARNINGS and not o.same and not _both_failed(o)
    )


def differing(pairs: Iterable[Observation]) -> tuple[Observation, ...]:
    """The pairs whose difference counts (`counts`), but not one side's failure in a probe that raised on the other
    side (its `error`): a value that errors as shipped where the probe raised before it without the override (the
    class as shipped cannot generate; without the override it cannot be built) is two different errors in one
    probe, and says only that the class cannot run it either way. Values both sides gave still count there, and
    so do the failures of a probe that ran to its end on both sides (one call each of several, each on its own).
    Nor a step one side has no value for because it failed at an earlier step of the same probe (never_got_there):
    granite-tsfm's `init_weights` raising as shipped, where without `config_class` the class could not be built to
    call it."""
    pairs = tuple(pairs)
    failed = {
        (o.probe, side, o.name == ERROR)
        for o in pairs
        if o.carries and o.name != WARNINGS
        for side, value in ((0, o.override), (1, o.base))
        if _failed(o, value)
    }
    sides = {(probe, side) for probe, side, _ in failed}
    both = {probe for probe, side, raised in failed if raised and (probe, 1 - side) in sides}
    return tuple(
        o
        for o in pairs
        if counts(o)
        and not (o.probe in both and (_failed(o, o.override) or _failed(o, o.base)))
        and not never_got_there(o, sides)
    )


def never_got_there(o: Observation, sides: set[tuple[str, int]]) -> bool:
    """Whether one side gave no value for `o` and failed elsewhere in the probe (`sides`: (probe, 0 as shipped /
    1 the base) that failed somewhere): it stopped before it got there, and that failure is the difference (a
    reload whose outputs were never compared as shipped, because its forward raised)."""
    return (o.base is None and o.override is not None and (o.probe, 1) in sides) or (
        o.override is None and o.base is not None and (o.probe, 0) in sides
    )


def judge(subject: SubjectResult, name: str) -> Judgement:
    """What deleting `name` does in this cell, by the rules in this module's docstring."""
    if name in subject.unprobed:
        return Judgement(name, INCONCLUSIVE, reason=f"no probe exercises {name}")
    for variant, why in subject.unfinished:
        if name in Variant(variant).names:  # its values are missing, not those of the code it compares with
            return Judgement(name, INCONCLUSIVE, reason=f"the variant {variant} gave no values ({why})")
    contexts = (ALONE,) if len(subject.methods) < 2 else (WITH_REST, WITHOUT_REST)
    silent: dict[str, str] = {}
    evidence = False
    ran: dict[str, set[int]] = {}  # per unit of its code, the statements that ran where it was evidence
    orphaned = dict(subject.orphaned).get(name)
    for context in contexts:
        pairs = _context(subject.observations, name, context)
        found = differing(pairs)
        if found:
            return Judgement(name, DIFFERS, context, found, told_nothing=tuple(silent.items()))
        for probe, observations in by_probe(pairs).items():
            reached = observations.get(REACHED)
            if reached is None or name not in (reached.override or ()):
                continue  # it never ran on the side that keeps it: no evidence either way
            why = empty_handed(observations, partly=True)
            if why is not None:
                silent.setdefault(probe, why)
            elif context != WITHOUT_REST and any(o.carries and o.name != WARNINGS for o in observations.values()):
                evidence = True  # it ran as shipped in a probe that observed something
                lines = observations.get(LINES)
                for key, numbers in ((lines.override or {}).get(name, {}) if lines else {}).items():
                    ran.setdefault(key, set()).update(numbers)
    quiet = tuple(silent.items())
    if orphaned:
        return Judgement(name, ORPHANED, reason=orphaned, told_nothing=quiet)
    if evidence and name in UNSEEN:
        return Judgement(name, INCONCLUSIVE, reason=f"{name} {UNSEEN[name]}", told_nothing=quiet)
    code = code_of(subject, name)
    if evidence and _maps_keys(code):  # it passes from_pretrained a key mapping
        return Judgement(name, INCONCLUSIVE, reason=f"{name} {_CHECKPOINTS}", told_nothing=quiet)
    if evidence and (unwatched := _unwatched(subject, name)):
        return Judgement(name, INCONCLUSIVE, reason=unwatched, told_nothing=quiet)
    missing = never_ran(code, ran) if evidence and code else ()
    if missing:
        why = f"{statements_text(missing)} as shipped in a probe that observed something"
        return Judgement(name, INCONCLUSIVE, reason=why, told_nothing=quiet, never_ran=missing)
    if evidence:
        return Judgement(name, SAME, contexts[0], told_nothing=quiet)
    why = f"{name} never ran as shipped in a probe that observed something"
    if quiet:
        why += " (" + "; ".join(f"{probe}: {text}" for probe, text in quiet) + ")"
    return Judgement(name, INCONCLUSIVE, reason=why, told_nothing=quiet)


_KEY_MAPPING = re.compile(r"\b(?:key_mapping|_checkpoint_conversion_mapping)\b")


def _maps_keys(code: Code | None) -> bool:
    """Whether `code` names a mapping of checkpoint keys, as a `from_pretrained` that passes one does (colpali's
    `key_mapping = super()._checkpoint_conversion_mapping`): what that decides, loading a checkpoint with other
    keys, the probes never see (UNSEEN). Comments left out."""
    texts = [uncommented(text) for _, unit in (code.units if code else ()) for _, text in unit]
    return any(_KEY_MAPPING.search(t) for t in texts)


def uncommented(statement: str) -> str:
    """A watched statement without its trailing comment (`x = 1  # why`), as its code."""
    return statement.split("  #")[0]


def code_of(subject: SubjectResult, name: str) -> Code | None:
    """The statements the cell watched of the audited `name`; None where it watched none."""
    return next((c for c in subject.code or () if c.name == name), None)


def _unwatched(subject: SubjectResult, name: str) -> str | None:
    """Why the statements of a method that ran could not be vouched for: the cell watched statements, but not this
    method's (no source, or none that compiles alone: compat_matrix.cell.instrument); None where they were watched,
    or for an attribute."""
    attribute = any(o.name == name and o.kind == ATTRIBUTE for o in subject.overrides)
    if subject.code is None or attribute or code_of(subject, name) is not None:
        return None
    return (
        f"the statements of {name} could not be watched (no copy of its source compiles alone): what ran cannot be told"
    )


def redundant(subject: SubjectResult) -> tuple[str, ...]:
    """The audited names judged `same` one by one, where several are audited: those the advice deletes together."""
    if len(subject.methods) < 2:
        return ()
    return tuple(m for m in subject.methods if judge(subject, m).verdict == SAME)


def together(subject: SubjectResult) -> tuple[Observation, ...]:
    """Where deleting every name judged redundant one by one, at once, changes what the class as shipped does (pairs:
    with them, without them), e.g. two overrides that each provide what the other does; empty where it changes
    nothing, or there are not two such names. With all of them redundant, that is the class with all deleted."""
    names = redundant(subject)
    if len(names) < 2:
        return ()
    key = JOINED.join(names)
    if set(names) == set(subject.methods):
        pairs: Iterable[Observation] = subject.observations
    else:
        pairs = (
            Observation(
                o.probe, o.name, o.override, dict(o.without).get(key, o.override), o.carries, contract=o.contract
            )
            for o in subject.observations
        )
    return differing(pairs)
