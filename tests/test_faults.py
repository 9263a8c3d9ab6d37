"""Fault injection on real cells: each fault is labelled where it happened, and its neighbours keep their results."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from compat_matrix.host.envs import run_lock
from conftest import BROKEN, ROOT, run_matrix

pytestmark = pytest.mark.integration

GOOD = "utf8_tokenizer.char_causal_lm:CharacterCausalLMWrapper"
FAULTS = "broken_overrides.faults"


def matrix_text(name: str, transformers: list[str], subjects: list[tuple[str, str | None]], timeout: float) -> str:
    lines = [
        f'[matrix]\nname = "{name}"\ntimeout = {timeout}',
        f'requirements = ["utf8-tokenizer==0.8.5", "{BROKEN}"]',
        f'[axes]\ntransformers = {json.dumps(transformers)}\ntorch = ["2.13.0"]',
    ]
    for target, factory in subjects:
        lines.append(f'[[subjects]]\ntarget = "{target}"\nmethods = ["gradient_checkpointing_disable"]')
        if factory:
            lines.append(f'factory = "{FAULTS}:{factory}"')
    return "\n".join(lines) + "\n"


def test_aborting_hanging_and_missing_are_labelled_and_the_rest_survives(tmp_path):
    subjects = [
        (GOOD, None),
        (f"{FAULTS}:Aborting", "aborts"),
        (f"{FAULTS}:Hanging", "hangs"),
        (f"{FAULTS}:HangingHard", "hangs_hard"),
        (f"{FAULTS}:Hostile", "raises_hostile"),
    ]
    text = matrix_text("faults", ["5.14.1", "99.0"], subjects, timeout=5)
    matrix = tmp_path / "faults.toml"
    matrix.write_text(text)
    started = time.monotonic()
    done, report = run_matrix(matrix, tmp_path / "reports")
    assert time.monotonic() - started < 120  # the hang costs its timeout, 5 s, and the hard hang 15 s
    assert done.returncode == 3
    by_version = {c["requested"]["transformers"]: c for c in report["cells"]}
    assert by_version["99.0"]["status"] == "install-failed"
    ok = by_version["5.14.1"]
    assert ok["status"] == "ok"
    good, aborted, hung, hung_hard, hostile = (s for s in ok["subjects"])
    assert good["verdict"] == "same" and good["observations"]
    assert aborted["verdict"] == "crashed" and "SIGABRT" in aborted["reason"]
    assert "disable_round_trip (override)" in aborted["reason"]
    assert hung["verdict"] == "timed-out" and "exceeded the timeout of 5s" in hung["reason"]
    assert hung_hard["verdict"] == "timed-out" and "no answer after 15s" in hung_hard["reason"]
    # both variants raise the same error before any audited method runs: an observation, and nothing observed
    assert hostile["verdict"] == "inconclusive" and "never ran" in hostile["reason"]
    error = next(o for o in hostile["observations"] if o["name"] == "error")
    assert error["override"].startswith("ValueError: bad | value")
    markdown = (tmp_path / "reports" / "faults.md").read_text()
    assert "<script>" not in markdown and "bad &#124; value" in markdown


def test_two_runs_on_one_reports_folder_wait_for_each_other(tmp_path):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from compat_matrix.host.envs import run_lock; from pathlib import Path\n"
            f"with run_lock(Path({str(tmp_path)!r})):\n    print('held', flush=True); time.sleep(3)",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert holder.stdout.readline().strip() == "held"
    said = []
    started = time.monotonic()
    with run_lock(tmp_path, log=said.append):
        waited = time.monotonic() - started
    holder.wait()
    assert waited > 1 and said and said[0].startswith("waiting: another compat-matrix run (pid")


def test_interrupt_keeps_finished_cells_and_labels_the_rest(tmp_path):
    subjects = [(GOOD, "hangs_on_4_57")]
    matrix = tmp_path / "interrupt.toml"
    matrix.write_text(matrix_text("interrupt", ["5.14.1", "4.57.x"], subjects, timeout=600))
    reports = tmp_path / "reports"
    env = {**os.environ, "COMPAT_MATRIX": str(matrix), "COMPAT_MATRIX_REPORTS": str(reports)}
    nox = subprocess.Popen(
        [sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "-s", "matrix"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    finished = reports / ".cells" / "interrupt" / "interrupt_transformers=5.14.1_torch=2.13.0.json"
    deadline = time.monotonic() + 300
    while not finished.exists() and time.monotonic() < deadline:
        time.sleep(1)
    assert finished.exists()
    nox.send_signal(signal.SIGTERM)
    assert nox.wait(timeout=120) == 130
    report = json.loads((reports / "interrupt.json").read_text())
    by_version = {c["requested"]["transformers"]: c for c in report["cells"]}
    assert by_version["5.14.1"]["status"] == "ok"
    assert by_version["4.57.x"]["status"] == "not run"
    assert not list(reports.rglob("*.tmp"))
    assert outlived(str(reports), grace=20.0) == [], "processes of the interrupted run outlived it"


def outlived(marker: str, grace: float) -> list[str]:
    """The processes whose command line holds `marker` still there after `grace` seconds: a process being killed
    takes a moment, longer on a loaded machine (3 s was too short with two other runs on the 2 cores)."""
    deadline = time.monotonic() + grace
    while True:
        left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)
