"""The values a matrix file writes in its own grammar: an axis value (exact, X.Y.x, X.x, latest, pre, or a PEP 440
specifier) as what it allows and the requirement an installer gets, and a moment as the UTC timestamp uv gets."""

from __future__ import annotations

import datetime
import re

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from compat_matrix.host.prerelease import PRE
from compat_matrix.host.spec.problems import show

_SERIES = re.compile(r"([0-9]+(?:\.[0-9]+)*)\.x")
TIMESTAMP = "a date (2026-10-01, midnight UTC) or an RFC 3339 timestamp (2026-10-01T12:00:00Z)"


def axis_specifier(value: str) -> SpecifierSet:
    """What an axis value allows: exact, X.Y.x (newest X.Y), X.x, latest (anything), pre (the newest pre-release,
    where it is newer than every release: resolve.resolve picks it), or a PEP 440 specifier."""
    value = value.strip()
    if value == "latest":
        return SpecifierSet()
    if value == PRE:  # any release, pre-releases too; only the one the index offers is ever installed
        return SpecifierSet(">=0.dev0")
    series = _SERIES.fullmatch(value)
    if series:
        return SpecifierSet(f"=={series.group(1)}.*")
    try:
        return SpecifierSet(f"=={Version(value)}")
    except InvalidVersion:
        pass
    try:
        if value:
            return SpecifierSet(value)
    except InvalidSpecifier:
        pass
    raise ValueError(f"not a version, X.Y.x, X.x, 'latest', 'pre' or PEP 440 specifier: {show(value)}")


def axis_requirement(package: str, value: str) -> str:
    """The installer requirement for one axis value."""
    return f"{package}{axis_specifier(value)}"


def timestamp(value: str) -> str:
    """A date (`2026-10-01`, midnight UTC) or an RFC 3339 timestamp, as the UTC timestamp uv gets
    (`2026-10-01T00:00:00Z`), so that a run resolves alike on every machine whatever its time zone."""
    text = value.strip()
    try:
        if len(text) == 10:
            moment = datetime.datetime.combine(datetime.date.fromisoformat(text), datetime.time(), datetime.UTC)
        else:
            moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(TIMESTAMP) from None
    if moment.tzinfo is None:
        raise ValueError(f"{TIMESTAMP}; a timestamp needs its time zone (Z for UTC)")
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
