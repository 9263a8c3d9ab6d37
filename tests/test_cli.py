"""The command line: help that documents every option and exit code, --version, the exit line, exit code 4 for a
bug, the mode of the files it writes, where reports go, lanes and the options handed to the cells' nox."""

from __future__ import annotations

import os
import re
import stat
import tempfile
from dataclasses import replace

import pytest

from compat_matrix import __version__
from compat_matrix.host import cli, exits, nox_sessions, plan
from compat_matrix.host.cells import cells
from compat_matrix.host.folders import reports_folder, result_path
from compat_matrix.host.spec import load
from compat_matrix.shared.results import CellResult, write_json_atomic
from conftest import ROOT

MATRIX = '[matrix]\nname = "demo"\n[axes]\ntransformers = ["5.x", "4.57.x"]\n[[subjects]]\ntarget = "a.b:C"\n'


def help_entries(text: str) -> dict[str, str]:
    """The arguments a help text lists, each with its help (empty when it has none)."""
    entries: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        entry = re.match(r"  (\S.*?)(?:\s{2,}(\S.*))?$", line)
        if entry:
            current = entry.group(1)
            entries[current] = entry.group(2) or ""
        elif current and re.match(r"\s{4,}\S", line):
            entries[current] = f"{entries[current]} {line.strip()}".strip()
    return entries


@pytest.mark.parametrize("name", sorted(cli.subcommands()))
def test_every_subcommand_documents_its_options_and_exit_codes(name, capsys):
    with pytest.raises(SystemExit) as done:
        cli.main([name, "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert "exit codes:" in text and "  4   unexpected error" in text and "  0   " in text
    start = text.find("positional arguments:") if "positional arguments:" in text else text.index("options:")
    arguments = text[start : text.index("exit codes:")]
    entries = help_entries(arguments)
    assert "-h, --help" in entries and len(entries) > 1
    assert all(entries.values()), {k: v for k, v in entries.items() if not v}
    assert "--wait" not in text  # internal


def test_version(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert capsys.readouterr().out.strip() == f"compat-matrix {__version__}"


def test_an_unexpected_error_exits_4_with_one_line_and_the_traceback_in_a_file(tmp_path, capsys, monkeypatch):
    def broken(args):
        raise RuntimeError("a bug\non two lines")

    monkeypatch.setattr(cli, "cmd_list", broken)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    (tmp_path / "m.toml").write_text(MATRIX)
    assert cli.main(["list", str(tmp_path / "m.toml")]) == cli.EXIT_UNEXPECTED == 4
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("exit 4: unexpected error RuntimeError: a bug on two lines (traceback in ")
    (written,) = tmp_path.glob("compat-matrix-*.traceback.txt")
    assert str(written) in line and 'raise RuntimeError("a bug' in written.read_text()


def test_report_files_are_readable_like_any_other_file(tmp_path):
    previous = os.umask(0o022)
    try:
        matrix = tmp_path / "m.toml"
        matrix.write_text(MATRIX)
        cli.main(["report", "--reports", str(tmp_path / "r"), str(matrix)])
    finally:
        os.umask(previous)
    written = [p for p in (tmp_path / "r").iterdir() if p.is_file() and p.suffix in {".md", ".json", ".csv"}]
    assert len(written) == 3
    for path in written:
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path


def test_the_last_line_of_a_report_says_what_the_exit_code_means(tmp_path, capsys):
    matrix = tmp_path / "m.toml"
    matrix.write_text(MATRIX)
    first, second = cells(load(matrix))
    write_json_atomic(result_path(tmp_path, first), CellResult("demo", first.id, first.requested).to_json())
    assert cli.main(["report", "--reports", str(tmp_path), str(matrix)]) == cli.EXIT_CELL_FAILED
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == f"exit 3: 1 cell could not run: {second.id} (not run)"
    write_json_atomic(result_path(tmp_path, second), CellResult("demo", second.id, second.requested).to_json())
    assert cli.main(["report", "--reports", str(tmp_path), str(matrix)]) == cli.EXIT_OK
    assert capsys.readouterr().out.strip().splitlines()[-1] == "exit 0: every cell ran and every expectation held"


def test_reports_go_beside_a_matrix_file_from_elsewhere(tmp_path, monkeypatch, capsys):
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    (home / "matrix").mkdir(parents=True)
    elsewhere.mkdir()
    assert reports_folder(home / "matrix" / "x.toml", home) == home / "reports"
    assert reports_folder(elsewhere / "x.toml", home) == elsewhere / "reports"
    (elsewhere / "m.toml").write_text(MATRIX)
    monkeypatch.chdir(home)
    cli.main(["report", str(elsewhere / "m.toml")])
    assert (elsewhere / "reports" / "demo.md").exists() and not (home / "reports").exists()


@pytest.mark.parametrize(
    ("environ", "cpus", "gib", "expected"),
    [
        ({}, 2, 24, 2),
        ({}, 16, 8, 4),  # capped by memory: about 2 GiB a cell
        ({}, 4, 1, 1),
        ({"COMPAT_MATRIX_LANES": "3"}, 2, 1, 3),
        ({"COMPAT_MATRIX_LANES": " 1 "}, 8, 64, 1),
    ],
)
def test_lanes(environ, cpus, gib, expected):
    assert plan.lanes(environ, cpus, gib * 1024**3) == expected


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5", "１"])
def test_bad_lanes_are_refused_with_the_value(value):
    with pytest.raises(ValueError, match=f"COMPAT_MATRIX_LANES = '{value}'"):
        plan.lanes({"COMPAT_MATRIX_LANES": value}, 2, 2**40)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["nox", "-s", "matrix"], []),
        (["nox", "--envdir", "/e", "--reuse-venv", "never", "-s", "matrix"], ["--reuse-venv", "never"]),
        (["nox", "--reuse-venv=always", "-s", "matrix"], ["--reuse-venv=always"]),
        (["nox", "-R", "-s", "matrix", "--", "-r"], ["-R"]),
        (["nox", "--no-reuse-existing-virtualenvs", "-r"], ["--no-reuse-existing-virtualenvs", "-r"]),
    ],
)
def test_options_of_the_outer_nox_that_matter_to_the_cells_reach_them(argv, expected):
    assert nox_sessions.forwarded(argv) == expected


