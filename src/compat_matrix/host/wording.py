"""Conclusions and advice in words: sentences from the structured conclusions of compat_matrix.host.conclude, in the
escaping of one output format (`Style`). Pure functions.

`MARKDOWN` marks code with backticks and emphasis with asterisks and quotes observed text (errors, reasons, names a
user's probe chose) with markdown's emphasis and link characters escaped, as the report's sentences have always
read, in the markdown and in the JSON's sentences alike; render then escapes HTML and `|` for the markdown alone.
`PLAIN` is the same sentences as plain text, for readers that are not markdown.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compat_matrix import probes
from compat_matrix.host import grid
from compat_matrix.host.conclude import (
    COULD_NOT_RUN,
    DIFFERENTLY,
    HARMFUL,
    NEEDED,
    ORDER,
    ORPHANED,
    REDUNDANT,
    UNKNOWN,
    Advice,
    Conclusion,
    Contrast,
    Override,
    RangeCheck,
    SubjectConclusions,
    advise,
    error_of,
)
from compat_matrix.host.releases import Label, runs
from compat_matrix.host.shipped import FAILS
from compat_matrix.host.tests_seen import TestsSeen
from compat_matrix.host.verdict import Verdict
from compat_matrix.shared import evidence
from compat_matrix.shared.results import THROUGH, Discovery, Observation, equal, one_line
from compat_matrix.shared.vocabulary import AdviceKind, ConclusionKind, ObservationName, Status, VerdictKind

SHORT = 48  # characters of a value in a phrase
_MARKUP = re.compile(r"([*_\[\]])")


@dataclass(frozen=True)
class Style:
    """How one output format writes the report's sentences."""

    text: Callable[[str], str]  # observed text, quoted in a sentence: one line, safe
    code: Callable[[str], str]  # a name in code: a method, a test
    strong: Callable[[str], str]  # the word a line is about


def _markdown_text(text: str) -> str:
    """One line, no backticks, markdown's emphasis and link characters escaped (HTML and `|` are escaped when the
    sentence is written out)."""
    return _MARKUP.sub(r"\\\1", one_line(text).replace("`", "'"))


MARKDOWN = Style(_markdown_text, lambda name: f"`{name}`", lambda word: f"**{word}**")
PLAIN = Style(one_line, str, str)


@dataclass(frozen=True)
class Said:
    """Contrasts in words: where (probe titles, each with its observations) and the two sides in short."""

    kind: ConclusionKind
    where: tuple[tuple[str, tuple[str, ...]], ...]  # (("Trainer step", ("default",)),)
    override: str
    base: str
    error: str | None = None  # the one-sided error's first line

    @property
    def what(self) -> str:
        """`Trainer step (default, with_kwargs), entry points`: each title once, with its observations."""
        return ", ".join(f"{title} ({', '.join(names)})" if names else title for title, names in self.where)

    @property
    def titles(self) -> str:
        """The probe titles, at most three named."""
        titles = [title for title, _ in self.where]
        return ", ".join(titles[:3]) + (f" and {len(titles) - 3} more" if len(titles) > 3 else "")

    def text(self, detailed: bool = True) -> str:
        return f"{self.what if detailed else self.titles}: {self.override} (override) vs {self.base} (base)"


def spelled(value: Any) -> str:
    """An observed value as a reader expects it: `True`, `2/2`, `use_reentrant=False, ...`, `a; b`; containers
    inside containers in brackets: `layers=[True, False]`, `other_flags={model.model=True}`; empty ones as `{}` and
    `[]`; None as `—`."""
    if value is None:
        return "—"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_nested(v)}" for k, v in sorted(value.items())) or "{}"
    if isinstance(value, list):
        return "; ".join(_nested(v) for v in value) or "[]"
    return str(value)


