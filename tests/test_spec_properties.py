"""Property: whatever a matrix file holds, `compat-matrix validate` answers with exit code 0 or 2 and one line per
problem, never a traceback. The documents are built from the schema's keys with values of every TOML type."""

from __future__ import annotations

import contextlib
import datetime
import io
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compat_matrix.host import cli
from compat_matrix.host.spec import MATRIX_KEYS, SUBJECT_KEYS, SWEEP_KEYS, TOP_KEYS, MatrixError, parse

KEYS = [*TOP_KEYS, *MATRIX_KEYS, *SUBJECT_KEYS, *SWEEP_KEYS, "transformers", "torch", "python", "requirments", ""]
PLAUSIBLE = [
    "5.x",
    "4.57.x",
    "latest",
    ">=5,<6",
    "5.14.1",
    "3.11",
    "a:B",
    "pkg.mod:Class",
    "gradient_checkpointing_enable",
    "./",
    "../",
    "~/x",
    "/",
    "utf8-tokenizer==0.8.5",
    "*",
    "same",
    "differs",
    "-e .",
    "https://x/y.whl",
    "x @ file:///y",
    "minor",
    "release",
    "2026-10-01",
]
texts = st.one_of(st.sampled_from(PLAUSIBLE), st.text(max_size=20), st.text(min_size=200, max_size=400))
scalars = st.one_of(
    texts,
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.dates(),
    st.datetimes(min_value=datetime.datetime(1, 1, 2)),
    st.times(),
)
keys = st.one_of(st.sampled_from(KEYS), st.text(max_size=12))
values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4), max_leaves=10
)


def table_of(names: list[str]) -> st.SearchStrategy[dict]:
    """A table with some of the schema's keys (and strangers), each with a value of any shape."""
    return st.dictionaries(st.one_of(st.sampled_from(names), keys), values, max_size=6)


documents = st.one_of(
    st.dictionaries(keys, values, max_size=6),
    st.fixed_dictionaries(
        {},
        optional={
            "matrix": st.one_of(table_of(list(MATRIX_KEYS)), values),
            "axes": st.one_of(st.dictionaries(keys, st.one_of(st.lists(texts, max_size=3), values)), values),
            "subjects": st.one_of(st.lists(st.one_of(table_of(list(SUBJECT_KEYS)), values), max_size=3), values),
            "exclude": st.one_of(st.lists(table_of(["transformers", "torch"]), max_size=2), values),
        },
    ),
)

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("properties")


@SETTINGS
@given(document=documents)
def test_parse_raises_nothing_but_matrix_error(folder, document):
    try:
        parse(document, folder / "m.toml")
    except MatrixError as exc:
        assert exc.problems and all("\n" not in p and p.startswith(f"{folder / 'm.toml'}: ") for p in exc.problems)


@SETTINGS
@given(document=documents)
def test_validate_exits_0_or_2_with_one_line_per_problem(folder, document):
    path = folder / "m.toml"
    path.write_text(tomli_w.dumps(document), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["validate", "--offline", str(path)])
    assert code in (cli.EXIT_OK, cli.EXIT_BAD_MATRIX), err.getvalue()
    lines = err.getvalue().splitlines()
    assert (code == cli.EXIT_BAD_MATRIX) == bool(lines)
    assert all(line.startswith(f"error: {path}: ") for line in lines), lines
