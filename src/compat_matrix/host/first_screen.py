"""What the first screen holds at library scale, decided before render formats it: the release's health (said by
compat_matrix.host.health), the rows that ask for action, and the rest counted per class with its one cause and
one next step. Pure functions over the grid.

A grid of at most GROUPED_ABOVE rows is shown whole: a small report needs no grouping. A longer one keeps on the
first screen only the rows that ask for action (harmful somewhere, Fix, Port, Delete, or newly behaving
differently); the rest become lines: Review rows that share one cause (their class could not be built, nothing
ran, the probes ran on stand-ins, lines that never ran, …) one line per cause, naming every class it holds, and the
Keep rows counted per class. The whole grid follows, collapsed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from compat_matrix.host import grid as grids
from compat_matrix.host.conclude import COULD_NOT_RUN, DIFFERENTLY, HARMFUL, NEEDED, ORPHANED, REDUNDANT, UNKNOWN
from compat_matrix.host.grid import Grid
from compat_matrix.host.health import AT_THE_TOP, PHRASES, Breakage, Statement, next_step
from compat_matrix.host.overrides import OverrideConclusions
from compat_matrix.host.verdict import INSPECTS
from compat_matrix.host.wording import MARKDOWN, Style, name_of, name_of_subject, unaudited, versions_text
from compat_matrix.shared.evidence import UNSEEN
from compat_matrix.shared.vocabulary import AdviceKind

GROUPED_ABOVE = 15  # rows of a grid the first screen shows whole
ACTS = (AdviceKind.FIX, AdviceKind.PORT, AdviceKind.DELETE)  # advice that asks for work


class CauseKind(StrEnum):
    """Why a Review row could not be decided, in the order its line is chosen (the first that applies)."""

    NOTHING_RAN = "nothing ran"  # on no tested release: its class did not import, build or run
    CAVEAT = "caveat"  # the conclusions say Delete, on stand-ins or a model with nothing in it
    DIFFERS = "differs"  # it behaves differently where the class as shipped fails too, or only beside the others
    UNKNOWN = "not established"  # inconclusive somewhere: what the probes did not reach
    UNAUDITED = "not audited"  # deleting it changes nothing where it ran; no class of transformers defines it elsewhere
    UNTESTED = "could not run"  # somewhere, and deleting it changes nothing where it ran


@dataclass(frozen=True)
class Cause:
    """One cause of Review rows, the same for every row it explains (no class or override named in it)."""

    kind: CauseKind
    detail: str = ""  # the category or text of the cause: what UNKNOWN did not establish, the caveat, …
    releases: tuple[str, ...] = ()  # UNTESTED: where it could not run
    breakage: Breakage | None = None  # NOTHING_RAN, UNTESTED: the breakage at the top (no class, no releases)


@dataclass(frozen=True)
class Group:
    """Rows said as one line: Review rows of one cause, or the Keep rows."""

    advice: AdviceKind
    overrides: tuple[OverrideConclusions, ...]
    cause: Cause | None = None

    @property
    def targets(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(o.target for o in self.overrides))


@dataclass(frozen=True)
class Screen:
    """The first screen, decided: the grid it shows (every row, or where `grouped` the rows that ask for action)
    and the lines for the rest; `full`: the whole grid (collapsed below, where grouped)."""

    grouped: bool
    grid: Grid
    groups: tuple[Group, ...]
    full: Grid
    said: tuple[Statement, ...] = ()  # the health, in the order it is said


def newly_different(override: OverrideConclusions) -> bool:
    """It behaves differently on a release after the oldest that ran it, and not on that one."""
    ran = [c.kind for _, c in override.oldest_first if c.kind != COULD_NOT_RUN]
    return bool(ran) and ran[0] != DIFFERENTLY and DIFFERENTLY in ran[1:]


def acts(override: OverrideConclusions) -> bool:
    """Whether its row asks for action: harmful somewhere, advice that asks for work, or newly different."""
    return override.harmful or override.advice.kind in ACTS or newly_different(override)


def make(full: Grid, found: Sequence[Breakage] = (), said: Sequence[Statement] = ()) -> Screen:
    """The first screen for `full`; `found`, `said`: the breakages, and the statements at the top. A Review row
    whose cause is its own (no line says it) stays a row."""
    if len(full.rows) <= GROUPED_ABOVE:
        return Screen(False, full, (), full, tuple(said))
    why = {w: b for b in found for w in b.whys}
    shown, keep = [], []
    causes: dict[Cause, list[OverrideConclusions]] = {}
    for row in full.rows:
        o = row.override
        cause = cause_of(o, why) if o.advice.kind == AdviceKind.REVIEW and not row.nothing_audited else None
        if cause is not None and not acts(o):
            causes.setdefault(cause, []).append(o)
        elif o.advice.kind == AdviceKind.KEEP and not row.nothing_audited and not acts(o):
            keep.append(o)
        else:
            shown.append(o)
    review = sorted(causes.items(), key=lambda item: -len(item[1]))  # stable: the grid's order among equals
    groups = [Group(AdviceKind.REVIEW, tuple(overrides), cause) for cause, overrides in review]
    groups += [Group(AdviceKind.KEEP, tuple(keep))] if keep else []
    return Screen(True, grids.of(shown, full.several), tuple(groups), full, tuple(said))


def _general(breakage: Breakage) -> Breakage:
    """The breakage without what differs from one class and release to the next: what a cause may share."""
    return replace(breakage, target=None, releases=(), whys=())


def cause_of(override: OverrideConclusions, broken: Mapping[str, Breakage]) -> Cause | None:
    """The one cause of a Review row, the first of CauseKind that applies; None where it is its own (the grid's
    reason says it). `broken`: the breakage behind each reason a row could not run."""
    advice = override.advice
    ran = {kind for kind, _ in advice.releases} - {COULD_NOT_RUN}
    newest_why = next((c.why for _, c in override.by_release if c.kind == COULD_NOT_RUN and c.why), None)
    breakage = broken.get(newest_why or "")
    said = _general(breakage) if breakage is not None else None
    if advice.nothing_ran:
        return Cause(CauseKind.NOTHING_RAN, "" if said else newest_why or "", (), said)
    if advice.caveat:
        return Cause(CauseKind.CAVEAT, advice.caveat)
    differently = [c for _, c in override.by_release if c.kind == DIFFERENTLY]
    if differently and ran <= {NEEDED, DIFFERENTLY} and not any(c.does_its_job for c in differently):
        seen = [x.observation.probe for c in differently for x in c.contrasts]
        read = bool(seen) and all(probe in INSPECTS for probe in seen)
        return Cause(CauseKind.DIFFERS, READ_ONLY if read else "")
    unknown = next((c.why for _, c in override.by_release if c.kind == UNKNOWN), None)
    if unknown is not None:
        return Cause(CauseKind.UNKNOWN, category(unknown, override.name))
    if advice.on(COULD_NOT_RUN) and ran <= {REDUNDANT, HARMFUL, ORPHANED}:
        where = tuple(reversed(advice.on(COULD_NOT_RUN)))
        return Cause(CauseKind.UNTESTED, "" if said else newest_why or "", where, said)
    if override.untested and ran <= {REDUNDANT, HARMFUL, ORPHANED}:
        return Cause(CauseKind.UNAUDITED, releases=override.untested)
    return None


NO_PROBE, NEVER_RAN, LINES, UNWATCHED, NO_VALUES = "no probe", "never ran", "lines", "unwatched", "no values"
READ_ONLY = "read"  # a DIFFERS cause seen only by the probes that read the class (a signature, transformers' calls)
_LINES = re.compile(r"^lines? \d+.* never ran")


def category(why: str, name: str) -> str:
    """What an inconclusive conclusion did not establish, the same for every override it holds for (its name left
    out): NO_PROBE, NEVER_RAN, LINES, UNWATCHED, NO_VALUES, what an attribute decides that the probes cannot see,
    else the reason with `it` for the name."""
    if why.startswith("no probe exercises"):
        return NO_PROBE
    if _LINES.match(why):
        return LINES
    if why.startswith(f"{name} never ran"):
        return NEVER_RAN
    if why.startswith("the statements of") and "could not be watched" in why:
        return UNWATCHED
    if why.startswith("the variant") and "gave no values" in why:
        return NO_VALUES
    if why.removeprefix(f"{name} ") in UNSEEN.values():
        return why.removeprefix(f"{name} ")
    return re.sub(rf"\b{re.escape(name)}\b", "it", why) if name else why


# In words.

CLASSES_NAMED = 6  # classes a line names before "and N more"


def classes(targets: Sequence[str], style: Style = MARKDOWN) -> str:
    names = [name_of_subject(t, style) for t in targets]
    if len(names) <= CLASSES_NAMED:
        return ", ".join(names)
    return f"{', '.join(names[: CLASSES_NAMED - 1])} and {len(names) - CLASSES_NAMED + 1} more"


def _not_established(detail: str, one: bool, style: Style) -> str:
    they, them, their = ("it", "it", "its") if one else ("they", "them", "their")
    said = {
        NO_PROBE: f"no probe exercises {them}: add a probe of your own (README: Probes of your own)",
        NEVER_RAN: f"{they} never ran in a probe that observed something: write a factory, or inputs, that call {them}",
        LINES: f"some of {their} lines never ran in a probe that observed something: write a factory, or inputs,"
        " that take them (the evidence names them)",
        UNWATCHED: f"{their} statements could not be watched (no copy of their source compiles alone)",
        NO_VALUES: "a variant gave no values (the evidence says why)",
    }
    if detail in said:
        return said[detail]
    if detail in UNSEEN.values():
        return f"the probes cannot see what {they} {'decides' if one else 'decide'}: {style.text(detail)}"
    return style.text(detail)


def _broke(breakage: Breakage | None, detail: str, several: bool, style: Style) -> str:
    """Why its class did not run, said once at the top: the stage, and the next step."""
    if breakage is None:
        return style.text(detail)
    phrase = PHRASES[breakage.stage]  # `cannot be built` (its class), `its cell could not run`
    if phrase.startswith("its cell "):
        said = f"{'their cells' if several else 'its cell'} {phrase.removeprefix('its cell ')}"
    else:
        said = f"{'their classes' if several else 'its class'} {phrase}"
    step = next_step(breakage, style)
    return f"{said} ({AT_THE_TOP})" + (f": {step}" if step else "")


def line(group: Group, order: Sequence[str], several: bool, style: Style = MARKDOWN) -> str:
    """`**Review** `PreferenceTrainer`, `PairTrainer`: 17 overrides not established, their classes cannot be
    built (said at the top): write a factory whose dataset has a `chosen` column`; `**Keep** 12: `A` (3), …`."""
    count = len(group.overrides)
    if group.advice == AdviceKind.KEEP:
        per = {t: sum(o.target == t for o in group.overrides) for t in group.targets}
        named = [f"{name_of_subject(t, style)} ({n})" for t, n in per.items()]
        shown = ", ".join(named[:CLASSES_NAMED]) + (
            f" and {len(named) - CLASSES_NAMED} more" if len(named) > CLASSES_NAMED else ""
        )
        return f"{style.strong(f'Keep {count}')} (needed, or they do their job): {shown}"
    cause = group.cause or Cause(CauseKind.NOTHING_RAN)
    one = count == 1
    who = name_of(group.overrides[0], several, style) if one else f"{classes(group.targets, style)}: {count} overrides"
    several_classes = len(group.targets) > 1
    if cause.kind == CauseKind.NOTHING_RAN:
        said = f"not established, {_broke(cause.breakage, cause.detail, several_classes, style)}"
    elif cause.kind == CauseKind.CAVEAT:
        said = f"{'reads' if one else 'read'} redundant, but {style.text(cause.detail)}"
    elif cause.kind == CauseKind.DIFFERS and cause.detail == READ_ONLY:
        said = (
            f"{'differs' if one else 'differ'} only in {'its signature' if one else 'their signatures'} or what"
            f" transformers passes {'it' if one else 'them'}: nothing that ran differed; check the calls the evidence"
            " names"
        )
    elif cause.kind == CauseKind.DIFFERS:
        said = (
            f"{'behaves' if one else 'behave'} differently where the class as shipped fails too, or only beside the"
            " other overrides: review the evidence"
        )
    elif cause.kind == CauseKind.UNKNOWN:
        said = f"not established: {_not_established(cause.detail, one, style)}"
    elif cause.kind == CauseKind.UNAUDITED:
        said = f"{'changes' if one else 'change'} nothing where {'it' if one else 'they'} ran, " + (
            unaudited(cause.releases, order, one)
        )
    else:
        where = versions_text(cause.releases, order)
        said = f"could not run on {where}, {_broke(cause.breakage, cause.detail, several_classes, style)}"
    return f"{style.strong('Review')} {who} {said}"
