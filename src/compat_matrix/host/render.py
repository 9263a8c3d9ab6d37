"""Render the report: markdown that pastes into a PR, JSON for machines (compat_matrix.host.report_json, read here
too), CSV for spreadsheets.

Pure functions that only format: the rows, their order and labels, the verdicts, the conclusions, the grid, the
release's health, what the first screen holds and the words were all decided before (collect → verdict → conclude
→ grid, health, first_screen, wording). Nothing here reads a file or the clock, so unchanged results render to
byte-identical files. Each format escapes its own text, once: table cells given as plain text are escaped by
`table`, cells already written as markdown (`Md`) only made safe for a row.

The markdown, top to bottom: a title that is the answer (what breaks and where, then the counts of advice), the
breakages it does not name, unmet expectations, one caution line when something is harmful, the decision grid
(compat_matrix.host.grid) with its legend, or at library scale the rows that ask for action and a line per cause
for the rest (compat_matrix.host.first_screen), deprecations on one line, what the class as shipped does across
releases (where no harmful override or breakage already says it), changes since a baseline, the probes' summary
table (the motivating PR's) for the subjects whose probes have one, your tests; then, collapsed, the whole grid
(where the first screen grouped it), the evidence per override and the versions; the command that reproduces the
run last.
"""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Sequence
from dataclasses import dataclass, field

from compat_matrix.host import first_screen as screens
from compat_matrix.host import health, prerelease, since, wording
from compat_matrix.host.baseline import Change, failing
from compat_matrix.host.collect import Collected
from compat_matrix.host.conclude import Concluded
from compat_matrix.host.grid import Grid, Reached, Row
from compat_matrix.host.markup import Md, escape, inline, table
from compat_matrix.host.overrides import OverrideConclusions, SubjectConclusions
from compat_matrix.host.range_check import RangeCheck
from compat_matrix.host.releases import axis_of, runs
from compat_matrix.host.report_json import SCHEMA as SCHEMA  # the JSON in a module of its own; read here too
from compat_matrix.host.report_json import override_json as override_json
from compat_matrix.host.report_json import report_json as report_json
from compat_matrix.host.report_json import subject_json as subject_json
from compat_matrix.host.spec import Subject
from compat_matrix.host.tests_seen import TEST_COLUMNS, TestsSeen
from compat_matrix.host.wording import MARKDOWN, PLAIN, Summary, spelled, versions_text
from compat_matrix.host.wording.evidence import source
from compat_matrix.shared.results import Discovery
from compat_matrix.shared.vocabulary import ConclusionKind, Status

COLUMNS = {"override": "with override", "base": "base implementation"}
BASE_MEANING = (
    "*base implementation*: the class with its audited overrides deleted, so each name resolves to the next class "
    "in its MRO that defines it."
)
EVIDENCE = "<details><summary>Evidence"  # where the collapsed parts start: compat_matrix.host.cut cuts them first
VERSIONS = "<details><summary>Versions"
WHOLE_GRID = "<details><summary>The whole grid"  # where the first screen shows only the rows that ask for action
MARKDOWN_LIMIT = 65_536  # characters of a pull-request comment: the report pastes whole; more evidence goes beside it
OK, FAILING, COULD_NOT_RUN = "ok", "failing", "could not run"  # the report's `status`, as its exit code (0, 1, 3)


@dataclass(frozen=True)
class ReportMeta:
    name: str
    file: str  # the matrix file, as the reader should type it
    command: str  # reproduces the run
    subjects: tuple[Subject, ...]
    exclude_newer: str | None = None  # the run resolved and installed releases as of this moment


