"""The release's health, said first: per class and tested release, whether the class as shipped imports, builds and
runs, and per cell whether it could be installed at all. Each breakage is said once, classes that break alike
together, the worst first; the report's title names the first of them before any count of advice. Pure functions
over the concluded rows.

The stages, in the order they are said:
- `import`: the class cannot be imported there (its status `import-failed`); the whole library, where every class
  of the matrix fails alike;
- `build`: it cannot be built there: the default factory cannot make it tiny (`could-not-build`), the matrix file's
  factory raised (`factory-failed`), or building it as shipped raises (the build probe's error on the class as
  shipped: an override that breaks construction, say), or its `init_weights()` does (`post_init` and
  `from_pretrained` call it);
- `run`: every probe that runs it fails, with its overrides and without (`fails as shipped`), or its run stopped
  (`crashed`, `timed-out`, …);
- `install` and `cell`: the cell itself could not run (`install-failed`, `interpreter not found`; `crashed`, …), so
  nothing of the matrix was tried there. These say why a column reads `could not run`; not being about a class, they
  are not in the title.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from compat_matrix.host.conclude import Concluded
from compat_matrix.host.releases import early_label
from compat_matrix.host.verdict import QUIET
from compat_matrix.host.wording import MARKDOWN, Style, listed, name_of_subject, versions_text
from compat_matrix.shared import evidence
from compat_matrix.shared.results import OK, SubjectResult, failure_in, one_line
from compat_matrix.shared.vocabulary import Status

# An absolute path (not the tail of a relative one) up to the folder of installed packages. The same rule as
# results.short_paths on the branch that adds it there; once it is on main, this one goes and that one is used.
_INSTALLED = re.compile(r"(?<![\w.~-])(?:[A-Za-z]:)?[/\\][^\s'\"()<>]*?[/\\](site-packages|dist-packages)[/\\]")


def short_paths(text: str) -> str:
    """`text` with every absolute path into an environment's installed packages cut to where it says something
    (`/work/x/.nox/cell-…/lib/python3.11/site-packages/huggingface_hub/__init__.py` →
    `site-packages/huggingface_hub/__init__.py`): the same in every environment, so that one error is one error."""
    return _INSTALLED.sub(lambda found: f"{found.group(1)}/", text)


class Stage(StrEnum):
    """Where the class as shipped (or the cell) stops, in the order they are said."""

    IMPORT = "import"
    BUILD = "build"
    RUN = "run"
    INSTALL = "install"
    CELL = "cell"


TITLED = (Stage.IMPORT, Stage.BUILD, Stage.RUN)  # about a class: what a title names
BUILD_PROBE, BUILT = "build_and_init", "built"  # the probe that builds the class, and its observation of the build
INIT_WEIGHTS = "init_weights"  # its observation of `init_weights()` on the instance built
IMPORT_FAILED, COULD_NOT_BUILD, FACTORY_FAILED = Status.IMPORT_FAILED, Status.COULD_NOT_BUILD, Status.FACTORY_FAILED
INSTALLING = frozenset({Status.INSTALL_FAILED, Status.NO_INTERPRETER})
_UNBUILT = re.compile(r"^could not build [\w.]+: (?P<error>.*?)(?:; write a factory \(see README\))?$")


@dataclass(frozen=True)
class Breakage:
    """What breaks for one class (None: the cell itself, every class) at one stage with one error, on the tested
    releases it names (oldest first)."""

    target: str | None
    stage: Stage
    error: str  # `Type: message`, one line, environment paths shortened
    releases: tuple[str, ...]
    whys: tuple[str, ...] = ()  # as the conclusions say why it could not run there (`status: reason`)
    status: str | None = None  # the subject's status behind it (`could-not-build`, …); None: it ran
    kind: str | None = None  # the class's kind (`model`, `trainer`), for the next step


@dataclass(frozen=True)
class Statement:
    """Breakages said together: the same stage, error and releases, for every class it names (none: the cell)."""

    targets: tuple[str, ...]
    stage: Stage
    error: str
    releases: tuple[str, ...]  # oldest first
    library: str | None = None  # where it names every class of the matrix: the library's name
    stopped: bool = False  # at `run`: its run stopped (crashed, timed out, …), rather than failing as shipped

    @property
    def titled(self) -> bool:
        return self.stage in TITLED


def why_of(status: str, reason: str | None) -> str:
    """How the conclusions say why a cell or subject could not run (compat_matrix.host.conclude.conclude)."""
    return f"{status}: {reason}" if reason else status


ERROR_KEPT = 240  # characters of an error a breakage keeps: past them, errors that begin alike read alike


def _error(text: str | None) -> str:
    """One line, environment paths shortened, cut to ERROR_KEPT characters: a cell cuts each class's reason after
    its own name (`could not build AsyncGRPOTrainer: …`), so the same long error (a model's repr in it) would
    otherwise end at another place for each class and never be said once for all of them."""
    error = short_paths(one_line(text or "")).removesuffix("…")
    return error if len(error) <= ERROR_KEPT else error[: ERROR_KEPT - 1] + "…"


def _built_error(subject: SubjectResult) -> str | None:
    """The error building the class as shipped raised, where the build probe ran and building it failed; else the
    error its `init_weights()` raised there (what `post_init` and `from_pretrained` call: a class whose weights
    cannot be initialized cannot be loaded either), said as `init_weights(): Type: message`."""
    found = {o.name: o for o in subject.observations if o.probe == BUILD_PROBE}
    built = found.get(BUILT)
    if built is not None and (error := failure_in(built.override)):
        return error
    initialized = found.get(INIT_WEIGHTS)
    error = failure_in(initialized.override) if initialized is not None else None
    return f"{INIT_WEIGHTS}(): {error}" if error else None


def _of_row(row: Concluded) -> Breakage | None:
    """What breaks in one cell × subject, on its release; None where nothing does."""
    cell, result, verdict = row.row.cell, row.row.result, row.verdict
    if cell.status == Status.SKIPPED:
        return None  # nothing to install (`pre` with no pre-release to stand for): nothing was tried, nothing broke
    if cell.status != OK:
        why = why_of(cell.status, cell.reason)
        stage = Stage.INSTALL if cell.status in INSTALLING else Stage.CELL
        error = _error(cell.reason if stage == Stage.INSTALL else why)
        return Breakage(None, stage, error, (row.label,), (why,), cell.status)
    if result is None:
        return None  # the cell ran no such subject: said by the grid, nothing broke that the cell saw
    target, kind, why = row.row.target, result.kind, why_of(verdict.verdict, verdict.reason)
    if result.status == IMPORT_FAILED:
        return Breakage(target, Stage.IMPORT, _error(result.reason), (row.label,), (why,), result.status, kind)
    if result.status in (COULD_NOT_BUILD, FACTORY_FAILED):
        found = _UNBUILT.match(one_line(result.reason or ""))
        error = _error(found.group("error") if found else result.reason)
        return Breakage(target, Stage.BUILD, error, (row.label,), (why,), result.status, kind)
    if result.status != OK:  # its run stopped: crashed, timed out, …
        return Breakage(target, Stage.RUN, _error(why), (row.label,), (why,), result.status, kind)
    built = _built_error(result)
    if verdict.verdict == Status.FAILS_AS_SHIPPED:
        error = _error(built or evidence.broken_as_shipped(result, QUIET) or verdict.reason)
        stage = Stage.BUILD if built else Stage.RUN
        return Breakage(target, stage, error, (row.label,), (why,), Status.FAILS_AS_SHIPPED, kind)
    if built is not None:  # building it as shipped raised, and something ran: an override breaks construction, say
        return Breakage(target, Stage.BUILD, _error(built), (row.label,), (), None, kind)
    return None


def breakages(rows: Sequence[Concluded]) -> tuple[Breakage, ...]:
    """Every breakage in `rows` (newest first), one per class, stage and error, in the order first seen, naming its
    releases oldest first; a cell that could not run is one breakage of its own, whatever its subjects."""
    found: dict[tuple[str | None, Stage, str], Breakage] = {}
    for row in rows:
        broken = _of_row(row)
        if broken is None:
            continue
        key = (broken.target, broken.stage, broken.error)
        seen = found.setdefault(key, replace(broken, releases=(), whys=()))
        releases = seen.releases if row.label in seen.releases else (row.label, *seen.releases)  # oldest first
        whys = seen.whys + tuple(w for w in broken.whys if w not in seen.whys)
        found[key] = replace(seen, releases=releases, whys=whys)
    return tuple(found.values())


def library_of(targets: Sequence[str], fallback: str) -> str:
    """The library the classes come from: the top-level module they share, else `fallback` (the matrix's name)."""
    tops = {t.split(":", 1)[0].split(".", 1)[0] for t in targets}
    return tops.pop() if len(tops) == 1 else fallback


def statements(
    found: Sequence[Breakage], targets: Sequence[str], order: Sequence[str], matrix: str
) -> tuple[Statement, ...]:
    """The breakages said together where they read alike (stage, error, releases), in the order they are said: by
    stage, those on releases before those on pre-releases alone (they warn about the next release), those on the
    newest tested release first, then those naming more classes. With several classes in the matrix, a statement
    that names every one names the library instead."""
    alike: dict[tuple[Stage, str, tuple[str, ...], bool], list[str]] = {}
    for b in found:
        stopped = b.stage == Stage.RUN and b.status != Status.FAILS_AS_SHIPPED
        named = alike.setdefault((b.stage, b.error, b.releases, stopped), [])
        named += [b.target] if b.target is not None else []
    said = []
    place = {t: i for i, t in enumerate(targets)}
    for (stage, error, releases, stopped), named in alike.items():
        every = len(targets) > 1 and set(targets) <= set(named)
        library = library_of(targets, matrix) if every else None
        named.sort(key=lambda t: place.get(t, len(place)))  # the matrix file's order
        said.append(Statement(tuple(named), stage, error, releases, library, stopped))
    newest = next((label for label in order if not early_label(label)), None)

    def rank(s: Statement) -> tuple[int, bool, bool, int]:
        early = all(early_label(label) for label in s.releases)
        return list(Stage).index(s.stage), early, newest not in s.releases, -len(s.targets)

    return tuple(sorted(said, key=rank))  # stable: first seen first among equals


# In words.

HEADLINES = 2  # statements a title names; the rest are lines below it
TITLE_ERROR = 160  # characters of an error in the title
NAMED = 3  # classes a statement names before "and N more"


def who(statement: Statement, style: Style = MARKDOWN) -> str:
    """`mylib`, `RewardTrainer`, `A`, `B` and `C`, `A`, `B` and 4 more classes."""
    if statement.library is not None:
        return style.code(statement.library)
    names = [name_of_subject(t, style) for t in statement.targets]
    if len(names) <= NAMED:
        return listed(names)
    return f"{', '.join(names[: NAMED - 1])} and {len(names) - NAMED + 1} more classes"


SENTENCES = {
    Stage.IMPORT: "{who} cannot be imported with {where} ({error})",
    Stage.BUILD: "{who} cannot be built on {where} ({error})",
    Stage.RUN: "{who} {fails} as shipped on {where} ({error})",
    Stage.INSTALL: "{where} could not be installed ({error})",
    Stage.CELL: "the {cells} of {where} could not run ({error})",
}
STOPPED = "{who} could not run on {where} ({error})"  # at `run`, where its run stopped


def sentence(
    statement: Statement, order: Sequence[str], style: Style = MARKDOWN, limit: int | None = None, axis: bool = True
) -> str:
    """`mylib cannot be imported with transformers 5.24.0 (ImportError: …)`: one statement, its error cut to
    `limit` characters (None: as it is), the releases without their axis' name unless `axis`."""
    error = statement.error if limit is None or len(statement.error) <= limit else statement.error[: limit - 1] + "…"
    several = len(statement.targets) > 1 and statement.library is None
    template = STOPPED if statement.stopped else SENTENCES[statement.stage]
    return template.format(
        who=who(statement, style),
        where=versions_text(statement.releases, order, axis),
        error=style.text(error),
        fails="fail" if several else "fails",
        cells="cells" if len(statement.releases) > 1 else "cell",
    )


def headline(said: Sequence[Statement], order: Sequence[str], style: Style = MARKDOWN) -> str:
    """What the title says before the counts: the first HEADLINES statements about a class, and how many more
    are said below it; empty where no class breaks."""
    titled = [s for s in said if s.titled]
    if not titled:
        return ""
    shown = "; ".join(sentence(s, order, style, TITLE_ERROR, axis=i == 0) for i, s in enumerate(titled[:HEADLINES]))
    more = len(titled) - HEADLINES
    return shown + (f"; {more} more below" if more > 0 else "")


def below(said: Sequence[Statement]) -> tuple[Statement, ...]:
    """The statements the title does not name: a line each under it."""
    titled = [s for s in said if s.titled][:HEADLINES]
    return tuple(s for s in said if s not in titled)


def title(name: str, counts: str, said: Sequence[Statement], order: Sequence[str], style: Style = MARKDOWN) -> str:
    """`mylib cannot be imported with transformers 5.24.0 (ImportError: …) — delete 5 and review 37 of 43
    overrides`: what breaks and where, before any count of advice; the name said first where the first breakage
    does not name it. `counts`: the title without breakages, `name: …`."""
    first = headline(said, order, style)
    if not first:
        return counts
    rest = counts.removeprefix(f"{name}: ")
    titled = next(s for s in said if s.titled)
    lead = "" if who(titled, style) in (style.code(name), name) else f"{name}: "
    return f"{lead}{first} — {rest}"


PHRASES = {
    Stage.IMPORT: "cannot be imported",
    Stage.BUILD: "cannot be built",
    Stage.RUN: "fails as shipped",
    Stage.INSTALL: "its cell could not be installed",
    Stage.CELL: "its cell could not run",
}


AT_THE_TOP = "said at the top"


def said_above(found: Sequence[Breakage], style: Style = MARKDOWN) -> dict[str, str]:
    """For each breakage said at the top, what the conclusions say why a row could not run there (`import-failed:
    ImportError: …`) and what the evidence and the grid say instead: the stage and the next step, not the error
    again (`cannot be built (said at the top): write a factory (see README)`)."""
    return {why: _told(b, style) for b in found for why in b.whys}


def _told(breakage: Breakage, style: Style) -> str:
    step = next_step(breakage, style)
    return f"{PHRASES[breakage.stage]} ({AT_THE_TOP})" + (f": {step}" if step else "")


_KEY = re.compile(r"^KeyError: '(\w+)'$")


def next_step(breakage: Breakage, style: Style = MARKDOWN) -> str:
    """The one thing to do so that the probes run where it broke; empty where the cell itself could not run."""
    if breakage.status == COULD_NOT_BUILD:
        column = _KEY.match(breakage.error)
        if column and breakage.kind == "trainer":
            return f"write a factory whose dataset has a {style.code(column.group(1))} column"
        return "write a factory (see README)"
    if breakage.status == FACTORY_FAILED:
        return "fix its factory"
    if breakage.stage == Stage.BUILD:
        return "write a factory that builds it there"
    if breakage.stage == Stage.IMPORT:
        return "make it importable there"
    if breakage.stage == Stage.RUN:
        return "write a factory, or inputs, that it runs with"
    return ""
