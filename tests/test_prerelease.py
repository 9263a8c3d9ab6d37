"""Pre-releases as an early warning: the axis value `pre` against the recorded index (which has no pre-release newer
than 5.24.0) and against the same answer with a 5.25.0rc1 added; the cell it stands for, its column, and that it
never fails a run by itself. No network: the index answers from the test's cache."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.version import Version

from compat_matrix.host import baseline, cli, collect, grid, plan, prerelease, releases, render, verdict
from compat_matrix.host.advice import advise
from compat_matrix.host.cells import Cell, install_args
from compat_matrix.host.conclude import Conclusion, OnRelease
from compat_matrix.host.folders import result_path
from compat_matrix.host.overrides import OverrideConclusions
from compat_matrix.host.package_index import lookup
from compat_matrix.host.report import make_report
from compat_matrix.host.resolve import check_axes, resolve
from compat_matrix.host.spec import Axis, MatrixError, load
from compat_matrix.shared.results import CellResult
from compat_matrix.shared.vocabulary import ConclusionKind, Status
from conftest import INDEX, ROOT, answer, default_matrix_variant, run_matrix
from test_report import HOSTILE, SPEC, observations, result

RC = "5.25.0rc1"


def with_candidate(version: str = RC) -> str:
    """The recorded answer of the index with one more release (a wheel, uploaded after 5.24.0)."""
    data = json.loads(INDEX.read_text())
    data["files"].append(
        {"filename": f"transformers-{version}-py3-none-any.whl", "upload-time": "2026-11-28T10:00:00Z", "yanked": False}
    )
    return json.dumps(data)


@pytest.mark.parametrize(
    ("versions", "expected"),
    [
        (["5.24.0", "5.25.0rc1"], "5.25.0rc1"),
        (["5.24.0", "5.25.0rc1", "5.25.0rc2"], "5.25.0rc2"),
        (["5.24.0", "5.25.0.dev0"], "5.25.0.dev0"),
        (["5.0.0rc3", "5.0.0", "5.24.0"], None),  # the candidates shipped: nothing newer than the newest release
        (["5.25.0rc1", "5.25.0"], None),
        ([], None),
        (["1.0a1"], "1.0a1"),  # nothing but a pre-release
    ],
)
def test_pre_stands_for_the_newest_pre_release_newer_than_every_release(versions, expected):
    found = [Version(v) for v in versions]
    assert prerelease.newest(found) == (Version(expected) if expected else None)
    assert resolve("pre", found) == prerelease.newest(found)


@pytest.mark.parametrize(
    ("versions", "said"),
    [
        (["5.0.0rc3", "5.24.0"], "no pre-release of transformers newer than 5.24.0 on the index"),
        ([], "no pre-release of transformers on the index"),
    ],
)
def test_why_pre_stands_for_nothing(versions, said):
    assert prerelease.missing("transformers", [Version(v) for v in versions]) == said


@pytest.mark.parametrize(
    ("requested", "resolved", "early"),
    [
        ({"transformers": "pre"}, {}, True),  # skipped: nothing installed
        ({"transformers": "pre"}, {"transformers": RC}, True),
        ({"transformers": "5.0.0rc3"}, {}, True),  # a pre-release named exactly
        ({"transformers": "5.x"}, {"transformers": "5.24.0"}, False),
        ({"transformers": ">=5.1"}, {}, False),
        ({"transformers": "5.x", "torch": "2.13.0"}, {"transformers": "5.24.0", "torch": "2.13.0+cpu"}, False),
    ],
)
def test_which_cells_are_early_warnings(requested, resolved, early):
    assert prerelease.early(requested, resolved) is early


@pytest.mark.parametrize(
    ("label", "early"),
    [
        ("transformers 5.25.0rc1 (pre-release)", True),
        ("transformers pre (requested)", True),
        ("transformers 5.25.0rc1 (pre-release), torch 2.13.0+cpu", True),
        ("transformers 5.24.0", False),
        ("transformers 5.x (requested)", False),
    ],
)
def test_which_labels_are_early_warnings(label, early):
    assert releases.early_label(label) is early


def matrix_file(folder: Path, values: list[str]) -> Path:
    return default_matrix_variant(folder, "watched", values)


def test_a_matrix_file_takes_pre_as_an_axis_value_but_not_as_a_sweeps_range(tmp_path):
    assert load(matrix_file(tmp_path, ["4.57.x", "5.x", "pre"])).axes[0].values == ("4.57.x", "5.x", "pre")
    bad = matrix_file(tmp_path, ["4.57.x"]).read_text().replace('["4.57.x"]', '[{ each = "release", range = "pre" }]')
    (tmp_path / "bad.toml").write_text(bad)
    with pytest.raises(MatrixError) as caught:
        load(tmp_path / "bad.toml")
    (problem,) = caught.value.problems
    assert problem.endswith(
        "axes.transformers[0].range = 'pre': 'pre' stands for one release: write it as an axis value, beside the sweep"
    )


def planned(folder: Path) -> plan.Plan:
    files = (matrix_file(folder, ["4.57.x", "5.14.1", "5.x", "pre"]),)
    return plan.make(plan.Request(folder, folder / "noxfile.py", files, runs=True))


PRE_CELL = "cell:watched:transformers=pre:torch=2.13.0"


def transformers_only(made: plan.Plan):
    """The planned spec with its transformers axis alone (torch is pinned exactly: the index is not asked)."""
    spec = made.matrices[0].spec
    return replace(spec, axes=spec.axes[:1])


def test_the_default_matrix_with_pre_when_the_index_has_a_pre_release(tmp_path, answered):
    answer(with_candidate())
    made = planned(tmp_path)
    assert made.pins[PRE_CELL] == {"transformers": RC} and PRE_CELL not in made.unpinned
    cell = next(c for _, c in made.cells() if c.id == PRE_CELL)
    assert f"transformers=={RC}" in install_args(made.matrices[0].spec, cell, made.pins[PRE_CELL])
    lines, problems = check_axes(transformers_only(made), lookup(os.environ))
    assert problems == [] and lines[0].endswith(f"pre → {RC}")


def test_the_default_matrix_with_pre_when_the_index_has_none(tmp_path, answered):
    made = planned(tmp_path)
    assert made.pins[PRE_CELL] == {}
    assert made.unpinned == {PRE_CELL: "no pre-release of transformers newer than 5.24.0 on the index"}
    lines, problems = check_axes(transformers_only(made), lookup(os.environ))
    assert problems == []  # validate says so; it is not a bad file
    assert lines[0].endswith("pre → none (no pre-release of transformers newer than 5.24.0 on the index)")


def test_a_pre_cell_with_nothing_to_stand_for_is_skipped_with_its_reason_and_exit_0(tmp_path, answered, capsys):
    path = matrix_file(tmp_path, ["pre"])
    reports = tmp_path / "reports"
    code = cli.main(["run", "--reports", str(reports), "--envdir", str(tmp_path / "envs"), str(path)])
    out = capsys.readouterr().out
    assert code == cli.EXIT_OK, out
    cell = Cell("watched", (("transformers", "pre"), ("torch", "2.13.0")))
    skipped = json.loads(result_path(reports, cell).read_text())
    assert skipped["status"] == "skipped"
    assert skipped["reason"] == "no pre-release of transformers newer than 5.24.0 on the index"
    report = json.loads((reports / "watched.json").read_text())
    assert report["status"] == "ok" and report["cells"][0]["status"] == "skipped"
    markdown = (reports / "watched.md").read_text()
    assert "| transformers pre, torch 2.13.0 | skipped |" in markdown
    assert "could not run on pre (requested): skipped: no pre-release of transformers newer than 5.24.0" in markdown
    assert not list((tmp_path / "envs").glob("cell*"))  # nothing was installed


PRE_SPEC = replace(SPEC, axes=(Axis("transformers", ("4.57.x", "5.x", "pre")),))


def releases_and(pre: CellResult) -> list[CellResult]:
    return [result("4.57.x", "4.57.6", observations()), result("5.x", "5.24.0", observations()), pre]


BREAKS = result("pre", RC, observations(enable=False, error=HOSTILE))
SKIPPED = result("pre", None, status=Status.SKIPPED, reason="no pre-release of transformers newer than 5.24.0")


def test_a_pre_release_is_a_column_of_its_own_marked_pre_release():
    decided = make_report(PRE_SPEC, releases_and(result("pre", RC, observations())))
    assert decided.grid.columns == (
        ("transformers 4.57.6", "transformers 5.24.0"),
        (f"transformers {RC} (pre-release)",),
    )
    assert "| override | transformers 4.57.6, 5.24.0 | 5.25.0rc1 (pre-release) | advice |" in render.markdown(decided)


def test_what_a_pre_release_breaks_is_said_but_never_fails_the_run():
    decided = make_report(PRE_SPEC, releases_and(BREAKS), fail_on=(ConclusionKind.HARMFUL,))
    data = render.report_json(decided)
    enable = data["overrides"][0]
    assert enable["by_release"][f"transformers={RC}"] == "harmful"
    assert {r["id"]: r["early"] for r in data["releases"]}[f"transformers={RC}"] is True
    assert decided.failed_on == () and data["status"] == "ok"
    assert "on transformers 5.25.0rc1 (pre-release), `gradient_checkpointing_enable` breaks" in render.markdown(decided)


def test_a_pre_cell_that_could_not_run_never_fails_the_run_nor_changes_the_advice():
    skipped = make_report(PRE_SPEC, releases_and(SKIPPED))
    data = render.report_json(skipped)
    assert data["status"] == "ok" and data["counts"]["Delete"] == 2  # not Review: the pre-release is no tested release
    assert verdict.could_not_run(SKIPPED) == "skipped" and verdict.fails_run(SKIPPED) is None
    failed = result("pre", None, status="install-failed", reason="No solution found")
    assert verdict.fails_run(failed) is None and verdict.fails_run(result("5.x", None, status="install-failed"))


def test_expectations_hold_for_releases_only():
    expected = replace(PRE_SPEC.subjects[0], expect=((">=5", "same"),))
    decided = make_report(replace(PRE_SPEC, subjects=(expected,)), releases_and(BREAKS))
    assert decided.unmet == ()


def test_a_changed_answer_on_a_pre_release_row_only_informs():
    old = {"schema": 2, "matrix": "demo", "cells": [_cell("same", True)]}
    new = {"schema": 2, "matrix": "demo", "cells": [_cell("differs", False)]}
    changes = baseline.compare(old, new)
    assert {c.row for c in changes} == {f"transformers {RC} (pre-release)"} and not baseline.failing(changes)
    assert baseline.failing(baseline.compare(_release(old), _release(new)))  # the same change on a release fails


def _cell(verdict: str, value: bool) -> dict:
    observed = [{"probe": "p", "name": "n", "override": value, "base": True}]
    return {
        "requested": {"transformers": "pre"},
        "resolved": {"transformers": RC},
        "status": "ok",
        "subjects": [{"target": "m:C", "verdict": verdict, "observations": observed}],
    }


def _release(report: dict) -> dict:
    cells = [
        {**c, "requested": {"transformers": "5.x"}, "resolved": {"transformers": "5.24.0"}} for c in report["cells"]
    ]
    return {**report, "cells": cells}


def test_a_pre_release_sorts_newest_and_pre_asked_for_sorts_after_everything():
    rows = [result("5.x", "5.24.0"), SKIPPED, result("4.57.x", "4.57.6")]
    assert [r.requested["transformers"] for r in collect.newest_first(rows, ["transformers"])] == [
        "pre",
        "5.x",
        "4.57.x",
    ]


def test_the_grid_never_joins_a_pre_release_with_its_neighbours():
    labels = ["v 2 (pre-release)", "v 1"]  # newest first, as by_release holds them
    by_release = tuple(OnRelease(label, Conclusion(ConclusionKind.REDUNDANT)) for label in labels)
    found = grid.make([_subject(OverrideConclusions("m:C", "x", by_release, advise(by_release)))])
    assert found.columns == (("v 1",), ("v 2 (pre-release)",))


def _subject(override: OverrideConclusions):
    from compat_matrix.host.overrides import SubjectConclusions

    return SubjectConclusions("m:C", (), (), (override,))


@pytest.mark.integration
@pytest.mark.network
def test_the_default_matrix_with_a_pre_release_column_runs_on_the_real_index(tmp_path):
    """The default matrix with `pre` added, on today's index: a column of its own marked pre-release where the index
    has a pre-release newer than every release, else a cell skipped with its reason; the run's exit code is the one
    it has without it."""
    values = ["4.57.x", "5.14.1", "5.x", "pre"]
    done, report = run_matrix(default_matrix_variant(tmp_path, "char-causal-lm-checkpointing", values), tmp_path)
    (pre,) = [c for c in report["cells"] if c["requested"]["transformers"] == "pre"]
    if pre["status"] == Status.SKIPPED:
        assert pre["reason"].startswith("no pre-release of transformers newer than ")
    else:
        version = pre["resolved"]["transformers"]
        assert (
            prerelease.is_pre(version)
            and f"{version} (pre-release)" in (tmp_path / "char-causal-lm-checkpointing.md").read_text()
        )
    assert done.returncode == 0, done.stdout[-2000:]
    assert report["title"] == json.loads((ROOT / "reports" / "char-causal-lm-checkpointing.json").read_text())["title"]
