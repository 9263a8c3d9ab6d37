"""A report cut to a size, tables first: for a pull-request comment (`compat-matrix summary`) and a CI job's summary
(`report --summary`). Pure: markdown in, markdown out."""

from __future__ import annotations

from compat_matrix.host.render import EVIDENCE, VERSIONS, WHOLE_GRID

TRUNCATED = (
    "*Details cut to fit. The full report, with every observation, is in the uploaded reports "
    "(`reports/<name>.md`, `.json` and `.csv`).*"
)


def truncate(markdown: str, limit: int) -> str:
    """`markdown` in at most `limit` bytes (UTF-8): the evidence goes first, then the versions, then the whole grid
    (where the first screen shows only the rows that ask for action); the first screen (the title, the grid, the
    caution and the tables) stays as long as it fits, and is cut at a line, with the note, only when it alone does
    not."""
    if len(markdown.encode()) <= limit:
        return markdown
    head, found, rest = markdown.partition(f"\n{EVIDENCE}")
    if not found:  # no evidence: cut before the versions
        head, found, rest = markdown.partition(f"\n{VERSIONS}")
    _, versions, tail = rest.partition(f"\n{VERSIONS}")
    screen = head.partition(f"\n{WHOLE_GRID}")[0]
    candidates = (
        f"{head}\n{TRUNCATED}\n\n{VERSIONS}{tail}" if versions else "",
        f"{head}\n{TRUNCATED}\n",
        f"{screen}\n{TRUNCATED}\n",
    )
    for candidate in map(closed, candidates):
        if candidate and len(candidate.encode()) <= limit:
            return candidate
    kept, size = [], len(TRUNCATED.encode()) + 2 + len(CLOSE.encode()) * screen.count("<details>")
    for line in screen.splitlines():
        size += len(line.encode()) + 1
        if size > limit:
            break
        kept.append(line)
    return closed("\n".join(kept) + f"\n\n{TRUNCATED}\n")


CLOSE = "</details>\n"


def closed(markdown: str) -> str:
    """`markdown` with every `<details>` it opens closed (a cut inside the comment's collapsed report leaves its
    opening alone)."""
    return markdown + CLOSE * max(0, markdown.count("<details>") - markdown.count("</details>"))
