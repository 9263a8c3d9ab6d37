"""Cells run one by one, as CI jobs would, and merged afterwards give the report of one local run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from compat_matrix.host import cli
from compat_matrix.host.cells import cells
from compat_matrix.host.spec import load
from conftest import ROOT, default_matrix_variant, run_matrix

pytestmark = pytest.mark.integration


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
    assert json.loads((tmp_path / "merged" / "shard.json").read_text()) == whole
    for suffix in (".md", ".csv"):  # no durations in the report files: byte for byte the same
        assert (tmp_path / "merged" / f"shard{suffix}").read_bytes() == (
            tmp_path / "whole" / f"shard{suffix}"
        ).read_bytes()
