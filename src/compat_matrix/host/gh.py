"""Calling GitHub's `gh`: one command line at a time, and the open issues it lists (or a file of them). What to
call is decided elsewhere (compat_matrix.host.watch); a call that fails is one line naming it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from compat_matrix.host.exits import BadInput


class Failed(Exception):
    """A `gh` call that failed: its first words and its last line of output."""


def run(command: list[str], stdin: str | None = None) -> str:
    """Run one `gh` command line; its standard output."""
    try:
        given = {"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}  # never the job's own stdin
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, **given)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Failed(f"{' '.join(command[:3])}: {exc}") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise Failed(f"{' '.join(command[:3])}: exit {done.returncode}" + (f": {said[-1]}" if said else ""))
    return done.stdout


def listed(command: list[str]) -> list[dict]:
    """The list of issues `gh issue list --json` prints."""
    try:
        found = json.loads(run(command) or "[]")
    except ValueError as exc:
        raise Failed(f"{' '.join(command[:3])}: not JSON ({exc})") from None
    if not issue_list(found):
        raise Failed(f"{' '.join(command[:3])}: not a list of issues")
    return found


def issue_list(found: object) -> bool:
    return isinstance(found, list) and all(isinstance(i, dict) and "number" in i for i in found)


def issues_in(path: Path) -> list[dict]:
    """The open issues in a file, as `gh issue list --json number,title,body` writes them."""
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BadInput([f"--issues {path}: cannot read it ({exc})"]) from None
    if not issue_list(found):
        raise BadInput([f"--issues {path}: not a list of issues, as `gh issue list --json number,title,body` writes"])
    return found