def _nested(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + spelled(value) + "}" if value else "{}"
    if isinstance(value, list):
        return "[" + ", ".join(_nested(v) for v in value) + "]"
    return spelled(value)


def short(value: Any, style: Style = MARKDOWN, limit: int = SHORT) -> str:
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, dict) and value:
        text = ", ".join(f"{style.text(str(k))}={short(v, style, limit)}" for k, v in value.items())
    else:
        text = style.text(spelled(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _flat(item, f"{prefix}{key}.").items()}
    return {prefix.rstrip("."): value}


def sides(override: Any, base: Any, style: Style = MARKDOWN, limit: int = SHORT) -> tuple[str, str]:
    """The two values in short, naming only what differs: dict keys whose values differ, list items on one side."""
    if isinstance(override, list) and isinstance(base, list) and all(isinstance(v, str) for v in override + base):
        mine, theirs = [v for v in override if v not in base], [v for v in base if v not in override]
        return (
            short(mine, style, limit) if mine else "nothing more",
            short(theirs, style, limit) if theirs else "nothing more",
        )
    flat_o, flat_b = _flat(override), _flat(base)
    if len(flat_o) > 1 or len(flat_b) > 1 or (isinstance(override, dict) and isinstance(base, dict)):
        keys = [k for k in dict.fromkeys([*flat_o, *flat_b]) if not equal(flat_o.get(k), flat_b.get(k))]
        keys = keys or list(dict.fromkeys([*flat_o, *flat_b]))
        return (
            short({k: flat_o.get(k) for k in keys}, style, limit),
            short({k: flat_b.get(k) for k in keys}, style, limit),
        )
    return short(override, style, limit), short(base, style, limit)


def said(contrast: Contrast, style: Style = MARKDOWN) -> Said:
    o = contrast.observation
    title = style.text(contrast.title) + (" warnings" if o.name == ObservationName.WARNINGS else "")
    names = () if o.name in (ObservationName.ERROR, ObservationName.WARNINGS) else (style.text(o.name),)
    where = ((title, names),)

    def kind_of(error: str) -> str:
        return style.text(error.split(":", 1)[0])

    if contrast.kind == HARMFUL:
        return Said(HARMFUL, where, kind_of(contrast.error or ""), "runs", style.text(contrast.error or ""))
    if contrast.kind == NEEDED:
        return Said(NEEDED, where, "runs", kind_of(contrast.error or ""), style.text(contrast.error or ""))
    on_override, on_base = error_of(o, o.override), error_of(o, o.base)
    if on_override and on_base:
        return Said(DIFFERENTLY, where, kind_of(on_override), kind_of(on_base))
    return Said(DIFFERENTLY, where, *sides(o.override, o.base, style))


def grouped(contrasts: Sequence[Contrast], style: Style = MARKDOWN) -> list[Said]:
    """Contrasts that read alike (the same kind and the same two sides) said once, naming every place they were
    seen."""
    groups: dict[tuple[ConclusionKind, str, str], dict[str, list[str]]] = {}
    errors: dict[tuple[ConclusionKind, str, str], str | None] = {}
    for c in (said(contrast, style) for contrast in contrasts):
        key = (c.kind, c.override, c.base)
        errors.setdefault(key, c.error)
        for title, names in c.where:
            groups.setdefault(key, {}).setdefault(title, []).extend(names)
    return [
        Said(kind, tuple((t, tuple(n)) for t, n in where.items()), o, b, errors[kind, o, b])
        for (kind, o, b), where in groups.items()
    ]


def phrase(conclusion: Conclusion, verdict: Verdict, style: Style = MARKDOWN) -> str:
    """The verdict cell of the main table: the verdict, and the differing values in a short phrase."""
    if verdict.verdict != VerdictKind.DIFFERS:
        return f"{verdict.verdict}: {verdict.reason}" if verdict.reason else verdict.verdict
    parts = [g.text(detailed=False) for g in grouped(conclusion.contrasts, style)]
    shown = "; ".join(parts[:2]) + (f"; +{len(parts) - 2} more" if len(parts) > 2 else "")
    return f"differs: {shown}{verdict.following}"


def versions_text(labels: Sequence[str], order: Sequence[str], axis: bool = True) -> str:
    """`transformers 4.57.6, 5.14.1 … 5.24.0`: oldest first, a run of three or more neighbouring tested versions
    (in `order`, newest first) as its ends, and the shared axis name said once (not at all without `axis`)."""
    tested = [run for run in runs(reversed(order), lambda label: label in labels) if run[0] in labels]
    read = [Label.read(label) for label in labels]
    shared = {label.package for label in read}
    simple = len(shared) == 1 and None not in shared

    def name(label: str) -> str:
        return Label.read(label).shown if simple else label

    said_ = [f"{name(r[0])} … {name(r[-1])}" if len(r) > 2 else ", ".join(map(name, r)) for r in tested]
    return (f"{shared.pop()} " if simple and axis else "") + (", " if simple else "; ").join(said_)


def _why(conclusion: Conclusion, style: Style) -> str:
    return style.text(conclusion.why or "")


def line(conclusion: Conclusion, follows: tuple[str, ...], where: str, style: Style = MARKDOWN) -> str:
    """The line that says one conclusion, on the versions `where`."""
    kind = conclusion.kind
    strong = style.strong(kind)
    pinned = f" (follows {', '.join(style.code(m) for m in follows)})" if follows else ""
    if conclusion.context == evidence.WITHOUT_REST:
        pinned += " (with the other audited overrides deleted: as shipped, the same failure hides it)"
    groups = grouped(conclusion.contrasts, style)
    if kind == REDUNDANT:
        return f"{strong} on {where}: deleting changes nothing there."
    if kind == ORPHANED:
        return f"{strong} on {where}: {_why(conclusion, style)} there, so transformers no longer uses it."
    if kind in (UNKNOWN, COULD_NOT_RUN):
        return f"{strong} on {where}: {_why(conclusion, style)}"
    if kind in (HARMFUL, NEEDED):
        raised = "; ".join(f"{g.what} raise “{g.error}”" for g in groups if g.kind == kind)
        side = ("with", "without") if kind == HARMFUL else ("without", "with")
        return f"{strong} on {where}{pinned}: {side[0]} the override, {raised}; {side[1]} it they run."
    return f"{strong} on {where}{pinned}: " + "; ".join(g.text() for g in groups) + "."


def lines(
    rows: Sequence[tuple[str, Conclusion, tuple[str, ...]]], order: Sequence[str], style: Style = MARKDOWN
) -> list[str]:
    """Versions whose conclusion is said the same way share a line; lines in the order of the conclusion kinds."""
    shared: dict[tuple[str, str], tuple[Conclusion, tuple[str, ...], list[str]]] = {}
    for label, conclusion, follows in rows:
        key = (conclusion.kind, line(conclusion, follows, "", style))
        shared.setdefault(key, (conclusion, follows, []))[2].append(label)
    ordered = sorted(shared.items(), key=lambda item: ORDER.index(item[0][0]))
    return [line(c, follows, versions_text(labels, order), style) for _, (c, follows, labels) in ordered]


def advice_why(advice: Advice, order: Sequence[str]) -> str:
    """Why the advice: the releases behind it."""
    untested = f" Not tested: {versions_text(advice.on(COULD_NOT_RUN), order)}." if advice.on(COULD_NOT_RUN) else ""
    if advice.nothing_ran:
        return "nothing ran." + untested
    if advice.kind == AdviceKind.PORT:
        before = [f"{kind} on {versions_text(advice.on(kind), order)}" for kind in (NEEDED, DIFFERENTLY, HARMFUL)]
        said_ = "; ".join(b for b, kind in zip(before, (NEEDED, DIFFERENTLY, HARMFUL), strict=True) if advice.on(kind))
        gone = f"orphaned on {versions_text(advice.on(ORPHANED), order)}: the behaviour it provided is gone there"
        return (f"{said_}; " if said_ else "") + gone + "; port it." + untested
    if advice.kind == AdviceKind.FIX:
        return "it breaks where transformers passes it what it cannot take, and does its job elsewhere." + untested
    if advice.kind == AdviceKind.KEEP:
        kinds = [f"{k} on {versions_text(advice.on(k), order)}" for k in (NEEDED, DIFFERENTLY) if advice.on(k)]
        return f"{' and '.join(kinds)}." + untested
    if advice.kind == AdviceKind.DELETE:
        harmful = advice.on(HARMFUL)
        fixes = f" and fixes {versions_text(harmful, order)}" if harmful else ""
        return f"safe on every tested version{fixes}." + untested
    return f"deleting it {_caveats(advice, order)}." + untested


def _caveats(advice: Advice, order: Sequence[str]) -> str:
    caveats = []
    if advice.caveat:
        found = " and ".join(
            f"{k} on {versions_text(advice.on(k), order)}" for k in (REDUNDANT, HARMFUL) if advice.on(k)
        )
        caveats.append(f"reads {found}, but {advice.caveat}")
    if advice.on(DIFFERENTLY):
        caveats.append(f"changes behaviour on {versions_text(advice.on(DIFFERENTLY), order)}: review the differences")
    if advice.on(UNKNOWN):
        caveats.append(f"is not established on {versions_text(advice.on(UNKNOWN), order)}")
    return " and ".join(caveats)


def _methods(methods: tuple[str, ...], style: Style) -> str:
    if len(methods) == 1:
        return f"the override of {style.code(methods[0])}"
    return ("both overrides" if len(methods) == 2 else f"all {len(methods)} overrides") + (
        f" ({', '.join(style.code(m) for m in methods)})"
    )


def recommend(methods: tuple[str, ...], advice: Advice, order: Sequence[str], style: Style = MARKDOWN) -> str:
    """What to do with the override(s) together, as a sentence."""
    why, which = advice_why(advice, order), _methods(methods, style)
    if advice.nothing_ran:
        return "Nothing ran, so there is nothing to recommend." + why.removeprefix("nothing ran.")
    if advice.kind == AdviceKind.KEEP:
        return f"Keep {which}: {why}"
    if advice.kind == AdviceKind.PORT:
        return f"Port {which}: {why}"
    if advice.kind == AdviceKind.FIX:
        return f"Fix {which}: {why}"
    if advice.kind == AdviceKind.DELETE:
        return f"Deleting {which} is {why}"
    return f"Deleting {which} " + why.removeprefix("deleting it ")


def glance(answer: SubjectConclusions, style: Style = MARKDOWN) -> str:
    """Per audited override, in the grid's order, where its conclusion changes, oldest to newest (`m: redundant
    4.57.6, 5.14.1 · harmful 5.24.0`): each stretch starts at the first release it names, so a sweep's glance names
    the first release on which each override turns bad. It says what the grid says."""
    if not answer.overrides:
        return _runs([(row.label, row.conclusion.kind) for row in answer.rows])
    return "; ".join(f"{style.code(o.name)}: {stretches(o)}" for o in sorted(answer.overrides, key=grid.rank))


def stretches(override: Override) -> str:
    """`redundant 4.57.6, 5.14.1 · harmful 5.24.0`: one override's conclusions, oldest first."""
    return _runs([(label, c.kind) for label, c in override.by_release])


def _runs(labelled: list[tuple[str, str]]) -> str:
    """`same 4.57.6, 5.14.1 · differs 5.24.0` from (label, word) newest first: runs of one word, oldest first."""
    stretches_ = runs(reversed(labelled), lambda pair: pair[1])
    return " · ".join(f"{run[0][1]} {_stretch([Label.read(label).shown for label, _ in run])}" for run in stretches_)


def _stretch(versions: Sequence[str]) -> str:
    """Neighbouring tested versions, oldest first: `5.14.1`, `4.57.6, 5.14.1`, `5.16.1 … 5.22.2`."""
    return f"{versions[0]} … {versions[-1]}" if len(versions) > 2 else ", ".join(versions)


@dataclass(frozen=True)
class Summary:
    """One subject across its tested releases, in words: a line per conclusion (per method, where there are
    several), deprecations, the recommendation, and where the verdict changes (`glance`)."""

    lines: tuple[str, ...]
    deprecations: tuple[str, ...]
    recommendation: str
    glance: str
    tests: TestsSeen | None = None
    as_shipped: tuple[str, ...] = ()  # what fails or changes about the class as shipped across releases
    told_nothing: str = ""  # the probes that observed nothing, and where


def summarize(answer: SubjectConclusions, tests: TestsSeen | None = None, style: Style = MARKDOWN) -> Summary:
    """With several audited methods and the variants that delete one alone, a line per method and conclusion, and
    advice per method; else a line per conclusion, and one recommendation."""
    rows, methods = answer.rows, answer.methods
    order = [row.label for row in rows]
    if answer.per_method:
        said_ = [
            f"{style.code(o.name)}: {text}"
            for o in answer.overrides
            for text in lines([(at, c, ()) for at, c in o.by_release], order, style)
        ]
        merged: dict[tuple[AdviceKind, str], list[str]] = {}  # methods with the same advice, said once
        for o in answer.overrides:
            merged.setdefault((o.advice.kind, advice_why(o.advice, order)), []).append(style.code(o.name))
        recommendation = " ".join(f"{kind} {', '.join(ms)}: {why}" for (kind, why), ms in merged.items())
    else:
        (override,) = answer.overrides or (None,)
        on = dict(override.by_release) if override else {}
        said_ = lines([(r.label, on.get(r.label, r.conclusion), _follows(r.verdict)) for r in rows], order, style)
        advice = override.advice if override else advise([(r.label, r.conclusion) for r in rows])
        recommendation = recommend(methods, advice, order, style)
    recommendation += needing(tests, style)
    return Summary(
        tuple(said_),
        deprecated(answer, style),
        recommendation,
        glance(answer, style),
        tests,
        shipped_lines(answer, order, style),
        told_nothing(answer, order, style),
    )


ACROSS = {"forward_backward": "the forward outputs", "save_and_load": "the reloaded weights"}


def shipped_lines(
    answer: SubjectConclusions, order: Sequence[str], style: Style = MARKDOWN, explained: frozenset[str] = frozenset()
) -> tuple[str, ...]:
    """What the class as shipped does across releases: probes that fail the same way on the same releases share a
    line (`as shipped, save and load, generate raise “…” on 4.57.6 … 5.24.0; they ran on 4.45.2, 4.51.3.`), then
    the values that change silently from one tested release to the next. Failures with an error in `explained`
    (what a harmful override raises, said elsewhere) are left out."""
    titles = _titles(answer)

    def releases(labels: tuple[str, ...]) -> str:
        return versions_text(labels, order)

    failing: dict[tuple[str, tuple[str, ...], tuple[str, ...]], list[str]] = {}
    said_ = []
    for change in answer.as_shipped:
        title = style.text(titles.get(change.probe, change.probe.replace("_", " ")))
        if change.kind == FAILS and change.error in explained:
            continue
        if change.kind == FAILS:
            failing.setdefault((change.error or "", change.releases, change.other), []).append(title)
            continue
        what = ACROSS.get(change.probe, f"the values of {title}")
        said_.append(
            f"as shipped, {what} (weights set from each parameter's name and shape) change from"
            f" {releases(change.other)} to {releases(change.releases)}:"
            f" {' vs '.join(sides(change.before, change.after, style))}."
        )
    fails = [
        f"as shipped, {', '.join(names)} {'raises' if len(names) == 1 else 'raise'} “{style.text(error)}” on"
        f" {releases(where)}; {'it' if len(names) == 1 else 'they'} ran on {releases(ran)}."
        for (error, where, ran), names in failing.items()
    ]
    return tuple(fails + said_)


def _titles(answer: SubjectConclusions) -> dict[str, str]:
    """What to call each probe: as the cells said, else as the registry says."""
    said = {name: title for row in answer.rows if row.row.result for name, title in row.row.result.titles}
    return {**probes.titles(), **said}


def told_nothing(answer: SubjectConclusions, order: Sequence[str], style: Style = MARKDOWN) -> str:
    """`save and load (ValueError: …) on transformers 4.57.6 … 5.24.0; generate (…) on …`: the probes whose two
    variants failed identically or found nothing, which are no evidence of anything; empty if none."""
    where: dict[tuple[str, str], list[str]] = {}
    titles = _titles(answer)
    for row in answer.rows:
        for probe, why in row.told_nothing:
            where.setdefault((titles.get(probe, probe.replace("_", " ")), why), []).append(row.label)
    return "; ".join(
        f"{style.text(title)} ({style.text(why)}) on {versions_text(labels, order)}"
        for (title, why), labels in where.items()
    )


def _follows(verdict: Verdict) -> tuple[str, ...]:
    return verdict.follows if verdict.per_method or len(verdict.follows) == 1 else ()


def deprecated(answer: SubjectConclusions, style: Style = MARKDOWN) -> tuple[str, ...]:
    """A line per deprecated audited method: the first tested release whose base implementation warns."""
    first_seen: dict[tuple[str, str | None], str] = {}
    for row in reversed(answer.rows):  # oldest first: the first version that warns
        for d in row.deprecations:
            first_seen.setdefault((d.method, d.replacement), row.label)
    return tuple(
        f"{style.code(m)} deprecated in {label}" + (f" in favour of {style.code(r)}" if r else "")
        for (m, r), label in first_seen.items()
    )


def needing(seen: TestsSeen | None, style: Style = MARKDOWN) -> str:
    """The recommendation's last word when the user's own tests need the override somewhere."""
    if seen is None:
        return ""
    needing = [(label, columns[0]) for label, columns in seen.per_version if columns[0]]
    if not needing:
        return ""
    tests = list(dict.fromkeys(style.text(t) for _, needed in needing for t in needed))
    order = [label for label, _ in seen.per_version]
    where = versions_text([label for label, _ in needing], order)
    return f" But your tests {', '.join(tests)} pass only with the override on {where}."


# The first screen: a title that is the answer, a caution, the grid's cells and advice, its legend.

VERBS = {  # what asks for work, in the order a title says it
    AdviceKind.FIX: "fix",
    AdviceKind.DELETE: "delete",
    AdviceKind.PORT: "port",
    AdviceKind.REVIEW: "review",
}
MEANINGS = {
    HARMFUL: "errors with the override, runs without it",
    NEEDED: "runs with the override, errors without it",
    DIFFERENTLY: "values differ with and without it",
    ORPHANED: "transformers no longer defines, calls or reads it",
    UNKNOWN: "no probe showed either way",
    COULD_NOT_RUN: "the cell or class failed",
    REDUNDANT: "deleting it changes nothing",
}
CAUTIONS = 3  # harmful overrides a caution line names; the grid shows the rest
ERROR_SHOWN = 200  # characters of an error in the caution line
UNBUILT = f"{Status.COULD_NOT_BUILD}: "  # a subject's status and reason, as a conclusion's why
INSTALL_FAILED = f"{Status.INSTALL_FAILED}: "  # a cell's


def _class(target: str) -> str:
    return target.rsplit(":", 1)[-1].rsplit(".", 1)[-1]


def name_of_subject(target: str, style: Style = MARKDOWN) -> str:
    """`CharacterCausalLMWrapper`, the class of a `module:Class` target."""
    return style.code(_class(target))


def name_of(override: Override, several: bool, style: Style = MARKDOWN) -> str:
    """`name`, or with several subjects `Class.name` (a subject with nothing audited: its class)."""
    owner = _class(override.target)
    if not override.name:
        return style.code(owner)
    return style.code(f"{owner}.{override.name}" if several else override.name)


def title(name: str, overrides: Sequence[Override], style: Style = MARKDOWN) -> str:
    """`CharacterCausalLMWrapper: delete 2 of 3 overrides`: the actions, by advice (keeping asks for none)."""
    audited = [o for o in overrides if o.name]
    if not audited:
        return f"{name}: nothing audited"
    if all(o.advice.nothing_ran for o in audited):
        return f"{name}: nothing ran"
    if len(audited) == 1:
        (only,) = audited
        return f"{name}: {str(only.advice.kind).lower()} {style.code(only.name)}"
    every = "both" if len(audited) == 2 else f"all {len(audited)}"
    counts = {kind: sum(o.advice.kind == kind for o in audited) for kind in VERBS}
    parts = [f"{VERBS[kind]} {count}" for kind, count in counts.items() if count]
    if not parts:
        return f"{name}: keep {every} overrides"
    alone = [kind for kind, count in counts.items() if count == len(audited)]
    if alone:
        return f"{name}: {VERBS[alone[0]]} {every} overrides"
    return f"{name}: {_listed(parts)} of {len(audited)} overrides"


def _failing(override: Override, kind: ConclusionKind) -> tuple[list[str], list[str], str | None]:
    """The releases where `override` is `kind` (newest first), the probe titles whose contrasts of that kind show it
    on the newest of them, and their first error."""
    labels = [label for label, c in override.by_release if c.kind == kind]
    if not labels:
        return [], [], None
    conclusion = dict(override.by_release)[labels[0]]
    contrasts = [c for c in conclusion.contrasts if c.kind == kind]
    titles = list(dict.fromkeys(c.title for c in contrasts))
    return labels, titles, next((c.error for c in contrasts if c.error), None)


def _listed(items: Sequence[str]) -> str:
    return ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else "".join(items)


def caution(
    overrides: Sequence[Override],
    order: Sequence[str],
    several: bool,
    style: Style = MARKDOWN,
    above: frozenset[str] = frozenset(),
) -> str:
    """One line when an override is harmful somewhere: what breaks, the error, and that deleting it fixes that.
    Overrides that break alike (the same error on the same releases) are said together. An error in `above` (the
    release's health at the top says it) is named by its type alone."""
    alike: dict[tuple[tuple[str, ...], str | None], tuple[list[str], list[str]]] = {}
    cautioned: dict[tuple[tuple[str, ...], str | None], list[str | None]] = {}  # their caveats (stand-ins, …)
    for o in overrides:
        if o.harmful:
            labels, titles, error = _failing(o, HARMFUL)
            names, seen = alike.setdefault((tuple(labels), error), ([], []))
            names.append(name_of(o, several, style))
            seen += [t for t in titles if t not in seen]
            cautioned.setdefault((tuple(labels), error), []).append(o.advice.caveat)
    if not alike:
        return ""
    said = []
    for (labels, error), (names, titles) in list(alike.items())[:CAUTIONS]:
        who = (
            _listed(names[:CAUTIONS]) if len(names) <= CAUTIONS else f"{', '.join(names[:2])} and {len(names) - 2} more"
        )
        verb = "breaks" if len(names) == 1 else "break"
        what = _listed([style.text(t) for t in titles[:3]]) + (" and more" if len(titles) > 3 else "")
        raised = f" with “{style.text(error[:ERROR_SHOWN])}”" if error and error not in above else ""
        raised += f" with the {style.text(error.split(':', 1)[0])} said at the top" if error and error in above else ""
        raised += "".join(dict.fromkeys(f" ({style.text(c)})" for c in cautioned.get((labels, error), ()) if c))
        said.append(f"on {versions_text(labels, order)}, {who} {verb} {what}{raised}")
    more = len(alike) - CAUTIONS
    fix = "deleting it fixes that there" if sum(o.harmful for o in overrides) == 1 else "deleting each fixes that there"
    return (
        f"{style.strong('Caution:')} "
        + "; ".join(said)
        + (f"; and {more} more (✗ in the grid)" if more > 0 else "")
        + f"; {fix}."
    )


def cell(kind: ConclusionKind) -> str:
    """A grid cell: the conclusion's symbol and word."""
    return f"{kind.symbol} {kind}"


def legend(kinds: Sequence[ConclusionKind]) -> str:
    """Each symbol the grid shows, defined once."""
    return " · ".join(f"{kind.symbol} {kind}: {MEANINGS[kind]}" for kind in kinds)


def stopped(whys: Sequence[str]) -> str | None:
    """Of why a subject could not run on each release (`status: reason`), the one to say first: a class that could
    not be built, then one that could not be imported or crashed, then a cell that could not be installed; a reason
    that says what failed (`could not build X: …`, `could not import the factory …`) without its status."""
    ranked = sorted(whys, key=lambda why: (not why.startswith(UNBUILT), why.startswith(INSTALL_FAILED)))
    if not ranked:
        return None
    _, _, said = ranked[0].partition(": ")
    return said if said.startswith("could not ") else ranked[0]


def reason(
    override: Override, order: Sequence[str], style: Style = MARKDOWN, above: Mapping[str, str] | None = None
) -> str:
    """The advice's reason in a few words, for the grid (and, plain, the JSON). `above`: for each reason a row could
    not run that the release's health at the top says, what to say instead (compat_matrix.host.health)."""
    advice = override.advice

    def on(kind: ConclusionKind) -> str:
        return versions_text(advice.on(kind), order, axis=False)

    if advice.nothing_ran:
        told = [above[c.why] for _, c in override.by_release if above and c.why in above]
        if told:
            return f"nothing ran: {told[0]}"
        why = stopped([c.why for _, c in override.by_release if c.why])
        return style.text(why[:ERROR_SHOWN]) if why else "nothing ran"
    if advice.kind == AdviceKind.DELETE:
        _, _, error = _failing(override, HARMFUL)
        if not advice.on(HARMFUL):
            return "deleting it changes nothing"
        fixed = f"the {style.text(error.split(':', 1)[0])}" if error else "what breaks"
        return f"fixes {fixed} on {on(HARMFUL)}" + ("; elsewhere changes nothing" if advice.on(REDUNDANT) else "")
    if advice.kind == AdviceKind.KEEP and not advice.on(NEEDED):
        _, titles, _ = _failing(override, DIFFERENTLY)
        what = _listed([style.text(t) for t in titles[:2]]) + (" …" if len(titles) > 2 else "")
        return f"it does its job: deleting it changes {what or 'what it does'} on {on(DIFFERENTLY)}"
    if advice.kind == AdviceKind.KEEP:
        _, titles, error = _failing(override, NEEDED)
        what = _listed([style.text(t) for t in titles[:2]]) or "a probe"
        raised = (
            f"{'raises' if len(titles) == 1 else 'raise'} {style.text(error.split(':', 1)[0])}" if error else "fail"
        )
        harmful = f"; harmful on {on(HARMFUL)}" if advice.on(HARMFUL) else ""
        return f"without it, {what} {raised}{harmful}"
    if advice.kind == AdviceKind.FIX:
        return fix_text(override, order, style)
    if advice.kind == AdviceKind.PORT:
        first = advice.on(ORPHANED)[-1]
        why = dict(override.by_release)[first].why
        since = versions_text([first], order, axis=False)
        return f"orphaned from {since}" + (f" ({style.text(why)})" if why else "") + ": port what it did"
    if advice.caveat:
        kinds = [f"{k} on {on(k)}" for k in (REDUNDANT, HARMFUL) if advice.on(k)]
        return f"{'; '.join(kinds)}, but {style.text(advice.caveat)}"
    ran = {kind for kind, _ in advice.releases} - {COULD_NOT_RUN}
    if advice.on(COULD_NOT_RUN) and ran <= {REDUNDANT, HARMFUL, ORPHANED}:
        kinds = [f"{k} on {on(k)}" for k in (REDUNDANT, HARMFUL, ORPHANED) if advice.on(k)]
        return f"{'; '.join(kinds)}, but it could not run on {on(COULD_NOT_RUN)}: delete it once it runs there"
    said = []
    if advice.on(HARMFUL) and advice.on(NEEDED):
        said.append(f"harmful on {on(HARMFUL)}, needed on {on(NEEDED)}")
    elif advice.on(HARMFUL):
        said.append(f"harmful on {on(HARMFUL)}")
    broken = [(label, c.breaks) for label, c in override.by_release if c.breaks]
    if broken:  # what no correct override does: said as what it breaks, where
        titles = list(dict.fromkeys(b.title for b in broken[0][1]))
        what = _listed([style.text(t) for t in titles[:2]]) + (" …" if len(titles) > 2 else "")
        said.append(f"breaks {what} on {versions_text([label for label, _ in broken], order, axis=False)}")
    elif advice.on(DIFFERENTLY):
        _, titles, _ = _failing(override, DIFFERENTLY)
        what = _listed([style.text(t) for t in titles[:2]]) + (" …" if len(titles) > 2 else "")
        said.append(f"behaves differently on {on(DIFFERENTLY)}" + (f" ({what})" if what else ""))
    if advice.on(UNKNOWN):
        said.append(f"not established on {on(UNKNOWN)}")
    return "; ".join(said) or "review it"


def fix_text(override: Override, order: Sequence[str], style: Style = MARKDOWN) -> str:
    """The change a Fix proposes and whether it was verified: `accept `missing_keys`, `recompute_mapping` and pass
    them on; on 5.0.0, 5.24.0 transformers calls `tie_weights(missing_keys=…, recompute_mapping=…)` at
    modeling_utils.py:4628;
    verified: with it the class runs on 5.0.0, 5.24.0, and elsewhere nothing passes it what it cannot take`."""
    broken = [(label, c.fix) for label, c in override.by_release if c.fix is not None]
    ran = [label for label, c in override.by_release if c.kind != COULD_NOT_RUN and c.fix is None]
    where = versions_text([label for label, _ in broken], order, axis=False)
    names = sorted({p for _, fix in broken for p in fix.parameters})
    accepted = _listed([style.code(n) if " " not in n else n for n in names])
    sites = next((fix.sites for _, fix in broken if fix.sites), ())
    called = (
        f"; on {where} transformers calls {style.code(_shape(sites[0]))} at {style.text(_at(sites[0]))}"
        if sites
        else ""
    )
    more = f" and {len(sites) - 1} more" if len(sites) > 1 else ""
    kwargs = style.code("**kwargs")
    change = f"accept {accepted} (or {kwargs}) and pass {'it' if len(names) == 1 else 'them'} on{called}{more}"
    failed = [(label, fix) for label, fix in broken if fix.verified is False]
    untried = [label for label, fix in broken if fix.verified is None]
    if failed:
        label, fix = failed[0]
        at = versions_text([label], order, axis=False)
        return f"{change}; not verified: with it, {style.text(fix.still or 'it')} on {at}"
    if untried:
        return f"{change}; not verified on {versions_text(untried, order, axis=False)}: the change was not run there"
    elsewhere = f", and on {versions_text(ran, order, axis=False)} nothing passes it what it cannot take" if ran else ""
    return f"{change}; verified: with it the class runs on {where}{elsewhere}"


def _shape(site: str) -> str:
    return site.partition(" at ")[0]


def _at(site: str) -> str:
    return site.partition(" at ")[2]


def deprecated_line(overrides: Sequence[Override], order: Sequence[str], several: bool, style: Style = MARKDOWN) -> str:
    """`Deprecated in transformers 5.24.0: `a` (use `b`), `c`.`: every deprecated audited name, on one line; with
    several subjects, a name deprecated alike in several classes is said once, naming them."""
    since: dict[str, dict[tuple[str, str | None], list[str]]] = {}
    for o in overrides:
        if o.deprecated is not None:
            owners = since.setdefault(o.deprecated.since, {}).setdefault((o.name, o.deprecated.replacement), [])
            owners.append(name_of_subject(o.target, PLAIN))
    said = []
    for label, names in since.items():
        parts = []
        for (name, replacement), owners in names.items():
            use = f" (use {style.code(replacement)})" if replacement else ""
            shown = _listed(owners[:3]) if len(owners) <= 3 else f"{', '.join(owners[:2])} and {len(owners) - 2} more"
            parts.append(f"{style.code(name)}{use}" + (f" in {style.text(shown)}" if several else ""))
        said.append(f"in {versions_text([label], order)}: {'; '.join(parts) if several else ', '.join(parts)}")
    return f"Deprecated {'; '.join(said)}." if said else ""


# The evidence: per override, what differs (the call a user makes, with the override and deleted), each error once.

EVIDENCE_ROWS = 8  # rows of one override's table; the JSON has the rest
EVIDENCE_VALUE = 100  # characters of a value in it


@dataclass(frozen=True)
class Evidence:
    """What differs for one override across releases, in words: table rows (releases, call, with it, deleted), the
    errors they name (each once), lines for the releases with nothing to show in a table, and what was left out."""

    rows: tuple[tuple[str, str, str, str], ...]
    errors: tuple[str, ...]
    notes: tuple[str, ...]
    left_out: int  # contrasts of warnings, or observed on one side only: in the JSON and CSV
    cut: int  # rows past EVIDENCE_ROWS


def _labels(contrasts: Sequence[Contrast]) -> dict[str, str]:
    """What a table calls each error: its type, numbered where one type has several messages."""
    errors = list(dict.fromkeys(e for c in contrasts for e in _errors(c.observation) if e))
    types = [e.split(":", 1)[0] for e in errors]
    return {
        e: t if types.count(t) == 1 else f"{t} ({i})" for i, (e, t) in enumerate(zip(errors, types, strict=True), 1)
    }


def _errors(o: Observation) -> tuple[str | None, str | None]:
    return error_of(o, o.override), error_of(o, o.base)


def what_differs(
    override: Override, order: Sequence[str], style: Style = PLAIN, above: Mapping[str, str] | None = None
) -> Evidence:
    """The contrasts behind each conclusion, grouped: a call whose two sides read alike on several releases is one
    row naming them, and calls whose sides and releases agree share a row. `above`: as for `reason`."""
    shown: list[tuple[str, tuple[str, str], str, str]] = []  # (label, (title, name), with it, deleted)
    left_out = 0
    contrasts = [c for _, conclusion in override.by_release for c in conclusion.contrasts]
    named = _labels(contrasts)
    for label, conclusion in override.oldest_first:
        for c in conclusion.contrasts:
            o, errors = c.observation, _errors(c.observation)
            if o.name == ObservationName.WARNINGS or (not any(errors) and (o.override is None or o.base is None)):
                left_out += 1  # warnings, or what a probe did not get to on one side
                continue
            if any(errors):
                sides_ = tuple(f"raises {named[e]}" if e else "runs" for e in errors)
            else:
                sides_ = sides(o.override, o.base, style, EVIDENCE_VALUE)
            call = (style.text(c.title), "" if o.name == ObservationName.ERROR else style.text(o.name))
            shown.append((label, call, *sides_))
    releases: dict[tuple[tuple[str, str], str, str], list[str]] = {}
    for label, call, mine, theirs in shown:
        releases.setdefault((call, mine, theirs), []).append(label)
    rows: dict[tuple[str, str, str], dict[str, list[str]]] = {}
    for (call, mine, theirs), labels in releases.items():
        names = rows.setdefault((versions_text(labels, order, axis=False), mine, theirs), {}).setdefault(call[0], [])
        names += [call[1]] if call[1] else []
    table = [(where, _calls(calls), mine, theirs) for (where, mine, theirs), calls in rows.items()]
    used = {e for row in table[:EVIDENCE_ROWS] for e, tag in named.items() if f"raises {tag}" in row[2:]}
    messages = {tag: e.partition(":")[2].strip() for e, tag in named.items() if e in used}
    errors = tuple(f"{tag}: {style.text(message)}" for tag, message in messages.items() if message)
    return Evidence(
        tuple(table[:EVIDENCE_ROWS]),
        errors,
        _notes(override, order, style, above or {}),
        left_out,
        max(0, len(table) - EVIDENCE_ROWS),
    )


CALLS = 4  # probes named in one row of an evidence table, and observations per probe


def _calls(calls: dict[str, list[str]]) -> str:
    """`entry points (activation_checkpointing_enable); Trainer step (default, with_kwargs)`, at most CALLS each."""

    def one(title: str, names: list[str]) -> str:
        shown = ", ".join(names[:CALLS]) + (f" and {len(names) - CALLS} more" if len(names) > CALLS else "")
        return f"{title} ({shown})" if names else title

    said = [one(title, names) for title, names in list(calls.items())[:CALLS]]
    return "; ".join(said) + (f"; and {len(calls) - CALLS} more probes" if len(calls) > CALLS else "")


def _notes(override: Override, order: Sequence[str], style: Style, above: Mapping[str, str]) -> tuple[str, ...]:
    """A line per conclusion that no table row shows (redundant, orphaned, inconclusive, could not run), and where
    the other context carried one."""
    said: dict[tuple[ConclusionKind, str], list[str]] = {}
    hidden: list[str] = []
    for label, c in override.by_release:
        if c.context == evidence.WITHOUT_REST:
            hidden.append(label)
        if c.kind in (REDUNDANT, ORPHANED, UNKNOWN, COULD_NOT_RUN):
            why = "nothing differs" if c.kind == REDUNDANT else above.get(c.why or "") or style.text(c.why or "")
            said.setdefault((c.kind, why), []).append(label)
    lines = [
        f"{kind} on {versions_text(labels, order, axis=False)}" + (f": {why}" if why else "")
        for (kind, why), labels in sorted(said.items(), key=lambda item: ORDER.index(item[0][0]))
    ]
    if hidden:
        lines.append(
            f"on {versions_text(hidden, order, axis=False)}: with the other audited overrides deleted"
            " (as shipped, the same failure hides it)"
        )
    return tuple(lines)


def alike(found: Sequence[tuple[Override, Evidence]]) -> list[tuple[tuple[Override, ...], Evidence]]:
    """Overrides of one class with the same advice whose evidence reads alike, said once (in the first one's place):
    the classes that could not be built, say, whose every override says only that."""
    together: dict[tuple[AdviceKind, Evidence], list[Override]] = {}
    for override, said in found:
        together.setdefault((override.advice.kind, said), []).append(override)
    return [(tuple(overrides), said) for (_, said), overrides in together.items()]


def left_out(count: int) -> str:
    """What an evidence table leaves to the JSON and CSV."""
    which = "observation" if count == 1 else "observations"
    return f"{count} more {which} (warnings, or made on one side only) in the JSON and CSV"


# Context beside the first screen: what a package target stood for, whether a declared range is honest.


def _run_of(versions: Sequence[str], tested: Sequence[str]) -> str:
    """`5.0.0 … 5.24.0`: versions as `versions_text` says them, among the tested ones (oldest first)."""
    return versions_text(list(versions), list(reversed(tested)))


def range_line(check: RangeCheck, style: Style = MARKDOWN) -> str:
    """Whether a declared range is honest, and the range the measurements support: "`gliner` 0.2.29 allows
    transformers>=4.51.3,<5.17.0; `tie_weights` is harmful on 5.0.0 … 5.16.1: cap it or fix the override"."""
    d = check.declared
    who = style.code(d.distribution) + (f" {d.version}" if d.version else "")
    allows = f"{who} allows {d.package}{d.specifier}" if d.specifier else f"{who} allows any {d.package}"
    if not check.tested:
        return f"{allows}; no tested release told anything about it."
    inside = set(check.allowed)
    problems = [
        f"{style.code(name)} is harmful on {_run_of(versions, check.tested)}"
        for name, versions in check.harmful
        if inside & set(versions)
    ]
    if inside & set(check.unimportable):
        problems.append(
            f"the class cannot be imported on {_run_of(sorted(inside & set(check.unimportable)), check.tested)}"
        )
    supported = f"the measurements support {d.package}{check.supported}" if check.supported else "nothing tested runs"
    if problems:
        return f"{allows}; {'; '.join(problems)}: cap it or fix the override ({supported})."
    beyond = f"; it also runs on {_run_of(check.beyond, check.tested)}, outside it" if check.beyond else ""
    outside = [v for v in check.breaking if v not in inside]
    if outside:
        beyond += f"; it breaks on {_run_of(outside, check.tested)}, outside it"
    tested = _run_of(check.allowed, check.tested) if check.allowed else "none of the tested releases"
    return f"{allows}: honest on {tested}{beyond} ({supported})."


def found_line(target: str, found: Sequence[Discovery], style: Style = MARKDOWN) -> str:
    """What a module or package target stood for in the cells (newest first): the classes audited, those of a kind
    no probe family covers, what was left out and what could not be imported."""
    subjects = list(dict.fromkeys(t for d in found for t in d.subjects))
    unaudited = dict(pair for d in found for pair in d.unaudited)
    excluded = list(dict.fromkeys(e for d in found for e in d.excluded))
    skipped = dict(pair for d in found for pair in d.skipped)

    def names(targets: Sequence[str]) -> str:
        return ", ".join(style.code(t.rsplit(":", 1)[-1]) for t in targets)

    said_ = [
        f"{style.strong(style.code(target))}: "
        + (f"{len(subjects)} classes found, {names(subjects)}" if subjects else "no class to audit found")
    ]
    through = {t: kind.removeprefix(THROUGH) for t, kind in unaudited.items() if kind.startswith(THROUGH)}
    unaudited = {t: kind for t, kind in unaudited.items() if t not in through}
    if through:
        said_.append(
            "abstract, audited through the concrete classes that inherit their overrides: "
            + ", ".join(
                f"{style.code(t.rsplit(':', 1)[-1])} (through {names(c.split(', '))})" for t, c in through.items()
            )
        )
    if unaudited:
        said_.append(
            "not audited (no probe family covers their kind): "
            + ", ".join(f"{style.code(t.rsplit(':', 1)[-1])} ({kind})" for t, kind in unaudited.items())
        )
    if excluded:
        said_.append(f"left out: {', '.join(style.code(e) for e in excluded)}")
    if skipped:
        said_.append(
            "could not be imported: " + ", ".join(f"{style.code(m)} ({style.text(why)})" for m, why in skipped.items())
        )
    return "; ".join(said_) + "."
