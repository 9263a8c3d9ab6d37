"""A sentence per conclusion: the verdict's phrase, a line per conclusion and its releases, the recommendation, and a
subject's summary (what the class as shipped does across releases, deprecations, what told nothing, your tests)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from compat_matrix import probes
from compat_matrix.host.advice import Advice, advise
from compat_matrix.host.conclude import (
    COULD_NOT_RUN,
    DIFFERENTLY,
    HARMFUL,
    NEEDED,
    ORDER,
    ORPHANED,
    REDUNDANT,
    UNKNOWN,
    Conclusion,
    Contrast,
    error_of,
)
from compat_matrix.host.overrides import SubjectConclusions
from compat_matrix.host.shipped import FAILS
from compat_matrix.host.tests_seen import TestsSeen
from compat_matrix.host.verdict import Verdict
from compat_matrix.host.wording.style import MARKDOWN, Style, sides
from compat_matrix.host.wording.versions import glance, versions_text
from compat_matrix.shared import evidence
from compat_matrix.shared.vocabulary import AdviceKind, ConclusionKind, ObservationName, VerdictKind


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
        rest = [f"{k} on {versions_text(advice.on(k), order)}" for k in (REDUNDANT, UNKNOWN) if advice.on(k)]
        return f"{' and '.join(kinds)}" + (f"; {', '.join(rest)}" if rest else "") + "." + untested
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
    titles = probe_titles(answer)

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


def probe_titles(answer: SubjectConclusions) -> dict[str, str]:
    """What to call each probe: as the cells said, else as the registry says."""
    said = {name: title for row in answer.rows if row.row.result for name, title in row.row.result.titles}
    return {**probes.titles(), **said}


def told_nothing(answer: SubjectConclusions, order: Sequence[str], style: Style = MARKDOWN) -> str:
    """`save and load (ValueError: …) on transformers 4.57.6 … 5.24.0; generate (…) on …`: the probes whose two
    variants failed identically or found nothing, which are no evidence of anything; empty if none."""
    where: dict[tuple[str, str], list[str]] = {}
    titles = probe_titles(answer)
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
