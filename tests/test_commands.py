"""Sweeps, --exclude-newer and bisect through the plan and the command line, on a recorded answer of the package
index (kept in the test's cache folder, so nothing is asked of the network): what gets registered, listed and
refused. No cell runs here; tests/test_integration.py runs real ones."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.version import Version

from compat_matrix.host import cli, nox_sessions, plan
from compat_matrix.host.exits import BadInput
from conftest import UNREACHABLE

MATRIX = """
[matrix]
name = "demo"

[axes]
transformers = ["4.57.x", { each = "minor", range = ">=5" }]
torch = ["2.13.0"]

[[subjects]]
target = "a.b:C"
"""


def write(folder: Path, text: str = MATRIX) -> Path:
    path = folder / "m.toml"
    path.write_text(text)
    return path


def test_a_sweep_registers_a_cell_per_release_with_a_stable_id(tmp_path, answered):
    run = nox_sessions.planned_run(
        tmp_path, tmp_path / "noxfile.py", {**os.environ, "COMPAT_MATRIX": str(write(tmp_path))}
    )
    assert run.problems == ()
    assert [c.id for _, c in run.plan.cells()] == [
        "cell:demo:transformers=4.57.x:torch=2.13.0",
        "cell:demo:transformers=5.0.0:torch=2.13.0",
        "cell:demo:transformers=5.14.1:torch=2.13.0",
        "cell:demo:transformers=5.24.0:torch=2.13.0",
    ]


def test_list_shows_the_expansion(tmp_path, answered, capsys):
    assert cli.main(["list", str(write(tmp_path))]) == cli.EXIT_OK
    out, err = capsys.readouterr()
    assert out.splitlines()[-1] == "cell:demo:transformers=5.24.0:torch=2.13.0"
    assert err.splitlines() == [f"{tmp_path / 'm.toml'}: transformers every minor in >=5: 5.0.0, 5.14.1, 5.24.0"]
    assert cli.main(["list", "--json", str(write(tmp_path))]) == cli.EXIT_OK
    listed = json.loads(capsys.readouterr().out)
    assert listed[1]["requested"] == {"transformers": "5.0.0", "torch": "2.13.0"}


def test_exclude_newer_of_a_run_overrides_the_files(tmp_path, answered, capsys):
    path = write(tmp_path, MATRIX.replace('name = "demo"', 'name = "demo"\nexclude_newer = 2026-01-01'))
    front = nox_sessions.planned_run(tmp_path, tmp_path / "noxfile.py", {**os.environ, "COMPAT_MATRIX": str(path)})
    assert "no release of transformers in it (the newest is 5.0.0rc1)" in front.problems[0]  # no final 5.x yet
    options = nox_sessions.matrix_options(["--cached", "--exclude-newer", "2026-08-01"])
    assert options == {"cached": True, "mutants": False, "exclude_newer": "2026-08-01", "baselines": (), "fail_on": ()}
    assert nox_sessions.matrix_options(["--exclude-newer=2026-08-01"])["exclude_newer"] == "2026-08-01"
    run = nox_sessions.session_plan(front, **options)
    assert [c.requested["transformers"] for _, c in run.cells()] == ["4.57.x", "5.0.0", "5.14.1"]
    assert run.matrices[0].spec.exclude_newer == "2026-08-01T00:00:00Z"
    assert run.pins[run.matrices[0].cells[0].id] == {"transformers": "4.57.6"}  # resolved once, for every process


def test_a_sweep_without_an_index_is_one_line_and_exit_code_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("UV_DEFAULT_INDEX", UNREACHABLE)
    path = write(tmp_path)
    run = nox_sessions.planned_run(tmp_path, tmp_path / "noxfile.py", {**os.environ, "COMPAT_MATRIX": str(path)})
    assert run.plan is None and len(run.problems) == 1
    assert run.problems[0].startswith(
        f"{path}: axes.transformers[1] = 'every minor in >=5': cannot list the releases of transformers: "
        f"{UNREACHABLE}/transformers/: "
    )
    assert cli.main(["list", str(path)]) == cli.EXIT_BAD_MATRIX
    assert capsys.readouterr().err.count("\n") == 1
    assert cli.main(["validate", "--offline", str(path)]) == cli.EXIT_OK
    assert capsys.readouterr().out == f"{path}: sweeps, listed from the package index\n"


def test_a_bisection_plans_a_cell_per_release_and_hands_them_down(tmp_path, answered):
    path = write(tmp_path)
    request = plan.request_from({"COMPAT_MATRIX": str(path)}, tmp_path, tmp_path / "noxfile.py")
    listed = plan.make(request)
    asked = plan.Bisect(">=5.14", observation="entry_points.activation_checkpointing_enable")  # names made as it runs
    run = plan.make(replace(request, bisect=asked, runs=True, report=False))
    assert run.bisection.releases == ("5.14.1", "5.24.0") and run.bisection.target == "a.b:C"
    assert run.cached and not run.report  # a bisection reuses earlier results and writes no report
    # 5.14.1 and 5.24.0 are among the sweep's cells: listed once
    assert [c.id for _, c in run.cells()] == [c.id for _, c in listed.cells()]
    assert run.bisection.cell(Version("5.24.0")).id == "cell:demo:transformers=5.24.0:torch=2.13.0"
    again = nox_sessions.planned_run(
        tmp_path, tmp_path / "noxfile.py", plan.nested_environ({}, plan.write(run, tmp_path))
    )
    assert again.plan == replace(run, handed_down=True)
    older = plan.make(replace(request, bisect=plan.Bisect("==4.57.3"), runs=True, report=False))
    assert [c.id for _, c in older.cells()][-1] == "cell:demo:transformers=4.57.3:torch=2.13.0"  # not the sweep's
    assert len(older.cells()) == len(listed.cells()) + 1
    (tmp_path / "damaged.json").write_text('{"schema": 1, "home": ')
    broken = nox_sessions.planned_run(
        tmp_path, tmp_path / "noxfile.py", {"COMPAT_MATRIX_PLAN": str(tmp_path / "damaged.json")}
    )
    assert broken.plan is None and broken.problems[0].startswith("COMPAT_MATRIX_PLAN = ")
    assert "not a plan of compat-matrix" in broken.problems[0]
    with pytest.raises(BadInput):
        plan.read(tmp_path / "missing.json")


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (["--subject", "a.b:D", "--range", ">=5"], "error: --subject 'a.b:D': not a subject of the matrix"),
        (["--range", ">=6"], "error: --range '>=6': no release of transformers in it (the newest is 5.24.0)"),
        (["--range", "five"], "error: --range 'five': not a version"),
        (["--range", ">=5", "--axis", "jax"], "error: --axis 'jax': not a package axis of"),
        (["--range", ">=5", "--observation", "entry_points"], "error: --observation 'entry_points': as probe.name"),
        (["--range", ">=5", "--exclude-newer", "soon"], "error: --exclude-newer = 'soon': a date"),
    ],
)
def test_bisect_refuses_bad_input_before_anything_runs(tmp_path, answered, capsys, monkeypatch, options, expected):
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path)
    assert cli.main(["bisect", str(path), *options]) == cli.EXIT_BAD_MATRIX
    err = capsys.readouterr().err
    assert err.startswith(expected) and err.count("\n") == 1, err
    assert not (tmp_path / ".nox").exists() and not (tmp_path / "reports").exists()


def test_bisect_asks_which_subject_when_there_are_several(tmp_path, answered, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, MATRIX + '\n[[subjects]]\ntarget = "a.b:D"\n')
    assert cli.main(["bisect", str(path), "--range", ">=5"]) == cli.EXIT_BAD_MATRIX
    assert capsys.readouterr().err == "error: --subject: which one? (a.b:C, a.b:D)\n"
