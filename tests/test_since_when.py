"""Since when? Real cells: a sweep as of a date, bisect over a few releases, and a warm `5.x` environment brought to
today's newest release. The matrices keep the default matrix's name, so their cells share environments with it (and
with each other): `cell:char-causal-lm-checkpointing:transformers=5.16.1:torch=2.13.0` is one environment whichever
run asks for it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from packaging.version import Version

from compat_matrix.host import package_index
from compat_matrix.host.envs import read_stamp
from conftest import ROOT, run_matrix
from test_markdown import unwrapped

pytestmark = pytest.mark.integration

DEFAULT = ROOT / "matrix" / "char-causal-lm-checkpointing.toml"
SWITCHES = 'methods = ["gradient_checkpointing_enable", "gradient_checkpointing_disable"]'


def matrix(folder: Path, transformers: str, extra: str = "", methods: str | None = None) -> Path:
    """The default matrix with another transformers axis (TOML, as written), lines added to [matrix], and other
    audited methods."""
    text = DEFAULT.read_text().replace('transformers = ["4.57.x", "5.14.1", "5.x"]', f"transformers = {transformers}")
    text = text.replace(
        'requirements = ["utf8-tokenizer==0.8.5"]', f'requirements = ["utf8-tokenizer==0.8.5"]\n{extra}'
    )
    if methods:
        text = text.replace(text[text.index("methods = [") :].splitlines()[0], methods)
    path = folder / "char-causal-lm-checkpointing.toml"
    path.write_text(text)
    return path


def test_a_sweep_as_of_a_date_runs_each_minor_and_says_where_the_verdict_changes(tmp_path):
    """Every minor from 5.15 to 5.16, installed as of 2026-10-11 (utf8-tokenizer 0.8.5 was uploaded the day before):
    the checkpointing switches' verdict changes at 5.16, where every_n_layers appears."""
    newer = 'exclude_newer = "2026-10-11"'
    path = matrix(tmp_path, '[{ each = "minor", range = ">=5.15,<5.17" }]', newer, SWITCHES)
    done, report = run_matrix(path, tmp_path / "reports")
    assert done.returncode == 0, done.stdout[-3000:]
    assert [c["cell"] for c in report["cells"]] == [
        "cell:char-causal-lm-checkpointing:transformers=5.16.1:torch=2.13.0",
        "cell:char-causal-lm-checkpointing:transformers=5.15.1:torch=2.13.0",
    ]
    assert [c["resolved"]["transformers"] for c in report["cells"]] == ["5.16.1", "5.15.1"]
    assert report["exclude_newer"] == "2026-10-11T00:00:00Z"
    (subject,) = report["subjects"]
    enable, disable = "gradient_checkpointing_enable", "gradient_checkpointing_disable"
    assert subject["glance"] == f"{enable}: redundant 5.15.1 · harmful 5.16.1; {disable}: redundant 5.15.1, 5.16.1"
    markdown = unwrapped((tmp_path / "reports" / "char-causal-lm-checkpointing.md").read_text())
    assert "\n| override | transformers 5.15.1 | 5.16.1 | advice |\n" in markdown  # the grid says it too
    assert f"\n| `{enable}` | = redundant | ✗ harmful | **Delete**: " in markdown
    assert "Releases as of 2026-10-11T00:00:00Z (`exclude_newer`)" in markdown
    for release in ("5-15-1", "5-16-1"):  # what uv was given, whichever run installed the environment
        stamp = read_stamp(ROOT / ".nox" / f"cell-char-causal-lm-checkpointing-transformers-{release}-torch-2-13-0")
        assert "--exclude-newer=2026-10-11T00:00:00Z" in stamp.asked


