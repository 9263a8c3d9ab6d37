"""A release watch for scheduled runs: what to do about the one GitHub issue of a matrix, decided from the baseline
(the committed report), the new report and the issue open now. Pure functions; the command line runs what
`gh_calls` says, and the workflow only calls the command line.

    findings(baseline, new)        what changed: per cell, audited name and release, a conclusion (`redundant →
                                   harmful` on transformers 5.25.0) or a class that stopped importing; per override,
                                   its advice (`Keep → Delete`)
    decide(baseline, new, issue)   the Decision: open, update, comment, close or nothing, with title, body, labels
    gh_calls(decision)             the `gh` command lines that carry it out, each with what it reads on stdin

A cell is compared with the baseline's cell that asked for the same (the `5.x` cell that installed 5.24.0 then and
5.25.0 now), else with the release just below it there (a new release of a sweep, a pre-release). A cell that
could not run says nothing: an earlier finding on it stands while the issue is open. The open issue carries the
findings it was last written with in a hidden marker, so that a later run knows whether they changed again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple

from compat_matrix.host import collect, prerelease
from compat_matrix.host.baseline import labelled, match
from compat_matrix.host.markup import escape, inline
from compat_matrix.host.releases import public
from compat_matrix.shared.vocabulary import RAN, ConclusionKind, Status

LABEL = "compat-matrix"  # every watch issue has it, so that people can filter
LABEL_COLOR = "5319e7"
LABEL_DESCRIPTION = "A transformers release changed what compat-matrix says about an override"
BODY_LIMIT = 60_000  # characters; an issue body holds 65,536
RUNS_AGAIN = "ran"  # a whole subject's answer where it ran: what a class that stops importing is compared with
ANSWERED = (Status.OK, Status.NOTHING_RAN)  # cells that say something about their subjects
_STATE = re.compile(r"<!-- compat-matrix watch state: (.*?) -->", re.S)


class Action(StrEnum):
    OPEN = "open"
    UPDATE = "update"  # the same findings: the body refreshed, nobody notified
    COMMENT = "comment"  # the findings changed again: the body rewritten and a comment saying what changed
    CLOSE = "close"  # the answers are back to the baseline
    NOTHING = "nothing"


class Issue(NamedTuple):
    """The open issue as `gh issue list --json number,title,body` reads it."""

    number: int
    title: str
    body: str


@dataclass(frozen=True)
class Finding:
    """One answer that differs from the baseline."""

    row: str  # the release, as the report labels it: "transformers 5.25.0"; "" for advice, which spans releases
    cell: str  # the cell's id, to know it again when it could not run
    target: str
    name: str  # the audited name; "" for the whole subject (it stopped importing) or its only conclusion
    before: str  # the baseline's answer: a conclusion, a status ("import-failed"), RUNS_AGAIN, or advice
    after: str
    since: str = ""  # the baseline's release compared with, where it is not `row`
    ships: str = ""  # a pre-release's: "5.25.0 if rc1 ships"

    def key(self) -> tuple[str, ...]:
        return (self.row, self.target, self.name, self.before, self.after)

    def to_json(self) -> dict[str, str]:
        return {name: getattr(self, name) for name in FIELDS}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finding:
        return cls(**{name: str(data.get(name) or "") for name in FIELDS})


FIELDS = ("row", "cell", "target", "name", "before", "after", "since", "ships")


@dataclass(frozen=True)
class Decision:
    matrix: str
    action: Action
    number: int | None  # the issue acted on (None to open one, or for nothing)
    title: str = ""
    body: str = ""
    comment: str = ""  # for comment and close
    labels: tuple[str, ...] = (LABEL,)
    findings: tuple[Finding, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "matrix": self.matrix,
            "action": str(self.action),
            "number": self.number,
            "title": self.title,
            "body": self.body,
            "comment": self.comment,
            "labels": list(self.labels),
            "findings": [f.to_json() for f in self.findings],
            "gh": [{"args": args, "stdin": stdin} for args, stdin in gh_calls(self)],
        }


class _Row(NamedTuple):
    """What collect's labels read of a cell: its requested and installed versions."""

    requested: dict[str, str]
    resolved: dict[str, str]


