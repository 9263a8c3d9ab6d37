"""`--fail-on`: a run goes red when an override reaches one of the named conclusions on any tested release (what a
scheduled job needs when a new release makes an override harmful); differences alone still never fail. On results
made by hand, as the default matrix's cells leave them (tests/test_integration.py runs the real cells)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compat_matrix.host import cli, exits
from compat_matrix.host.cells import cells
from compat_matrix.host.folders import result_path
from compat_matrix.host.spec import load
from compat_matrix.shared.results import CellResult, write_json_atomic
from conftest import ROOT
from test_golden import wrapper_cell

DEFAULT = ROOT / "matrix" / "char-causal-lm-checkpointing.toml"
RELEASES = {"4.57.x": "4.57.6", "5.14.1": "5.14.1", "5.x": "5.24.0"}
ENABLE = "CharacterCausalLMWrapper.gradient_checkpointing_enable"
WRAPPER = "utf8_tokenizer.char_causal_lm:CharacterCausalLMWrapper"
EVERYWHERE = ["transformers=4.57.6", "transformers=5.14.1", "transformers=5.24.0"]
FAILED_ENABLE = {
    "target": WRAPPER,
    "name": "gradient_checkpointing_enable",
    "conclusion": "harmful",
    "releases": ["transformers=5.24.0"],
}
FAILED_EMBEDDINGS = {"target": WRAPPER, "name": "get_input_embeddings", "conclusion": "needed", "releases": EVERYWHERE}


def default_matrix(folder: Path, values: list[str]) -> Path:
    """The default matrix limited to `values`, with a result file per cell: the enable override is harmful where the
    release's switches take `every_n_layers` (5.24.0 here), get_input_embeddings needed everywhere."""
    text = DEFAULT.read_text().replace('["4.57.x", "5.14.1", "5.x"]', json.dumps(values))
    folder.mkdir(exist_ok=True)
    path = folder / "char-causal-lm-checkpointing.toml"
    path.write_text(text)
    for cell in cells(load(path)):
        version = RELEASES[cell.requested["transformers"]]
        resolved = {"python": "3.11.7", "transformers": version, "torch": "2.13.0+cpu"}
        result = CellResult(cell.matrix, cell.id, cell.requested, resolved, subjects=(wrapper_cell(version),))
        write_json_atomic(result_path(folder / "reports", cell), result.to_json())
    return path


def report(folder: Path, path: Path, *options: str) -> int:
    return cli.main(["report", "--reports", str(folder / "reports"), *options, str(path)])


def test_fail_on_harmful_exits_1_on_the_default_matrix_and_0_without_5_24(tmp_path, capsys):
    path = default_matrix(tmp_path, ["4.57.x", "5.14.1", "5.x"])
    assert report(tmp_path, path) == exits.OK  # differences alone never fail
    capsys.readouterr()
    assert report(tmp_path, path, "--fail-on", "harmful") == exits.UNMET
    out = capsys.readouterr().out.strip().splitlines()
    assert f"fails on: {ENABLE}: harmful on transformers 5.24.0" in out
    assert out[-1] == f"exit 1: 1 check failed: --fail-on: {ENABLE}: harmful on transformers 5.24.0"
    data = json.loads((tmp_path / "reports" / "char-causal-lm-checkpointing.json").read_text())
    assert (data["status"], data["fail_on"]) == ("failing", ["harmful"])
    assert data["failed_on"] == [FAILED_ENABLE]
    assert data["releases"][0]["id"] == "transformers=5.24.0"  # what failed_on refers to
    markdown = (tmp_path / "reports" / "char-causal-lm-checkpointing.md").read_text()
    # each fact once: the caution says what breaks and that it fails the run; no --fail-on line says it again
    assert (
        "**Caution** (fails the run: `--fail-on harmful`): on transformers 5.24.0, `gradient_checkpointing_enable`"
        in markdown
    )
    assert "**Fails the run**" not in markdown and markdown.count("harmful on") == 0

    limited = default_matrix(tmp_path / "limited", ["4.57.x", "5.14.1"])
    assert report(tmp_path / "limited", limited, "--fail-on", "harmful") == exits.OK
    data = json.loads((tmp_path / "limited" / "reports" / "char-causal-lm-checkpointing.json").read_text())
    assert (data["status"], data["failed_on"]) == ("ok", [])


@pytest.mark.parametrize(
    ("fail_on", "expected"),
    [
        ("needed", [FAILED_EMBEDDINGS]),
        ("orphaned,could-not-run", []),
        ("harmful,needed", [FAILED_ENABLE, FAILED_EMBEDDINGS]),
    ],
)
def test_fail_on_names_each_override_and_conclusion_once(tmp_path, fail_on, expected):
    path = default_matrix(tmp_path, ["4.57.x", "5.14.1", "5.x"])
    assert report(tmp_path, path, "--fail-on", fail_on) == (exits.UNMET if expected else exits.OK)
    data = json.loads((tmp_path / "reports" / "char-causal-lm-checkpointing.json").read_text())
    assert data["failed_on"] == expected
    assert data["fail_on"] == fail_on.split(",")  # spelled as on the command line: `could-not-run`
