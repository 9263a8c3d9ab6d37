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
from dataclasses import dataclass
from typing import Any

from compat_matrix.results import Observation, SubjectResult, one_line
from compat_matrix.verdict import DIFFERS, INCONCLUSIVE, NO_PROBE, SAME, Verdict

REDUNDANT = "redundant"
HARMFUL = "harmful"
NEEDED = "needed"
DIFFERENTLY = "behaves differently"
UNKNOWN = "inconclusive"
NOT_RUN = "could not run"
KINDS = (HARMFUL, NEEDED, DIFFERENTLY, UNKNOWN, NOT_RUN, REDUNDANT)  # the order conclusions are listed in
SHORT = 48  # characters of a value in a phrase
_DEPRECATED = re.compile(r"deprecat", re.IGNORECASE)
_REPLACEMENT = re.compile(r"[Uu]se `([\w.]+)`")


@dataclass(frozen=True)
class Contrast:
    """One way the variants differ, in words: where (probe titles, each with its observations), and the two sides
    in short."""

    kind: str  # HARMFUL, NEEDED or DIFFERENTLY
    where: tuple[
        tuple[str, tuple[str, ...]], ...
    ]  # (probe title, observation names), e.g. ("Trainer step", ("default",))
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
        follows = ""
        if verdict.per_method:
            follows = f" [follows {', '.join(verdict.follows)}]" if verdict.follows else " [only with all deleted]"
        return f"differs: {shown}{follows}"


def error_of(observation: Observation, value: Any) -> str | None:
    """The error a side shows in an observation: the probe's own `error`, or an entry recorded as "error: …"."""
    if observation.name == "error":
        return value if isinstance(value, str) else None
    if isinstance(value, str) and value.startswith("error: "):
        return value.removeprefix("error: ")
    return None


def plain(text: str) -> str:
    """Observed text made safe to quote in a sentence that marks code with backticks: one line, no backticks."""
    return one_line(text).replace("`", "'")


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
        only = ([v for v in override if v not in base], [v for v in base if v not in override])
        return tuple(short(items) if items else "nothing more" for items in only)  # type: ignore[return-value]
    flat_o, flat_b = _flat(override), _flat(base)
    if len(flat_o) > 1 or len(flat_b) > 1:
        keys = [k for k in dict.fromkeys([*flat_o, *flat_b]) if flat_o.get(k) != flat_b.get(k)]
        return short({k: flat_o.get(k) for k in keys}), short({k: flat_b.get(k) for k in keys})
    return short(override), short(base)


def contrast(observation: Observation, title: str) -> Contrast:
    if observation.name == "warnings":
        title += " warnings"
    what = ((title, () if observation.name in ("error", "warnings") else (observation.name,)),)
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


def conclude(subject: SubjectResult | None, verdict: Verdict, titles: dict[str, str]) -> Conclusion:
    if verdict.verdict == SAME:
        return Conclusion(REDUNDANT)
    if verdict.verdict in (INCONCLUSIVE, NO_PROBE):
        return Conclusion(UNKNOWN, why=verdict.reason)
    if verdict.verdict != DIFFERS or subject is None:
        return Conclusion(NOT_RUN, why=f"{verdict.verdict}: {verdict.reason}" if verdict.reason else verdict.verdict)
    differing = [o for o in subject.observations if o.carries and not o.same]
    contrasts = tuple(contrast(o, titles.get(o.probe, o.probe.replace("_", " "))) for o in differing)
    kinds = {c.kind for c in contrasts}
    if HARMFUL in kinds and NEEDED not in kinds:
        kind = HARMFUL
    elif NEEDED in kinds and HARMFUL not in kinds:
        kind = NEEDED
    else:
        kind = DIFFERENTLY
    ordered = sorted(contrasts, key=lambda c: KINDS.index(c.kind))
    return Conclusion(kind, tuple(ordered))


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


@dataclass(frozen=True)
class Summary:
    """Across the tested versions of one subject: a line per conclusion, deprecations, the recommendation, and
    where the verdict changes (`glance`)."""

    lines: tuple[str, ...]
    deprecations: tuple[str, ...]
    recommendation: str
    glance: str


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
    return (f"{shared.pop()} " if simple else "") + ("; " if not simple else ", ").join(said)


def _methods(methods: tuple[str, ...]) -> str:
    if len(methods) == 1:
        return f"the override of `{methods[0]}`"
    return ("both overrides" if len(methods) == 2 else f"all {len(methods)} overrides") + (
        f" ({', '.join(f'`{m}`' for m in methods)})"
    )


WHERE = "\0where\0"  # stands for the versions in a line until the versions that share it are known