def labels(cells: Sequence[dict[str, Any]]) -> list[str]:
    """Each cell's row as the report labels it (the axes that vary: `transformers 5.25.0rc1 (pre-release)`)."""
    rows = [_Row(c["requested"], c.get("resolved") or {}) for c in cells]
    axes = collect.varying_axes(rows)  # type: ignore[arg-type]
    return [collect.label(r, axes) for r in rows]  # type: ignore[arg-type]


def answers(cell: dict[str, Any]) -> dict[str, dict[str, str]] | None:
    """What a cell says per subject: each audited name's conclusion; under "" the status of a subject that could
    not run where the cell did (`import-failed`), or the conclusion of one with no audited names. None where the
    cell itself could not run (an install that failed, a crash): it says nothing about its subjects."""
    if cell.get("status") not in ANSWERED:
        return None
    found: dict[str, dict[str, str]] = {}
    for subject in cell.get("subjects") or ():
        verdict, per = subject.get("verdict"), subject.get("per_method") or {}
        if verdict not in RAN:
            found[subject["target"]] = {"": str(verdict)}
        else:
            found[subject["target"]] = dict(per) if per else {"": str(subject.get("conclusion") or verdict)}
    return found


def differences(before: dict[str, dict[str, str]], after: dict[str, dict[str, str]]) -> list[tuple[str, str, str, str]]:
    """(target, name, before, after) for every answer of a subject in both that changed; a subject that stopped
    (or started) running is one difference of the whole subject."""
    found = []
    for target, now in after.items():
        was = before.get(target)
        if was is None:
            continue
        if "" in now or "" in was:
            old, new = was.get("", RUNS_AGAIN), now.get("", RUNS_AGAIN)
            if old != new:
                found.append((target, "", old, new))
            continue
        found += [(target, name, was[name], c) for name, c in now.items() if name in was and was[name] != c]
    return found


def reference(cell: dict[str, Any], unmatched: Sequence[dict[str, Any]], old: Sequence[dict[str, Any]]) -> int | None:
    """The index in `old` of the baseline cell a new cell is compared with: one of the `unmatched` old cells that
    asked for the same and ran (`5.x` installed another release then), else the release just below it on the one
    axis where they differ (above it where none is below), among the releases that ran; None where none fits."""
    ran = [i for i, c in enumerate(old) if answers(c) is not None]
    same = [i for i in ran if old[i] in unmatched and old[i]["requested"] == cell["requested"]]
    if same:
        return same[0]
    mine = _versions(cell)
    below, above = [], []
    for i in ran:
        if prerelease.early(old[i]["requested"], old[i].get("resolved") or {}):
            continue  # a release is compared with releases
        theirs = _versions(old[i])
        apart = [axis for axis in mine if mine[axis] != theirs.get(axis)]
        if len(apart) != 1:
            continue
        here, there = public(mine[apart[0]]), public(theirs.get(apart[0]))
        if here is not None and there is not None:
            (below if there < here else above).append((there, i))
    if below:
        return max(below)[1]
    return min(above)[1] if above else None


def _versions(cell: dict[str, Any]) -> dict[str, str]:
    resolved = cell.get("resolved") or {}
    return {axis: resolved.get(axis) or value for axis, value in cell["requested"].items()}


def ships(cell: dict[str, Any]) -> str:
    """`5.25.0 if rc1 ships`, for a cell that installed a pre-release; else ""."""
    for version in (cell.get("resolved") or {}).values():
        found = public(version) if prerelease.is_pre(version) else None
        if found is not None:
            tag = str(found)[len(found.base_version) :].lstrip(".-_") or str(found)
            return f"{found.base_version} if {tag} ships"
    return ""


