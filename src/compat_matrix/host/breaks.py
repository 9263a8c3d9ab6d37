"""Where a table cell may wrap on GitHub. A GitHub table is as wide as the sum of its columns' longest unbreakable
runs (its CSS makes it `width: max-content`, and `overflow-wrap: break-word` never narrows a table column), so one
`activation_checkpointing_enable(every_n_layers=2)` widens a table past the comment and hides its last columns.

A table whose columns' longest runs do not fit the comment side by side (`to_wrap`, a model in characters) has its
widest columns wrapped: each run longer than WORD characters gets `<wbr>` (kept by GitHub's sanitizer; invisible,
and copied as nothing) where a reader would break it: between the parts of a name or a call (before a `.`, after
`(`, `[`, `,`, `=`, `/` or a `-` before a letter), and only where a part is still longer than WORD, inside it (after
an `_` inside a name, between camel-case humps: `OLMoFor|Sequence|Classification`), as few as keep each piece within
WORD. A code span that needs one becomes `<code>…</code>`, which GitHub renders and styles alike. A table that fits
keeps its names whole. Nothing else changes: the text reads and copies as before.

Pure functions over a cell's markdown, as compat_matrix.host.markup writes it: escapes (`\\_`), entities and tags
are single units, and a bare `*`, `_` or `~` (an emphasis delimiter) is never split from its neighbours.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

WORD = 14  # characters a wrapped table cell may run without a break opportunity
# A table that fits without breaks keeps its names whole: the comment's width in characters of GitHub's text at 780 px
# (701 px of table; DejaVu, wider than GitHub's own fonts, runs about 8 px a character), and per column (its padding)
# and per table (its margins) what is not text. A model: benchmarks/render.py measures the real thing.
COMMENT, PADDING, MARGIN = 87, 3, 4
SHORT = 2  # characters of a piece too short to start a line of its own (`…,` after `=`)
WBR = "<wbr>"
NBSP = "\N{NO-BREAK SPACE}"  # between a symbol and its word: `✗ harmful` wraps as one
_SPACES = re.compile(r"[ \t\n\r\f\v]+")  # where text wraps; not NBSP (str.split() would split it too)
_UNITS = re.compile(r"<[^>]*>|\\[!-/:-@\[-`{-~]|&(?:#\d+|#[xX][0-9a-fA-F]+|[A-Za-z]\w*);|\s|.", re.S)
_CODE = re.compile(r"`([^`]+)`")
_BREAKS = ("<br>", WBR)
_AFTER = "([{,=/"


@dataclass(frozen=True)
class Unit:
    """One character as a reader sees it, and the markdown that writes it."""

    source: str
    shown: str
    delimiter: bool = False  # a bare `*`, `_` or `~`: markdown may read it as emphasis

    @property
    def first(self) -> str:
        return self.shown[:1]

    @property
    def last(self) -> str:
        return self.shown[-1:]


def longest(cell: str) -> int:
    """Characters of the longest run of a cell's markdown that a browser cannot break (what sets its column's
    narrowest width)."""
    units = [_unit(found.group()) for found in _UNITS.finditer(cell.replace("`", ""))]
    size = best = 0
    for unit in units:
        size = 0 if _ends_run(unit) else size + len(unit.shown)
        best = max(best, size)
    return best


def to_wrap(columns: Sequence[Sequence[str]], comment: int = COMMENT) -> set[int]:
    """The columns (by index) a table must wrap to fit a comment `comment` characters wide: none where its longest
    runs fit side by side; else the column whose wrapping alone is enough and breaks the least (a prose column's
    one long word before a column of names), or failing one, the column with the longest run, and again."""
    widths = {i: max(map(longest, column), default=0) for i, column in enumerate(columns)}
    wrapped: set[int] = set()
    while (excess := sum(widths.values()) + PADDING * len(widths) + MARGIN - comment) > 0:
        open_ = [i for i in widths if i not in wrapped and widths[i] > WORD]
        if not open_:
            break
        enough = [i for i in open_ if widths[i] - WORD >= excess]
        chosen = min(enough, key=widths.__getitem__) if enough else max(open_, key=widths.__getitem__)
        wrapped.add(chosen)
        widths[chosen] = WORD
    return wrapped


def runs(text: str) -> list[str]:
    """The runs of plain `text` a browser cannot break, as this module would leave them in a cell."""
    words = [word for word in _SPACES.split(text) if word]
    return [_shown(piece) for word in words for piece in _pieces([Unit(c, c) for c in word])]


def fits(text: str, limit: int = WORD) -> bool:
    """Whether plain `text` can wrap in a cell to runs of at most `limit` characters."""
    return all(len(run) <= limit for run in runs(text))


def wrap(cell: str) -> str:
    """A table cell's markdown with a break opportunity in each run longer than WORD characters."""
    out, at = [], 0
    for found in _CODE.finditer(cell):
        out += [_wrap_text(cell[at : found.start()]), _wrap_code(found.group(1))]
        at = found.end()
    return "".join([*out, _wrap_text(cell[at:])])


