"""The release watch: each decision (open, update, comment, close, nothing) on reports made by hand, carried out by
`compat-matrix watch --gh` against a fake `gh` on PATH that records its calls and answers `gh issue list` with the
issue a test says is open."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

from compat_matrix.host import cli, watch
from compat_matrix.host.watch import Action, Finding, Issue

T = "utf8_tokenizer.char_causal_lm:CharacterCausalLMWrapper"
ENABLE, DISABLE, EMBED = "gradient_checkpointing_enable", "gradient_checkpointing_disable", "get_input_embeddings"
NONE_NEWER = "no pre-release of transformers newer than 5.24.0 on the index"
TYPE_ERROR = (
    "CharacterCausalLMWrapper.gradient_checkpointing_enable() got an unexpected keyword argument 'every_n_layers'"
)
RUN = "https://github.com/owner/lib/actions/runs/"


def cell(value: str, installed: str | None, enable="redundant", embed="needed", status="ok", failed=None, why=None):
    """One cell of a report: what it asked for and installed, each audited name's conclusion, or the status of a
    subject that could not run (`failed`) or of the cell (`status`)."""
    per = {ENABLE: enable, DISABLE: "redundant", EMBED: embed}
    subject = {"target": T, "verdict": failed or "differs", "reason": why if failed else None}
    subject |= {"per_method": {}, "conclusion": "could not run"} if failed else {"per_method": per}
    return {
        "cell": f"cell:m:transformers={value}:torch=2.13.0",
        "requested": {"transformers": value, "torch": "2.13.0"},
        "resolved": {"transformers": installed, "torch": "2.13.0+cpu"} if installed else {},
        "status": status,
        "reason": why if status != "ok" else None,
        "subjects": [subject] if status in ("ok", "nothing ran") else [],
    }


def report(*cells: dict, advice: dict[str, str] | None = None) -> dict:
    """A report of these cells, with its overrides as the report stage records them (conclusions per release,
    advice, the errors behind harmful ones)."""
    labels = watch.labels(cells)
    overrides = []
    for name in (ENABLE, DISABLE, EMBED):
        by_release = {
            label: c["subjects"][0]["per_method"].get(name, "could not run") if c["subjects"] else "could not run"
            for label, c in zip(labels, cells, strict=True)
        }
        harmful = [label for label, said in by_release.items() if said == "harmful"]
        errors = [
            {"release": label, "variant": "override", "type": "TypeError", "message": TYPE_ERROR,
             "observations": ["trainer_step.default"]}
            for label in harmful
        ]  # fmt: skip
        advised = (advice or {}).get(name) or ("Keep" if name == EMBED else "Delete")
        reason = f"fixes the TypeError on {', '.join(harmful)}" if harmful else "deleting it changes nothing"
        overrides.append(
            {"target": T, "name": name, "by_release": by_release, "advice": advised, "reason": reason, "errors": errors}
        )
    return {"schema": 2, "matrix": "m", "title": "CharacterCausalLMWrapper: delete 2 of 3 overrides",
            "subjects": [{"target": T}], "overrides": overrides, "cells": list(cells)}  # fmt: skip


OLDER = [cell("4.57.x", "4.57.6"), cell("5.14.1", "5.14.1")]
SKIPPED_PRE = cell("pre", None, status="skipped", why=NONE_NEWER)
BASELINE = report(*OLDER, cell("5.x", "5.24.0"), SKIPPED_PRE)
NEW_HARMFUL = report(*OLDER, cell("5.x", "5.25.0", enable="harmful"), SKIPPED_PRE)
FLIPPED_BACK = report(*OLDER, cell("5.x", "5.25.1"), SKIPPED_PRE)
CHANGED_AGAIN = report(*OLDER, cell("5.x", "5.25.0", enable="harmful", embed="redundant"), SKIPPED_PRE)
PRE_ONLY = report(*OLDER, cell("5.x", "5.24.0"), cell("pre", "5.25.0rc1", enable="harmful"))
COULD_NOT_RUN = report(*OLDER, cell("5.x", None, status="install-failed", why="No solution found"), SKIPPED_PRE)
STOPS_IMPORTING = report(
    *OLDER, cell("5.x", "5.25.0", failed="import-failed", why="ImportError: cannot import name 'X'"), SKIPPED_PRE
)


def opened(new: dict, run: str = RUN + "1") -> Issue:
    """The issue the watch opened for `new`, as gh lists it afterwards."""
    decision = watch.decide(BASELINE, new, None, run)
    assert decision.action == Action.OPEN
    return Issue(7, decision.title, decision.body)


@pytest.fixture
def fake_gh(tmp_path, monkeypatch):
    """A `gh` first on PATH that appends each call (its arguments and stdin) to calls.jsonl and answers
    `gh issue list` with issues.json."""
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "gh"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        "here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))\n"
        "stdin = sys.stdin.read()\n"
        "with open(os.path.join(here, 'calls.jsonl'), 'a') as log:\n"
        "    log.write(json.dumps({'args': sys.argv[1:], 'stdin': stdin or None}) + '\\n')\n"
        "if sys.argv[1:3] == ['issue', 'list']:\n"
        "    print(open(os.path.join(here, 'issues.json')).read())\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:{__import__('os').environ['PATH']}")
    (tmp_path / "issues.json").write_text("[]")
    return tmp_path


def calls(folder: Path) -> list[dict]:
    log = folder / "calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def watched(folder: Path, new: dict, issue: Issue | None, run: str = RUN + "2") -> list[dict]:
    """`compat-matrix watch --gh` on the baseline and `new`, with `issue` open; the gh calls it made."""
    (folder / "baseline.json").write_text(json.dumps(BASELINE))
    (folder / "new.json").write_text(json.dumps(new))
    listed = [{"number": issue.number, "title": issue.title, "body": issue.body}] if issue else []
    (folder / "issues.json").write_text(json.dumps(listed))
    args = ["watch", str(folder / "new.json"), "--baseline", str(folder / "baseline.json"), "--gh", "--run-url", run]
    assert cli.main(args) == cli.EXIT_OK
    return calls(folder)


CREATE, EDIT, COMMENT, CLOSE = (
    [["label", "create"], ["issue", "create"]],
    ["issue", "edit"],
    ["issue", "comment"],
    ["issue", "close"],
)
LIST = ["issue", "list", "--state", "open", "--label", "compat-matrix", "--limit", "100", "--json", "number,title,body"]
CASES = {
    # case: (the new report, the report whose issue is open (None: none), the decision, the gh calls after the list)
    "no change": (copy.deepcopy(BASELINE), None, Action.NOTHING, []),
    "a new harmful": (NEW_HARMFUL, None, Action.OPEN, CREATE),
    "a flip back": (FLIPPED_BACK, NEW_HARMFUL, Action.CLOSE, [CLOSE]),
    "a change while an issue is open": (CHANGED_AGAIN, NEW_HARMFUL, Action.COMMENT, [EDIT, COMMENT]),
    "the same change on a later run": (NEW_HARMFUL, NEW_HARMFUL, Action.UPDATE, [EDIT]),
    "a pre-release-only change": (PRE_ONLY, None, Action.OPEN, CREATE),
    "a cell that could not run": (COULD_NOT_RUN, None, Action.NOTHING, []),
    "a cell that could not run, an issue open": (COULD_NOT_RUN, NEW_HARMFUL, Action.UPDATE, [EDIT]),
    "a class that stops importing": (STOPS_IMPORTING, None, Action.OPEN, CREATE),
}  # fmt: skip


@pytest.mark.parametrize(("new", "open_for", "action", "made"), CASES.values(), ids=CASES.keys())
def test_each_decision_and_the_gh_calls_that_carry_it_out(fake_gh, new, open_for, action, made):
    issue = opened(open_for) if open_for else None
    assert watch.decide(BASELINE, new, issue, RUN + "2").action == action
    done = watched(fake_gh, new, issue)
    assert done[0]["args"] == LIST
    assert [c["args"][:2] for c in done[1:]] == made


def test_a_new_harmful_opens_an_issue_titled_with_the_change_with_the_error_and_the_fix(fake_gh):
    _, label, create = watched(fake_gh, NEW_HARMFUL, None)
    assert label["args"][:5] == ["label", "create", "compat-matrix", "--force", "--color"]
    title = "transformers 5.25.0: `gradient_checkpointing_enable` became harmful"
    assert create["args"] == ["issue", "create", "--title", title, "--body-file", "-", "--label", "compat-matrix"]
    body = create["stdin"]
    assert body.startswith("<!-- compat-matrix watch: m -->\n<!-- compat-matrix watch state: ")
    assert (
        "| transformers 5.25.0 | `gradient_checkpointing_enable` | redundant (on transformers 5.24.0) | **harmful** |"
        in (body)
    )
    assert "TypeError: CharacterCausalLMWrapper.gradient\\_checkpointing\\_enable() got an unexpected keyword" in body
    assert "- `gradient_checkpointing_enable`: **Delete**: fixes the TypeError on transformers 5.25.0" in body
    assert f"([last run]({RUN}2))" in body
    assert [f.key() for f in watch.state(body)] == [
        ("transformers 5.25.0", T, ENABLE, "redundant", "harmful")
    ]  # what a later run compares with


def test_a_pre_release_reads_will_break_if_it_ships(fake_gh):
    _, _, create = watched(fake_gh, PRE_ONLY, None)
    title = create["args"][3]
    assert (
        title
        == "transformers 5.25.0rc1 (pre-release): `gradient_checkpointing_enable` will break in 5.25.0 if rc1 ships"
    )
    assert "**harmful**: will break in 5.25.0 if rc1 ships" in create["stdin"]


def test_a_change_while_open_retitles_the_issue_and_comments_with_what_is_new(fake_gh):
    _, edit, comment = watched(fake_gh, CHANGED_AGAIN, opened(NEW_HARMFUL))
    assert edit["args"][:3] == ["issue", "edit", "7"] and "(and 1 more)" in edit["args"][4]
    assert comment["args"] == ["issue", "comment", "7", "--body-file", "-"]
    assert comment["stdin"].splitlines()[2:] == [
        "- new: transformers 5.25.0: `get_input_embeddings` became redundant",
    ]


def test_a_flip_back_closes_the_issue_saying_why(fake_gh):
    _, close = watched(fake_gh, FLIPPED_BACK, opened(NEW_HARMFUL))
    assert close["args"] == [
        "issue", "close", "7", "--reason", "completed", "--comment",
        f"The answers are back to the baseline ([run]({RUN}2)).",
    ]  # fmt: skip


def test_a_cell_that_could_not_run_keeps_what_it_said_before_and_says_so(fake_gh):
    _, edit = watched(fake_gh, COULD_NOT_RUN, opened(NEW_HARMFUL))
    body = edit["stdin"]
    assert "**harmful** (not checked this run)" in body
    assert "- transformers 5.x (requested): install-failed: No solution found" in body


def test_the_same_issue_the_same_run_is_left_alone(fake_gh):
    issue = opened(NEW_HARMFUL, RUN + "2")
    assert watch.decide(BASELINE, NEW_HARMFUL, issue, RUN + "2").action == Action.NOTHING
    assert watched(fake_gh, NEW_HARMFUL, issue)[1:] == []


def test_a_class_that_stops_importing_is_a_change_of_the_whole_class():
    (found,) = watch.findings(BASELINE, STOPS_IMPORTING)
    assert (found.name, found.before, found.after) == ("", "ran", "import-failed")
    decision = watch.decide(BASELINE, STOPS_IMPORTING, None)
    assert decision.title == "transformers 5.25.0: `CharacterCausalLMWrapper` fails: import-failed"
    assert "ImportError: cannot import name 'X'" in decision.body


def test_a_change_of_advice_is_a_finding():
    new = report(*OLDER, cell("5.x", "5.24.0"), SKIPPED_PRE, advice={EMBED: "Delete"})
    (found,) = watch.findings(BASELINE, new)
    assert watch.headline(found, False) == "`get_input_embeddings`: advice Keep → Delete"
    failed = report(*OLDER, cell("5.x", None, status="crashed"), SKIPPED_PRE, advice={EMBED: "Delete"})
    assert watch.findings(BASELINE, failed) == []  # advice over releases that did not all run says nothing new


@pytest.mark.parametrize(
    ("new_cell", "compared_with"),
    [
        (cell("5.x", "5.25.0"), "transformers 5.24.0"),  # the cell that asked for the same, now another release
        (cell("5.25.0", "5.25.0"), "transformers 5.24.0"),  # a new release of a sweep: the release below it
        (cell("pre", "5.25.0rc1"), "transformers 5.24.0"),  # the baseline's `pre` was skipped: the release below
        (cell("4.0.0", "4.0.0"), "transformers 4.57.6"),  # nothing below: the release above it
    ],
)
def test_which_baseline_cell_a_new_cell_is_compared_with(new_cell, compared_with):
    new = report(*OLDER, cell("5.x", "5.24.0"), SKIPPED_PRE)
    new["cells"] = [c for c in new["cells"] if c["requested"] != new_cell["requested"]] + [
        {**new_cell, "subjects": [{**new_cell["subjects"][0], "per_method": {ENABLE: "orphaned"}}]}
    ]
    (found,) = [f for f in watch.findings(BASELINE, new) if f.after == "orphaned"]
    assert found.since == compared_with


def test_the_state_survives_text_that_would_end_an_html_comment():
    tricky = Finding("transformers 5.25.0 --> x", "c", T, ENABLE, "redundant", "harmful")
    line = watch.state_line([tricky])
    assert line.count("-->") == 1 and watch.state(line) == [tricky]
    assert watch.state("no marker here") == [] and watch.state("<!-- compat-matrix watch state: {bad -->") == []


def test_the_open_issue_is_the_one_with_the_matrixs_marker():
    theirs = {"number": 3, "title": "x", "body": "<!-- compat-matrix watch: other -->"}
    mine = {"number": 9, "title": "y", "body": watch.marker("m") + "\nbody"}
    assert watch.open_issue("m", [theirs, mine]) == Issue(9, "y", mine["body"])
    assert watch.open_issue("m", [theirs]) is None


def test_without_gh_it_prints_the_decisions_as_json(tmp_path, capsys):
    (tmp_path / "m.json").write_text(json.dumps(BASELINE))  # a folder of baselines holds <matrix>.json
    (tmp_path / "new.json").write_text(json.dumps(NEW_HARMFUL))
    issue = opened(NEW_HARMFUL)
    (tmp_path / "issues.json").write_text(json.dumps([issue._asdict()]))
    args = ["watch", str(tmp_path / "new.json"), "--baseline", str(tmp_path), "--issues", str(tmp_path / "issues.json")]
    assert cli.main(args) == cli.EXIT_OK
    (decision,) = json.loads(capsys.readouterr().out)
    assert decision["action"] == "update" and decision["number"] == 7
    assert [call["args"][:3] for call in decision["gh"]] == [["gh", "issue", "edit"]]


@pytest.mark.parametrize(
    ("files", "problem"),
    [
        ({"new.json": "{not json", "baseline.json": json.dumps(BASELINE)}, "cannot read baseline report"),
        ({"new.json": json.dumps(NEW_HARMFUL), "baseline.json": json.dumps({**BASELINE, "matrix": "x"})}, "not 'm'"),
        ({"new.json": json.dumps(NEW_HARMFUL), "baseline.json": json.dumps(BASELINE), "issues.json": "{}"}, "--issues"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, files, problem):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    args = ["watch", str(tmp_path / "new.json"), "--baseline", str(tmp_path / "baseline.json")]
    args += ["--issues", str(tmp_path / "issues.json")] if "issues.json" in files else []
    assert cli.main(args) == cli.EXIT_BAD_MATRIX
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: ") and problem in line


def test_a_failing_gh_call_is_exit_1_naming_it(fake_gh, capsys):
    (fake_gh / "bin" / "gh").write_text(
        "#!/bin/sh\necho 'HTTP 403: Resource not accessible by integration' >&2\nexit 1\n"
    )
    (fake_gh / "baseline.json").write_text(json.dumps(BASELINE))
    (fake_gh / "new.json").write_text(json.dumps(NEW_HARMFUL))
    args = ["watch", str(fake_gh / "new.json"), "--baseline", str(fake_gh / "baseline.json"), "--gh"]
    assert cli.main(args) == cli.EXIT_UNMET
    assert "gh issue list: exit 1: HTTP 403: Resource not accessible by integration" in capsys.readouterr().out


def test_a_matrix_without_a_baseline_is_watched_from_its_first_committed_report(tmp_path, capsys):
    (tmp_path / "new.json").write_text(json.dumps(NEW_HARMFUL))
    (tmp_path / "issues.json").write_text(json.dumps([opened(NEW_HARMFUL)._asdict()]))
    (tmp_path / "reports").mkdir()
    args = ["watch", str(tmp_path / "new.json"), "--baseline", str(tmp_path / "reports")]
    assert cli.main([*args, "--issues", str(tmp_path / "issues.json")]) == cli.EXIT_OK
    out, err = capsys.readouterr()
    assert json.loads(out)[0]["action"] == "nothing" and "m: no baseline in" in err  # nor is an open issue closed


def test_the_errors_of_a_schema_3_report_are_found_by_the_release_a_finding_names():
    """Schema 3 names releases by id (`transformers=5.10.1`); a finding names the row as the report labels it."""
    from compat_matrix.host import render
    from compat_matrix.host.report import make_report
    from test_report import RESULTS, SPEC, TARGET

    new = render.report_json(make_report(SPEC, RESULTS))
    assert new["schema"] == 3
    found = Finding("transformers 5.10.1", "", TARGET, ENABLE, "redundant", "harmful")
    lines = watch.errors(new, [found])
    assert lines[0] == "**Errors**" and lines[2].startswith("- transformers 5.10.1, `gradient_checkpointing_enable`")
