"""compat-matrix from another folder: `uvx --from <this checkout> compat-matrix run`, the reusable workflow's steps
on a library that has nothing but a matrix file, and `nox -s matrix` on a matrix file from elsewhere. Real cells."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT

pytestmark = pytest.mark.integration

LIBRARY_MATRIX = """[matrix]
name = "lib"
requirements = ["utf8-tokenizer==0.8.5"]

[axes]
transformers = ["5.14.1"]
torch = ["2.13.0"]

[[subjects]]
target = "utf8_tokenizer.char_causal_lm:CharacterCausalLMWrapper"
methods = ["gradient_checkpointing_enable", "gradient_checkpointing_disable"]
"""
UV = shutil.which("uv") or str(Path(sys.executable).parent / "uv")


def library(folder: Path) -> Path:
    """A library's repository with nothing but its matrix file."""
    (folder / "matrix").mkdir(parents=True)
    (folder / "matrix" / "lib.toml").write_text(LIBRARY_MATRIX)
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    return folder


def comparable(report: dict) -> dict:
    """A report without what differs from run to run: timings, and how the file was named."""
    for cell in report["cells"]:
        cell.pop("seconds", None)
    return {k: v for k, v in report.items() if k not in {"file", "command"}}


def test_uvx_run_from_another_folder_puts_the_report_beside_the_matrix_file(tmp_path):
    lib, elsewhere = library(tmp_path / "lib"), tmp_path / "elsewhere"
    elsewhere.mkdir()
    command = [UV, "tool", "run", "--from", str(ROOT), "compat-matrix", "run", "../lib/matrix/lib.toml"]
    done = subprocess.run(command, cwd=elsewhere, capture_output=True, text=True)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "exit 0: every cell ran and every expectation held"
    assert "[1/1] cell:lib:transformers=5.14.1:torch=2.13.0 | ok" in done.stdout
    report = json.loads((lib / "matrix" / "reports" / "lib.json").read_text())
    ((cell),) = report["cells"]
    assert cell["resolved"]["transformers"] == "5.14.1" and cell["subjects"][0]["verdict"] == "same"
    assert not (elsewhere / "reports").exists() and not (lib / "reports").exists()
    assert list((elsewhere / ".nox").glob("*/pyvenv.cfg"))  # the environments stay where the command ran


def run_step(script: str, cwd: Path, environ: dict[str, str]) -> int:
    return subprocess.run(["bash", "-c", script], cwd=cwd, env={**os.environ, **environ}).returncode


def test_the_reusable_workflows_steps_give_a_library_the_report_of_a_local_run(tmp_path):
    """The list, cell and report jobs' own scripts, run here as the runner would on a library's checkout."""
    jobs = yaml.safe_load((ROOT / ".github" / "workflows" / "matrix.yml").read_text())["jobs"]
    script = {s["name"]: s["run"] for job in jobs.values() for s in job["steps"] if "name" in s and "run" in s}
    lib = library(tmp_path / "lib")
    runner = {
        "MATRIX": "matrix/*.toml",
        "RUNNER_TEMP": str(tmp_path / "runner"),
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "REPORTS": "reports",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",  # compat-matrix installed
    }
    assert run_step(script["Check the matrix files, and every axis value against the package index"], lib, runner) == 0
    assert run_step(script["List the cells"], lib, runner) == 0
    cells = json.loads((tmp_path / "output").read_text().strip().removeprefix("cells="))
    assert [c["session"] for c in cells] == ["cell:lib:transformers=5.14.1:torch=2.13.0"]
    for cell in cells:
        assert run_step(script["Run the cell"], lib, {**runner, "SESSION": cell["session"]}) == 0
    shutil.copytree(tmp_path / "runner" / "reports" / ".cells", lib / "reports" / ".cells")  # the artifacts
    assert run_step(script["Merge the cells into the report"], lib, runner) == 0
    assert (tmp_path / "output").read_text().strip().splitlines()[-1] == "code=0"
    assert "| transformers 5.14.1 |" in (tmp_path / "summary.md").read_text()

    local = library(tmp_path / "local")
    done = subprocess.run(["compat-matrix", "run"], cwd=local, env={**os.environ, **runner}, capture_output=True)
    assert done.returncode == 0, done.stdout[-2000:]
    workflow, here = (json.loads((d / "reports" / "lib.json").read_text()) for d in (lib, local))
    assert comparable(workflow) == comparable(here)


def test_nox_matrix_on_a_file_from_elsewhere(tmp_path):
    """Its reports go beside it, nox's --envdir reaches the cells, a cell that could not run fails its session
    while the report is still written, and the last line says what exit code 3 means."""
    (tmp_path / "lib").mkdir()
    matrix = tmp_path / "lib" / "m.toml"
    matrix.write_text(LIBRARY_MATRIX.replace('"5.14.1"', '"99.0"').replace('"lib"', '"m"'))
    environ = {k: v for k, v in os.environ.items() if k not in {"COMPAT_MATRIX_REPORTS", "COMPAT_MATRIX_HOME"}}
    command = [sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "--envdir", str(tmp_path / "envs")]
    done = subprocess.run(
        [*command, "-s", "matrix"], env={**environ, "COMPAT_MATRIX": str(matrix)}, capture_output=True, text=True
    )
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr[-3000:]
    cell = "cell:m:transformers=99.0:torch=2.13.0"
    assert done.stdout.strip().splitlines()[-1] == f"exit 3: 1 cell could not run: {cell} (install-failed)"
    assert f"Session {cell} aborted" in done.stdout + done.stderr
    assert len(list((tmp_path / "envs").glob("*/pyvenv.cfg"))) == 1  # nox shortens a long path to a hash
    assert not list((ROOT / ".nox").glob("cell-m-*"))
    report = json.loads((tmp_path / "lib" / "reports" / "m.json").read_text())
    assert report["cells"][0]["status"] == "install-failed"
    assert not (ROOT / "reports" / "m.json").exists()
