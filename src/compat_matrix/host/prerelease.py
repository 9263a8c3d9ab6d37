"""Pre-releases as an early warning: the axis value `pre`, the mark a pre-release has in a row's label, and which
cells never fail a run by themselves.

    newest(versions)            the release `pre` stands for: the newest pre-release, where it is newer than every
                                release (`5.25.0rc1` beside 5.24.0), else None
    missing(package, versions)  why `pre` stands for nothing today, in one line
    is_pre(version)             whether a version as written is a pre-release
    early(requested, resolved)  whether a cell is an early warning: it asked for `pre`, or installed a pre-release

A row's label marks a pre-release (`5.25.0rc1 (pre-release)`) and says the same of itself (releases.Label.early).

A cell that is an early warning runs like any other and is shown in a column of its own, but what it finds never
changes the run's exit code: a release candidate that breaks an override is news, not yet a failure.

Standard library plus `packaging`, so that the matrix files' checks (spec) and the plan can use it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from packaging.version import InvalidVersion, Version

PRE = "pre"  # the axis value: the newest pre-release on the index, where it is newer than every release
MARK = "pre-release"


def newest(versions: Sequence[Version]) -> Version | None:
    """The newest pre-release among `versions` (a, b, rc or dev), where it is newer than every release: what the
    next release may be. None where the newest is a release (its candidates shipped, or there are none)."""
    top = max(versions, default=None)
    return top if top is not None and top.is_prerelease else None


def missing(package: str, versions: Sequence[Version]) -> str:
    """Why `pre` stands for no release of `package` today."""
    releases = [v for v in versions if not v.is_prerelease]
    if not releases:
        return f"no pre-release of {package} on the index"
    return f"no pre-release of {package} newer than {max(releases)} on the index"


def is_pre(version: str | None) -> bool:
    """Whether a version as written (`5.25.0rc1`, `2.13.0+cpu`) is a pre-release."""
    try:
        return version is not None and Version(version).is_prerelease
    except InvalidVersion:
        return False


def early(requested: Mapping[str, str], resolved: Mapping[str, str]) -> bool:
    """Whether a cell is an early warning: it asked for `pre`, or it installed (or asked for) a pre-release on one
    of its axes."""
    return any(value == PRE or is_pre(resolved.get(axis) or value) for axis, value in requested.items())
