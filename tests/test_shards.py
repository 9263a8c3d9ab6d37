"""Cells run one by one, as CI jobs would, and merged afterwards give the report of one local run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from compat_matrix import cli
from compat_matrix.cells import cells
from compat_matrix.spec import load
from conftest import ROOT, default_matrix_variant, run_matrix

pytestmark = pytest.mark.integration


def without_timings(report: dict) -> dict:
    for cell in report["cells"]:
        cell.pop("seconds", None)
    return report


def test_cells_run_apart_and_merged_give_the_same_report(tmp_path):
    matrix = default_matrix_variant(tmp_path, "shard", ["4.57.x", "5.14.1"])
    _, whole = run_matrix(matrix, tmp_path / "whole")

    merged = tmp_path / "merged" / ".cells" / "shard"
    merged.mkdir(parents=True)
    for index, cell in enumerate(cells(load(matrix))):
        shard = tmp_path / f"shard-{index}"
        env = {**os.environ, "COMPAT_MATRIX": str(matrix), "COMPAT_MATRIX_REPORTS": str(shard)}
        command = [sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "-s", cell.id]
        subprocess.run(command, env=env, check=True, capture_output=True)
        for result in (shard / ".cells" / "shard").glob("*.json"):
            shutil.copy(result, merged / result.name)  # what the merge job's artifact download does

    assert cli.main(["report", "--reports", str(tmp_path / "merged"), str(matrix)]) == cli.EXIT_OK
    apart = json.loads((tmp_path / "merged" / "shard.json").read_text())
    assert without_timings(apart) == without_timings(whole)
    markdown = [(tmp_path / d / "shard.md").read_text().split("## Versions")[0] for d in ("merged", "whole")]
    assert markdown[0] == markdown[1]
