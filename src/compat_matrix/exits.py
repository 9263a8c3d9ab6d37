"""Exit codes, what each means in one line, and the handling of an unexpected error. Standard library only: the
command line and the nox sessions both end through here."""

from __future__ import annotations

import os
import tempfile
import time
import traceback
from pathlib import Path

OK = 0
UNMET = 1  # an expectation failed, or since the baseline a verdict flipped or an observation changed
BAD_INPUT = 2  # a bad matrix file, baseline or option: nothing ran
CELL_FAILED = 3  # a cell could not run
UNEXPECTED = 4  # a bug: the traceback is in a file
INTERRUPTED = 130

MEANINGS = {
    OK: "every cell ran and every expectation held",
    UNMET: "an expectation failed",
    BAD_INPUT: "bad input, nothing ran",
    CELL_FAILED: "a cell could not run",
    UNEXPECTED: "unexpected error",
    INTERRUPTED: "interrupted",
}
EPILOG = "exit codes:\n" + "\n".join(f"  {code:<3} {meaning}" for code, meaning in MEANINGS.items())
SHOWN = 3  # items named in an exit line


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def exit_line(code: int, items: list[str], what: str = "") -> str:
    """`exit 3: 1 cell could not run: cell:… (install-failed)`: the code, what it means, and the first items."""
    head = f"exit {code}: {what or MEANINGS.get(code, 'unknown')}"
    if not items:
        return head
    shown = "; ".join(items[:SHOWN]) + (f"; and {len(items) - SHOWN} more" if len(items) > SHOWN else "")
    return f"{head}: {shown}"


def unexpected(exc: BaseException, program: str = "compat-matrix") -> str:
    """Write the traceback of `exc` to a file of its own; return the one line that says what happened and where."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = Path(tempfile.gettempdir()) / f"{program}-{stamp}-{os.getpid()}.traceback.txt"
    text = "".join(traceback.format_exception(exc))
    try:
        path.write_text(text, encoding="utf-8")
        where = f"traceback in {path}"
    except OSError as error:
        where = f"the traceback could not be written ({error})"
    message = " ".join(str(exc).split())[:200]
    return exit_line(UNEXPECTED, [], f"unexpected error {type(exc).__name__}" + (f": {message}" if message else "")) + (
        f" ({where}; please report it)"
    )
