from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compat_matrix.host import package_index
from compat_matrix.host.spec import load

ROOT = Path(__file__).resolve().parent.parent
BROKEN = ROOT / "tests" / "broken_overrides"
INDEX = ROOT / "tests" / "index" / "transformers.json"  # an answer of PyPI, recorded: 4.57.1 … 5.24.0
UNREACHABLE = "http://127.0.0.1:9/simple"  # the discard port: nothing listens


@pytest.fixture(autouse=True)
def index_cache(tmp_path_factory, monkeypatch):
    """Each test keeps the package index's answers in a folder of its own, never in the user's cache."""
    folder = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("COMPAT_MATRIX_CACHE", str(folder))
    return folder


@pytest.fixture
def answered(monkeypatch, index_cache):
    """The index answers as recorded (4.57.1 … 5.24.0), kept in the test's cache; asking it again would fail."""
    monkeypatch.setenv("UV_DEFAULT_INDEX", UNREACHABLE)
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.delenv("UV_FIND_LINKS", raising=False)
    answer(INDEX.read_text())


def answer(text: str) -> None:
    """What the index answers for transformers from now on (for a few minutes), as if it had just been asked."""
    for kept in (package_index.cache_folder(os.environ) / "index").glob("*.json"):
        kept.unlink()
    package_index.cached_uploads("transformers", os.environ, lambda url: text)


def catches() -> dict[str, list[tuple[str, str]]]:
    """Per broken override of the self-check matrix, the (probe, observation) pairs that must show it."""
    subjects = load(BROKEN / "selfcheck.toml").subjects
    return {s.target.split(":")[1]: [tuple(c.split(".", 1)) for c in s.catches] for s in subjects if s.catches}


def default_matrix_variant(folder: Path, name: str, transformers: list[str], extra: str = "") -> Path:
    """The default matrix file under another name, with other transformers versions (and extra axis lines)."""
    text = (ROOT / "matrix" / "char-causal-lm-checkpointing.toml").read_text()
    axis = "transformers = " + json.dumps(transformers) + (f"\n{extra}" if extra else "")
    text = text.replace('name = "char-causal-lm-checkpointing"', f'name = "{name}"')
    path = folder / f"{name}.toml"
    path.write_text(text.replace('transformers = ["4.57.x", "5.14.1", "5.x"]', axis))
    return path


def run_matrix(matrix: Path, reports: Path, envdir: Path | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    """`COMPAT_MATRIX=matrix nox -s matrix`, reports into `reports`, environments in `envdir` (default: the
    repository's .nox, whose environments the tests share); returns the process and the report JSON."""
    env = {**os.environ, "COMPAT_MATRIX": str(matrix), "COMPAT_MATRIX_REPORTS": str(reports)}
    where = ["--envdir", str(envdir)] if envdir else []
    done = subprocess.run(
        [sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), *where, "-s", "matrix"],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    name = next(line.split('"')[1] for line in matrix.read_text().splitlines() if line.startswith("name"))
    report = reports / f"{name}.json"
    assert report.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    return done, json.loads(report.read_text())
