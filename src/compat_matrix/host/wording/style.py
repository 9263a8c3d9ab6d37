"""How each output format writes the report's sentences (`Style`: MARKDOWN, PLAIN), and observed values spelled and
shortened as a reader expects them."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from compat_matrix.host.markup import TEXT, URL, pieces
from compat_matrix.shared.results import equal, one_line

SHORT = 48  # characters of a value in a phrase
_MARKUP = re.compile(r"([*_\[\]])")


@dataclass(frozen=True)
class Style:
    """How one output format writes the report's sentences."""

    text: Callable[[str], str]  # observed text, quoted in a sentence: one line, safe
    code: Callable[[str], str]  # a name in code: a method, a test
    strong: Callable[[str], str]  # the word a line is about


def _markdown_text(text: str) -> str:
    """One line, no backticks, markdown's emphasis and link characters escaped (HTML and `|` are escaped when the
    sentence is written out, and a URL made a link: compat_matrix.host.markup.inline); a URL whole, a mention or an
    issue reference (`@name`, `#123`) in code, so that GitHub makes neither of it."""
    said = one_line(text).replace("`", "'")
    return "".join(
        _MARKUP.sub(r"\\\1", piece) if kind == TEXT else piece if kind == URL else f"`{piece}`"
        for kind, piece in pieces(said)
    )


MARKDOWN = Style(_markdown_text, lambda name: f"`{name}`", lambda word: f"**{word}**")
PLAIN = Style(one_line, str, str)


def spelled(value: Any) -> str:
    """An observed value as a reader expects it: `True`, `2/2`, `use_reentrant=False, ...`, `a; b`; containers
    inside containers in brackets: `layers=[True, False]`, `other_flags={model.model=True}`; empty ones as `{}` and
    `[]`; None as `—`."""
    if value is None:
        return "—"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_nested(v)}" for k, v in sorted(value.items())) or "{}"
    if isinstance(value, list):
        return "; ".join(_nested(v) for v in value) or "[]"
    return str(value)


def _nested(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + spelled(value) + "}" if value else "{}"
    if isinstance(value, list):
        return "[" + ", ".join(_nested(v) for v in value) + "]"
    return spelled(value)


def short(value: Any, style: Style = MARKDOWN, limit: int = SHORT) -> str:
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, dict) and value:
        text = ", ".join(f"{style.text(str(k))}={short(v, style, limit)}" for k, v in value.items())
    else:
        text = style.text(spelled(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _flat(item, f"{prefix}{key}.").items()}
    return {prefix.rstrip("."): value}


def sides(override: Any, base: Any, style: Style = MARKDOWN, limit: int = SHORT) -> tuple[str, str]:
    """The two values in short, naming only what differs: dict keys whose values differ, list items on one side."""
    if isinstance(override, list) and isinstance(base, list) and all(isinstance(v, str) for v in override + base):
        mine, theirs = [v for v in override if v not in base], [v for v in base if v not in override]
        return (
            short(mine, style, limit) if mine else "nothing more",
            short(theirs, style, limit) if theirs else "nothing more",
        )
    flat_o, flat_b = _flat(override), _flat(base)
    if len(flat_o) > 1 or len(flat_b) > 1 or (isinstance(override, dict) and isinstance(base, dict)):
        keys = [k for k in dict.fromkeys([*flat_o, *flat_b]) if not equal(flat_o.get(k), flat_b.get(k))]
        keys = keys or list(dict.fromkeys([*flat_o, *flat_b]))
        return (
            short({k: flat_o.get(k) for k in keys}, style, limit),
            short({k: flat_b.get(k) for k in keys}, style, limit),
        )
    return short(override, style, limit), short(base, style, limit)


def long_lines(value: Any, other: Any, style: Style = MARKDOWN) -> tuple[str, ...]:
    """`value` whole, a line per part that differs from `other` (as `sides` names them): `key=value`, or `key:` and
    a line per item of a list of texts (call sites, each on its own line); for what a table cell cannot hold."""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(style.text(v) for v in value if not isinstance(other, list) or v not in other)
    flat, theirs = _flat(value), _flat(other)
    keys = [k for k in flat if not equal(flat[k], theirs.get(k))] or list(flat)
    lines: list[str] = []
    for key in keys:
        item = flat[key]
        if isinstance(item, list) and item and all(isinstance(v, str) for v in item):
            lines += [f"{style.text(key)}:", *(f"  {style.text(v)}" for v in item)]
        else:
            lines.append(f"{style.text(key)}={style.text(spelled(item))}" if key else style.text(spelled(item)))
    return tuple(lines)


def listed(items: Sequence[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    return ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else "".join(items)
