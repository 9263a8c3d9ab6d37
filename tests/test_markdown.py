"""The markdown as GitHub renders it, its size bound for a pull-request comment, and stable report files."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from compat_matrix.host import cli, cut, render, wording
from compat_matrix.host.cells import cells
from compat_matrix.host.folders import result_path
from compat_matrix.host.report import make_report
from compat_matrix.host.spec import Axis, MatrixSpec, Subject, load
from compat_matrix.shared.results import CellResult, Observation, SubjectResult, TestOutcome, write_json_atomic
from compat_matrix.shared.vocabulary import ConclusionKind
from conftest import ROOT
from test_report import HOSTILE, RESULTS, SPEC

COMMENT_LIMIT = 65_536  # characters in a GitHub pull-request comment
MARKER = "<!-- compat-matrix -->\n"
ENABLE, DISABLE = "gradient_checkpointing_enable", "gradient_checkpointing_disable"


class Cells(HTMLParser):
    """The rendered tables: per table, the cell count of every row; the text of every cell, and all the text."""

    def __init__(self):
        super().__init__()
        self.tables: list[list[int]] = []
        self.texts: list[str] = []
        self.details = 0
        self.text = ""

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append(0)
        elif tag in ("td", "th"):
            self.tables[-1][-1] += 1
            self.texts.append("")
        elif tag == "details":
            self.details += 1

    def handle_endtag(self, tag):
        if tag == "details":
            self.details -= 1

    def handle_data(self, data):
        self.text += data
        if self.texts:
            self.texts[-1] += data


def gfm(text: str) -> Cells:
    parsed = Cells()
    parsed.feed(MarkdownIt("commonmark", {"html": True}).enable("table").render(text))
    return parsed


def unwrapped(line: str) -> str:
    """A table row's markdown without what only decides where it wraps (compat_matrix.host.breaks): no `<wbr>`, a
    `<code>` a code span again, a no-break space a space."""
    line = line.replace("<wbr>", "").replace("\xa0", " ")
    return re.sub(r"<code>(.*?)</code>", lambda m: "`" + re.sub(r"\\([\\*_\[\]~])", r"\1", m.group(1)) + "`", line)


def source_tables(text: str) -> list[list[str]]:
    """The tables of `text`, a list of rows each, as their markdown reads without break opportunities."""
    tables, current = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            current.append(unwrapped(line))
        elif current:
            tables.append(current)
            current = []
    return tables


BOTH = [ENABLE, DISABLE]
EVERY_NONE = ((ENABLE, None), (DISABLE, None))


def sweep(versions: int = 30, subjects: int = 5) -> tuple[MatrixSpec, list[CellResult]]:
    """A sweep of many releases and subjects whose every row differs, with long values and hostile errors."""
    targets = [f"mylib.models.wrappers:Subject{i}" for i in range(subjects)]
    spec = MatrixSpec(
        Path("matrix/sweep.toml"),
        "sweep",
        (),
        (Axis("transformers", tuple(f"5.{v}.0" for v in range(versions))),),
        tuple(Subject(t, (ENABLE, DISABLE)) for t in targets),
    )
    results = []
    for v in range(versions):
        observed = []
        for p in range(10):
            for n in range(5):
                long = {"use_reentrant": bool(v % 2), "context": "x" * 80, "path": f"model.layers.{n}"}
                base = {**long, "use_reentrant": not v % 2}
                alone = ((ENABLE, base), (DISABLE, base))
                observed.append(Observation(f"probe_{p}", f"value_{n}", long, base, without=alone))
            observed.append(Observation(f"probe_{p}", "error", f"{HOSTILE} {'y' * 200}", None, without=EVERY_NONE))
            observed.append(Observation(f"probe_{p}", "reached", BOTH, BOTH, False, ((ENABLE, BOTH), (DISABLE, BOTH))))
        ran = tuple(
            SubjectResult(t, (ENABLE, DISABLE), observations=tuple(observed), probes=("probe_0",)) for t in targets
        )
        requested = {"transformers": f"5.{v}.0"}
        results.append(CellResult("sweep", f"cell:sweep:transformers=5.{v}.0", requested, requested, subjects=ran))
    return spec, results


@pytest.mark.parametrize("make", [lambda: (SPEC, RESULTS), sweep], ids=["demo", "sweep"])
def test_markdown_renders_as_github_flavoured_markdown(make):
    spec, results = make()
    text = render.markdown(make_report(spec, results))
    parsed = gfm(text)
    sources = source_tables(text)
    assert len(parsed.tables) == len(sources) >= 2
    for rendered, source in zip(parsed.tables, sources, strict=True):
        # every row has as many cells as the header, in the source (GitHub pads or drops cells silently) ...
        counts = {len(re.findall(r"(?<!\\)\|", line)) for line in source}
        assert len(counts) == 1, source
        # ... and as rendered: one rendered row per source row but the delimiter row
        assert len(rendered) == len(source) - 1 and len(set(rendered)) == 1
    assert parsed.details == 0 and text.count("<details>") == text.count("</details>")
    assert "ValueError: a | b `code` <b>bold</b>" in parsed.text  # escaped once: it reads literally


def grid_of(text: str) -> list[str]:
    """The decision grid's lines: the first table of a report."""
    return source_tables(text)[0]


