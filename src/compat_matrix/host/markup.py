"""Markdown as GitHub renders it, for the report's tables and lines: text escaped once (`escape`), the report's own
sentences made safe (`inline`), tables without padding (`table`). Pure functions over text; compat_matrix.host.render
and the watch's issue bodies use them.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Any


class Md(str):
    """A table cell already written as markdown (code spans, emphasis): `table` only keeps it in its row."""


_MARKUP = re.compile(r"([\\*_\[\]~])")


def escape(text: Any) -> str:
    """Make any text safe inside a markdown table cell (or a line of its own): no `|`, newline, HTML or code span
    can break the row, and no emphasis, link or strikethrough can start in it."""
    text = html.escape(str(text), quote=False).replace("`", "&#96;").replace("|", "&#124;")
    text = _MARKUP.sub(r"\\\1", text)
    return "<br>".join(line.strip() for line in text.splitlines()) or " "


def inline(text: str) -> str:
    """A sentence of the report's own, whose backticks mark code, made safe: no HTML, no `|`, one line."""
    return " ".join(html.escape(text, quote=False).replace("|", "&#124;").split())


def table(header: Sequence[Any], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured markdown table without padding; every cell escaped once (an `Md` cell is markdown already:
    only HTML, `|` and line breaks are made safe)."""

    def safe(cell: Any) -> str:
        return (inline(cell) or " ") if isinstance(cell, Md) else escape(cell)

    lines = ["| " + " | ".join(safe(h) if h else " " for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(safe(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)