def findings(baseline: dict[str, Any], new: dict[str, Any]) -> list[Finding]:
    """Every answer of `new` that differs from `baseline`, most urgent first: per cell (compared with its
    reference), then the advice per override (where every cell ran)."""
    old, cells = baseline["cells"], new["cells"]
    rows, old_rows = labels(cells), labels(old)
    pairs, _, unmatched = match(old, cells)
    partner = {id(after): before for before, after in pairs}
    found = []
    for index, cell in enumerate(cells):
        now = answers(cell)
        if now is None:
            continue
        before = partner.get(id(cell))
        at = old.index(before) if before is not None else reference(cell, unmatched, old)
        was = answers(old[at]) if at is not None else None
        if was is None:
            continue
        since = old_rows[at] if at is not None and old_rows[at] != rows[index] else ""
        found += [
            Finding(rows[index], cell["cell"], target, name, b, a, since, ships(cell))
            for target, name, b, a in differences(was, now)
        ]
    if unchecked(new):
        return sorted(found, key=urgency)  # advice over releases some of which could not run says nothing new
    advised = {(o["target"], o["name"]): o.get("advice") for o in baseline.get("overrides") or ()}
    found += [
        Finding("", "", o["target"], o["name"], str(advised[key]), str(o["advice"]))
        for o in new.get("overrides") or ()
        if (key := (o["target"], o["name"])) in advised and advised[key] and o.get("advice") != advised[key]
    ]
    return sorted(found, key=urgency)


SEVERITY = (
    ConclusionKind.HARMFUL,
    ConclusionKind.ORPHANED,
    ConclusionKind.NEEDED,
    ConclusionKind.DIFFERENTLY,
    ConclusionKind.UNKNOWN,
    ConclusionKind.COULD_NOT_RUN,
    ConclusionKind.REDUNDANT,
)
BREAKS = (ConclusionKind.HARMFUL, ConclusionKind.ORPHANED, ConclusionKind.COULD_NOT_RUN)


def urgency(finding: Finding) -> tuple[int, int]:
    """Releases before pre-releases before advice; within each, a subject that stopped running first, then by
    conclusion."""
    where = 2 if not finding.row else int(bool(finding.ships))
    if finding.after in SEVERITY:
        return (where, 1 + SEVERITY.index(ConclusionKind(finding.after)))
    return (where, len(SEVERITY) + 1 if finding.after == RUNS_AGAIN else 0)


def breaks(answer: str) -> bool:
    """Whether an answer is a breakage: harmful, orphaned, could not run, or the status of a subject that cannot
    run (`import-failed`)."""
    return answer in BREAKS or answer not in {*ConclusionKind, *RAN, RUNS_AGAIN}


def who(finding: Finding, several: bool) -> str:
    cls = finding.target.rsplit(":", 1)[-1]
    if not finding.name:
        return f"`{cls}`"
    return f"`{cls}.{finding.name}`" if several else f"`{finding.name}`"


def headline(finding: Finding, several: bool) -> str:
    """`transformers 5.25.0: \\`gradient_checkpointing_enable\\` became harmful`, and the like for a pre-release
    (`… will break in 5.25.0 if rc1 ships`), a class that stops running and a change of advice."""
    name, after = who(finding, several), finding.after
    if not finding.row:
        return f"{name}: advice {finding.before} → {after}"
    if finding.ships:
        said = f"will break in {finding.ships}" if breaks(after) else f"would become {after} in {finding.ships}"
    elif not finding.name and after == RUNS_AGAIN:
        said = f"runs again (was {finding.before})"
    elif not finding.name and breaks(after):
        said = f"fails: {after}"
    else:
        said = f"became {after}"
    return f"{finding.row}: {name} {said}"


def title(found: Sequence[Finding], several: bool) -> str:
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    return headline(found[0], several) + more


def marker(matrix: str) -> str:
    """The hidden first line that finds a matrix's issue again."""
    return f"<!-- compat-matrix watch: {matrix} -->"


def state_line(found: Sequence[Finding]) -> str:
    text = json.dumps({"findings": [f.to_json() for f in found]}, ensure_ascii=False, sort_keys=True)
    text = text.replace("--", "-\\u002d")  # JSON still, and no `-->` to end the comment early
    return f"<!-- compat-matrix watch state: {text} -->"


def state(body: str) -> list[Finding]:
    """The findings an issue was last written with (none where its marker is missing or damaged)."""
    found = _STATE.search(body or "")
    try:
        return [Finding.from_json(f) for f in json.loads(found.group(1))["findings"]] if found else []
    except (ValueError, KeyError, TypeError, AttributeError):
        return []