def test_the_grid_has_a_row_per_override_and_a_column_per_stretch_of_releases_that_read_alike():
    spec, results = sweep(versions=3, subjects=2)
    text = render.markdown(make_report(spec, results))
    grid = grid_of(text)
    assert grid[0] == "| override | transformers 5.0.0, 5.1.0, 5.2.0 | advice |" and len(grid) == 2 + 4
    assert all(row.split(" | ")[1] == "✗ harmful" for row in grid[2:])
    assert f"\n{wording.legend([ConclusionKind.HARMFUL])}\n" in text  # each symbol shown defined once
    demo = grid_of(render.markdown(make_report(SPEC, RESULTS)))  # one subject: a grid too
    assert demo[0] == "| override | transformers 4.57.6, 5.9.0 | 5.10.1 | 99.0 (requested) | advice |"


def test_summary_cuts_to_a_comment_by_default(tmp_path, capsys):
    """A library-sized report (73,515 characters for an RL library's 21 trainers) fits the comment it is posted as
    without --limit; the job summary keeps its 1 MiB."""
    spec, results = sweep()
    text = render.markdown(make_report(spec, results))
    head, evidence, rest = text.partition(f"\n{render.EVIDENCE}")
    report = tmp_path / "big.md"
    report.write_text(head + evidence + rest * (2 * COMMENT_LIMIT // len(rest)))
    assert cli.main(["summary", str(report)]) == 0
    body = capsys.readouterr().out
    assert len(body.encode()) <= COMMENT_LIMIT + 1 and body.startswith(head) and cut.TRUNCATED in body
    assert cli.COMMENT_LIMIT == COMMENT_LIMIT and cli.SUMMARY_LIMIT == 1_000_000


def test_summary_of_reports_star_md_leaves_out_the_evidence_beside_a_report(tmp_path, capsys):
    """`summary reports/*.md` (the CI comment) lists `trl.evidence.md` beside `trl.md`: it is no report of its own."""
    report, beside, alone = tmp_path / "trl.md", tmp_path / "trl.evidence.md", tmp_path / "x.evidence.md"
    report.write_text("# trl: the report\n")
    beside.write_text("# trl: the evidence\n")
    alone.write_text("# x: asked for alone\n")
    assert cli.main(["summary", str(beside), str(report)]) == 0
    assert capsys.readouterr().out == "# trl: the report\n\n"
    assert cli.main(["summary", str(alone)]) == 0 and "asked for alone" in capsys.readouterr().out


def test_a_comment_of_30_releases_and_5_subjects_fits_and_cuts_the_evidence_first(tmp_path, capsys):
    spec, results = sweep()
    text = render.markdown(make_report(spec, results))
    assert len(text.encode()) <= COMMENT_LIMIT - len(MARKER.encode())  # whole, evidence included
    report = tmp_path / "sweep.md"
    report.write_text(text)
    first_screen = text.split(f"\n{render.EVIDENCE}", 1)[0]
    limit = len(first_screen.encode()) + 1000  # the first screen fits, the evidence does not
    assert cli.main(["summary", "--limit", str(limit), str(report)]) == 0
    body = capsys.readouterr().out
    assert len(body.encode()) <= limit + 1 and body.startswith(first_screen)
    assert cut.TRUNCATED in body and render.EVIDENCE not in body
    grid = grid_of(body)
    assert len(grid) == 2 + 10 and all(row.split(" | ")[1] == "✗ harmful" for row in grid[2:])
    assert body.startswith("# sweep: delete all 10 overrides\n")


def write_results(spec: MatrixSpec, results: list[CellResult], folder: Path) -> None:
    for cell, result in zip(cells(spec), results, strict=True):
        write_json_atomic(result_path(folder, cell), result.to_json())


def test_a_rerun_with_unchanged_results_leaves_every_report_file_byte_identical(tmp_path):
    matrix = tmp_path / "demo.toml"
    matrix.write_text(
        '[matrix]\nname = "demo"\n[axes]\ntransformers = ["4.57.x", "5.10.1", "5.x", "99.0"]\n'
        f'[[subjects]]\ntarget = "{SPEC.subjects[0].target}"\n'
    )
    spec = load(matrix)
    write_results(spec, RESULTS, tmp_path)
    cli.main(["report", "--reports", str(tmp_path), str(matrix)])
    files = {suffix: (tmp_path / f"demo{suffix}").read_bytes() for suffix in (".md", ".json", ".csv")}
    # the same results again, from another run: other durations, reused from a cache
    write_results(spec, [replace(r, seconds=99.9, reused=True, cache_key="other") for r in RESULTS], tmp_path)
    cli.main(["report", "--reports", str(tmp_path), str(matrix)])
    for suffix, before in files.items():
        assert (tmp_path / f"demo{suffix}").read_bytes() == before, suffix
    assert b"99.9" not in files[".md"] + files[".json"] and "99.9" in (tmp_path / ".logs" / "demo.log").read_text()


def test_values_are_spelled_the_same_in_markdown_and_csv():
    report = make_report(SPEC, RESULTS)
    text, table = render.markdown(report), render.csv_text(report.collected)
    assert "| 5.10.1 | layers after enable (layers\\_on) | False | True |" in text
    assert "transformers 5.10.1,cell:demo:transformers=5.10.1," in table and ",layers_on,False,True,False,True" in table
    assert ",true," not in table and ",false," not in table


def test_csv_text_that_a_spreadsheet_would_run_is_inert_and_numbers_stay():
    formulas = ["=HYPERLINK(1)", "@SUM(A1)", "+1+cmd", "-2+3", "\t=1", "\r=1"]
    assert [render.inert(text) for text in formulas] == ["'" + text for text in formulas]
    assert [render.inert(text) for text in ("-0.5", "+3", "1e-3", "a=b", "—")] == ["-0.5", "+3", "1e-3", "a=b", "—"]


def releases_where(enable_from: int, count: int = 8) -> tuple[MatrixSpec, list[CellResult]]:
    """A sweep whose verdict is `differs` on every release (the disable override changes a value), where the enable
    override starts to raise from release `enable_from` on."""
    spec = MatrixSpec(
        Path("matrix/sweep.toml"),
        "sweep",
        (),
        (Axis("transformers", tuple(f"5.{v}.0" for v in range(count))),),
        (Subject("mylib:Wrapper", (ENABLE, DISABLE)),),
    )
    results = []
    for v in range(count):
        raises = "TypeError: unexpected keyword" if v >= enable_from else "runs"
        observed = (
            Observation("probe_0", "flag", True, False, without=((ENABLE, True), (DISABLE, False))),
            Observation("probe_0", "reached", [DISABLE], [DISABLE], False, ((DISABLE, []),)),
            Observation("probe_1", "step", raises, "runs", without=((ENABLE, "runs"), (DISABLE, raises))),
            Observation("probe_1", "reached", [ENABLE], [ENABLE], False, ((ENABLE, []),)),
        )
        ran = (SubjectResult("mylib:Wrapper", (ENABLE, DISABLE), observations=observed, probes=("probe_0",)),)
        requested = {"transformers": f"5.{v}.0"}
        results.append(CellResult("sweep", f"cell:sweep:transformers=5.{v}.0", requested, requested, subjects=ran))
    return spec, results


def test_a_sweeps_glance_names_the_first_bad_release_per_override_as_the_grid_does():
    report = make_report(*releases_where(enable_from=5))
    glance = report.summaries["mylib:Wrapper"].glance
    assert glance == (
        f"{ENABLE}: redundant 5.0.0–5.4.0 (5 releases) · behaves differently 5.5.0, 5.6.0, 5.7.0; "
        f"{DISABLE}: behaves differently 5.0.0–5.7.0 (8 releases)"
    )
    assert render.report_json(report)["subjects"][0]["glance"] == glance
    grid = grid_of(render.markdown(report))
    assert grid[0] == "| override | transformers 5.0.0–5.4.0 (5 releases) | 5.5.0, 5.6.0, 5.7.0 | advice |"
    assert [row.split(" | ")[:3] for row in grid[2:]] == [
        [f"| `{ENABLE}`", "= redundant", "≠ behaves differently"],
        [f"| `{DISABLE}`", "≠ behaves differently", "≠ behaves differently"],
    ]
    steady = make_report(*releases_where(enable_from=0))
    assert steady.summaries["mylib:Wrapper"].glance == (
        f"{ENABLE}: behaves differently 5.0.0–5.7.0 (8 releases); "
        f"{DISABLE}: behaves differently 5.0.0–5.7.0 (8 releases)"
    )
    assert grid_of(render.markdown(steady))[0] == "| override | transformers 5.0.0–5.7.0 (8 releases) | advice |"


def test_the_evidence_shows_what_differs_with_one_method_deleted_alone():
    """The round trip agrees with both deleted, not with `enable` alone: the advice for `enable` rests on that row."""
    spec, results = releases_where(enable_from=0, count=1)
    trip = Observation("probe_2", "layers_on", False, False, without=((ENABLE, True), (DISABLE, False)))
    (subject,) = results[0].subjects
    results = [replace(results[0], subjects=(replace(subject, observations=(*subject.observations, trip)),))]
    text = render.markdown(make_report(spec, results))
    evidence = text.split(f"**`{ENABLE}`**", 1)[1].split("**`", 1)[0]
    assert "| 5.0.0 | probe 2 (layers\\_on) | False | True |" in evidence
    assert "probe 2" not in text.split(f"**`{DISABLE}`**", 1)[1]  # deleting `disable` alone changes nothing there


def test_a_short_matrix_gives_each_release_a_column_where_they_differ():
    text = render.markdown(make_report(*releases_where(enable_from=3, count=5)))
    assert grid_of(text)[0] == "| override | transformers 5.0.0, 5.1.0, 5.2.0 | 5.3.0, 5.4.0 | advice |"


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([["t 3", "a", "x"], ["t 2", "a", "x"], ["t 1", "a", "x"]], [["t 1, 2, 3", "a", "x"]]),
        ([[f"t {n}", "a", "x"] for n in (4, 3, 2, 1)], [["t 1–4 (4 releases)", "a", "x"]]),
        (
            [["t 3", "a", "x"], ["t 2", "a", "y"], ["t 1", "a", "x"]],
            [["t 3", "a", "x"], ["t 2", "a", "y"], ["t 1", "a", "x"]],
        ),
        ([["t 3", "a", "x"], ["t 2", "a", "x"], ["t 1", "b", "x"]], [["t 2, 3", "a", "x"], ["t 1", "b", "x"]]),
    ],
)
def test_merged_rows(rows, expected):
    assert render.merged(rows) == expected