def test_a_plan_hands_its_files_and_reports_to_the_nested_nox_in_one_file(tmp_path, monkeypatch):
    matrix = tmp_path / "m.toml"
    matrix.write_text(MATRIX)
    monkeypatch.setenv("COMPAT_MATRIX_REPORTS", "/somewhere/else")
    monkeypatch.setenv("COMPAT_MATRIX_LANES", "7")
    run = nox_sessions.planned_run(tmp_path, tmp_path / "noxfile.py", {"COMPAT_MATRIX": str(matrix)}).plan
    assert run.matrices[0].reports == tmp_path / "reports"
    environ = plan.nested_environ(os.environ, plan.write(run, tmp_path / ".nox"))
    # not inherited: the nested nox runs this very plan, and the plan's path is all it is handed
    assert {k for k in environ if k.startswith("COMPAT_MATRIX")} <= {"COMPAT_MATRIX_PLAN", "COMPAT_MATRIX_CACHE"}
    again = nox_sessions.planned_run(tmp_path / "elsewhere", tmp_path / "noxfile.py", environ)
    assert again.plan == replace(run, handed_down=True) and again.request is None


def test_run_refuses_bad_input_before_anything_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.toml").write_text('[matrix]\nname = "x"\n[axes]\nsubjects = ["x"]\n')
    assert cli.main(["run", "bad.toml"]) == cli.EXIT_BAD_MATRIX
    assert "axes.subjects = ['x']: not a package" in capsys.readouterr().err
    (tmp_path / "m.toml").write_text(MATRIX)
    assert cli.main(["run", "--cell", "cell:nope", "m.toml"]) == cli.EXIT_BAD_MATRIX
    assert "--cell 'cell:nope': no such cell" in capsys.readouterr().err
    assert not (tmp_path / ".nox").exists() and not (tmp_path / "reports").exists()


def test_exit_lines_name_the_first_items():
    line = exits.exit_line(3, ["a", "b", "c", "d", "e"], "5 cells could not run")
    assert line == "exit 3: 5 cells could not run: a; b; c; and 2 more"


def test_the_readme_documents_every_command_and_exit_code():
    readme = (ROOT / "README.md").read_text()
    for name in cli.subcommands():
        assert f"| `compat-matrix {name}" in readme, name
    for code in exits.MEANINGS:
        assert code == exits.INTERRUPTED or f"\n| {code} | " in readme, code


def test_the_readme_commands_install_compat_matrix_and_ci_runs_the_test_command():
    readme = (ROOT / "README.md").read_text()
    first, second = re.findall(r"```sh\n(.*?)\n```", readme)[:2]
    assert first == "python -m pip install -e . && nox -s matrix"
    assert second == "python -m pip install -e . && nox -s tests"
    assert second in (ROOT / ".ci" / "run").read_text().splitlines()


def test_an_unexpected_error_in_the_matrix_session_is_exit_code_4(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def broken() -> exits.Outcome:
        return {}["no such key"]

    outcome = exits.guarded(broken)
    assert exits.code(outcome) == exits.UNEXPECTED
    with pytest.raises(SystemExit) as done:
        nox_sessions.finish(outcome)
    assert done.value.code == exits.UNEXPECTED
    assert capsys.readouterr().err.startswith("exit 4: unexpected error KeyError: 'no such key' (traceback in ")
    assert exits.code(exits.guarded(lambda: exits.Outcome(could_not_run=("c (crashed)",)))) == 3


def test_a_python_without_the_report_s_dependencies_is_told_so_before_any_cell_runs(tmp_path, capsys, monkeypatch):
    matrix = tmp_path / "m.toml"
    matrix.write_text(MATRIX)
    run = nox_sessions.planned_run(tmp_path, tmp_path / "noxfile.py", {"COMPAT_MATRIX": str(matrix)}).plan
    monkeypatch.setattr(nox_sessions, "REPORT_NEEDS", ("pandas", "no_such_dependency_here"))
    outcome = exits.guarded(lambda: nox_sessions.run_matrix(run, tmp_path / ".nox", []))
    with pytest.raises(SystemExit) as done:
        nox_sessions.finish(outcome)
    assert done.value.code == exits.BAD_INPUT
    out = capsys.readouterr()
    assert "error: the report needs no_such_dependency_here in this Python" in out.err
    assert out.out.strip().endswith("exit 2: bad input, nothing ran")
    assert not (tmp_path / ".nox").exists() and not (tmp_path / "reports").exists()