def open_issue(matrix: str, issues: Sequence[dict[str, Any]]) -> Issue | None:
    """The open issue of `matrix` among `gh issue list --json number,title,body`'s answer: the one whose body
    starts with its marker (the oldest, should there be several)."""
    mine = [i for i in issues if str(i.get("body") or "").startswith(marker(matrix))]
    if not mine:
        return None
    first = min(mine, key=lambda i: int(i["number"]))
    return Issue(int(first["number"]), str(first.get("title") or ""), str(first["body"]))


def unchecked(new: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(cell id, row, why) of the cells that could not run this time (a `pre` with nothing to stand for aside:
    that is no news)."""
    rows = labels(new["cells"])
    return [
        (c["cell"], rows[i], f"{c['status']}" + (f": {c['reason']}" if c.get("reason") else ""))
        for i, c in enumerate(new["cells"])
        if answers(c) is None and c.get("status") != Status.SKIPPED
    ]


def decide(
    baseline: dict[str, Any] | None, new: dict[str, Any], issue: Issue | None, run_url: str = "", report: str = ""
) -> Decision:
    """What to do about the matrix's one issue. `baseline`: the committed report (None: there is none, so nothing
    is decided, an open issue left as it is); `issue`: the one open now; `run_url`, `report`: where this run and
    its report are, for the body."""
    matrix = str(new["matrix"])
    if baseline is None:
        return Decision(matrix, Action.NOTHING, issue.number if issue else None)
    fresh = findings(baseline, new)
    previous = state(issue.body) if issue else []
    failed = {cell: why for cell, _, why in unchecked(new)}
    keys = {f.key() for f in fresh}
    carried = [f for f in previous if f.cell in failed and f.key() not in keys]  # not checked again: it stands
    now = tuple(sorted([*fresh, *carried], key=urgency))
    if not now:
        if issue is None:
            return Decision(matrix, Action.NOTHING, None)
        said = "The answers are back to the baseline" + (f" ([run]({run_url}))" if run_url else "") + "."
        return Decision(matrix, Action.CLOSE, issue.number, issue.title, issue.body, said)
    several = len(new.get("subjects") or ()) > 1
    heading, text = title(now, several), body(new, now, failed, run_url, report)
    if issue is None:
        return Decision(matrix, Action.OPEN, None, heading, text, findings=now)
    if {f.key() for f in now} != {f.key() for f in previous}:
        said = changed_again(previous, now, several, run_url)
        return Decision(matrix, Action.COMMENT, issue.number, heading, text, said, findings=now)
    unchanged = text == issue.body and heading == issue.title
    return Decision(matrix, Action.NOTHING if unchanged else Action.UPDATE, issue.number, heading, text, findings=now)


def changed_again(previous: Sequence[Finding], now: Sequence[Finding], several: bool, run_url: str) -> str:
    before, after = {f.key() for f in previous}, {f.key() for f in now}
    lines = ["Changed again" + (f" ([run]({run_url}))" if run_url else "") + ":", ""]
    lines += [f"- new: {inline(headline(f, several))}" for f in now if f.key() not in before]
    lines += [f"- back to the baseline: {inline(headline(f, several))}" for f in previous if f.key() not in after]
    return "\n".join(lines)


def body(
    new: dict[str, Any], found: Sequence[Finding], failed: dict[str, str], run_url: str = "", report: str = ""
) -> str:
    """The issue's text: the changed rows, the errors behind them, the fix where the report has one, what could
    not be checked; under a hidden marker and the findings' state."""
    matrix, several = str(new["matrix"]), len(new.get("subjects") or ()) > 1
    releases = list(dict.fromkeys(f.row for f in found if f.row))
    lines = [marker(matrix), state_line(found), ""]
    what = ", ".join(f"**{inline(r)}**" for r in releases) or "The advice"
    lines += [f"{what} changed what compat-matrix says about `{inline(matrix)}` since the committed report.", ""]
    lines += ["| release | override | baseline | now |", "|---|---|---|---|"]
    for f in found:
        since = f" (on {f.since})" if f.since else ""
        now = f"**{f.after}**" + (f": will break in {f.ships}" if f.ships and breaks(f.after) else "")
        now += " (not checked this run)" if f.cell in failed else ""
        name = who(f, several) if f.name else f"{who(f, several)} (the class)"
        lines.append(f"| {escape(f.row or 'every release')} | {name} | {escape(f.before + since)} | {now} |")
    lines += ["", *errors(new, found)]
    lines += fixes(new, found, several)
    if failed:
        lines += ["**Could not run this time** (what they said before stands):", ""]
        rows = {c["cell"]: r for c, r in zip(new["cells"], labels(new["cells"]), strict=True)}
        lines += [f"- {escape(rows.get(cell, cell))}: {escape(why)}" for cell, why in failed.items()] + [""]
    if new.get("title"):
        where = f" ({report})" if report else ""
        lines += [f"The report now: *{escape(new['title'])}*{where}.", ""]
    lines += [
        "---",
        "Opened by compat-matrix's release watch" + (f" ([last run]({run_url}))" if run_url else "") + ". It updates "
        "this issue while it stays open, comments when the answers change again, and closes it when they are back "
        "to the baseline. To accept the new answers, commit the new report: it becomes the baseline.",
    ]
    text = "\n".join(lines) + "\n"
    return text if len(text) <= BODY_LIMIT else text[: BODY_LIMIT - 40] + "\n\n*(cut to fit an issue)*\n"