@dataclass(frozen=True)
class Report:
    """Everything the files show, decided: the collected rows and observations, each cell × subject concluded,
    per subject its conclusions (structured) and their summary (plain words, for the JSON), the grid, unmet
    expectations, what reached a `--fail-on` conclusion, and changes since a baseline (None: no baseline given)."""

    meta: ReportMeta
    collected: Collected
    rows: tuple[Concluded, ...]
    subjects: dict[str, SubjectConclusions]
    summaries: dict[str, Summary]
    grid: Grid
    unmet: tuple[str, ...] = ()
    changes: tuple[Change, ...] | None = None
    fail_on: tuple[ConclusionKind, ...] = ()
    failed_on: tuple[Reached, ...] = ()  # `Class.name: harmful on transformers 5.24.0`, per override and conclusion
    # per module or package target: what the cells found there (newest first)
    found: dict[str, tuple[Discovery, ...]] = field(default_factory=dict)
    # per subject: whether each declared range is honest (where an axis sweeps one)
    ranges: dict[str, tuple[RangeCheck, ...]] = field(default_factory=dict)
    health: tuple[health.Breakage, ...] = ()  # what breaks for the class as shipped (or the cell), and where
    screen: screens.Screen | None = None  # what the first screen holds; None: the whole grid, nothing grouped
    since: str = "the baseline"  # what `changes` compare with, as its reader names it (`reports/<name>.json`)

    @property
    def first(self) -> screens.Screen:
        return self.screen or screens.Screen(False, self.grid, (), self.grid)

    @property
    def order(self) -> list[str]:
        """Every tested release, newest first."""
        return [c.label for c in self.collected.cells]

    @property
    def title(self) -> str:
        return self.title_in(PLAIN)

    def title_in(self, style: wording.Style) -> str:
        """What breaks and where, then what to do with the audited overrides."""
        counts = wording.title(self.name, [row.override for row in self.grid.rows], style)
        return health.title(self.name, counts, self.first.said, self.order, style)

    @property
    def name(self) -> str:
        """What the title names: the class of the only subject, else the matrix."""
        if len(self.meta.subjects) == 1:
            return self.meta.subjects[0].target.rsplit(":", 1)[-1].rsplit(".", 1)[-1]
        return self.meta.name

    @property
    def status(self) -> str:
        cells = [c.result for c in self.collected.cells if not prerelease.early(c.result.requested, c.result.resolved)]
        rows = [r for r in self.rows if not prerelease.early(r.row.cell.requested, r.row.cell.resolved)]
        if any(c.status != Status.OK for c in cells) or any(not r.verdict.ran for r in rows):
            return COULD_NOT_RUN
        return FAILING if self.unmet or self.failed_on or failing(list(self.changes or ())) else OK


MERGE_ABOVE = 5  # rows: a longer probe-summary table gives neighbours that read alike one row


def merged(rows: list[list[str]], axis: bool = True) -> list[list[str]]:
    """Neighbouring rows (newest first) whose cells but the label are equal, as one row labelled with their versions
    (`transformers 5.16.1–5.22.2 (7 releases)`; without `axis`, `5.16.1–5.22.2 (7 releases)`), so that a sweep's
    table stays short where nothing changes."""
    order = [row[0] for row in rows]
    return [[versions_text([r[0] for r in run], order, axis), *run[0][1:]] for run in runs(rows, lambda r: r[1:])]


def tests_section(seen: TestsSeen) -> list[str]:
    """The user's own tests: which need the override on each version, and which notice a broken one."""
    rows = [[label, *(", ".join(tests) or "—" for tests in columns)] for label, columns in seen.per_version]
    out = ["**Your tests**, with the override and without it:", "", table(["", *TEST_COLUMNS], rows), ""]
    if not seen.mutants:
        return [
            *out,
            "Run with `mutants = true` (or `nox -s matrix -- --mutants`) to learn which tests notice a "
            "broken override.",
            "",
        ]
    out += [f"**Which tests notice a broken override** ({len(seen.mutants)} broken versions):", ""]
    out += [table(["test", "catches"], [list(pair) for pair in seen.catches]), ""]
    notes = [
        f"- {escape(t)} catches none: it cannot tell a broken override from a working one." for t in seen.catch_none
    ]
    notes += [f"- {escape(test)} catches nothing that {escape(other)} does not." for test, other in seen.adds_nothing]
    return [*out, *notes, ""] if notes else out


def versions_table(collected: Collected) -> str:
    results = [c.result for c in collected.cells]
    packages = list(dict.fromkeys(p for r in results for p in r.resolved))
    rows = [
        [", ".join(f"{a} {v}" for a, v in r.requested.items()), r.outcome, *(r.resolved.get(p, "—") for p in packages)]
        for r in results
    ]
    return table(["requested", "status", *packages], rows)


def markdown(report: Report) -> str:
    """The report (documents)."""
    return documents(report)[0]


def documents(report: Report) -> tuple[str, str | None]:
    """The report, in at most MARKDOWN_LIMIT characters where the evidence is what makes it longer: the evidence of
    the subjects that do not fit (in the grid's order, the first that do stay) is a document of its own, `evidence`
    (`<name>.evidence.md` beside it, which the report names); None where all of it fits. Against a baseline, as
    compat_matrix.host.since lays it out: what changed first, this collapsed."""
    title = inline(report.title_in(MARKDOWN))
    lines = body(report, [_EVIDENCE_HERE])
    laid = "\n".join([f"# {title}", "", *lines] if report.changes is None else since.comment(report, title, lines))
    head, _, tail = laid.partition(_EVIDENCE_HERE + "\n")
    sections = ["".join(f"{line}\n" for line in evidence_section(report, s)) for s in _in_grid_order(report)]
    room = MARKDOWN_LIMIT - len(head) - len(tail) - 1
    if sum(map(len, sections)) <= room:
        return f"{head}{''.join(sections)}{tail}\n", None
    kept = 0
    note = _evidence_elsewhere(report, len(sections), kept) + "\n\n"
    while kept < len(sections) and sum(map(len, sections[: kept + 1])) + len(note) <= room:
        kept += 1
        note = _evidence_elsewhere(report, len(sections) - kept, kept) + "\n\n"
    evidence = "".join(sections[kept:])
    return f"{head}{''.join(sections[:kept])}{note}{tail}\n", f"# {title}: the evidence\n\n{evidence}"


