"""What the observations mean for a maintainer: a conclusion per cell and subject, and across versions a
recommendation. Pure functions over results and verdicts; standard library only.

The rules, per cell and subject:
- `redundant`: the verdict is `same`: deleting the override(s) changes nothing there;
- `harmful`: something errors with the override and runs without it (and nothing works only with it);
- `needed`: something runs with the override and errors without it (and nothing errors only with it);
- `behaves differently`: values differ with no such one-sided error (or errors on both sides);
- `inconclusive`: the verdict is `inconclusive` or `no probe`;
- `could not run`: the cell or subject failed (`install-failed`, `crashed`, `timed-out`, …).
Across the tested versions: deleting is safe where every version is redundant or harmful (and fixes the harmful
ones); it is not where any version needs the override; differences and missing evidence are named.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from compat_matrix.results import Observation, SubjectResult, failure_in, one_line
from compat_matrix.verdict import DIFFERS, INCONCLUSIVE, NO_PROBE, SAME, Verdict

REDUNDANT = "redundant"
HARMFUL = "harmful"
NEEDED = "needed"
DIFFERENTLY = "behaves differently"
UNKNOWN = "inconclusive"
COULD_NOT_RUN = "could not run"
KINDS = (HARMFUL, NEEDED, DIFFERENTLY, UNKNOWN, COULD_NOT_RUN, REDUNDANT)  # the order conclusions are listed in
SHORT = 48  # characters of a value in a phrase
_DEPRECATED = re.compile(r"deprecat", re.IGNORECASE)
_REPLACEMENT = re.compile(r"[Uu]se `([\w.]+)`")
Where = tuple[tuple[str, tuple[str, ...]], ...]  # (probe title, observation names): (("Trainer step", ("default",)),)


@dataclass(frozen=True)
class Contrast:
    """One way the variants differ, in words: where (probe titles, each with its observations), and the two sides
    in short."""

    kind: str  # HARMFUL, NEEDED or DIFFERENTLY
    where: Where
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


@dataclass(frozen=True)
class Conclusion:
    """The conclusion for one cell and subject."""

    kind: str
    contrasts: tuple[Contrast, ...] = ()
    why: str | None = None  # for inconclusive and could not run

    def phrase(self, verdict: Verdict) -> str:
        """The verdict cell of the main table: the verdict, and the differing values in a short phrase."""
        if verdict.verdict != DIFFERS:
            return f"{verdict.verdict}: {verdict.reason}" if verdict.reason else verdict.verdict
        parts = [c.text(detailed=False) for c in grouped(self.contrasts)]
        shown = "; ".join(parts[:2]) + (f"; +{len(parts) - 2} more" if len(parts) > 2 else "")
        return f"differs: {shown}{verdict.following}"


def error_of(observation: Observation, value: Any) -> str | None:
    """The error a side shows in an observation: the probe's own `error`, or an entry recorded as "error: …"."""
    if observation.name == "error":
        return value if isinstance(value, str) else None
    return failure_in(value)


_MARKUP = re.compile(r"([*_\[\]])")


def plain(text: str) -> str:
    """Observed text (an error, a reason, a name a user's probe chose) made safe to quote in a sentence of the
    report's own, which marks code with backticks and emphasis with asterisks: one line, no backticks, markdown's
    emphasis and link characters escaped. HTML and `|` are escaped when the sentence is written out."""
    return _MARKUP.sub(r"\\\1", one_line(text).replace("`", "'"))