def errors(new: dict[str, Any], found: Sequence[Finding]) -> list[str]:
    """A line per error behind the findings, as the report records it per override and release; and why a subject
    that stopped running did."""
    lines = []
    records = {(o["target"], o["name"]): o for o in labelled(new).get("overrides") or ()}
    for f in found:
        for e in records.get((f.target, f.name), {}).get("errors") or ():
            if e.get("release") == f.row:
                side = "with the override" if e.get("variant") == "override" else "without it"
                error = escape(f"{e.get('type')}: {e.get('message')}")
                shown = ", ".join(e.get("observations") or ())
                lines.append(
                    f"- {escape(f.row)}, `{f.name}` {side}: {error}" + (f" ({escape(shown)})" if shown else "")
                )
        if not f.name and f.row:
            cell = next((c for c in new["cells"] if c["cell"] == f.cell), {})
            why = next((s.get("reason") for s in cell.get("subjects") or () if s["target"] == f.target), None)
            if why:
                lines.append(f"- {escape(f.row)}, `{f.target}`: {escape(f.after + ': ' + why)}")
    lines = list(dict.fromkeys(lines))
    return ["**Errors**", "", *lines, ""] if lines else []


def fixes(new: dict[str, Any], found: Sequence[Finding], several: bool) -> list[str]:
    """What the report advises for each override a finding names, with its reason (the fix, where there is one)."""
    records = {(o["target"], o["name"]): o for o in new.get("overrides") or ()}
    named = list(dict.fromkeys((f.target, f.name) for f in found if f.name))
    lines = []
    for target, name in named:
        o = records.get((target, name))
        if o and o.get("advice"):
            reason = f": {o['reason']}" if o.get("reason") else ""
            label = who(Finding("", "", target, name, "", ""), several)
            lines.append(f"- {label}: **{o['advice']}**{escape(reason)}")
    return ["**What the report advises**", "", *lines, ""] if lines else []


def gh_calls(decision: Decision) -> list[tuple[list[str], str | None]]:
    """The `gh` command lines that carry out a decision, each with what it reads on stdin (a body); the repository
    is gh's own (GH_REPO, or the checkout's)."""
    number = str(decision.number)
    edit = ["gh", "issue", "edit", number, "--title", decision.title, "--body-file", "-"]
    if decision.action == Action.OPEN:
        label = ["gh", "label", "create", LABEL, "--force", "--color", LABEL_COLOR, "--description", LABEL_DESCRIPTION]
        create = ["gh", "issue", "create", "--title", decision.title, "--body-file", "-"]
        create += [arg for name in decision.labels for arg in ("--label", name)]
        return [(label, None), (create, decision.body)]
    if decision.action == Action.UPDATE:
        return [(edit, decision.body)]
    if decision.action == Action.COMMENT:
        return [(edit, decision.body), (["gh", "issue", "comment", number, "--body-file", "-"], decision.comment)]
    if decision.action == Action.CLOSE:
        return [(["gh", "issue", "close", number, "--reason", "completed", "--comment", decision.comment], None)]
    return []


LIST = ["gh", "issue", "list", "--state", "open", "--label", LABEL, "--limit", "100", "--json", "number,title,body"]
