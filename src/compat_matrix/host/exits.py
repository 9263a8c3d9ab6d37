"""Exit codes: what a run came to (`Outcome`), the one function that turns it into the exit code (`code`), and the
line that says what the code means (`line`). The command line, the nox sessions and bisect
all end through here.
"""

from __future__ import annotations

import os
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

OK = 0
UNMET = 1  # an expectation failed, an override reached a --fail-on conclusion, or a baseline check failed
BAD_INPUT = 2  # a bad matrix file, baseline or option: nothing ran
CELL_FAILED = 3  # a cell could not run
UNEXPECTED = 4  # a bug: the traceback is in a file
INTERRUPTED = 130

MEANINGS = {
    OK: "every cell ran and every expectation held",
    UNMET: "a check failed (an expectation, --fail-on, a baseline)",
    BAD_INPUT: "bad input, nothing ran",
    CELL_FAILED: "a cell could not run",
    UNEXPECTED: "unexpected error",
    INTERRUPTED: "interrupted",
}
EPILOG = "exit codes:\n" + "\n".join(f"  {code:<3} {meaning}" for code, meaning in MEANINGS.items())
SHOWN = 3  # items named in an exit line


class BadInput(ValueError):
    """Input that stops a run before anything runs (a matrix file, a baseline, an option); `problems` holds one line
    per problem, each naming the file, the key or option, and the value."""

    def __init__(self, problems: Sequence[str]):
        super().__init__("\n".join(problems))
        self.problems = list(problems)


@dataclass(frozen=True)
class Outcome:
    """What a run came to: everything its exit code and its last line depend on."""

    cells: int = 0  # the cells it ran (or reported on)
    could_not_run: tuple[str, ...] = ()  # `cell (why)`, each cell once
    partly: int = 0  # of those, the cells that ran but where some class (subject) could not
    failed_checks: tuple[str, ...] = ()  # unmet expectations, and changes since the baseline that fail
    bad_input: tuple[str, ...] = ()  # nothing ran
    interrupted: bool = False
    unexpected: str | None = None  # the one line that says where the traceback of a bug is
    checked: bool = True  # False for cells run without a report: nothing was expected of them


def code(outcome: Outcome) -> int:
    """The exit code of a run: the first of these that holds."""
    if outcome.unexpected is not None:
        return UNEXPECTED
    if outcome.interrupted:
        return INTERRUPTED
    if outcome.bad_input:
        return BAD_INPUT
    if outcome.could_not_run:
        return CELL_FAILED
    if outcome.failed_checks:
        return UNMET
    return OK


def line(outcome: Outcome) -> str:
    """`exit 3: 1 cell could not run: cell:… (install-failed)`: the code, what it means, and the first items."""
    found = code(outcome)
    if found == UNEXPECTED:
        return outcome.unexpected or exit_line(UNEXPECTED, [])
    if found == CELL_FAILED:
        whole = len(outcome.could_not_run) - outcome.partly
        said = [f"{plural(whole, 'cell')} could not run" if whole else ""]
        their = "its" if outcome.partly == 1 else "their"
        said += [f"{plural(outcome.partly, 'cell')} ran, but not all {their} classes" if outcome.partly else ""]
        return exit_line(found, outcome.could_not_run, ", ".join(filter(None, said)))
    if found == UNMET:
        failed = outcome.failed_checks
        return exit_line(found, failed, f"{plural(len(failed), 'check')} failed")
    if found == OK and not outcome.checked:
        return exit_line(found, [], f"{plural(outcome.cells, 'cell')} ran")
    return exit_line(found, [])


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def exit_line(code: int, items: Sequence[str], what: str = "") -> str:
    head = f"exit {code}: {what or MEANINGS.get(code, 'unknown')}"
    if not items:
        return head
    shown = "; ".join(items[:SHOWN]) + (f"; and {len(items) - SHOWN} more" if len(items) > SHOWN else "")
    return f"{head}: {shown}"


def guarded(body: Callable[[], Outcome]) -> Outcome:
    """`body()`'s outcome; bad input, an interrupt and an unexpected error (a bug) become outcomes of their own."""
    try:
        return body()
    except BadInput as exc:
        return Outcome(bad_input=tuple(exc.problems))
    except KeyboardInterrupt:
        return Outcome(interrupted=True)
    except Exception as exc:
        return Outcome(unexpected=unexpected(exc))


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