_EVIDENCE_HERE = "\x00evidence\x00"  # where the evidence goes, in the report laid out once


def evidence_file(name: str) -> str:
    return f"{name}.evidence.md"


def _evidence_elsewhere(report: Report, count: int, shown: int) -> str:
    whose = "every class" if not shown else "one more class" if count == 1 else f"{count} more classes"
    return f"The evidence for {whose} is in `{evidence_file(report.meta.name)}`, beside this report."


def _in_grid_order(report: Report) -> list[Subject]:
    return sorted(report.meta.subjects, key=lambda s: _first_row(report.grid, s.target))


def body(report: Report, evidence: list[str]) -> list[str]:
    """The report below its title, with `evidence` (its lines) before the versions."""
    out = health_lines(report)
    if report.unmet:
        out += ["**Unmet expectations**", "", *(f"- {escape(line)}" for line in report.unmet), ""]
    unsaid = [f for f in report.failed_on if not said_by_caution(report, f)]
    if unsaid:
        kinds = ",".join(kind.option for kind in report.fail_on)
        out += [f"**Fails the run** (`--fail-on {kinds}`): " + "; ".join(escape(x) for x in unsaid), ""]
    out += first_screen(report)
    out += context_lines(report)
    out += summary_tables(report)
    out += whole_grid(report)
    out += evidence
    out += [f"{VERSIONS}</summary>", "", versions_table(report.collected), ""]
    if report.meta.exclude_newer:
        newer = report.meta.exclude_newer
        out += [f"Releases as of {newer} (`exclude_newer`): uploaded later, they were left out.", ""]
    out += ["</details>", "", *reproduce(report.meta)]
    return out


def said_by_caution(report: Report, found: Reached) -> bool:
    """Whether the caution line says what `found` says: it names every harmful override, where it breaks."""
    return found.kind == ConclusionKind.HARMFUL and bool(caution_of(report))


def caution_of(report: Report) -> str:
    grid = report.first.full
    fails = ",".join(f.kind.option for f in report.failed_on if f.kind == ConclusionKind.HARMFUL)
    overrides = [row.override for row in grid.rows]
    return wording.caution(overrides, report.order, grid.several, above=said_errors(report), fails=fails)


def context_lines(report: Report) -> list[str]:
    """What each module or package target stood for in the cells, and whether the declared range is honest for
    each subject (subjects that read alike said once)."""
    out = [inline(wording.found_line(target, found)) for target, found in report.found.items()]
    out += [f"**Installed instead**: {escape(n)}" for n in dict.fromkeys(installed_notes(report.collected))]
    alike: dict[str, list[str]] = {}
    for target, checks in report.ranges.items():
        for check in checks:
            alike.setdefault(wording.range_line(check), []).append(target)
    for line, targets in alike.items():
        whose = f" ({screens.classes(targets)})" if report.grid.several else ""
        out.append(f"**Declared range**{whose}: {inline(line)}")
    return [part for line in out for part in (line, "")]


def installed_notes(collected: Collected) -> list[str]:
    """What the cells say of how they were installed (a ranged value's newest release that could not be), in the
    cells' order."""
    return [note for c in collected.cells for note in c.result.notes]


def health_lines(report: Report) -> list[str]:
    """What breaks that the title does not name, a line each."""
    below = health.below(report.first.said)
    return [*(f"- {inline(health.sentence(s, report.order))}" for s in below), ""] if below else []


def said_errors(report: Report) -> frozenset[str]:
    """The errors the release's health says at the top: said once."""
    return frozenset(s.error for s in report.first.said)