def short(value: Any, limit: int = SHORT) -> str:
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    text = ", ".join(f"{k}={short(v)}" for k, v in value.items()) if isinstance(value, dict) else plain(str(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _flat(item, f"{prefix}{key}.").items()}
    return {prefix.rstrip("."): value}


def sides(override: Any, base: Any) -> tuple[str, str]:
    """The two values in short, naming only what differs: dict keys whose values differ, list items on one side."""
    if isinstance(override, list) and isinstance(base, list) and all(isinstance(v, str) for v in override + base):
        mine, theirs = [v for v in override if v not in base], [v for v in base if v not in override]
        return short(mine) if mine else "nothing more", short(theirs) if theirs else "nothing more"
    flat_o, flat_b = _flat(override), _flat(base)
    if len(flat_o) > 1 or len(flat_b) > 1:
        keys = [k for k in dict.fromkeys([*flat_o, *flat_b]) if flat_o.get(k) != flat_b.get(k)]
        return short({k: flat_o.get(k) for k in keys}), short({k: flat_b.get(k) for k in keys})
    return short(override), short(base)


def contrast(observation: Observation, title: str) -> Contrast:
    title = plain(title) + (" warnings" if observation.name == "warnings" else "")
    what = ((title, () if observation.name in ("error", "warnings") else (plain(observation.name),)),)
    on_override, on_base = error_of(observation, observation.override), error_of(observation, observation.base)
    if on_override and not on_base:
        return Contrast(HARMFUL, what, _error_type(on_override), "runs", plain(on_override))
    if on_base and not on_override:
        return Contrast(NEEDED, what, "runs", _error_type(on_base), plain(on_base))
    if on_override and on_base:
        return Contrast(DIFFERENTLY, what, _error_type(on_override), _error_type(on_base))
    return Contrast(DIFFERENTLY, what, *sides(observation.override, observation.base))


def _error_type(error: str) -> str:
    return plain(error.split(":", 1)[0])


def grouped(contrasts: tuple[Contrast, ...]) -> list[Contrast]:
    """Contrasts with the same two sides and kind merged into one, naming every place they were seen."""
    groups: dict[tuple[str, str, str], dict[str, list[str]]] = {}
    errors: dict[tuple[str, str, str], str | None] = {}
    for c in contrasts:
        key = (c.kind, c.override, c.base)
        errors.setdefault(key, c.error)
        for title, names in c.where:
            groups.setdefault(key, {}).setdefault(title, []).extend(names)
    return [
        Contrast(kind, tuple((t, tuple(n)) for t, n in where.items()), o, b, errors[kind, o, b])
        for (kind, o, b), where in groups.items()
    ]


def from_contrasts(contrasts: list[Contrast]) -> Conclusion:
    """harmful, needed or behaves differently, by the rules above; redundant when nothing differs."""
    if not contrasts:
        return Conclusion(REDUNDANT)
    kinds = {c.kind for c in contrasts}
    if HARMFUL in kinds and NEEDED not in kinds:
        kind = HARMFUL
    elif NEEDED in kinds and HARMFUL not in kinds:
        kind = NEEDED
    else:
        kind = DIFFERENTLY
    return Conclusion(kind, tuple(sorted(contrasts, key=lambda c: KINDS.index(c.kind))))


def _title(observation: Observation, titles: dict[str, str]) -> str:
    return titles.get(observation.probe, observation.probe.replace("_", " "))


def conclude(subject: SubjectResult | None, verdict: Verdict, titles: dict[str, str]) -> Conclusion:
    """The conclusion for one cell and subject: what deleting every audited method does."""
    if verdict.verdict == SAME:
        return Conclusion(REDUNDANT)
    if verdict.verdict in (INCONCLUSIVE, NO_PROBE):
        return Conclusion(UNKNOWN, why=plain(verdict.reason or verdict.verdict))
    if verdict.verdict != DIFFERS or subject is None:
        return Conclusion(
            COULD_NOT_RUN, why=plain(f"{verdict.verdict}: {verdict.reason}" if verdict.reason else verdict.verdict)
        )
    differing = [o for o in subject.observations if o.carries and not o.same]
    return from_contrasts([contrast(o, _title(o, titles)) for o in differing])


def conclude_method(subject: SubjectResult | None, verdict: Verdict, method: str, titles: dict[str, str]) -> Conclusion:
    """What deleting `method` alone does, from the variant with only that method deleted; where the two columns
    agree, that variant did not run and deleting it is as redundant as deleting them all."""
    if verdict.verdict != DIFFERS or subject is None or len(subject.methods) < 2:
        return conclude(subject, verdict, titles)
    alone = [replace(o, base=dict(o.without)[method]) for o in subject.observations if method in dict(o.without)]
    if not alone:
        return Conclusion(UNKNOWN, why=f"the variant without `{method}` alone did not run")
    return from_contrasts([contrast(o, _title(o, titles)) for o in alone if o.carries and not o.same])


def deprecations(subject: SubjectResult | None) -> tuple[tuple[str, str | None], ...]:
    """(audited name, replacement or None) for every deprecation warning of the base implementation that names an
    audited method, e.g. a FutureWarning "`x` is deprecated … Use `y` instead"."""
    if subject is None:
        return ()
    texts = sorted({w for o in subject.observations if o.name == "warnings" for w in o.base or ()})
    found = []
    for method in subject.methods:
        text = next((t for t in texts if f"`{method}`" in t and _DEPRECATED.search(t)), None)
        if text is not None:
            replacement = _REPLACEMENT.search(text)
            found.append((method, replacement.group(1) if replacement else None))
    return tuple(found)


@dataclass(frozen=True)
class Row:
    """One tested version of one subject, as the summary needs it."""

    label: str  # "transformers 5.24.0"
    verdict: Verdict
    conclusion: Conclusion
    deprecations: tuple[tuple[str, str | None], ...] = ()
    per_method: tuple[tuple[str, Conclusion], ...] = ()  # (method, what deleting it alone does)


@dataclass(frozen=True)
class Summary:
    """Across the tested versions of one subject: a line per conclusion (per method, where there are several),
    deprecations, the recommendation, and where the verdict changes (`glance`)."""

    lines: tuple[str, ...]
    deprecations: tuple[str, ...]
    recommendation: str
    glance: str
    tests: TestsSeen | None = None


def versions_text(labels: list[str], order: list[str]) -> str:
    """`transformers 4.57.6, 5.14.1 … 5.24.0`: oldest first, a run of three or more neighbouring tested versions
    (in `order`, newest first) as its ends, and the shared axis name said once."""
    runs: list[list[str]] = []
    previous = None
    for label in reversed(order):
        if label in labels:
            if previous in labels and runs:
                runs[-1].append(label)
            else:
                runs.append([label])
        previous = label
    shared = {label.split(" ", 1)[0] for label in labels}
    simple = len(shared) == 1 and all(" " in label and "," not in label for label in labels)

    def name(label: str) -> str:
        return label.split(" ", 1)[1] if simple else label

    said = [f"{name(r[0])} … {name(r[-1])}" if len(r) > 2 else ", ".join(map(name, r)) for r in runs]
    return (f"{shared.pop()} " if simple else "") + (", " if simple else "; ").join(said)


def _methods(methods: tuple[str, ...]) -> str:
    if len(methods) == 1:
        return f"the override of `{methods[0]}`"
    return ("both overrides" if len(methods) == 2 else f"all {len(methods)} overrides") + (
        f" ({', '.join(f'`{m}`' for m in methods)})"
    )


def _line(conclusion: Conclusion, follows: tuple[str, ...], where: str) -> str:
    """The line that says one conclusion, on the versions `where`."""
    kind = conclusion.kind
    pinned = f" (follows {', '.join(f'`{m}`' for m in follows)})" if follows else ""
    groups = grouped(conclusion.contrasts)
    if kind == REDUNDANT:
        return f"**redundant** on {where}: deleting changes nothing there."
    if kind in (UNKNOWN, COULD_NOT_RUN):
        return f"**{kind}** on {where}: {conclusion.why}"
    if kind in (HARMFUL, NEEDED):
        said = "; ".join(f"{g.what} raise “{g.error}”" for g in groups if g.kind == kind)
        side = ("with", "without") if kind == HARMFUL else ("without", "with")
        return f"**{kind}** on {where}{pinned}: {side[0]} the override, {said}; {side[1]} it they run."
    return f"**behaves differently** on {where}{pinned}: " + "; ".join(g.text() for g in groups) + "."


def _lines(rows: list[tuple[str, Conclusion, tuple[str, ...]]], order: list[str]) -> list[str]:
    """Versions whose conclusion is said the same way share a line; lines in the order of KINDS."""
    shared: dict[tuple[str, str], tuple[Conclusion, tuple[str, ...], list[str]]] = {}
    for label, conclusion, follows in rows:
        key = (conclusion.kind, _line(conclusion, follows, ""))
        shared.setdefault(key, (conclusion, follows, []))[2].append(label)
    ordered = sorted(shared.items(), key=lambda item: KINDS.index(item[0][0]))
    return [_line(c, follows, versions_text(labels, order)) for _, (c, follows, labels) in ordered]


def _follows(verdict: Verdict) -> tuple[str, ...]:
    return verdict.follows if verdict.per_method or len(verdict.follows) == 1 else ()


def summarize(methods: tuple[str, ...], rows: list[Row]) -> Summary:
    """`rows` newest first. With several audited methods and the variants that delete one alone, a line per
    method and conclusion, and advice per method; else a line per conclusion, and one recommendation."""
    order = [row.label for row in rows]
    if len(methods) > 1 and any(row.verdict.per_method for row in rows):
        by_method = {m: [(r.label, dict(r.per_method).get(m, r.conclusion)) for r in rows] for m in methods}
        said = [f"`{m}`: {line}" for m in methods for line in _lines([(at, c, ()) for at, c in by_method[m]], order)]
        merged: dict[tuple[str, str], list[str]] = {}  # methods with the same advice, said once
        for m in methods:
            merged.setdefault(advice(by_method[m], order), []).append(f"`{m}`")
        recommendation = " ".join(f"{verb} {', '.join(ms)}: {why}" for (verb, why), ms in merged.items())
    else:
        said = _lines([(r.label, r.conclusion, _follows(r.verdict)) for r in rows], order)
        recommendation = recommend(methods, [(r.label, r.conclusion) for r in rows], order)
    first_seen: dict[tuple[str, str | None], str] = {}
    for row in reversed(rows):  # oldest first: the first version that warns
        for method, replacement in row.deprecations:
            first_seen.setdefault((method, replacement), row.label)
    deprecated = tuple(
        f"`{m}` deprecated in {label}" + (f" in favour of `{r}`" if r else "") for (m, r), label in first_seen.items()
    )
    return Summary(tuple(said), deprecated, recommendation, glance(rows))


def _by_kind(rows: list[tuple[str, Conclusion]]) -> dict[str, list[str]]:
    by_kind: dict[str, list[str]] = {}
    for label, conclusion in rows:
        by_kind.setdefault(conclusion.kind, []).append(label)
    return by_kind


def advice(rows: list[tuple[str, Conclusion]], order: list[str]) -> tuple[str, str]:
    """What to do with one override, from its conclusions on every tested version: (Delete|Keep|Review, why)."""
    by_kind = _by_kind(rows)
    untested = f" Not tested: {versions_text(by_kind[COULD_NOT_RUN], order)}." if COULD_NOT_RUN in by_kind else ""
    if not set(by_kind) - {COULD_NOT_RUN}:
        return "Review", "nothing ran." + untested
    if NEEDED in by_kind:
        return "Keep", f"needed on {versions_text(by_kind[NEEDED], order)}." + untested
    if set(by_kind) - {COULD_NOT_RUN} <= {REDUNDANT, HARMFUL}:
        fixes = f" and fixes {versions_text(by_kind[HARMFUL], order)}" if HARMFUL in by_kind else ""
        return "Delete", f"safe on every tested version{fixes}." + untested
    return "Review", f"deleting it {_caveats(by_kind, order)}." + untested


def _caveats(by_kind: dict[str, list[str]], order: list[str]) -> str:
    caveats = []
    if DIFFERENTLY in by_kind:
        caveats.append(f"changes behaviour on {versions_text(by_kind[DIFFERENTLY], order)}: review the differences")
    if UNKNOWN in by_kind:
        caveats.append(f"is not established on {versions_text(by_kind[UNKNOWN], order)}")
    return " and ".join(caveats)


def recommend(methods: tuple[str, ...], rows: list[tuple[str, Conclusion]], order: list[str]) -> str:
    """What to do with the override(s) together, as a sentence, by the same rules as `advice`."""
    verb, why = advice(rows, order)
    which = _methods(methods)
    if verb == "Keep":
        return f"Keep {which}: {why}"
    if verb == "Delete":
        return f"Deleting {which} is {why}"
    if why.startswith("nothing ran"):
        return "Nothing ran, so there is nothing to recommend." + why.removeprefix("nothing ran.")
    return f"Deleting {which} " + why.removeprefix("deleting it ")


def glance(rows: list[Row]) -> str:
    """Where the verdict changes, oldest to newest: `same 4.57.6 … 5.14.1 · differs 5.24.0`; where the variants
    that delete one audited method alone ran, also where that changes, when it says more (`; `m`: same … · …`)."""
    said = main = _runs([(row.label, row.verdict.verdict) for row in rows])
    methods = list(dict.fromkeys(m for row in rows for m, _ in row.per_method))
    for method in methods if len(methods) > 1 and any(row.verdict.per_method for row in rows) else ():
        alone = _runs([(row.label, _verdict_of(dict(row.per_method).get(method), row)) for row in rows])
        if " · " in alone and alone != main:
            said += f"; `{method}`: {alone}"
    return said


def _verdict_of(conclusion: Conclusion | None, row: Row) -> str:
    """The verdict that deleting one method alone gets (the row's own where that did not run)."""
    if conclusion is None or conclusion.kind == COULD_NOT_RUN:
        return row.verdict.verdict
    return {REDUNDANT: SAME, UNKNOWN: INCONCLUSIVE}.get(conclusion.kind, DIFFERS)


def _runs(labelled: list[tuple[str, str]]) -> str:
    """`same 4.57.6 … 5.14.1 · differs 5.24.0` from (label, verdict) newest first: runs of one verdict, oldest first."""
    runs: list[tuple[str, list[str]]] = []
    for label, verdict in reversed(labelled):
        version = label.split(" ", 1)[-1]
        if runs and runs[-1][0] == verdict:
            runs[-1][1].append(version)
        else:
            runs.append((verdict, [version]))
    return " · ".join(f"{v} {vs[0]}" + (f" … {vs[-1]}" if len(vs) > 1 else "") for v, vs in runs)


def add_conclusions(subjects: Any, titles: dict[str, str]) -> Any:
    """The `subjects` frame (with verdicts) with each row's Conclusion, what deleting each method alone does, its
    verdict phrase and its deprecations. `titles`: what to call each probe, where the cell did not say."""
    pairs = list(zip(subjects["result"], subjects["decided"], strict=True))
    named = [{**titles, **dict(r.titles)} if r is not None else titles for r, _ in pairs]
    conclusions = [conclude(r, d, t) for (r, d), t in zip(pairs, named, strict=True)]
    per_method = [
        tuple((m, conclude_method(r, d, m, t)) for m in (r.methods if r is not None else ()))
        for (r, d), t in zip(pairs, named, strict=True)
    ]
    return subjects.assign(
        conclusion=conclusions,
        per_method=per_method,
        phrase=[c.phrase(d) for c, (_, d) in zip(conclusions, pairs, strict=True)],
        deprecations=[deprecations(r) for r in subjects["result"]],
    )


def summaries(subjects: Any, expected: tuple[Any, ...]) -> dict[str, Summary]:
    """Per subject of the matrix, in file order: the Summary across its rows (newest first)."""
    out = {}
    for subject in expected:
        rows = subjects[subjects["target"] == subject.target].to_dict("records")
        ran = next((r["result"].methods for r in rows if r["result"] is not None and r["result"].methods), None)
        said = [Row(r["label"], r["decided"], r["conclusion"], r["deprecations"], r["per_method"]) for r in rows]
        seen = seen_tests([(r["label"], r["result"]) for r in rows])
        summary = summarize(ran or subject.methods, said)
        out[subject.target] = replace(summary, tests=seen, recommendation=summary.recommendation + _needing(seen))
    return out


PASSING, FAILING = ("passed",), ("failed", "error")
TEST_COLUMNS = ("needs the override", "fails only with the override", "passes in both", "fails in both", "other")


@dataclass(frozen=True)
class TestsSeen:
    """What one subject's own tests say across the tested versions: per version, the tests in each of
    TEST_COLUMNS; per test, the broken versions it catches; the tests that catch none; the tests that catch
    nothing another test does not catch."""

    __test__ = False  # not a test class, for pytest's collection of modules that import it

    per_version: tuple[tuple[str, tuple[tuple[str, ...], ...]], ...]  # (label, one tuple of tests per column)
    catches: tuple[tuple[str, str], ...]  # (test, what it catches, said once or per version)
    catch_none: tuple[str, ...]
    adds_nothing: tuple[tuple[str, str], ...]  # (test, a test that catches all it catches)
    mutants: tuple[str, ...]  # the broken versions the tests ran against


def short_tests(ids: list[str]) -> dict[str, str]:
    """Test ids without the part they all share (`tests/test_x.py::`)."""
    prefix = ids[0].rsplit("::", 1)[0] + "::" if ids else ""
    while prefix and not all(i.startswith(prefix) for i in ids):
        prefix = prefix[:-2].rsplit("::", 1)[0] + "::" if "::" in prefix[:-2] else ""
    return {i: i.removeprefix(prefix) or i for i in ids}


def _column(override: str, base: str) -> int:
    if override in PASSING and base in FAILING:
        return 0
    if override in FAILING and base in PASSING:
        return 1
    if override in PASSING and base in PASSING:
        return 2
    return 3 if override in FAILING and base in FAILING else 4


def seen_tests(rows: list[tuple[str, SubjectResult | None]]) -> TestsSeen | None:
    """`rows`: (label, result) newest first. None when the subject names no tests (or none ran)."""
    ran = [(label, r) for label, r in rows if r is not None and r.tests]
    if not ran:
        return None
    names = short_tests(list(dict.fromkeys(t.id for _, r in ran for t in r.tests)))
    per_version = []
    for label, result in ran:
        columns: list[list[str]] = [[] for _ in TEST_COLUMNS]
        for t in result.tests:
            columns[_column(t.override, t.base)].append(names[t.id])
        per_version.append((label, tuple(tuple(c) for c in columns)))
    mutated = [(label, r) for label, r in ran if r.mutants]
    caught: dict[str, dict[str, tuple[str, ...]]] = {}
    for label, result in mutated:
        for t in result.tests:
            if t.override in PASSING:
                caught.setdefault(names[t.id], {})[label] = t.catches
    catches = [(test, _caught_text(by_label)) for test, by_label in caught.items()]
    union = {test: set().union(*by_label.values()) for test, by_label in caught.items()}
    catch_none = tuple(test for test, found in union.items() if not found)
    adds_nothing = tuple((test, other) for test in union if union[test] and (other := _covered_by(test, union)))
    every = tuple(dict.fromkeys(m for _, r in mutated for m in r.mutants))
    return TestsSeen(tuple(per_version), tuple(catches), catch_none, adds_nothing, every)


def _needing(seen: TestsSeen | None) -> str:
    """The recommendation's last word when the user's own tests need the override somewhere."""
    if seen is None:
        return ""
    needing = [(label, columns[0]) for label, columns in seen.per_version if columns[0]]
    if not needing:
        return ""
    tests = list(dict.fromkeys(plain(t) for _, needed in needing for t in needed))
    order = [label for label, _ in seen.per_version]
    where = versions_text([label for label, _ in needing], order)
    return f" But your tests {', '.join(tests)} pass only with the override on {where}."


def _caught_text(by_label: dict[str, tuple[str, ...]]) -> str:
    """What a test catches: once when the same on every version, else per version."""
    said = {", ".join(c) or "none" for c in by_label.values()}
    if len(said) == 1:
        return said.pop()
    return "; ".join(f"{label}: {', '.join(c) or 'none'}" for label, c in by_label.items())


def _covered_by(test: str, union: dict[str, set[str]]) -> str | None:
    """Another test that catches every broken version `test` catches; of two that catch the same, the first
    listed covers the later."""
    order = list(union)
    for other, more in union.items():
        if other != test and union[test] <= more and (union[test] < more or order.index(other) < order.index(test)):
            return other
    return None