HOSTILE_NAME = "x_[link](http://evil)_*b*_`c`_<i>i</i>|"


def test_hostile_reasons_names_and_test_ids_come_out_literally():
    """What users and their libraries write (reasons, observation names of their own probes, test ids) can break
    neither a table nor a sentence, nor become a link, emphasis, code or HTML."""
    spec, results = sweep(versions=2, subjects=2)
    failing = SubjectResult(
        spec.subjects[0].target, ("m",), status="import-failed", reason=f"ImportError: {HOSTILE_NAME}"
    )
    differing = SubjectResult(
        spec.subjects[1].target,
        ("m",),
        observations=(
            Observation("my_probe", HOSTILE_NAME, 1, 2),
            Observation("my_probe", "reached", ["m"], ["m"], carries=False),
        ),
        probes=("my_probe",),
        tests=(TestOutcome(f"tests/test_x.py::test_{HOSTILE_NAME}", "passed", "passed"),),
        mutants=("m: does nothing",),
    )
    results = [replace(results[0], subjects=(failing, differing)), results[1]]
    text = render.markdown(make_report(spec, results))
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(text)
    # the one link is the URL itself, whole (an autolink: compat_matrix.host.markup); `[link](…)` makes none
    assert re.findall(r"<a [^>]*>[^<]*</a>", html) == ['<a href="http://evil">http://evil</a>'] * html.count("<a ")
    assert "<a " in html and ">link</a>" not in html and "<i>" not in html and "<code>c</code>" not in html
    assert html.count("<em>") == 0  # no summary table here, so none of the report's own
    parsed = gfm(text)
    assert all(len(set(rows)) == 1 for rows in parsed.tables)  # every row as many cells as its header
    assert HOSTILE_NAME.replace("\\", "") in " ".join(parsed.texts) or "[link](http://evil)" in html


SEEDED = """
import sys
sys.path[:0] = ["src", "tests"]
from test_markdown import sweep
from compat_matrix.host import render
from compat_matrix.host.report import make_report
spec, results = sweep(versions=3, subjects=2)
print(render.markdown(make_report(spec, results)))
"""


def test_the_report_is_the_same_whatever_python_s_hash_seed():
    """Nothing in a report may follow the order of a set of strings, which changes from process to process."""

    def rendered(seed: str) -> str:
        environ = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-c", SEEDED], env=environ, cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert len({rendered(seed) for seed in ("1", "2", "3")}) == 1
