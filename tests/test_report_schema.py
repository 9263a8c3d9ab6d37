"""The report JSON against its JSON Schema (src/compat_matrix/host/report.schema.json, shipped with the package):
every committed report, and the JSON of every golden layout (with `--fail-on` and a baseline, so that `failed_on`
and `changes_since_baseline` hold records); the schema's vocabularies are the code's, and it refuses a report of
schema 2 (releases keyed by label)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from compat_matrix.host import render
from compat_matrix.host.health import Stage
from compat_matrix.host.report import make_report
from compat_matrix.shared import evidence
from compat_matrix.shared.vocabulary import AdviceKind, ChangeKind, ConclusionKind
from conftest import ROOT
from test_golden import LAYOUTS

SCHEMA = json.loads(resources.files("compat_matrix.host").joinpath("report.schema.json").read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
COMMITTED = sorted((ROOT / "reports").glob("*.json"))


def problems(data: dict) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in VALIDATOR.iter_errors(data)]


def test_the_schema_is_a_valid_json_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.name)
def test_every_committed_report_validates(path: Path):
    assert problems(json.loads(path.read_text(encoding="utf-8"))) == []


def test_there_are_committed_reports_to_validate():
    assert any(p.name == "char-causal-lm-checkpointing.json" for p in COMMITTED)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_every_golden_layout_s_json_validates_with_fail_on_and_a_baseline(layout):
    spec, results = LAYOUTS[layout]()
    plain = render.report_json(make_report(spec, results))
    assert problems(plain) == []
    everything = tuple(ConclusionKind)
    redundant = [{**o, "by_release": dict.fromkeys(o["by_release"], "redundant")} for o in plain["overrides"]]
    earlier = {**plain, "overrides": redundant}
    checked = render.report_json(make_report(spec, results, earlier, everything))
    assert checked["failed_on"] and checked["changes_since_baseline"]
    assert problems(checked) == []
    ids = {r["id"] for r in checked["releases"]}
    assert {i for f in checked["failed_on"] for i in f["releases"]} <= ids
    assert {c["release"] for c in checked["changes_since_baseline"]} <= ids | {None}


def test_the_schema_s_vocabularies_are_the_code_s():
    defs = SCHEMA["$defs"]
    assert defs["conclusion"]["enum"] == [str(k) for k in ConclusionKind]
    assert defs["conclusion_option"]["enum"] == [k.option for k in ConclusionKind]
    assert defs["advice"]["enum"] == [str(k) for k in AdviceKind]
    assert set(SCHEMA["properties"]["counts"]["required"]) == {str(k) for k in AdviceKind}
    assert defs["context"]["enum"] == [evidence.ALONE, evidence.WITH_REST, evidence.WITHOUT_REST, evidence.TOGETHER]
    assert defs["breakage"]["properties"]["stage"]["enum"] == [str(s) for s in Stage]
    assert defs["change"]["properties"]["kind"]["enum"] == [str(k) for k in ChangeKind]


def test_the_schema_refuses_what_schema_2_wrote():
    spec, results = LAYOUTS["demo"]()
    data = render.report_json(make_report(spec, results))
    relabelled = {r["id"]: r["label"] for r in data["releases"]}
    enable = data["overrides"][0]
    old = {**enable, "by_release": {relabelled[k]: v for k, v in enable["by_release"].items()}}
    assert any("by_release" in p for p in problems({**data, "overrides": [old]}))  # keyed by label: refused
    assert problems({**data, "fail_on": ["could not run"]})  # the option is could-not-run
    assert problems({**data, "failed_on": ["CharacterCausalLMWrapper.gradient_checkpointing_enable: harmful"]})
    told = data["subjects"][0]["told_nothing"]
    assert isinstance(told, list)
    assert problems({**data, "subjects": [{**data["subjects"][0], "told_nothing": "generate (…) on 5.24.0"}]})


def test_carries_is_false_for_what_never_decides_and_the_subject_s_conclusion_never_contradicts_its_names():
    data = render.report_json(make_report(*LAYOUTS["sweep-11"]()))
    observations = [o for c in data["cells"] for s in c["subjects"] for o in s["observations"]]
    assert {o["name"] for o in observations if not o["carries"]} >= {"warnings", "reached"}
    assert all(o["carries"] for o in observations if o["name"] not in ("warnings", "reached", "lines"))
    for subject in (s for c in data["cells"] for s in c["subjects"]):
        kinds = set(subject["per_method"].values())
        assert subject["conclusion"] == (kinds.pop() if len(kinds) == 1 else None), subject["per_method"]


def test_the_schema_ships_with_the_package():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'packages = ["src/compat_matrix"]' in pyproject  # hatch ships every file of the package, the schema too
    assert (ROOT / "src" / "compat_matrix" / "host" / "report.schema.json").is_file()


def test_a_schema_2_baseline_and_a_schema_3_report_compare_by_release():
    from compat_matrix.host.baseline import compare, labelled

    spec, results = LAYOUTS["demo"]()
    new = render.report_json(make_report(spec, results))
    old = {**labelled(new), "schema": 2}
    del old["releases"]
    assert [c for c in compare(old, new) if c.kind == ChangeKind.CONCLUDED] == []
    flipped = {**old, "overrides": [replace_by_release(old["overrides"][0], "transformers 5.10.1", "redundant")]}
    (changed,) = [c for c in compare(flipped, new) if c.kind == ChangeKind.CONCLUDED]
    assert changed.row == "transformers 5.10.1" and changed.detail.endswith("redundant → harmful")


def replace_by_release(override: dict, label: str, conclusion: str) -> dict:
    return {**override, "by_release": {**override["by_release"], label: conclusion}}


GATE = ROOT / "examples" / "bot" / "gate.py"
DEFAULT_REPORT = ROOT / "reports" / "char-causal-lm-checkpointing.json"


@pytest.mark.parametrize(
    ("kinds", "code", "lines"),
    [
        (
            [],
            1,
            [
                "utf8_tokenizer.char_causal_lm:CharacterCausalLMWrapper gradient_checkpointing_enable: harmful on "
                "transformers 5.25.0"
            ],
        ),
        (["orphaned", "could-not-run"], 0, []),
        (
            ["needed"],
            1,
            [
                f"utf8_tokenizer.char_causal_lm:CharacterCausalLMWrapper get_input_embeddings: needed on "
                f"transformers {v}"
                for v in ("4.57.6", "5.14.1", "5.25.0")
            ],
        ),
    ],
)
def test_the_readme_s_bot_decides_from_the_committed_json_alone(kinds, code, lines):
    import subprocess
    import sys

    ran = subprocess.run([sys.executable, str(GATE), str(DEFAULT_REPORT), *kinds], capture_output=True, text=True)
    assert (ran.returncode, ran.stdout.splitlines()) == (code, lines), ran.stderr


def test_the_readme_quotes_the_bot_as_it_is():
    source = GATE.read_text()
    function = source[source.index("def failures") : source.index("\n\n\ndef main")]
    assert f"```python\n{function}\n```" in (ROOT / "README.md").read_text()
