"""The class as shipped, across the tested releases: what stopped working, and what changed silently. Pure
functions over results.

Where a probe fails as shipped on some releases and ran on others, the maintainer must hear it, whether or not the
override is to blame (both variants may fail alike). And where the forward outputs or the reloaded weights of a
model whose parameters depend only on their names and shapes (the `across_releases` observations) change from one
tested release to the next, the class behaves differently for its users although nothing of theirs changed.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from compat_matrix.shared.results import SubjectResult, equal, failure_in
from compat_matrix.shared.vocabulary import Status

ACROSS_RELEASES = "across_releases"  # as compat_matrix.cell.probes.outputs names it
ERROR, WARNINGS = "error", "warnings"
FAILS, CHANGES = "fails", "changes"


@dataclass(frozen=True)
class ShippedChange:
    """One thing about the class as shipped that is not the same on every tested release.

    FAILS: `probe` raises `error` on `releases` and ran on `other`. CHANGES: observation `name` of `probe` is
    `before` on the release `other` names and `after` on the next tested one, `releases`."""

    kind: str
    probe: str
    releases: tuple[str, ...]
    other: tuple[str, ...]
    name: str | None = None
    error: str | None = None
    before: Any = None
    after: Any = None


def _probe_error(subject: SubjectResult, probe: str) -> tuple[bool, str | None]:
    """Whether the class as shipped ran `probe` in this cell, and the first error among what carries."""
    seen = [o for o in subject.observations if o.probe == probe and (o.carries or o.name == ERROR)]
    for o in seen:
        error = o.override if o.name == ERROR else failure_in(o.override)
        if error is not None and o.name != WARNINGS:
            return True, str(error)
    return bool(seen), None


def shipped_changes(rows: list[tuple[str, SubjectResult | None]]) -> tuple[ShippedChange, ...]:
    """`rows`: (release, the subject's result there) oldest first; the releases where the subject could not run
    are left out. Failures first (in probe order), then silent changes."""
    ran = [(release, result) for release, result in rows if result is not None and result.status == Status.OK]
    probes = list(dict.fromkeys(o.probe for _, result in ran for o in result.observations))
    found = []
    for probe in probes:
        failing, running, first = [], [], None
        for release, result in ran:
            present, error = _probe_error(result, probe)
            if error is not None:
                failing.append(release)
                first = first or error
            elif present:
                running.append(release)
        if failing and running:
            found.append(ShippedChange(FAILS, probe, tuple(failing), tuple(running), error=first))
    for probe in probes:
        values = [(release, _across(result, probe)) for release, result in ran]
        values = [(release, value) for release, value in values if value is not None]
        for (was, before), (now, after) in itertools.pairwise(values):
            if not equal(before, after):
                found.append(ShippedChange(CHANGES, probe, (now,), (was,), ACROSS_RELEASES, None, before, after))
    return tuple(found)


def _across(result: SubjectResult, probe: str) -> Any:
    """The class as shipped's `across_releases` value in `probe`, unless it is an error."""
    value = next((o.override for o in result.observations if o.probe == probe and o.name == ACROSS_RELEASES), None)
    return None if value is None or failure_in(value) is not None else value
