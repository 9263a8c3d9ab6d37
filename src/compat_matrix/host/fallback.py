"""A ranged axis value whose newest release cannot be installed here: the newest one that can be, said in the report.

`5.x` stands for the newest 5.x release, as an installer would choose it; but an installer chooses among the releases
whose requirements it can meet, and an index may offer a release before what it requires (transformers 5.25.0,
which needs kernels>=0.19.1, on an index whose newest kernels is 0.17.2). Pinned exactly, such a cell could not run
at all. Where its install fails for want of a solution, each older release the value allows is tried in turn, newest
first (up to TRIES); the one that installs runs, with a note saying what could not be installed and why. Exact
values (`5.25.0`, a sweep's releases) are never replaced: they ask for that release.

What could not be installed is remembered beside the reports for CACHE_SECONDS, as the index's answers are, so that
a warm run goes straight to the release that installs.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from packaging.version import Version

from compat_matrix.host.cells import Cell
from compat_matrix.host.package_index import CACHE_SECONDS
from compat_matrix.host.prerelease import PRE
from compat_matrix.host.resolve import exact
from compat_matrix.host.spec import PYTHON, axis_specifier
from compat_matrix.shared.results import write_json_atomic

TRIES = 3  # older releases tried per ranged value, newest first
MEMO = ".cells"  # in the reports folder, beside the cells' results

_WANTS = re.compile(r"(?P<who>\S+) depends on (?P<needs>[^\s,]+(?:,[<>=!~][^\s,]+)*)")
_ONLY = re.compile(r"only (?P<what>\S+) (?:is|are) available")


def unsatisfiable(why: str) -> bool:
    """Whether an install failed because its requirements cannot all be met (what installing again cannot change),
    not for a reason of the moment (the network, a full disk)."""
    return "pins conflict" in why or "No solution found" in why or "unsatisfiable" in why


def cause(why: str) -> str:
    """The installer's reason, short: `it needs kernels>=0.19.1,<0.20, and the index has only kernels<=0.17.2` where
    it says what is missing, else as it came."""
    wants, only = _WANTS.search(why), _ONLY.search(why)
    if wants is None:
        return why
    return f"it needs {wants['needs']}" + (f", and the index has only {only['what']}" if only else "")


def older(
    cell: Cell, pins: Mapping[str, str], releases_of: Callable[[str], Sequence[Version]]
) -> Iterator[dict[str, str]]:
    """Pins to try in turn where `pins` cannot be installed: for each ranged axis value of `cell`, the releases it
    allows below the one pinned, newest first (up to TRIES), the rest as pinned."""
    for axis, value in cell.axes:
        if axis == PYTHON or value.strip() == PRE or exact(value) or axis not in pins:
            continue
        pinned = Version(pins[axis])
        allowed = sorted((v for v in axis_specifier(value).filter(releases_of(axis)) if v < pinned), reverse=True)
        for version in allowed[:TRIES]:
            yield {**pins, axis: str(version)}


def note(cell: Cell, wanted: Mapping[str, str], instead: Mapping[str, str], why: str) -> str:
    """`transformers 5.x: 5.25.0 cannot be installed here (it needs kernels>=0.19.1,<0.20, …); 5.24.0 ran instead`."""
    values = dict(cell.axes)
    changed = [axis for axis in instead if instead[axis] != wanted.get(axis)]
    said = ", ".join(f"{axis} {values.get(axis, '')}: {wanted[axis]}" for axis in changed)
    ran = ", ".join(instead[axis] for axis in changed)
    return f"{said} cannot be installed here ({cause(why)}); {ran} ran instead"


def _memo(reports: Path, environment: str) -> Path:
    return reports / MEMO / f"uninstallable-{hashlib.sha256(environment.encode()).hexdigest()[:16]}.json"


def remember(reports: Path, environment: str, instead: Mapping[str, str], said: str) -> None:
    """That the environment `environment` (its fingerprint) cannot be installed, and the pins that ran instead."""
    write_json_atomic(_memo(reports, environment), {"pins": dict(instead), "note": said, "at": time.time()})


def remembered(reports: Path, environment: str) -> tuple[dict[str, str], str] | None:
    """The pins that ran instead of `environment`, and the note, where it was found uninstallable in the last
    CACHE_SECONDS; None otherwise."""
    try:
        found = json.loads(_memo(reports, environment).read_text(encoding="utf-8"))
        if time.time() - float(found["at"]) <= CACHE_SECONDS:
            return {str(k): str(v) for k, v in found["pins"].items()}, str(found["note"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    return None