def grid_table(report: Report, grid: Grid, alike: bool = False) -> list[str]:
    """A grid of rows, with its legend; `alike`: rows of one name that read alike in every column and in their
    advice share one row, naming each class (colpali's three PaliGemma wrappers, each with the same six Deletes)."""
    order, above = report.order, health.said_above(report.health)
    columns = [versions_text(list(c), order, axis=i == 0) for i, c in enumerate(grid.columns)]
    shared: dict[tuple, list[Row]] = {}  # (name, cells, advice) -> its rows; a row of its own where not `alike`
    for row in grid.rows:
        advice = f"**{row.override.advice.kind}**: {wording.reason(row.override, order, above=above)}"
        key = (row.override.name, row.cells, advice) if alike and row.override.name else (id(row), advice)
        shared.setdefault(key, []).append(row)
    rows = [
        [
            Md(_named(rows, grid.several) + (" (nothing audited)" if rows[0].nothing_audited else "")),
            *(wording.cell(kind) for kind in rows[0].cells),
            Md(key[-1]),
        ]
        for key, rows in shared.items()
    ]
    return [table(["override", *columns, "advice"], rows), "", inline(wording.legend(grid.kinds)), ""]


def _named(rows: Sequence[Row], several: bool) -> str:
    """What the first column calls rows that share it: `Class.name`, or `A`, `B`: `name`."""
    if len(rows) == 1:
        return wording.name_of(rows[0].override, several)
    return f"{screens.classes([row.override.target for row in rows])}: {wording.name_of(rows[0].override, False)}"


def first_screen(report: Report) -> list[str]:
    """The caution, the grid (where grouped, the rows that ask for action, and a line per cause for the rest) and
    its legend, deprecations, and what the class as shipped does across releases."""
    screen, order = report.first, report.order
    grid = screen.full
    overrides = [row.override for row in grid.rows]
    out = []
    caution = caution_of(report)
    if caution:
        out += [inline(caution), ""]
    out += grid_table(report, screen.grid, alike=screen.grouped) if screen.grid.rows else []
    if screen.groups:
        out += [*(f"- {inline(screens.line(g, order, grid.several))}" for g in screen.groups), ""]
    deprecated = wording.deprecated_line(overrides, order, grid.several)
    if deprecated:
        out += [inline(deprecated), ""]
    classes: dict[str, list[str]] = {}  # what the class as shipped does across releases: said once for the classes
    for answer in report.subjects.values():
        for line in wording.shipped_lines(answer, order, MARKDOWN, explained=explained(answer) | said_errors(report)):
            classes.setdefault(line, []).append(wording.name_of_subject(answer.target))
    shipped = [(f"{', '.join(names)}: " if grid.several else "") + line for line, names in classes.items()]
    out += [*(f"- {inline(line)}" for line in shipped), ""] if shipped else []
    return out


def whole_grid(report: Report) -> list[str]:
    """Collapsed, where the first screen shows only the rows that ask for action: every row."""
    if not report.first.grouped:
        return []
    count = sum(not row.nothing_audited for row in report.grid.rows)
    return [f"{WHOLE_GRID}: {count} overrides</summary>", "", *grid_table(report, report.grid), "</details>", ""]


def explained(answer: SubjectConclusions) -> frozenset[str]:
    """The errors of the class as shipped that a harmful override already accounts for (the caution says them)."""
    return frozenset(f.error for o in answer.overrides for f in o.failures() if f.variant == "override")


def summary_tables(report: Report) -> list[str]:
    """The probes' summary per release (the motivating PR's table), for the subjects whose probes have one: one
    subject's rows are its releases (neighbours that read alike share one past MERGE_ABOVE); with several subjects,
    one table, a row per subject and stretch of releases that read alike (subjects whose rows all read alike
    share them: one row for twenty classes that switch alike). Then your own tests, per subject."""
    subjects = _in_grid_order(report)
    tables: list[tuple[Subject, list[list[str]]]] = []
    for subject in subjects:
        rows = report.subjects[subject.target].rows
        if any(r.row.override_shown or r.row.base_shown for r in rows):
            shown = [
                [r.label, *((r.row.override_shown, r.row.base_shown) if r.verdict.ran else (r.verdict.verdict,) * 2)]
                for r in rows
            ]
            tables.append((subject, shown))
    out = []
    if len(tables) == 1 and not report.grid.several:
        ((_, shown),) = tables
        out += [BASE_MEANING, "", table(["", *COLUMNS.values()], merged(shown) if len(shown) > MERGE_ABOVE else shown)]
        out += [""]
    elif tables:
        alike: dict[tuple[tuple[str, ...], ...], list[str]] = {}  # classes whose rows read alike share them
        for subject, shown in tables:
            alike.setdefault(tuple(map(tuple, merged(shown, axis=False))), []).append(subject.target)
        rows = [
            [Md(", ".join(wording.name_of_subject(t) for t in targets)), *row]
            for stretch, targets in alike.items()
            for row in stretch
        ]
        out += [BASE_MEANING, "", table(["class", axis_of(report.order), *COLUMNS.values()], rows), ""]
    for subject in subjects:
        seen = report.summaries[subject.target].tests
        if seen is not None:
            out += [f"{wording.name_of_subject(subject.target)}:", ""] if report.grid.several else []
            out += tests_section(seen)
    return out


