"""Context beside the first screen in words: what a package target stood for, and whether a declared range is honest."""

from __future__ import annotations

from collections.abc import Sequence

from compat_matrix.host.range_check import RangeCheck
from compat_matrix.host.wording.style import MARKDOWN, Style
from compat_matrix.host.wording.versions import versions_text
from compat_matrix.shared.results import THROUGH, Discovery


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