def _wrap_code(code: str) -> str:
    """A code span whose runs fit, as it was; else as `<code>` with breaks, its text escaped for HTML and markdown
    so that it shows what the span showed."""
    if all(len(word) <= WORD for word in _SPACES.split(code)):
        return f"`{code}`"
    return f"<code>{_joined([Unit(_escaped(c), c) for c in code])}</code>"


def _wrap_text(text: str) -> str:
    return _joined([_unit(found.group()) for found in _UNITS.finditer(text)])


def _joined(units: list[Unit]) -> str:
    """The units' markdown, each run longer than WORD split into pieces with WBR between them."""
    out: list[str] = []
    run: list[Unit] = []
    for unit in [*units, None]:
        if unit is None or _ends_run(unit):
            pieces = _pieces(run) if len(_shown(run)) > WORD else [run]
            out.append(WBR.join("".join(u.source for u in piece) for piece in pieces))
            out += [unit.source] if unit is not None else []
            run = []
        else:
            run.append(unit)
    return "".join(out)


def _ends_run(unit: Unit) -> bool:
    return (unit.shown.isspace() and unit.shown != NBSP) or unit.source in _BREAKS


def _shown(units: Sequence[Unit]) -> str:
    return "".join(u.shown for u in units)


def _unit(source: str) -> Unit:
    if source.startswith("<"):
        return Unit(source, source if source in _BREAKS else source[1:-1])
    if source.startswith("\\") and len(source) == 2:
        return Unit(source, source[1])
    if source.startswith("&") and len(source) > 1:
        return Unit(source, html.unescape(source))
    return Unit(source, source, delimiter=source in "*_~")


def _pieces(run: list[Unit]) -> list[list[Unit]]:
    """`run` cut where it may break: at every break between the parts of a name or a call (a piece of two characters
    or fewer stays with the one before it), then, in a part longer than WORD characters, inside its words (`_`,
    camel case), as few as keep each piece within WORD."""
    pieces: list[list[Unit]] = []
    for part in _cut(run, _between):
        if pieces and len(_shown(part)) <= SHORT:
            pieces[-1] = pieces[-1] + part
        else:
            pieces.append(part)
    if len(pieces) > 1 and len(_shown(pieces[0])) <= SHORT:  # `(` opens the line of what it opens
        pieces[:2] = [pieces[0] + pieces[1]]
    return [piece for part in pieces for piece in (_within(part) if len(_shown(part)) > WORD else [part])]


def _within(part: list[Unit]) -> list[list[Unit]]:
    merged: list[list[Unit]] = []
    for piece in _cut(part, _inside):
        if merged and len(_shown(merged[-1])) + len(_shown(piece)) <= WORD:
            merged[-1] = merged[-1] + piece
        else:
            merged.append(piece)
    return merged


def _cut(run: list[Unit], may: Callable[[str, str, str], bool]) -> list[list[Unit]]:
    """`run` cut between each pair of units where `may(earlier, before, after)` (their characters) says so; never
    next to an emphasis delimiter, inside a link or a tag."""
    cuts = [0]
    for i in range(1, len(run)):
        before, after = run[i - 1], run[i]
        whole = before.delimiter or after.delimiter or len(before.shown) > 1 or len(after.shown) > 1
        if not whole and may(run[i - 2].last if i >= 2 else "", before.last, after.first):
            cuts.append(i)
    return [run[start:end] for start, end in zip(cuts, [*cuts[1:], len(run)], strict=True)]


def _between(earlier: str, a: str, b: str) -> bool:
    """Between the parts of a dotted name or a call: before `.`, after `(`, `[`, `,`, `=`, `/` or `-`."""
    return a in _AFTER or (a == "-" and b.isalpha()) or (b == "." and (a.isalpha() or a in ")_"))


def _inside(earlier: str, a: str, b: str) -> bool:
    """Inside a word of a name: after an `_` between letters or digits, between camel-case humps."""
    return (a == "_" and b.isalnum() and earlier.isalnum()) or (a.islower() and b.isupper())


def _escaped(char: str) -> str:
    """A character inside raw `<code>`, where markdown still reads escapes, entities and emphasis."""
    if char in "\\*_[]~":
        return "\\" + char
    return {"&": "&amp;", "<": "&lt;", ">": "&gt;", "`": "&#96;", "|": "&#124;"}.get(char, char)
