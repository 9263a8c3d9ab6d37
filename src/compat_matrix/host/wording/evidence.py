"""The evidence in words: per override, what differs (the call a user makes, with the override and deleted), each
error once, and a line for what no table row shows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from compat_matrix.host import breaks
from compat_matrix.host.conclude import COULD_NOT_RUN, ORDER, ORPHANED, REDUNDANT, UNKNOWN, Contrast, error_of
from compat_matrix.host.overrides import OverrideConclusions
from compat_matrix.host.wording.style import PLAIN, Style, long_lines, sides
from compat_matrix.host.wording.versions import versions_text
from compat_matrix.shared import evidence
from compat_matrix.shared.results import Code, Observation
from compat_matrix.shared.vocabulary import AdviceKind, ConclusionKind, ObservationName

EVIDENCE_ROWS = 8  # rows of one override's table; the JSON has the rest
EVIDENCE_VALUE = 100  # characters of a value in one of its cells; a longer one goes under the table, whole


@dataclass(frozen=True)
class Evidence:
    """What differs for one override across releases, in words: table rows (releases, call, with it, deleted), the
    errors they name (each once), lines for the releases with nothing to show in a table, and what was left out."""

    rows: tuple[tuple[str, str, str, str], ...]
    errors: tuple[str, ...]
    notes: tuple[str, ...]
    left_out: int  # contrasts of warnings, or observed on one side only: in the JSON and CSV
    cut: int  # rows past EVIDENCE_ROWS
    # values too long for a cell, whole: (what the cell says instead, `value (1)`; the lines of the value)
    values: tuple[tuple[str, tuple[str, ...]], ...] = ()


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
    override: OverrideConclusions, order: Sequence[str], style: Style = PLAIN, above: Mapping[str, str] | None = None
) -> Evidence:
    """The contrasts behind each conclusion, grouped: a call whose two sides read alike on several releases is one
    row naming them, and calls whose sides and releases agree share a row. `above`: as for `reason`."""
    shown: list[tuple[str, tuple[str, str], str, str]] = []  # (label, (title, name), with it, deleted)
    values: dict[tuple[str, ...], str] = {}  # the lines of each value too long for a cell, and its tag
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
                sides_ = tuple(
                    text if _fits(text) else _tag(values, long_lines(mine, theirs, style))
                    for text, mine, theirs in zip(
                        sides(o.override, o.base, style, 10**6), (o.override, o.base), (o.base, o.override), strict=True
                    )
                )
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
    kept = table[:EVIDENCE_ROWS]
    tags = {tag for row in kept for tag in row[2:]}
    return Evidence(
        tuple(kept),
        errors,
        _notes(override, order, style, above or {}),
        left_out,
        max(0, len(table) - EVIDENCE_ROWS),
        tuple((tag, lines) for lines, tag in values.items() if tag in tags),
    )


def _fits(text: str) -> bool:
    """Whether a value reads in a cell of a table that fits a comment: short, and no run that widens its column where
    no break opportunity is (compat_matrix.host.breaks: a column is as wide as its longest)."""
    return len(text) <= EVIDENCE_VALUE and breaks.fits(text)


def _tag(values: dict[tuple[str, ...], str], lines: tuple[str, ...]) -> str:
    """What a cell says of a value too long for it: `value (1)`, the same tag for the same value."""
    return values.setdefault(lines, f"value ({len(values) + 1})")


CALLS = 4  # probes named in one row of an evidence table, and observations per probe


def _calls(calls: dict[str, list[str]]) -> str:
    """`entry points (activation_checkpointing_enable); Trainer step (default, with_kwargs)`, at most CALLS each."""

    def one(title: str, names: list[str]) -> str:
        shown = ", ".join(names[:CALLS]) + (f" and {len(names) - CALLS} more" if len(names) > CALLS else "")
        return f"{title} ({shown})" if names else title

    said = [one(title, names) for title, names in list(calls.items())[:CALLS]]
    return "; ".join(said) + (f"; and {len(calls) - CALLS} more probes" if len(calls) > CALLS else "")


def _notes(
    override: OverrideConclusions, order: Sequence[str], style: Style, above: Mapping[str, str]
) -> tuple[str, ...]:
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


def alike(
    found: Sequence[tuple[OverrideConclusions, Evidence]],
) -> list[tuple[tuple[OverrideConclusions, ...], Evidence]]:
    """Overrides of one class with the same advice whose evidence reads alike, said once (in the first one's place):
    the classes that could not be built, say, whose every override says only that."""
    together: dict[tuple[AdviceKind, Evidence], list[OverrideConclusions]] = {}
    for override, said in found:
        together.setdefault((override.advice.kind, said), []).append(override)
    return [(tuple(overrides), said) for (_, said), overrides in together.items()]


def left_out(count: int) -> str:
    """What an evidence table leaves to the JSON and CSV."""
    which = "observation" if count == 1 else "observations"
    return f"{count} more {which} (warnings, or made on one side only) in the JSON and CSV"


def source(name: str, code: Sequence[Code]) -> str | None:
    """Where the audited `name` is defined, as `file.py:LINE` (the file from its package down: `utf8_tokenizer/
    char_causal_lm.py:97`, the same in every environment), from the code a cell watched; None where it has none."""
    found = next((c for c in code if c.name == name and c.units), None)
    if found is None:
        return None
    key = next((k for k, _ in found.units if k.startswith(f"{name}@")), found.units[0][0])
    line = key.rpartition("@")[2]
    _, installed, below = found.file.replace("\\", "/").rpartition("-packages/")
    return f"{below if installed else found.file.rpartition('/')[2]}:{line}" if line.isdigit() else None