def bisect(path: Path, reports: Path, *options: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COMPAT_MATRIX": str(path), "COMPAT_MATRIX_REPORTS": str(reports)}
    command = [sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "-s", "bisect", "--", *options]
    return subprocess.run(command, env=env, capture_output=True, text=True, cwd=ROOT)


def test_bisect_finds_the_release_that_brought_a_new_entry_point_and_reuses_its_results(tmp_path):
    """activation_checkpointing_enable appeared in transformers 5.23.0. Four releases, two lanes: the oldest and
    5.22.2 in round 1, then 5.23.0; a second bisection of the range reuses all three results."""
    path = matrix(tmp_path, '["5.x"]')
    options = ["--range", ">=5.22,<=5.23", "--observation", "entry_points.activation_checkpointing_enable"]
    done = bisect(path, tmp_path / "reports", *options)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert "round 1: testing transformers 5.22.0, 5.22.2 (first differing in 5.22.1 … 5.23.0 or none)" in lines
    assert "round 2: testing transformers 5.23.0 (first differing in 5.23.0 or none)" in lines
    assert "first differing release: transformers 5.23.0 (5.22.2 absent)" in lines
    answer = json.loads((tmp_path / "reports" / "char-causal-lm-checkpointing.bisect.json").read_text())
    assert answer == {
        "schema": 1,
        "matrix": "char-causal-lm-checkpointing",
        "subject": "utf8_tokenizer.char_causal_lm:CharacterCausalLMWrapper",
        "axis": "transformers",
        "range": ">=5.22,<=5.23",
        "observation": "entry_points.activation_checkpointing_enable",
        "method": None,
        "first_differing": "5.23.0",
        "last_same": "5.22.2",
        "tested": {"5.22.0": "absent", "5.22.2": "absent", "5.23.0": "differs"},
        "rounds": [["5.22.0", "5.22.2"], ["5.23.0"]],
        "single_change": True,
        "exclude_newer": None,
    }
    start = time.monotonic()
    again = bisect(path, tmp_path / "reports", *options)
    assert again.returncode == 0 and "first differing release: transformers 5.23.0 (5.22.2 absent)" in again.stdout
    reused = [line for line in again.stdout.splitlines() if line.startswith("[") and "| ok (reused) |" in line]
    assert len(reused) == 3, again.stdout[-3000:]  # a progress line per cell
    assert time.monotonic() - start < 60  # no cell imported torch again


def test_a_warm_5x_environment_is_brought_to_the_newest_release(tmp_path, index_cache):
    """First as if the run were before 5.24.0 was released (the index's answer, as recorded, without 5.24.0, kept in
    the cache): `5.x` installs 5.14.1. Then with the answer once it was out: the same environment is reinstalled in
    place. In an environment folder of its own, where no other environment already holds 5.24.0 to be shared."""
    path = matrix(tmp_path, '["5.x"]')
    envdir = tmp_path / "envs"
    recorded = json.loads((ROOT / "tests" / "index" / "transformers.json").read_text())
    recorded["files"] = [f for f in recorded["files"] if "5.24.0" not in f["filename"]]
    package_index.cached_uploads("transformers", os.environ, lambda url: json.dumps(recorded))
    done, report = run_matrix(path, tmp_path / "reports", envdir)
    assert done.returncode == 0, done.stdout[-3000:]
    (cell,) = report["cells"]
    assert cell["cell"] == "cell:char-causal-lm-checkpointing:transformers=5.x:torch=2.13.0"
    assert (cell["requested"]["transformers"], cell["resolved"]["transformers"]) == ("5.x", "5.14.1")

    for kept in index_cache.rglob("*.json"):
        kept.unlink()
    whole = (ROOT / "tests" / "index" / "transformers.json").read_text()
    package_index.cached_uploads("transformers", os.environ, lambda url: whole)  # the answer once 5.24.0 is out
    done, report = run_matrix(path, tmp_path / "reports", envdir)
    assert done.returncode == 0, done.stdout[-3000:]
    (cell,) = report["cells"]
    assert (cell["requested"]["transformers"], cell["resolved"]["transformers"]) == ("5.x", "5.24.0")
    install = [line for line in done.stdout.splitlines() if " pip install --python " in line]
    assert len(install) == 1 and "transformers==5.24.0" in install[0], done.stdout[-3000:]
    assert " venv --clear " not in done.stdout  # in place: the environment keeps what it has


def test_bisect_on_one_override_finds_where_its_conclusion_changed(tmp_path):
    """The subject's verdict differs throughout (get_input_embeddings is needed on every release), but the enable
    override's conclusion changes once: redundant up to 5.15.1, harmful from 5.16.0 (every_n_layers)."""
    options = ["--range", ">=5.14,<=5.24", "--method", "gradient_checkpointing_enable"]
    done = bisect(DEFAULT, tmp_path / "reports", *options)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "first differing release: transformers 5.16.0 (5.15.1 redundant)" in done.stdout.splitlines()
    answer = json.loads((tmp_path / "reports" / "char-causal-lm-checkpointing.bisect.json").read_text())
    assert (answer["method"], answer["first_differing"], answer["last_same"]) == (
        "gradient_checkpointing_enable",
        "5.16.0",
        "5.15.1",
    )
    assert len(answer["tested"]) <= 6 and answer["tested"]["5.16.0"] == "harmful" and answer["single_change"]


def test_fail_on_harmful_exits_1_on_the_default_matrix_and_0_without_5_24(tmp_path):
    """The scheduled job's gate: harmful on the newest 5.x (5.24.0 and later) fails the run; the same matrix limited
    to 4.57.x and 5.14.1 (its cells' results reused) passes."""
    reports = tmp_path / "reports"

    def run(path: Path, *options: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "COMPAT_MATRIX": str(path), "COMPAT_MATRIX_REPORTS": str(reports)}
        command = [sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "-s", "matrix", "--", *options]
        return subprocess.run(command, env=env, capture_output=True, text=True, cwd=ROOT)

    done = run(DEFAULT, "--fail-on", "harmful")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    enable = "CharacterCausalLMWrapper.gradient_checkpointing_enable"
    report = json.loads((reports / "char-causal-lm-checkpointing.json").read_text())
    newest = next(c["resolved"]["transformers"] for c in report["cells"] if c["requested"]["transformers"] == "5.x")
    assert Version(newest) >= Version("5.24.0")  # 5.x: the newest release on the index today
    assert f"exit 1: 1 check failed: --fail-on: {enable}: harmful on transformers {newest}" in done.stdout
    assert report["status"] == "failing"
    limited = matrix(tmp_path, '["4.57.x", "5.14.1"]')
    done = run(limited, "--fail-on", "harmful", "--cached")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert json.loads((reports / "char-causal-lm-checkpointing.json").read_text())["status"] == "ok"