def _line(kind: str, first: Row) -> str:
    """The line for `first`'s conclusion, with WHERE for the versions."""
    where = WHERE
    follows = first.verdict.follows if first.verdict.per_method or len(first.verdict.follows) == 1 else ()
    pinned = f" (follows {', '.join(f'`{m}`' for m in follows)})" if follows else ""
    groups = grouped(first.conclusion.contrasts)
    if kind == REDUNDANT:
        return f"**redundant** on {where}: deleting changes nothing there."
    if kind in (UNKNOWN, NOT_RUN):
        return f"**{kind}** on {where}: {first.conclusion.why}"
    if kind == HARMFUL:
        broken = [g for g in groups if g.kind == HARMFUL]
        said = "; ".join(f"{g.what} raise “{g.error}”" for g in broken)
        return f"**harmful** on {where}{pinned}: with the override, {said}; without it they run."
    if kind == NEEDED:
        broken = [g for g in groups if g.kind == NEEDED]
        said = "; ".join(f"{g.what} raise “{g.error}”" for g in broken)
        return f"**needed** on {where}{pinned}: without the override, {said}; with it they run."
    return f"**behaves differently** on {where}{pinned}: " + "; ".join(g.text() for g in groups) + "."


def summarize(methods: tuple[str, ...], rows: list[Row]) -> Summary:
    """`rows` newest first. Versions with the same conclusion, said the same way, share a line."""
    lines: dict[tuple[str, str], list[str]] = {}
    for row in rows:
        lines.setdefault((row.conclusion.kind, _line(row.conclusion.kind, row)), []).append(row.label)
    ordered = sorted(lines.items(), key=lambda item: KINDS.index(item[0][0]))
    order = [row.label for row in rows]
    said = tuple(line.replace(WHERE, versions_text(labels, order)) for (_, line), labels in ordered)
    first_seen: dict[tuple[str, str | None], str] = {}
    for row in reversed(rows):  # oldest first: the first version that warns
        for method, replacement in row.deprecations:
            first_seen.setdefault((method, replacement), row.label)
    deprecated = tuple(
        f"`{m}` deprecated in {label}" + (f" in favour of `{r}`" if r else "") for (m, r), label in first_seen.items()
    )
    return Summary(said, deprecated, recommend(methods, rows), glance(rows))


def recommend(methods: tuple[str, ...], rows: list[Row]) -> str:
    order = [row.label for row in rows]
    by_kind: dict[str, list[str]] = {}
    for row in rows:
        by_kind.setdefault(row.conclusion.kind, []).append(row.label)
    ran = [k for k in by_kind if k != NOT_RUN]
    untested = f" Not tested: {versions_text(by_kind[NOT_RUN], order)}." if NOT_RUN in by_kind else ""
    if not ran:
        return "Nothing ran, so there is nothing to recommend." + untested
    if NEEDED in by_kind:
        return f"Keep {_methods(methods)}: needed on {versions_text(by_kind[NEEDED], order)}." + untested
    if set(ran) <= {REDUNDANT, HARMFUL}:
        fixes = f" and fixes {versions_text(by_kind[HARMFUL], order)}" if HARMFUL in by_kind else ""
        return f"Deleting {_methods(methods)} is safe on every tested version{fixes}." + untested
    caveats = []
    if DIFFERENTLY in by_kind:
        caveats.append(f"changes behaviour on {versions_text(by_kind[DIFFERENTLY], order)}: review the differences")
    if UNKNOWN in by_kind:
        caveats.append(f"is not established on {versions_text(by_kind[UNKNOWN], order)}")
    return f"Deleting {_methods(methods)} " + " and ".join(caveats) + "." + untested


def glance(rows: list[Row]) -> str:
    """Where the verdict changes, oldest to newest: `same 4.57.6 … 5.14.1 · differs 5.24.0`."""
    runs: list[tuple[str, list[str]]] = []
    for row in reversed(rows):
        version = row.label.split(" ", 1)[-1]
        if runs and runs[-1][0] == row.verdict.verdict:
            runs[-1][1].append(version)
        else:
            runs.append((row.verdict.verdict, [version]))
    return " · ".join(f"{v} {vs[0]}" + (f" … {vs[-1]}" if len(vs) > 1 else "") for v, vs in runs)


def add_conclusions(subjects: Any, titles: dict[str, str]) -> Any:
    """The `subjects` frame (with verdicts) with each row's Conclusion, its verdict phrase and its deprecations."""
    conclusions = [conclude(r, d, titles) for r, d in zip(subjects["result"], subjects["decided"], strict=True)]
    phrases = [c.phrase(d) for c, d in zip(conclusions, subjects["decided"], strict=True)]
    return subjects.assign(
        conclusion=conclusions, phrase=phrases, deprecations=[deprecations(r) for r in subjects["result"]]
    )


def summaries(subjects: Any, expected: tuple[Any, ...]) -> dict[str, Summary]:
    """Per subject of the matrix, in file order: the Summary across its rows (newest first)."""
    out = {}
    for subject in expected:
        rows = subjects[subjects["target"] == subject.target].to_dict("records")
        ran = next((r["result"].methods for r in rows if r["result"] is not None and r["result"].methods), None)
        said = [Row(r["label"], r["decided"], r["conclusion"], r["deprecations"]) for r in rows]
        out[subject.target] = summarize(ran or subject.methods, said)
    return out
