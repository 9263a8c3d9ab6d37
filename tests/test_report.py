"""Collect, verdict and render on hand-made cell results (tests/test_golden.py compares the markdown with a golden
file)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from compat_matrix.host import cli, collect, cut, render, verdict
from compat_matrix.host.cells import cells
from compat_matrix.host.folders import result_path
from compat_matrix.host.report import load_results, make_report
from compat_matrix.host.spec import Axis, MatrixSpec, Subject, load
from compat_matrix.shared.results import CellResult, Observation, SubjectResult, read_cell_result, write_json_atomic

TARGET = "utf8_tokenizer.char_causal_lm:CharacterCausalLMWrapper"
METHODS = ("gradient_checkpointing_enable", "gradient_checkpointing_disable")
SPEC = MatrixSpec(
    Path("matrix/demo.toml"),
    "demo",
    ("utf8-tokenizer==0.8.5",),
    (Axis("transformers", ("4.57.x", "5.10.1", "5.x", "99.0")),),
    (Subject(TARGET, METHODS),),
)
HOSTILE = "ValueError: a | b `code` <b>bold</b>\nsecond line"


def observations(enable: bool = True, error: str | None = None) -> tuple[Observation, ...]:
    """What the cells observe, with each method deleted alone where it ran as shipped: the enable override is the
    one that changes the layers and raises."""
    enable_only = ((METHODS[0], [METHODS[1]]), (METHODS[1], [METHODS[0]]))
    return (
        Observation("enable_reaches_wrapped_model", "layers_on", enable, True, without=((METHODS[0], True),)),
        Observation(
            "enable_reaches_wrapped_model", "reached", [METHODS[0]], [METHODS[0]], False, ((METHODS[0], [METHODS[0]]),)
        ),
        Observation(
            "disable_round_trip", "layers_on", False, False, without=((METHODS[0], False), (METHODS[1], False))
        ),
        Observation("disable_round_trip", "reached", list(METHODS), list(METHODS), False, enable_only),
        Observation(
            "kwargs_forwarded",
            "checkpoint_kwargs",
            [{"use_reentrant": False}],
            [{"use_reentrant": False}],
            without=((METHODS[0], [{"use_reentrant": False}]),),
        ),
        Observation("kwargs_forwarded", "reached", [METHODS[0]], [METHODS[0]], False, ((METHODS[0], [METHODS[0]]),)),
        # the enable probe raises part way (its flags read as they were left): one failure, not a second difference
        *(
            [Observation("enable_reaches_wrapped_model", "error", error, None, without=((METHODS[0], None),))]
            if error
            else []
        ),
    )


def result(requested: str, resolved: str | None, obs=(), status="ok", reason=None) -> CellResult:
    subjects = (SubjectResult(TARGET, METHODS, observations=obs, probes=("enable_reaches_wrapped_model",)),)
    return CellResult(
        "demo",
        f"cell:demo:transformers={requested}",
        {"transformers": requested},
        {"python": "3.11.7", "transformers": resolved} if resolved else {},
        status,
        reason,
        subjects if status == "ok" else (),
        12.5,
    )


RESULTS = [
    result("4.57.x", "4.57.6", observations()),
    result("5.10.1", "5.10.1", observations(enable=False, error=HOSTILE)),
    result("5.x", "5.9.0", observations()),
    result("99.0", None, status="install-failed", reason="No solution found | transformers==99.0"),
]
META = render.ReportMeta("demo", "matrix/demo.toml", "COMPAT_MATRIX=matrix/demo.toml nox -s matrix", SPEC.subjects)


def rendered() -> tuple[str, dict]:
    report = make_report(SPEC, RESULTS)
    return render.markdown(report), render.report_json(report)


def decided(results=RESULTS, subjects=SPEC.subjects):
    return verdict.decide_all(collect.collect(results, subjects).subjects)


def test_rows_are_newest_first_by_version_not_string_order():
    labels = [row.label for row in collect.collect(RESULTS, SPEC.subjects).cells]
    assert labels == [
        "transformers 99.0 (requested)",
        "transformers 5.10.1",
        "transformers 5.9.0",
        "transformers 4.57.6",
    ]


def test_a_series_that_did_not_install_goes_after_its_releases():
    failed = [result("5.x", None, status="install-failed"), result("4.57.x", "4.57.6", observations())]
    failed.append(result("4.x", None, status="install-failed"))
    labels = [row.label for row in collect.collect(failed, SPEC.subjects).cells]
    assert labels == ["transformers 5.x (requested)", "transformers 4.x (requested)", "transformers 4.57.6"]


def test_verdicts_name_what_differs():
    rows = {row.label: verdict for row, verdict in decided()}
    assert rows["transformers 4.57.6"].verdict == "same"
    assert rows["transformers 5.10.1"].verdict == "differs"
    assert rows["transformers 5.10.1"].differs == (
        "enable_reaches_wrapped_model.layers_on",
        "enable_reaches_wrapped_model.error",
    )
    assert rows["transformers 99.0 (requested)"].verdict == "install-failed"


def test_hostile_text_cannot_break_a_table_row():
    text, data = rendered()
    assert "<b>" not in text and "`code`" not in text
    tables, current = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            current.append(line.count("|"))
        elif current:
            tables.append(current)
            current = []
    assert len(tables) >= 3 and all(len(set(counts)) == 1 for counts in tables)
    assert HOSTILE in json.dumps(data["cells"][1]["subjects"][0]["observations"]).replace("\\n", "\n")


def test_json_has_every_contract_key():
    _, data = rendered()
    assert data["schema"] == 3 and data["matrix"] == "demo"
    assert data["title"] == "CharacterCausalLMWrapper: review both overrides"  # no Delete: 99.0 could not run
    assert data["status"] == "could not run"  # 99.0 did not install
    assert data["counts"] == {"Delete": 0, "Keep": 0, "Review": 2, "Port": 0, "Fix": 0}
    enable, disable = data["overrides"]
    assert enable == {
        "target": TARGET,
        "name": METHODS[0],
        "kind": "method",
        "by_release": {
            "transformers=4.57.6": "redundant",
            "transformers=5.9.0": "redundant",
            "transformers=5.10.1": "harmful",
            "transformers=requested:99.0": "could not run",
        },
        "context": {
            "transformers=4.57.6": "the rest as shipped",
            "transformers=5.9.0": "the rest as shipped",
            "transformers=5.10.1": "the rest as shipped",
        },
        "advice": "Review",
        "reason": "redundant on 4.57.6, 5.9.0; harmful on 5.10.1, but it could not run on 99.0 (requested): delete it "
        "once it runs there",
        "caveat": None,
        "first_changed": "transformers=5.10.1",
        "last_same": "transformers=5.9.0",
        "errors": [
            {
                "release": "transformers=5.10.1",
                "variant": "override",
                "type": "ValueError",
                "message": HOSTILE.split(": ", 1)[1],
                "observations": ["enable_reaches_wrapped_model.error"],
            }
        ],
        "deprecated": None,
    }
    assert (disable["first_changed"], disable["last_same"]) == (None, "transformers=5.10.1")
    releases = {r["id"]: r for r in data["releases"]}
    assert [r["id"] for r in data["releases"]] == [c["release"] for c in data["cells"]]  # a record per cell, joined
    assert set(enable["by_release"]) == set(releases)  # every key of by_release is a record's id
    assert releases["transformers=requested:99.0"] == {
        "id": "transformers=requested:99.0",
        "label": "transformers 99.0 (requested)",
        "versions": {},
        "requested": {"transformers": "99.0"},
        "early": False,
    }
    assert releases["transformers=5.10.1"]["versions"]["transformers"] == "5.10.1"
    said = [data["title"], data["subjects"], data["overrides"], data["cells"][1]["subjects"][0]["phrase"]]
    said = json.dumps(said, ensure_ascii=False)
    assert "**" not in said and "\\\\_" not in said and "`gradient" not in said  # plain text: no markdown in it
    assert "gradient_checkpointing_enable: redundant 4.57.6, 5.9.0 · harmful 5.10.1" in said
    for cell in data["cells"]:
        assert {"release", "requested", "resolved", "status", "reason", "subjects"} <= cell.keys()
        for subject in cell["subjects"]:
            assert {"target", "verdict", "observations"} <= subject.keys()
            for o in subject["observations"]:
                assert {"probe", "name", "override", "base", "carries"} <= set(o)
    assert data["cells"][0]["subjects"][0]["verdict"] == "install-failed"
    assert data["cells"][3]["resolved"]["transformers"] == "4.57.6"


def test_summary_uses_the_pr_form():
    text, _ = rendered()
    assert "| transformers 4.57.6 | enable→True, disable→False | enable→True, disable→False |" in text
    assert "| transformers 5.10.1 | enable→error, disable→False | enable→True, disable→False |" in text


def test_round_trip_of_cell_results(tmp_path):
    path = tmp_path / "r.json"
    write_json_atomic(path, RESULTS[1].to_json())
    assert read_cell_result(path) == RESULTS[1]


@pytest.mark.parametrize(
    ("content", "status", "message"),
    [
        (None, "not run", "no result file"),
        ('{"schema": 1, "matrix": "demo", "cel', "damaged result", "not valid JSON"),
        ('{"schema": 7}', "damaged result", "schema 7, expected 1"),
        ('{"hello": "world"}', "damaged result", "not a compat-matrix cell result"),
        ('{"schema": 1}', "damaged result", "malformed cell result"),
    ],
)
def test_missing_or_damaged_result_files_become_labelled_rows(tmp_path, content, status, message):
    demo = MatrixSpec(Path("m.toml"), "demo", (), (Axis("transformers", ("5.x", "4.57.x")),), SPEC.subjects)
    good, bad = cells(demo)
    write_json_atomic(result_path(tmp_path, good), result("5.x", "5.24.0", observations()).to_json())
    if content is not None:
        result_path(tmp_path, bad).write_text(content)
    loaded = load_results(demo, [good, bad], tmp_path)
    assert loaded[0].status == "ok"
    assert loaded[1].status == status and message in loaded[1].reason


def test_report_command_writes_reports_and_exit_code(tmp_path, capsys):
    matrix = tmp_path / "demo.toml"
    matrix.write_text(
        '[matrix]\nname = "demo"\n[axes]\ntransformers = ["5.x", "4.57.x"]\n'
        f'[[subjects]]\ntarget = "{TARGET}"\nmethods = {list(METHODS)!r}\n'.replace("'", '"')
    )
    spec = load(matrix)
    first, _ = cells(spec)
    write_json_atomic(result_path(tmp_path, first), result("5.x", "5.24.0", observations()).to_json())
    code = cli.main(["report", "--reports", str(tmp_path), str(matrix)])
    assert code == cli.EXIT_CELL_FAILED  # the second cell never ran
    assert (tmp_path / "demo.md").exists() and json.loads((tmp_path / "demo.json").read_text())["matrix"] == "demo"
    assert "not run" in (tmp_path / "demo.md").read_text()


def test_the_evidence_that_does_not_fit_is_written_beside_the_report_and_a_stale_one_removed(
    tmp_path, capsys, monkeypatch
):
    matrix = tmp_path / "demo.toml"
    matrix.write_text(
        '[matrix]\nname = "demo"\n[axes]\ntransformers = ["5.x"]\n'
        f'[[subjects]]\ntarget = "{TARGET}"\nmethods = {list(METHODS)!r}\n'.replace("'", '"')
    )
    (first,) = cells(load(matrix))
    write_json_atomic(result_path(tmp_path, first), result("5.x", "5.24.0", observations()).to_json())
    report = ["report", "--reports", str(tmp_path), str(matrix)]
    assert cli.main(report) == cli.EXIT_OK and not (tmp_path / "demo.evidence.md").exists()
    whole = (tmp_path / "demo.md").read_text()
    monkeypatch.setattr(render, "MARKDOWN_LIMIT", whole.index(render.EVIDENCE) + 200)
    assert cli.main(report) == cli.EXIT_OK
    beside = (tmp_path / "demo.evidence.md").read_text()
    main = (tmp_path / "demo.md").read_text()
    assert render.EVIDENCE in beside and render.EVIDENCE not in main
    assert "The evidence for every class is in `demo.evidence.md`, beside this report." in main
    assert "demo.evidence.md" in capsys.readouterr().out  # said among the files written
    monkeypatch.undo()
    assert cli.main(report) == cli.EXIT_OK and not (tmp_path / "demo.evidence.md").exists()


def test_bad_matrix_file_exits_2_with_one_line_per_problem(tmp_path, capsys):
    matrix = tmp_path / "bad.toml"
    matrix.write_text('[matrix]\nname = "x y"\n[axes]\ntransformers = ["5.x"]\n')
    assert cli.main(["validate", str(matrix)]) == cli.EXIT_BAD_MATRIX
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith(f"error: {matrix}: ") for line in err)


@pytest.mark.parametrize(
    ("expect", "unmet"),
    [
        ((), []),
        ((("*", "same"),), [("transformers 5.10.1", "expected same, got differs")]),
        (((">=5.10", "differs"), ("*", "same")), []),
        (((">=5", "differs"), ("*", "same")), [("transformers 5.9.0", "expected differs, got same")]),
        (((">=6", "same"),), []),
    ],
)
def test_expectations_met_and_unmet(expect, unmet):
    subjects = (Subject(TARGET, METHODS, expect=expect),)
    lines = verdict.unmet_expectations(decided(RESULTS[:3], subjects), subjects)
    assert len(lines) == len(unmet)
    for line, (label, says) in zip(lines, unmet, strict=True):
        assert line.startswith(f"{label}: {TARGET} {says}")


def test_unmet_expectation_exits_1_and_tops_the_report(tmp_path):
    matrix = one_cell_with_result(tmp_path, expect='expect = { "*" = "same" }\n')
    assert cli.main(["report", "--reports", str(tmp_path), str(matrix)]) == cli.EXIT_UNMET
    text = (tmp_path / "demo.md").read_text()
    assert text.splitlines()[2] == "**Unmet expectations**"  # under the title
    assert json.loads((tmp_path / "demo.json").read_text())["unmet_expectations"]


def one_cell_with_result(folder: Path, expect: str = "") -> Path:
    """A matrix file of one cell (transformers 5.10.1) whose result file is already in `folder`."""
    matrix = folder / "demo.toml"
    subject = f'[[subjects]]\ntarget = "{TARGET}"\n{expect}'
    matrix.write_text(f'[matrix]\nname = "demo"\n[axes]\ntransformers = ["5.10.1"]\n{subject}')
    (cell,) = cells(load(matrix))
    write_json_atomic(result_path(folder, cell), RESULTS[1].to_json())
    return matrix


def test_report_with_baseline_adds_the_section_and_csv(tmp_path):
    matrix = one_cell_with_result(tmp_path)
    assert cli.main(["report", "--reports", str(tmp_path), str(matrix)]) == cli.EXIT_OK
    first = (tmp_path / "demo.json").read_text()
    assert (
        "Changed since" not in (tmp_path / "demo.md").read_text()
        and "No change since" not in (tmp_path / "demo.md").read_text()
    )
    # the committed report as its own baseline: it is read before being rewritten
    code = cli.main(["report", "--reports", str(tmp_path), "--baseline", str(tmp_path / "demo.json"), str(matrix)])
    assert code == cli.EXIT_OK
    said = (tmp_path / "demo.md").read_text()
    assert said.startswith(f"# No change since `{tmp_path / 'demo.json'}` — CharacterCausalLMWrapper: delete both")
    assert json.loads((tmp_path / "demo.json").read_text())["changes_since_baseline"] == []
    assert json.loads(first)["cells"] == json.loads((tmp_path / "demo.json").read_text())["cells"]
    rows = list(csv.DictReader((tmp_path / "demo.csv").open(newline="")))
    assert len(rows) == len(RESULTS[1].subjects[0].observations)
    assert rows[-1]["override"] == HOSTILE and rows[0]["label"] == "transformers 5.10.1"


def test_truncate_keeps_the_tables_and_cuts_details_first():
    text, _ = rendered()
    assert cut.truncate(text, 10**6) == text
    head = text.split(f"\n{render.EVIDENCE}")[0]
    short = cut.truncate(text, len(text.encode()) - 10)
    assert short.startswith(head) and cut.TRUNCATED in short and render.VERSIONS in short
    assert render.EVIDENCE not in short and short.count("<details>") == short.count("</details>")
    assert len(short.encode()) <= len(text.encode()) - 10
    limit = len(head.encode()) // 2  # not even the top fits: it is cut at a line, with the note
    small = cut.truncate(text, limit)
    assert len(small.encode()) <= limit and small.startswith("# CharacterCausalLMWrapper: review both overrides\n")
    assert small.endswith(cut.TRUNCATED + "\n") and render.VERSIONS not in small


def test_list_json_is_one_line_for_a_ci_matrix(tmp_path, capsys):
    matrix = tmp_path / "demo.toml"
    matrix.write_text(
        f'[matrix]\nname = "demo"\n[axes]\ntransformers = ["5.x", "4.57.x"]\n[[subjects]]\ntarget = "{TARGET}"\n'
    )
    assert cli.main(["list", "--json", "--compact", str(matrix)]) == cli.EXIT_OK
    out = capsys.readouterr().out.strip()
    assert "\n" not in out
    assert [c["session"] for c in json.loads(out)] == [
        "cell:demo:transformers=5.x",
        "cell:demo:transformers=4.57.x",
    ]


def test_a_folder_of_committed_reports_is_a_baseline_and_the_summary_is_capped(tmp_path):
    matrix = one_cell_with_result(tmp_path)
    summary = tmp_path / "summary.md"
    args = ["report", "--reports", str(tmp_path), "--baseline", str(tmp_path), str(matrix)]
    assert cli.main(args) == cli.EXIT_OK  # no earlier report in the folder: no baseline
    assert cli.main([*args, "--summary", str(summary), "--limit", "2000"]) == cli.EXIT_OK
    assert (tmp_path / "demo.md").read_text().startswith("# No change since ")
    assert len(summary.read_bytes()) <= 2001 and "| transformers 5.10.1" in summary.read_text()
