"""Plan once, on real cells: a warm run of the default matrix's three cells parses its matrix file once, in the
process that starts the run; the nested nox and the cells' nox sessions read the plan. Every process of the run
records the files it opens (an audit hook, installed by a sitecustomize module on its PYTHONPATH)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, default_matrix_variant

pytestmark = pytest.mark.integration

HOOK = """
import os, sys

_WATCHED, _LOG = os.environ.get("OPENS_OF"), os.environ.get("OPENS_LOG")


def _opened(event, args):
    if event == "open" and _WATCHED and args and str(args[0]) == _WATCHED:
        with open(_LOG, "a", encoding="utf-8") as log:
            log.write(f"{os.getpid()} {' '.join(sys.argv)[:300]}\\n")


sys.addaudithook(_opened)
"""


def test_a_warm_three_cell_run_opens_its_matrix_file_once(tmp_path):
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(HOOK)
    # the default matrix's name and cells: its environments are warm
    matrix = default_matrix_variant(tmp_path, "char-causal-lm-checkpointing", ["4.57.x", "5.14.1", "5.x"])
    log = tmp_path / "opens.log"
    path = os.pathsep.join(p for p in (str(hooks), os.environ.get("PYTHONPATH")) if p)
    env = {
        **os.environ,
        "COMPAT_MATRIX": str(matrix),
        "COMPAT_MATRIX_REPORTS": str(tmp_path / "reports"),
        "OPENS_OF": str(matrix),
        "OPENS_LOG": str(log),
        "PYTHONPATH": path,
    }
    command = [sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "-s", "matrix"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    opens = log.read_text().splitlines()
    assert len(opens) == 1, opens  # the outer nox, at its noxfile's import
    assert "-s matrix" in opens[0]
    cells = [line for line in done.stdout.splitlines() if line.startswith("[")]
    assert len(cells) == 3 and all(f"[{k}/3] cell:" in line for k, line in enumerate(cells, 1))  # each told once
    assert done.stdout.count("| ok |") == 3 and not list((ROOT / ".nox" / ".compat-matrix").glob("plan-*.json"))
    assert Path(tmp_path / "reports" / "char-causal-lm-checkpointing.md").exists()
