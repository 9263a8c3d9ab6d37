from __future__ import annotations

import re
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from compat_matrix.host.cells import Cell, cells, install_args, newest_first, runner_request
from compat_matrix.host.envs import (
    FRESH,
    IN_PLACE,
    KEEP,
    STAMP,
    Stamp,
    asked,
    environment_for,
    install_kind,
    read_stamp,
)
from compat_matrix.host.folders import result_path
from compat_matrix.host.spec import Axis, MatrixSpec, Subject, Sweep, load
from compat_matrix.host.uv import installer_reason, uv_environment
from compat_matrix.shared.results import write_json_atomic


def spec(*axes: Axis, requirements: tuple[str, ...] = ("utf8-tokenizer==0.8.5",)) -> MatrixSpec:
    return MatrixSpec(Path("m.toml"), "demo", requirements, axes, (Subject("a.b:C", ("m",)),))


def test_axes_expand_to_their_product_first_axis_slowest():
    got = cells(spec(Axis("transformers", ("4.57.x", "5.x")), Axis("torch", ("2.13.0", "2.14.1"))))
    assert [c.requested for c in got] == [
        {"transformers": "4.57.x", "torch": "2.13.0"},
        {"transformers": "4.57.x", "torch": "2.14.1"},
        {"transformers": "5.x", "torch": "2.13.0"},
        {"transformers": "5.x", "torch": "2.14.1"},
    ]


def test_cell_names_pins_and_files():
    matrix = spec(Axis("transformers", (">=5.20,<5.23",)), Axis("python", ("3.11",)))
    (cell,) = cells(matrix)
    assert cell.id.startswith("cell:demo:transformers=>=5.20,<5.23:python=3.11:")  # punctuation: a hash follows
    assert cell.python == "3.11"
    assert cell.pins == ("transformers<5.23,>=5.20",)
    assert "/" not in cell.filename and "<" not in cell.filename
    assert result_path(Path("r"), cell) == Path("r/.cells/demo") / cell.filename
    assert install_args(matrix, cell) == ["utf8-tokenizer==0.8.5", "transformers<5.23,>=5.20", "accelerate"]