def evidence_section(report: Report, subject: Subject) -> list[str]:
    """Collapsed: per override of the subject, what differs, each error once; what told nothing; what it overrides
    without being audited."""
    answer, order = report.subjects[subject.target], report.order
    several = report.grid.several
    whose = f" for <code>{html.escape(subject.target.rsplit(':', 1)[-1])}</code>" if several else ""
    out = [f"{EVIDENCE}{whose}: what differs, per override</summary>", ""]
    axis = axis_of(order)
    above = health.said_above(report.health, PLAIN)
    ordered = sorted(answer.overrides, key=lambda o: report.grid.rows.index(_row(report.grid, o)))
    code = next((r.row.result.code for r in answer.rows if r.row.result is not None and r.row.result.code), ())
    for overrides, found in wording.alike([(o, wording.what_differs(o, order, above=above)) for o in ordered]):
        names = ", ".join(wording.name_of(o, False) for o in overrides)
        where = [at for o in overrides[:1] if len(overrides) == 1 and (at := source(o.name, code))]
        out += [f"**{names}** ({str(overrides[0].advice.kind).lower()})" + "".join(f" at `{at}`" for at in where), ""]
        if found.rows:
            out += [table([axis, "call", "with override", "deleted"], [list(r) for r in found.rows]), ""]
        out += values_list(found.values)
        notes = [
            *(escape(e) for e in found.errors),
            *(escape(n) for n in found.notes),
            *([f"{found.cut} more rows in the JSON"] if found.cut else []),
            *([wording.left_out(found.left_out)] if found.left_out else []),
        ]
        out += [*(f"- {n}" for n in notes), ""] if notes else []
    told = wording.told_nothing(answer, order)
    if told:
        out += [f"Told nothing (both sides failed alike, or found nothing to look at): {inline(told)}", ""]
    ran = next((r.row.result for r in answer.rows if r.row.result is not None and r.row.result.overrides), None)
    others = [o.name for o in ran.overrides if not o.audited] if ran else []
    if others:
        out += ["Not audited: " + ", ".join(f"`{name}`" for name in others) + ".", ""]
    return [*out, "</details>", ""]


def values_list(values: Sequence[tuple[str, tuple[str, ...]]]) -> list[str]:
    """Under an evidence table, the values too long for its cells, whole: a line per part, a list's items (call
    sites) each on its own line. Its bullets are `*`, so that it stays a list of its own beside the notes' `-`."""
    out = []
    for tag, lines in values:
        out.append(f"* {escape(tag)}:")
        out += [f"  {'  ' * (len(line) - len(line.lstrip()) > 0)}* {escape(line.strip())}" for line in lines]
    return [*out, ""] if out else []


def _row(grid: Grid, override: OverrideConclusions) -> Row:
    return next(row for row in grid.rows if row.override is override)


def _first_row(grid: Grid, target: str) -> int:
    """Where a subject's first row is in the grid: its evidence comes in that order."""
    return next((i for i, row in enumerate(grid.rows) if row.override.target == target), len(grid.rows))


def reproduce(meta: ReportMeta) -> list[str]:
    if "`" in meta.command:
        return [f"Matrix {escape(meta.name)}; reproduce:", "", "```sh", meta.command, "```"]
    return [f"Matrix `{meta.name}`; reproduce: `{meta.command}`"]


def csv_text(collected: Collected) -> str:
    """Every observation, one row each, for spreadsheets; values spelled as in the markdown."""
    columns = ["label", "cell", "target", "probe", "name", "override", "base", "same", "carries"]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for o in collected.observations.to_dict("records"):
        values = map(spelled, (o["override"], o["base"], o["same"], o["carries"]))
        writer.writerow([inert(text) for text in (o["label"], o["cell"], o["target"], o["probe"], o["name"], *values)])
    return buffer.getvalue()


def inert(text: str) -> str:
    """`text` as a spreadsheet shows it, never runs it: text that starts like a formula (`=`, `+`, `-`, `@`, a tab
    or a carriage return; an error message of a user's library, say) gets a leading `'`. Numbers stay numbers."""
    if not text.startswith(("=", "+", "-", "@", "\t", "\r")):
        return text
    try:
        float(text)
        return text
    except ValueError:
        return "'" + text
