"""One plan, made once: bad input of any kind is refused before any cell starts, the processes a run starts read the
plan and nothing else (the matrix file is parsed once), and a sweep's cells cannot drift between the cells and the
report when the index changes meanwhile. The cells here are faked where a test needs results; tests/test_plan_run.py
counts the same on real ones."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from compat_matrix.host import cli, console, exits, nox_sessions, plan, report, spec
from compat_matrix.host.folders import result_path
from compat_matrix.shared.results import CellResult, Observation, SubjectResult, write_json_atomic
from conftest import INDEX, ROOT, answer
from test_commands import MATRIX as SWEEP

MATRIX = SWEEP + 'methods = ["m"]\n'  # a sweep of 5.x minors beside 4.57.x
PLAIN = MATRIX.replace('["4.57.x", { each = "minor", range = ">=5" }]', '["5.14.1", "4.57.6"]')


def write(folder: Path, text: str = MATRIX, name: str = "m.toml") -> Path:
    path = folder / name
    path.write_text(text)
    return path


def nothing_ran(folder: Path) -> bool:
    return not (folder / ".nox").exists() and not (folder / "reports").exists()


def ran(matrix: plan.Matrix, cell: plan.Cell, resolved: dict[str, str]) -> None:
    """A result file for `cell`, as a cell that ran would leave it: its subject observed the same on both sides."""
    observed = (Observation("p", "x", 1, 1), Observation("p", "reached", ["m"], ["m"], carries=False))
    subjects = tuple(
        SubjectResult(s.target, ("m",), observations=observed, probes=("p",)) for s in matrix.spec.subjects
    )
    result = CellResult(matrix.spec.name, cell.id, cell.requested, resolved, subjects=subjects, seconds=1.0)
    write_json_atomic(result_path(matrix.reports, cell), result.to_json())


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (["--baseline", "missing.json"], "error: {folder}/missing.json: cannot read baseline report"),
        (["--baseline", "other.json"], "error: {folder}/other.json: baseline of matrix 'other', which is not being"),
        (["--baseline", "m.toml"], "error: {folder}/m.toml: cannot read baseline report"),
        (["--cell", "cell:nope"], "error: --cell 'cell:nope': no such cell"),
        (["--exclude-newer", "soon"], "error: --exclude-newer = 'soon': a date"),
        (["--fail-on", "harmfull"], "error: --fail-on 'harmfull': not a conclusion; did you mean 'harmful'?"),
        (
            ["--fail-on", "harmful,couldnt-run"],
            "error: --fail-on 'couldnt-run': not a conclusion; did you mean 'could-n",
        ),
    ],
)
def test_run_refuses_bad_options_and_baselines_before_any_cell_starts(tmp_path, monkeypatch, capsys, options, expected):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, PLAIN)
    (tmp_path / "other.json").write_text(json.dumps({"schema": 1, "matrix": "other", "cells": []}))
    assert cli.main(["run", *options, "m.toml"]) == exits.BAD_INPUT
    out, err = capsys.readouterr()
    assert err.startswith(expected.format(folder=tmp_path)) and err.count("\n") == 1, err
    assert out.strip().splitlines()[-1] == "exit 2: bad input, nothing ran"
    assert nothing_ran(tmp_path)


def test_bad_lanes_are_refused_before_any_cell_starts(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COMPAT_MATRIX_LANES", "two")
    write(tmp_path, PLAIN)
    assert cli.main(["run", "m.toml"]) == exits.BAD_INPUT
    err = capsys.readouterr().err
    assert err == "error: COMPAT_MATRIX_LANES = 'two': a whole number of cells at once, at least 1\n"
    assert nothing_ran(tmp_path)


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ((), ()),
        (("harmful",), ("harmful",)),
        (("could-not-run,harmful", " Needed "), ("harmful", "needed", "could not run")),
        (("orphaned", "could not run", "behaves-differently"), ("behaves differently", "orphaned", "could not run")),
    ],
)
def test_fail_on_names_conclusions_in_the_vocabulary_s_order(typed, expected):
    problems: list[str] = []
    assert plan.fail_on_kinds(typed, problems) == expected and problems == []


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        ("mm", "--method 'mm': not an audited name of a.b:C; did you mean 'm'?"),
        ("zzz", "--method 'zzz': not an audited name of a.b:C; audited: m"),
        ("m", None),
    ],
)
def test_bisect_refuses_a_method_that_is_not_audited_before_any_cell_starts(
    tmp_path, answered, monkeypatch, capsys, method, expected
):
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path)
    request = plan.request_from({"COMPAT_MATRIX": str(path)}, tmp_path, tmp_path / "noxfile.py")
    if expected is None:
        made = plan.make(replace(request, bisect=plan.Bisect(">=5", method=method), runs=True, report=False))
        assert made.bisection.method == method
        assert nox_sessions.planned_run(
            tmp_path, tmp_path / "x.py", plan.nested_environ({}, plan.write(made, tmp_path))
        ).plan
        return
    assert cli.main(["bisect", str(path), "--range", ">=5", "--method", method]) == exits.BAD_INPUT
    err = capsys.readouterr().err
    assert err == f"error: {expected}\n"
    assert nothing_ran(tmp_path)
    both = ["--range", ">=5", "--method", "m", "--observation", "p.x"]
    assert cli.main(["bisect", str(path), *both]) == exits.BAD_INPUT
    assert capsys.readouterr().err == "error: --method and --observation: bisect on one of them\n"


@pytest.mark.parametrize(
    ("observation", "expected"),
    [
        (
            "build_and_init.nonexistent",
            "build_and_init observes built, config, error, inconclusive, init_weights, reached",
        ),
        ("build_and_int.built", "no probe 'build_and_int' in this run; did you mean 'build_and_init'?"),
    ],
)
def test_bisect_refuses_an_observation_no_probe_makes_before_any_cell_starts(
    tmp_path, answered, monkeypatch, capsys, observation, expected
):
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path)
    assert cli.main(["bisect", str(path), "--range", ">=5", "--observation", observation]) == exits.BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith(f"error: --observation {observation!r}: {expected}") and err.count("\n") == 1, err
    assert nothing_ran(tmp_path)


def test_observations_of_probes_that_name_them_as_they_run_and_of_your_own_probes(tmp_path, answered):
    (tmp_path / "mine.py").write_text(
        "from compat_matrix import probe\n\n\n@probe(exercises=('m',))\ndef my_probe(build):\n"
        "    return {'seen': True}\n"
    )
    path = write(tmp_path, MATRIX.replace('name = "demo"', 'name = "demo"\nprobes = ["./mine.py"]'))
    request = plan.request_from({"COMPAT_MATRIX": str(path)}, tmp_path, tmp_path / "noxfile.py")

    def bisecting(observation: str) -> plan.Plan:
        return plan.make(replace(request, bisect=plan.Bisect(">=5", observation=observation)))

    for fine in ("entry_points.activation_checkpointing_enable", "my_probe.seen", "my_probe.error"):
        assert bisecting(fine).bisection.observation == fine
    with pytest.raises(exits.BadInput, match=r"'my_probe.unseen': my_probe observes error, inconclusive, reached, s"):
        bisecting("my_probe.unseen")


def test_a_misspelt_option_of_the_matrix_session_runs_nothing(tmp_path):
    """`nox -s matrix -- --basline x`: one line and exit code 2 from the outer nox, before any cell starts."""
    matrix = write(tmp_path, PLAIN)
    env = {**os.environ, "COMPAT_MATRIX": str(matrix), "COMPAT_MATRIX_REPORTS": str(tmp_path / "reports")}
    command = [sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "--envdir", str(tmp_path / ".nox")]
    done = subprocess.run([*command, "-s", "matrix", "--", "--basline", "x"], env=env, capture_output=True, text=True)
    assert done.returncode == exits.BAD_INPUT, done.stdout + done.stderr
    assert "error: nox -s matrix --: unrecognized arguments: --basline x\n" in done.stderr
    assert done.stdout.strip().splitlines()[-1] == "exit 2: bad input, nothing ran"
    assert "Starting session cell:" not in done.stdout and not (tmp_path / "reports").exists()
    with pytest.raises(exits.BadInput, match="--baseline: expected one argument"):
        nox_sessions.matrix_options(["--baseline"])
    misspelt = subprocess.run([*command, "-s", "matrix", "--", "--fail-on", "harmfull"], env=env, capture_output=True)
    assert (
        misspelt.returncode == exits.BAD_INPUT and b"error: --fail-on 'harmfull': not a conclusion" in misspelt.stderr
    )
    assert b"Starting session cell:" not in misspelt.stdout and not (tmp_path / "reports").exists()


def fake_cells(monkeypatch, opened: list[Path]):
    """Stand-ins for the processes a run starts, in this process: the nested nox (its noxfile's import reads the
    plan it is handed) and each cell's nox child (the same), each cell writing a result. Every matrix file parsed
    anywhere is counted in `opened`."""
    parse = spec.load

    def counted(path: Path) -> spec.MatrixSpec:
        opened.append(Path(path))
        return parse(path)

    monkeypatch.setattr(spec, "load", counted)
    monkeypatch.setattr(spec.files, "load", counted)  # where load_all finds it

    def nested_nox(command, environ, tick, shown=None):
        assert {k for k in environ if k.startswith("COMPAT_MATRIX")} <= {"COMPAT_MATRIX_PLAN", "COMPAT_MATRIX_CACHE"}
        ids = command[command.index("-s") + 1 :]
        nested = nox_sessions.planned_run(Path("/nowhere"), Path(command[4]), environ)
        for matrix, cell in nested.plan.cells():
            if cell.id not in ids:
                continue
            child = nox_sessions.planned_run(Path("/nowhere"), Path(command[4]), environ).plan  # each cell's nox child
            ranged = cell.requested["transformers"] == "4.57.x"
            assert child.pins[cell.id] == ({"transformers": "4.57.6"} if ranged else {})
            ran(matrix, cell, {**cell.requested, **child.pins[cell.id]})
        tick()
        return 0, False

    monkeypatch.setattr(console, "run_watched", nested_nox)


def test_a_run_parses_its_matrix_file_once_and_every_process_it_starts_reads_the_plan(
    tmp_path, answered, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path)
    opened: list[Path] = []
    fake_cells(monkeypatch, opened)
    assert cli.main(["run", str(path)]) == exits.OK
    assert opened == [path]
    out = capsys.readouterr().out.splitlines()
    assert [line.split(" | ")[0] for line in out if line.startswith("[")] == [  # one line per finished cell
        "[1/4] cell:demo:transformers=4.57.x:torch=2.13.0",
        "[2/4] cell:demo:transformers=5.0.0:torch=2.13.0",
        "[3/4] cell:demo:transformers=5.14.1:torch=2.13.0",
        "[4/4] cell:demo:transformers=5.24.0:torch=2.13.0",
    ]
    assert out[-1] == "exit 0: every cell ran and every expectation held"
    assert not list((tmp_path / ".nox" / plan.PLANS).iterdir())  # the plan file lives as long as its run


def test_a_sweep_cannot_drift_between_the_cells_and_the_report(tmp_path, answered, monkeypatch):
    """The index gains a release between planning and reporting (and loses one): the cells that ran are the plan's,
    and so is what the report covers, whichever process reads the plan."""
    path = write(tmp_path)
    request = plan.request_from({"COMPAT_MATRIX": str(path)}, tmp_path, tmp_path / "noxfile.py")
    made = plan.make(replace(request, runs=True))
    planned = [c.id for _, c in made.cells()]
    assert planned[-1] == "cell:demo:transformers=5.24.0:torch=2.13.0"
    handed = plan.write(made, tmp_path / ".nox")
    for matrix, cell in made.cells():
        ran(matrix, cell, {**cell.requested, **made.pins[cell.id]})

    recorded = json.loads(INDEX.read_text())
    later = next(f for f in recorded["files"] if f["filename"] == "transformers-5.24.0-py3-none-any.whl")
    recorded["files"] = [f for f in recorded["files"] if "5.24.0" not in f["filename"]]
    recorded["files"].append({**later, "filename": "transformers-5.30.0-py3-none-any.whl"})
    answer(json.dumps(recorded))  # the index has changed: planned again, the sweep would stand for 5.30.0
    assert [c.id for _, c in plan.make(request).cells()][-1] == "cell:demo:transformers=5.30.0:torch=2.13.0"

    nested = nox_sessions.planned_run(tmp_path, tmp_path / "noxfile.py", plan.nested_environ(os.environ, handed))
    assert [c.id for _, c in nested.plan.cells()] == planned
    assert nested.plan.pins == made.pins  # `5.x`-style values install what was planned, not today's release
    (written,) = report.run(plan.read(handed))
    assert exits.code(report.outcome([written])) == exits.OK  # no cell the run never ran is expected
    cells = json.loads((tmp_path / "reports" / "demo.json").read_text())["cells"]
    assert sorted(c["cell"] for c in cells) == sorted(planned)


def test_a_cell_that_could_not_run_is_counted_once_whatever_its_subjects(tmp_path, capsys):
    two = PLAIN.replace('["5.14.1", "4.57.6"]', '["5.14.1"]') + '\n[[subjects]]\ntarget = "a.b:D"\n'
    path = write(tmp_path, two)
    (matrix,) = plan.make(plan.request_from({"COMPAT_MATRIX": str(path)}, tmp_path, tmp_path / "n.py")).matrices
    (cell,) = matrix.cells
    failed = tuple(
        SubjectResult(t, (), status="import-failed", reason="No module named 'a'") for t in ("a.b:C", "a.b:D")
    )
    result = CellResult("demo", cell.id, cell.requested, {"transformers": "5.14.1"}, subjects=failed)
    write_json_atomic(result_path(matrix.reports, cell), result.to_json())
    assert cli.main(["report", str(path)]) == exits.CELL_FAILED
    last = capsys.readouterr().out.strip().splitlines()[-1]
    said = f"exit 3: 1 cell ran, but not all its classes: {cell.id} (a.b:C import-failed, a.b:D import-failed)"
    assert last == said  # the cell ran: its classes could not


@pytest.mark.parametrize("command", ["list", "validate", "diff", "summary"])
def test_commands_that_run_no_cell_say_what_their_exit_code_0_means(command, capsys):
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    text = capsys.readouterr().out
    assert "  0   " in text and "every cell ran" not in text


def test_the_nox_processes_a_run_starts_keep_their_bytecode_in_the_envdir(tmp_path):
    """With PYTHONDONTWRITEBYTECODE set (as on this machine), the nested nox and each worker compiled pandas and
    compat-matrix from source: their bytecode goes to a folder of the envdir instead; a prefix of your own stays."""
    told = nox_sessions.host_bytecode({"PYTHONDONTWRITEBYTECODE": "1", "HOME": "/h"}, tmp_path)
    assert told == {"HOME": "/h", "PYTHONPYCACHEPREFIX": str(tmp_path / nox_sessions.HOST_BYTECODE)}
    assert nox_sessions.host_bytecode({"PYTHONPYCACHEPREFIX": "/mine"}, tmp_path) == {"PYTHONPYCACHEPREFIX": "/mine"}


@pytest.mark.parametrize("own", [None, "/mine"])
def test_the_nox_process_you_start_keeps_its_bytecode_in_the_envdir_too(own):
    """This repository's noxfile, loaded with PYTHONDONTWRITEBYTECODE set, writes and reads the bytecode of what it
    imports next (compat-matrix, then pandas) in the folder the processes it starts use; a prefix of your own
    stays, and so does the variable where you gave one."""
    environ = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    environ.pop("PYTHONPYCACHEPREFIX", None)
    environ |= {"PYTHONPYCACHEPREFIX": own} if own else {}
    code = "import runpy, sys; runpy.run_path('noxfile.py'); print(sys.pycache_prefix, sys.dont_write_bytecode)"
    said = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environ, capture_output=True, text=True)
    expected = f"{ROOT / '.nox' / nox_sessions.HOST_BYTECODE} False" if own is None else f"{own} True"
    assert said.stdout.strip().splitlines()[-1] == expected, said.stderr