def test_local_projects_are_reinstalled(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "my-lib"\n')
    (cell,) = cells(spec(Axis("transformers", ("5.x",)), requirements=(str(tmp_path),)))
    args = install_args(spec(Axis("transformers", ("5.x",)), requirements=(str(tmp_path),)), cell)
    assert args == [str(tmp_path), "transformers==5.*", "accelerate", "--reinstall-package=my-lib"]


def test_runner_request_carries_subjects_and_packages():
    matrix = spec(Axis("transformers", ("5.x",)))
    request = runner_request(matrix, cells(matrix)[0]).to_json()
    assert request["subjects"] == [
        {"target": "a.b:C", "methods": ["m"], "factory": None, "tests": [], "inputs": None, "exclude": []}
    ]
    assert request["packages"] == ["transformers", "utf8-tokenizer", "torch"]
    assert request["mutants"] is False and request["rootdir"] == str(matrix.path.parent)
    assert "pytest" not in install_args(matrix, cells(matrix)[0])


def test_pytest_is_installed_only_when_a_subject_names_tests(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("")
    matrix = tmp_path / "m.toml"
    subject = '[[subjects]]\ntarget = "a.b:C"\ntests = ["tests/test_x.py::TestX"]\n'
    matrix.write_text(f'[matrix]\nname = "m"\nmutants = true\n[axes]\ntransformers = ["5.x"]\n{subject}')
    loaded = load(matrix)
    (cell,) = cells(loaded)
    assert "pytest" in install_args(loaded, cell)
    request = runner_request(loaded, cell).to_json()
    assert request["subjects"][0]["tests"] == [f"{tmp_path}/tests/test_x.py::TestX"] and request["mutants"] is True


def test_uv_is_pointed_at_pips_local_wheels():
    assert uv_environment({"PIP_FIND_LINKS": "/a /b"}) == {"UV_FIND_LINKS": "/a,/b"}
    assert uv_environment({"PIP_FIND_LINKS": "/a", "UV_FIND_LINKS": "/c"}) == {}
    assert uv_environment({}) == {}


def test_installer_reason_is_one_line():
    output = (
        "Using Python 3.11.7 environment at: .nox/x\n"
        "  × No solution found when resolving dependencies:\n"
        "  ╰─▶ Because there is no version of transformers==99.0 and you require transformers==99.0, we can "
        "conclude that your requirements are unsatisfiable.\n"
    )
    reason = installer_reason(output)
    assert "\n" not in reason
    assert reason.startswith("No solution found when resolving dependencies")
    assert "transformers==99.0" in reason


def test_exclude_rules_drop_matching_combinations(tmp_path):
    from compat_matrix.host.spec import load

    path = tmp_path / "m.toml"
    path.write_text(
        '[matrix]\nname = "x"\n[axes]\ntransformers = ["4.57.x", "5.x"]\ntorch = ["2.13.0", "2.14.1"]\n'
        '[[exclude]]\ntransformers = "4.57.x"\ntorch = "2.14.1"\n'
        '[[exclude]]\ntorch = "2.13.0"\ntransformers = "5.x"\n'
        '[[subjects]]\ntarget = "a:B"\nmethods = ["m"]\n'
    )
    assert [c.requested for c in cells(load(path))] == [
        {"transformers": "4.57.x", "torch": "2.13.0"},
        {"transformers": "5.x", "torch": "2.14.1"},
    ]


def test_environment_fingerprint_follows_pins_and_local_contents(tmp_path):
    from compat_matrix.host.fingerprints import environment_key

    lib = tmp_path / "lib"
    (lib / "src").mkdir(parents=True)
    (lib / "pyproject.toml").write_text('[project]\nname = "lib"\n')
    (lib / "src" / "code.py").write_text("x = 1\n")
    matrix = spec(Axis("transformers", ("5.x",)), requirements=(str(lib),))
    (cell,) = cells(matrix)
    first = environment_key(matrix, cell)
    (lib / "__pycache__").mkdir()
    (lib / "__pycache__" / "code.pyc").write_bytes(b"cache")
    assert environment_key(matrix, cell) == first  # caches are not contents
    (lib / "src" / "code.py").write_text("x = 2\n")
    assert environment_key(matrix, cell) != first
    (other,) = cells(spec(Axis("transformers", ("5.14.1",)), requirements=(str(lib),)))
    assert environment_key(matrix, other) != environment_key(matrix, cell)


def nox_folder(name: str) -> str:
    """How nox names a session's environment folder (nox.sessions, 2026.10): punctuation runs fold into one "-"."""
    name = re.sub(r"[^\w\s-]", "-", name).strip().lower()
    return re.sub(r"[-\s]+", "-", name).strip("-")


@pytest.mark.parametrize(
    "values",
    [(">=5", "<=5", "5", "==5", "~=5.0"), ("5.x", "==5.*", "5"), ("5.14.1", "5.14.1.0", "==5.14.1")],
)
def test_values_that_differ_in_punctuation_never_share_an_environment_or_a_file(values):
    got = cells(spec(Axis("transformers", values), Axis("torch", ("2.13.0",))))
    assert len({nox_folder(c.id) for c in got}) == len(values)
    assert len({c.filename for c in got}) == len(values)


def test_plain_names_stay_readable_and_long_ones_fit_a_file_name():
    (plain,) = cells(spec(Axis("transformers", ("5.x",)), Axis("torch", ("2.13.0",))))
    assert plain.id == "cell:demo:transformers=5.x:torch=2.13.0"
    assert plain.filename == "demo_transformers=5.x_torch=2.13.0.json"
    long_values = (">=" + ".".join(["1"] * 200), ">=" + ".".join(["2"] * 200))
    first, second = cells(spec(Axis("transformers", long_values)))
    assert len(first.filename) <= 160 and first.filename != second.filename


def git(folder: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True)


@pytest.mark.parametrize("checkout", [True, False])
def test_local_fingerprint_honours_gitignore_and_skips_reports_and_environments(tmp_path, checkout):
    from compat_matrix.host.fingerprints import tree_key

    lib = tmp_path / "lib"
    (lib / "src").mkdir(parents=True)
    (lib / "src" / "code.py").write_text("x = 1\n")
    (lib / ".gitignore").write_text("*.lock\nscratch/\n")
    (lib / "reports").mkdir()
    (lib / "reports" / "m.md").write_text("committed report\n")
    if checkout:
        git(lib, "init", "-q")
        git(lib, "add", ".")
        git(lib, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")

    def key() -> str:
        return tree_key(lib, skip=[lib / "reports"])  # the run's reports folder, as run_cell passes it

    first = key()
    # what runs write inside the checkout: reports (committed ones too), the run lock, results, environments
    (lib / "reports" / "m.md").write_text("rewritten by the run\n")
    (lib / "reports" / ".lock").write_text("pid 1\n")
    (lib / "matrix" / "reports" / ".cells" / "m").mkdir(parents=True)  # another matrix's reports folder
    (lib / "matrix" / "reports" / ".cells" / "m" / "cell.json").write_text("{}")
    (lib / "matrix" / "reports" / "m.md").write_text("report\n")
    (lib / "envs" / "cell").mkdir(parents=True)
    (lib / "envs" / "cell" / "pyvenv.cfg").write_text("home = /usr\n")
    (lib / "src" / "__pycache__").mkdir()
    (lib / "src" / "__pycache__" / "code.pyc").write_bytes(b"cache")
    assert key() == first
    (lib / "uv.lock").write_text("ignored by .gitignore\n")
    (lib / "scratch").mkdir()
    (lib / "scratch" / "notes.txt").write_text("ignored folder\n")
    assert (key() == first) is checkout  # only a checkout has a .gitignore that counts
    (lib / "src" / "new.py").write_text("y = 2\n")  # untracked, not ignored: code
    second = key()
    assert second != first
    (lib / "src" / "code.py").write_text("x = 2\n")
    assert key() != second


def test_ranged_values_are_installed_as_the_release_they_resolve_to_and_exclude_newer_reaches_uv():
    matrix = replace(
        spec(Axis("transformers", ("5.x",)), Axis("torch", ("2.13.0",))), exclude_newer="2026-10-01T00:00:00Z"
    )
    (cell,) = cells(matrix)
    assert install_args(matrix, cell, {"transformers": "5.18.0"}) == [
        "utf8-tokenizer==0.8.5",  # the library's requirements first: uv decides what they need before the pins'
        "transformers==5.18.0",
        "torch==2.13.0",
        "accelerate",  # for the Trainer probes, whatever release the pins allow
        "--exclude-newer=2026-10-01T00:00:00Z",
    ]
    assert cell.id == "cell:demo:transformers=5.x:torch=2.13.0"  # the id says what was asked, not what it resolved to


def test_a_new_release_changes_the_environments_fingerprint():
    from compat_matrix.host.fingerprints import environment_key

    matrix = spec(Axis("transformers", ("5.x",)))
    (cell,) = cells(matrix)
    assert environment_key(matrix, cell, pins={"transformers": "5.23.0"}) == environment_key(
        matrix, cell, pins={"transformers": "5.23.0"}
    )
    assert environment_key(matrix, cell, pins={"transformers": "5.23.0"}) != environment_key(
        matrix, cell, pins={"transformers": "5.24.0"}
    )


def test_sweeps_must_be_expanded_before_cells_are_made():
    with pytest.raises(ValueError, match="sweeps not expanded"):
        cells(spec(Axis("transformers", ("5.x", Sweep("minor", ">=5.14")))))


ARGS = ["transformers==5.23.0", "torch==2.13.0", "utf8-tokenizer==0.8.5", "--reinstall-package=lib"]


def test_what_an_install_asks_for_is_named_without_versions():
    assert asked(ARGS) == {"transformers", "torch", "utf8-tokenizer"}
    assert asked(["Utf8_Tokenizer>=0.8", "/src/lib", "--exclude-newer=2026-10-01T00:00:00Z"]) == {
        "utf8-tokenizer",
        "/src/lib",
        "--exclude-newer=2026-10-01T00:00:00Z",
    }


@pytest.mark.parametrize(
    ("stamp", "key", "args", "expected"),
    [
        (None, "k", ARGS, IN_PLACE),  # a new environment
        (Stamp("k", asked(ARGS)), "k", ARGS, KEEP),  # warm, and today's releases are those it holds
        (Stamp("old", asked(ARGS)), "k", ARGS, IN_PLACE),  # a new release of what it holds
        (Stamp("old", asked(ARGS[1:])), "k", ARGS, IN_PLACE),  # a requirement added
        (Stamp("old", asked(ARGS)), "k", ARGS[1:], FRESH),  # a requirement removed
        (Stamp("old", asked(ARGS)), "k", [*ARGS, "--exclude-newer=2026-10-01T00:00:00Z"], FRESH),  # date set
        (Stamp("old", asked([*ARGS, "--exclude-newer=2026-10-01T00:00:00Z"])), "k", ARGS, FRESH),  # date dropped
        (Stamp("k"), "k", ARGS, KEEP),  # a stamp of an earlier compat-matrix, same fingerprint
        (Stamp("old"), "k", ARGS, FRESH),  # ... another one: what it holds is not known
    ],
)
def test_how_an_environment_is_brought_to_what_a_cell_asks_for(stamp, key, args, expected):
    assert install_kind(stamp, key, args) == expected


def test_stamps_say_what_was_asked_for_and_old_ones_still_read(tmp_path):
    write_json_atomic(tmp_path / STAMP, Stamp("k", asked(ARGS)).to_json())
    assert read_stamp(tmp_path) == Stamp("k", frozenset({"transformers", "torch", "utf8-tokenizer"}))
    (tmp_path / STAMP).write_text("0123456789abcdef")
    assert read_stamp(tmp_path) == Stamp("0123456789abcdef")
    (tmp_path / STAMP).unlink()
    assert read_stamp(tmp_path) is None


def test_an_edit_to_your_own_probe_module_or_test_file_makes_a_cached_result_stale(tmp_path):
    from compat_matrix.host.fingerprints import inputs_key

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("def test_a(): pass\n")
    (tmp_path / "probes.py").write_text("# probes\n")
    matrix = tmp_path / "m.toml"
    subject = '[[subjects]]\ntarget = "a.b:C"\ntests = ["tests/test_x.py::test_a"]\n'
    matrix.write_text(f'[matrix]\nname = "m"\nprobes = ["./probes.py"]\n[axes]\ntransformers = ["5.x"]\n{subject}')
    before = inputs_key(load(matrix))
    (tmp_path / "tests" / "test_x.py").write_text("def test_a(): assert False\n")
    after_test = inputs_key(load(matrix))
    (tmp_path / "probes.py").write_text("# other probes\n")
    assert len({before, after_test, inputs_key(load(matrix))}) == 3


def test_a_cell_runs_in_an_environment_beside_its_own_that_holds_exactly_its_pins(tmp_path):
    """Cells of other matrices with the same pins and requirements share one environment (no install, its bytecode
    already written); a cell whose own environment holds them, or that no other holds, runs in its own."""
    own, other, older = tmp_path / "cell-a", tmp_path / "cell-b", tmp_path / "cell-c"
    for home, version in ((own, "3.11.7"), (other, "3.11.7"), (older, "3.10.14")):
        (home / "bin").mkdir(parents=True)
        (home / "pyvenv.cfg").write_text(f"home = /usr/bin\nversion_info = {version}\n")
    write_json_atomic(older / STAMP, Stamp("older python", frozenset()).to_json())
    with environment_for(own / "bin" / "python", "older python") as python:
        assert python == own / "bin" / "python"  # the same pins on another interpreter: not the same environment
    write_json_atomic(other / STAMP, Stamp("wanted", frozenset()).to_json())
    with environment_for(own / "bin" / "python", "wanted") as python:
        assert python == other / "bin" / "python"
    with environment_for(own / "bin" / "python", "nobody's") as python:
        assert python == own / "bin" / "python"
    write_json_atomic(own / STAMP, Stamp("wanted", frozenset()).to_json())
    with environment_for(own / "bin" / "python", "wanted") as python:
        assert python == own / "bin" / "python"


def test_accelerate_is_installed_for_the_trainer_probes_unless_the_matrix_names_it():
    named = spec(Axis("transformers", ("5.x",)), requirements=("accelerate==1.10.0",))
    assert install_args(named, cells(named)[0]) == ["accelerate==1.10.0", "transformers==5.*"]
    without = spec(Axis("torch", ("2.13.0",)))
    assert "accelerate" not in install_args(without, cells(without)[0])  # no transformers axis: not ours to add


def test_a_run_starts_with_the_newest_transformers_and_keeps_file_order_among_equals():
    """wtpsplit's sweep of 61 releases, cut short by a time limit, had run 4.22 … 4.56 and none of 5.x: the cells
    run newest first, so that what a run cut short holds is what a maintainer must hear about."""
    made = [Cell("m", (("transformers", value), ("torch", torch))) for value, torch in (
        ("4.57.x", "2.13.0"), ("5.14.1", "2.13.0"), ("5.x", "2.13.0"), ("main", "2.13.0"), ("5.14.1", "2.12.0"),
    )]  # fmt: skip
    ordered = sorted(made, key=newest_first, reverse=True)
    assert [c.requested["transformers"] for c in ordered] == ["5.x", "5.14.1", "5.14.1", "4.57.x", "main"]
    assert [c.requested["torch"] for c in ordered][1:3] == ["2.13.0", "2.12.0"]  # equals: as the file has them


def test_a_cell_left_behind_by_its_nox_stops_its_runner_within_a_second():
    """A parallel nox stopped by SIGTERM did not stop the worker it was starting then: left behind (reparented),
    that worker waited for its hanging cell to its limit, and CI found it 20 minutes later. A worker whose parent
    is gone stops; one whose parent is there gets the runner's output, or TimeoutExpired at its limit."""
    import os
    import sys
    import time

    from compat_matrix.host.cell_run import awaited, orphaned

    sleeping = [sys.executable, "-c", "import time; time.sleep(30)"]
    with subprocess.Popen(sleeping, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as runner:
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt, match="is gone"):
            awaited(runner, 30.0, orphaned(os.getppid() + 1))  # not this process's parent: it has gone
        assert time.monotonic() - started < 3
        with pytest.raises(subprocess.TimeoutExpired):
            awaited(runner, 0.5, orphaned(os.getppid()))
        runner.kill()
    talking = [sys.executable, "-c", "print('done')"]
    with subprocess.Popen(talking, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as runner:
        assert awaited(runner, 30.0, orphaned(os.getppid())) == ("done\n", "")
