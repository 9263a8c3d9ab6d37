"""Escaping that survives GitHub (compat_matrix.host.markup): a URL in observed text stays whole and links where it
points, `@name` and `#123` go in code (GitHub makes no mention or issue link inside code), the rest is escaped once;
tested on the pieces, on one cell, and on a whole report rendered through a CommonMark renderer with tables."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from markdown_it import MarkdownIt

from compat_matrix.host import render
from compat_matrix.host.markup import CODE, TEXT, URL, escape, inline, pieces
from compat_matrix.host.report import make_report
from compat_matrix.host.wording import MARKDOWN
from test_markdown import unwrapped
from test_report import SPEC, observations, result

DOCS = "https://huggingface.co/docs/transformers/main_classes/model#transformers.PreTrainedModel"
ERROR = f"OSError: see {DOCS}. @property failed (#123, huggingface/transformers#4567); ask me@example.com"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"see {DOCS}.", [(TEXT, "see "), (URL, DOCS), (TEXT, ".")]),
        ("(https://x.org/a_(b)) ok", [(TEXT, "("), (URL, "https://x.org/a_(b)"), (TEXT, ") ok")]),
        ("@property\ndef f", [(CODE, "@property"), (TEXT, "\ndef f")]),
        ("cc @org/team, @user-1", [(TEXT, "cc "), (CODE, "@org/team"), (TEXT, ", "), (CODE, "@user-1")]),
        ("fixed in #123 and a/b#9", [(TEXT, "fixed in "), (CODE, "#123"), (TEXT, " and "), (CODE, "a/b#9")]),
        ("me@example.com, x#1, &#124;, #fff", [(TEXT, "me@example.com, x#1, &#124;, #fff")]),  # none of GitHub's
        ("", []),
    ],
)
def test_pieces(text, expected):
    assert pieces(text) == expected


def test_a_cell_keeps_the_url_whole_and_puts_mentions_and_references_in_code():
    assert escape(ERROR) == (
        f"OSError: see <{DOCS}>. `@property` failed (`#123`, `huggingface/transformers#4567`); ask me@example.com"
    )
    assert escape("a_b | *c*") == "a\\_b &#124; \\*c\\*"  # everything else as before: escaped once


def test_a_sentence_quoting_it_does_the_same_and_a_url_in_code_stays_code():
    said = inline(f"**Caution:** “{MARKDOWN.text(ERROR)}”; run `pip install https://x.org/p_q`")
    assert f"<{DOCS}>" in said and "`@property`" in said and "`#123`" in said
    assert said.endswith("run `pip install https://x.org/p_q`")  # code is code: no link made in it


class Rendered(HTMLParser):
    """The links of rendered HTML, and its text outside code."""

    def __init__(self):
        super().__init__()
        self.links: list[str] = []
        self.code = 0
        self.outside = ""

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.links.append(dict(attrs)["href"])
        self.code += tag == "code"

    def handle_endtag(self, tag):
        self.code -= tag == "code"

    def handle_data(self, data):
        if not self.code:
            self.outside += data


def rendered(markdown: str) -> Rendered:
    parsed = Rendered()
    parsed.feed(MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown))
    return parsed


def test_a_report_whose_error_holds_a_url_a_mention_and_a_reference_renders_them_safely():
    results = [result("4.57.x", "4.57.6", observations()), result("5.x", "5.24.0", observations(False, ERROR))]
    text = render.markdown(make_report(SPEC, results))
    assert f"<{DOCS}>" in text and "main\\_classes" not in text
    html = rendered(text)
    assert html.links and set(html.links) == {DOCS}  # whole: not main%5C_classes, nor cut at the underscore
    assert "@property" not in html.outside and "#123" not in html.outside and "transformers#4567" not in html.outside
    assert "me@example.com" in html.outside  # an address is no mention: left as it is
    assert "\\_" not in html.outside  # no escape shows


CALL = "gradient_checkpointing_enable(gradient_checkpointing_kwargs=…, every_n_layers=…, offload=…)"
SITES = [f"{CALL} at modeling_utils.py:3143", f"{CALL} at trainer.py:1524"]


def test_a_value_too_long_for_a_cell_goes_under_the_table_whole_with_each_call_site_on_its_line():
    from compat_matrix.shared.results import Observation

    enable, disable = SPEC.subjects[0].methods
    calls = Observation(
        "transformers_calls", enable, {"calls": 2, "cannot_take": SITES}, {"calls": 2, "cannot_take": []}
    )
    short = Observation("signature", enable, {"cannot_take": ["kwargs (**kwargs)"]}, {"cannot_take": []})
    ran = Observation("transformers_calls", "reached", [enable, disable], [], carries=False)
    results = [result("5.x", "5.24.0", (*observations(), calls, short, ran))]
    text = render.markdown(make_report(SPEC, results))
    assert "| value (1) | cannot\\_take=\\[\\] |" in text  # the cell names the value, no cut (`offloa…`)
    short = "| cannot\\_take=kwargs (\\*\\*kwargs) | cannot\\_take=\\[\\] |"
    assert short in unwrapped(text)  # a short one stays in its cell
    listed = ["* value (1):", "  * cannot\\_take:", *(f"    * {escape(site)}" for site in SITES)]
    assert "\n".join(listed) in text
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(text)
    assert all(f"<li>{site}</li>" in html for site in SITES)  # each call site a list item of its own, whole
