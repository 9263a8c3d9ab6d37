"""Markdown as GitHub renders it, for the report's tables and lines: text escaped once (`escape`), the report's own
sentences made safe (`inline`), tables without padding (`table`). Pure functions over text; compat_matrix.host.render
and the watch's issue bodies use them.

Observed text (an error message, a reason) can hold what GitHub would turn into something else; `pieces` finds it:
- a URL stays whole, as an autolink `<https://…>`: backslash escapes do not apply inside one, so `main_classes`
  stays `main_classes` (escaped as text it read `main\\_classes` and linked to `main%5C_classes`), and every
  CommonMark renderer links it, not only GitHub's;
- `@name` (a decorator in a traceback: `@property` pings the user `property`) and `#123` / `owner/repo#123` (a link to
  an unrelated issue) go in a code span: GitHub makes no mention or reference inside code, and the text reads and
  copies exactly as raised (an invisible joiner would break it for whoever pastes it into a search).
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Any

from compat_matrix.host.breaks import to_wrap, wrap

_URL = r"https?://[^\s<>`|\"']+"
_NAME = r"(?<![\w@/.&#-])@[A-Za-z0-9][A-Za-z0-9-]*(?:/[\w.-]+)?"  # a mention, or a team: @org/team
_REF = r"(?<![\w&#/.-])(?:[\w.-]+/[\w.-]+)?#\d+\b"  # an issue or pull request: #123, owner/repo#123
_PIECES = re.compile(rf"(?P<url>{_URL})|(?P<name>{_NAME})|(?P<ref>{_REF})")
_SPACES = re.compile(r"[ \t\n\r\f\v]+")  # collapsed in a sentence; a no-break space stays (`✗ harmful` as one)
_TRAILING = ".,;:!?*_~'\""  # what ends a sentence after a URL, not the URL (GitHub's autolinks leave it out too)
TEXT, URL, CODE = "text", "url", "code"


def pieces(text: str) -> list[tuple[str, str]]:
    """`text` as (kind, piece): URLs (`URL`), mentions and issue references (`CODE`), and the text between them."""
    out: list[tuple[str, str]] = []
    at = 0
    for found in _PIECES.finditer(text):
        piece, start = found.group(), found.start()
        if found.lastgroup == "url":
            piece = _url(piece)
        out += [(TEXT, text[at:start])] if start > at else []
        out.append((URL if found.lastgroup == "url" else CODE, piece))
        at = start + len(piece)
    return out + ([(TEXT, text[at:])] if at < len(text) else [])


def _url(found: str) -> str:
    """A URL without what ends the sentence around it: from the first `)` it does not open (`[a](http://x)` and
    `(see http://x)` end there), then trailing punctuation."""
    depth = 0
    for i, char in enumerate(found):
        depth += (char == "(") - (char == ")")
        if depth < 0:
            found = found[:i]
            break
    return found.rstrip(_TRAILING)


def autolink(url: str) -> str:
    return f"<{url}>"


class Md(str):
    """A table cell already written as markdown (code spans, emphasis): `table` only keeps it in its row."""


_MARKUP = re.compile(r"([\\*_\[\]~])")


def escape(text: Any) -> str:
    """Make any text safe inside a markdown table cell (or a line of its own): no `|`, newline, HTML or code span
    can break the row, and no emphasis, link or strikethrough can start in it."""
    text = "".join(
        _escaped(piece) if kind == TEXT else autolink(piece) if kind == URL else f"`{piece}`"
        for kind, piece in pieces(str(text))
    )
    return "<br>".join(line.strip() for line in text.splitlines()) or " "


def _escaped(text: str) -> str:
    text = html.escape(text, quote=False).replace("`", "&#96;").replace("|", "&#124;")
    return _MARKUP.sub(r"\\\1", text)


def inline(text: str) -> str:
    """A sentence of the report's own, whose backticks mark code, made safe: no HTML, no `|`, one line; a URL in it
    (outside its code) an autolink."""
    parts = _SPACES.sub(" ", text).strip().split("`")
    return "`".join(_inline(part) if i % 2 == 0 else _safe(part) for i, part in enumerate(parts))


def _safe(text: str) -> str:
    return html.escape(text, quote=False).replace("|", "&#124;")


def _inline(text: str) -> str:
    return "".join(autolink(piece) if kind == URL else _safe(piece) for kind, piece in _url_pieces(text))


def _url_pieces(text: str) -> list[tuple[str, str]]:
    """The URLs of `text` and what is between them (its mentions are code already: the style put them there)."""
    out: list[tuple[str, str]] = []
    for kind, piece in pieces(text):
        kind = kind if kind == URL else TEXT
        if out and out[-1][0] == kind == TEXT:
            out[-1] = (TEXT, out[-1][1] + piece)
        else:
            out.append((kind, piece))
    return out


def table(header: Sequence[Any], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured markdown table without padding; every cell escaped once (an `Md` cell is markdown already:
    only HTML, `|` and line breaks are made safe); where its longest runs would not fit a comment side by side, the
    columns that widen it most given break opportunities (compat_matrix.host.breaks)."""

    def safe(cell: Any) -> str:
        return (inline(cell) or " ") if isinstance(cell, Md) else escape(cell)

    lines = [[safe(h) if h else " " for h in header], *([safe(cell) for cell in row] for row in rows)]
    wrapped = to_wrap(list(zip(*lines, strict=True)))
    lines = [[wrap(cell) if i in wrapped else cell for i, cell in enumerate(line)] for line in lines]
    rendered = ["| " + " | ".join(line) + " |" for line in lines]
    return "\n".join([rendered[0], "|" + "---|" * len(header), *rendered[1:]])
