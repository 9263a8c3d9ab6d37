"""Problems of a matrix file, one line each: where (`Context`: the file and the dotted key, TOML's quoting kept), the
bad value quoted and cut, and the one error that carries them all (`MatrixError`)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compat_matrix.host.exits import BadInput

SHOW_LIMIT = 80  # characters of a value or key quoted in a problem
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
MISSING = object()


class MatrixError(BadInput):
    """A matrix file that cannot be used; `problems` holds one line per problem."""


def show(value: Any) -> str:
    """A value as a problem quotes it: its repr on one line, cut to SHOW_LIMIT characters."""
    text = repr(value)
    return text if len(text) <= SHOW_LIMIT else text[: SHOW_LIMIT - 1] + "…"


def display_path(path: Path) -> str:
    """`path` relative to the working directory when it lies below it, else absolute."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(Path(path).resolve())


def dotted(prefix: str, key: str) -> str:
    """`prefix.key`, the key quoted as TOML would need it (and cut) when it is not a bare key."""
    if not _BARE_KEY.fullmatch(key):
        quoted = "".join(c if c.isprintable() else _escape(c) for c in json.dumps(key, ensure_ascii=False))
        key = quoted if len(quoted) <= SHOW_LIMIT else quoted[: SHOW_LIMIT - 2] + '…"'
    return f"{prefix}.{key}" if prefix else key


def _escape(char: str) -> str:
    return f"\\u{ord(char):04x}" if ord(char) <= 0xFFFF else f"\\U{ord(char):08x}"


@dataclass(frozen=True)
class Context:
    """Where a validator is: the file and the dotted key. Problems go into the shared list."""

    path: Path
    key: str
    problems: list[str] = field(default_factory=list)

    def at(self, key: str) -> Context:
        return Context(self.path, key, self.problems)

    def problem(self, value: Any, why: str) -> None:
        shown = "" if value is MISSING else f" = {show(value)}"
        reason = " ".join(line.strip() for line in str(why).splitlines() if line.strip())
        self.problems.append(f"{self.path}: {self.key}{shown}: {reason}")
