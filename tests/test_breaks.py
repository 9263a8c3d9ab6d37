"""Tables that fit a comment, held to rules a test can check exactly (the browser check, with GitHub's CSS, is
benchmarks/render.py): where a cell may wrap, that wrapping changes no text, and that every committed and golden
report's tables either fit the comment's width in characters or run no more than WORD characters unbroken."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from compat_matrix.host import breaks, wording
from compat_matrix.host.markup import Md, escape, inline, table
from compat_matrix.shared.vocabulary import ConclusionKind
from conftest import ROOT

REPORTS = sorted([*(ROOT / "reports").glob("*.md"), *(ROOT / "tests" / "golden").glob("*.md")])
BREAK = "\n"  # a break opportunity, in the text of a rendered cell


class Tables(HTMLParser):
    """The rendered tables: per table, its rows of cell texts, each `<wbr>` and `<br>` as BREAK."""

    def __init__(self):
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.inside = False

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self.tables[-1][-1].append("")
            self.inside = True
        elif tag in ("wbr", "br") and self.inside:
            self.tables[-1][-1][-1] += BREAK

    def handle_endtag(self, tag):
        self.inside = self.inside and tag not in ("td", "th")

    def handle_data(self, data):
        if self.inside:
            self.tables[-1][-1][-1] += data


def rendered(markdown: str) -> list[list[list[str]]]:
    parsed = Tables()
    parsed.feed(MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown))
    return parsed.tables


def longest(text: str) -> int:
    """Characters of the longest run a browser cannot break: between spaces (a no-break space joins) and BREAKs."""
    return max((len(run) for run in re.split(r"[ \t\n\r\f\v]+", text)), default=0)


def plain(text: str) -> str:
    return " ".join(text.replace(BREAK, "").split())


@pytest.mark.parametrize(
    ("text", "runs"),
    [
        (
            "activation_checkpointing_enable(every_n_layers=2)",
            ["activation_", "checkpointing_", "enable(", "every_n_", "layers=2)"],
        ),
        ("OLMoModel.tie_weights", ["OLMoModel", ".tie_weights"]),  # between the names, not inside one
        ("OLMoForSequenceClassification.tie_weights", ["OLMoFor", "Sequence", "Classification", ".tie_weights"]),
        ("(gradient_checkpointing_enable)", ["(gradient_", "checkpointing_", "enable)"]),  # `(` opens its line
        ("modeling_utils.py:4628", ["modeling_utils", ".py:4628"]),
        ("__init__weights_and_more", ["__init__weights_", "and_more"]),  # a dunder stays whole
        ("5.16.1–5.24.0 (9 releases)", ["5.16.1–5.24.0", "(9", "releases)"]),  # a version stays whole
        ("tie_weights", ["tie_weights"]),  # short: nothing to break
        ("✗\N{NO-BREAK SPACE}harmful", ["✗\N{NO-BREAK SPACE}harmful"]),
    ],
)
def test_runs(text, runs):
    assert breaks.runs(text) == runs


@pytest.mark.parametrize(
    "cell",
    [
        "activation_checkpointing_enable(every_n_layers=2)",
        "cannot_take=kwargs (**kwargs)",
        "a_very_long_name_with *stars* and [brackets] | pipes <b>tags</b> &amp; `ticks`",
        Md("**Fix**: accept `recompute_mapping` and call `tie_weights(missing_keys=…, recompute_mapping=…)`"),
        Md("`OLMoForSequenceClassification.tie_weights` <https://example.com/a_long_path/with_parts>"),
        "@property_decorated_name in #12345 https://example.com/a_long_path/with_parts",
    ],
)
def test_wrapping_a_cell_changes_no_text_only_where_it_may_break(cell):
    """A cell too long for the comment, wrapped, reads as it does unwrapped: the same text, the same code (as
    `<code>`), the same links; and it runs no more than WORD characters unbroken where it can."""
    wrapped = table(["a", "b"], [[cell, "x" * 60]])
    whole = f"| a | b |\n|---|---|\n| {inline(cell) if isinstance(cell, Md) else escape(cell)} | x |"
    assert "<wbr>" in wrapped and "<wbr>" not in whole
    assert plain(rendered(wrapped)[0][1][0]) == plain(rendered(whole)[0][1][0])
    render = MarkdownIt("commonmark", {"html": True}).enable("table").render
    assert re.findall(r'href="([^"]*)"', render(wrapped)) == re.findall(r'href="([^"]*)"', render(whole))
    codes = [plain(c) for c in re.findall(r"<code>(.*?)</code>", render(wrapped).replace("<wbr>", ""))]
    assert codes == re.findall(r"<code>(.*?)</code>", render(whole))
    assert all(len(run) <= breaks.WORD for run in breaks.runs(plain(rendered(wrapped)[0][1][0])))


def test_a_table_that_fits_keeps_its_names_whole_and_one_that_does_not_wraps_the_column_that_gives_enough():
    fits = [[Md("`gradient_checkpointing_enable`"), "= redundant", "fine"]]
    assert "<wbr>" not in table(["override", "r", "advice"], fits)
    prose = [[Md("`gradient_checkpointing_enable`"), "x" * 14, "y" * 14, "raises NotImplementedError"]]
    wrapped = table(["override", "a", "b", "advice"], prose)
    assert "`gradient_checkpointing_enable`" in wrapped and "NotImplemented<wbr>Error" in wrapped


@pytest.mark.parametrize("report", REPORTS, ids=[p.name for p in REPORTS])
def test_every_table_of_a_committed_or_golden_report_fits_or_runs_no_word_past_the_limit(report: Path):
    """The exact rule behind the width benchmarks/render.py measures: per table, its columns' longest unbroken runs
    fit the comment side by side (host/breaks.py's model of it), or none runs past breaks.WORD characters."""
    for rows in rendered(report.read_text()):
        widths = [max(longest(row[i]) for row in rows if i < len(row)) for i in range(len(rows[0]))]
        model = sum(widths) + breaks.PADDING * len(widths) + breaks.MARGIN
        longer = [run for row in rows for cell in row for run in re.split(r"[ \t\n]+", cell) if len(run) > breaks.WORD]
        assert model <= breaks.COMMENT or not longer, (report.name, rows[0], widths, longer)


@pytest.mark.parametrize("report", REPORTS, ids=[p.name for p in REPORTS])
def test_a_conclusion_s_symbol_never_wraps_apart_from_its_word(report: Path):
    text = report.read_text()
    for kind in ConclusionKind:
        assert f"{kind.symbol} {kind}" not in text, kind
    assert wording.cell(ConclusionKind.HARMFUL) == "✗\N{NO-BREAK SPACE}harmful"
