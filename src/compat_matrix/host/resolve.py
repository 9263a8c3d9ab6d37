"""Axis values → releases on the package index (compat_matrix.host.package_index). Host side: standard library +
packaging.

    resolve("5.x", versions)          the newest release an axis value allows, or None; for `pre`, the newest
                                      pre-release where it is newer than every release (compat_matrix.host.prerelease)
    expand(spec, releases_of)         the spec with every sweep replaced by the releases it stands for
    pins(cell, releases_of)           the release each ranged axis value of a cell resolves to today
    validate(specs, environ)          every axis value of matrix files resolved, for `compat-matrix validate`

Only the process that plans a run asks (compat_matrix.host.plan); the processes it starts read the plan. `sweep` is
pure and tested on recorded answers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from compat_matrix.host import prerelease
from compat_matrix.host.cells import Cell, cells
from compat_matrix.host.distributions import declared_ranges, metadata_reader
from compat_matrix.host.exits import plural
from compat_matrix.host.package_index import ResolveError, lookup
from compat_matrix.host.prerelease import PRE
from compat_matrix.host.spec import (
    PYTHON,
    Declared,
    MatrixError,
    MatrixSpec,
    Sweep,
    axis_specifier,
    display_path,
    dotted,
    show,
)


def resolve(value: str, versions: Sequence[Version]) -> Version | None:
    """The newest of `versions` that the axis value allows; pre-releases only when asked for or nothing else fits,
    as installers choose. `pre`: the newest pre-release, where it is newer than every release."""
    if value.strip() == PRE:
        return prerelease.newest(versions)
    return max(axis_specifier(value).filter(versions), default=None)


def check_axes(spec: MatrixSpec, releases_of: Callable[[str], Sequence[Version]]) -> tuple[list[str], list[str]]:
    """Every axis value of `spec` resolved against the index: (one line per axis saying what each value resolves
    to, one problem per value that no release matches)."""
    lines, problems = [], []
    for axis in spec.axes:
        if axis.package == PYTHON:
            continue
        versions = releases_of(axis.package)
        resolved = [(value, resolve(value, versions)) for value in axis.values]
        none = f"none ({prerelease.missing(axis.package, versions)})"
        said = [f"{value} → {version or none if value == PRE else version}" for value, version in resolved]
        lines.append(f"{axis.package}: " + ", ".join(said))
        newest = f"the newest is {versions[-1]}" if versions else "there is none"
        problems += [  # `pre` with nothing to stand for is a cell skipped with its reason, not a bad file
            f"{spec.path}: {dotted('axes', axis.package)} = {show(value)}: no release of {axis.package} matches "
            f"({newest})"
            for value, version in resolved
            if version is None and value != PRE
        ]
    return lines, problems


def exact(value: str) -> bool:
    """Whether an axis value names one release (`5.14.1`, `==5.14.1`): it resolves without asking the index."""
    specifiers = list(axis_specifier(value))
    return len(specifiers) == 1 and specifiers[0].operator in ("==", "===") and "*" not in specifiers[0].version


def pins(cell: Cell, releases_of: Callable[[str], Sequence[Version]]) -> dict[str, str]:
    """The release each ranged axis value of `cell` resolves to (`{"transformers": "5.24.0"}` for `5.x`): what the
    cell installs, exactly. Exact values, and values that no release matches, are left as written."""
    out = {}
    for axis, value in cell.axes:
        if axis != PYTHON and not exact(value):
            found = resolve(value, releases_of(axis))
            if found is not None:
                out[axis] = str(found)
    return out


def unresolved(cell: Cell, releases_of: Callable[[str], Sequence[Version]]) -> str | None:
    """Why a cell has nothing to install today though its file is right: it asks for `pre`, and the index has no
    pre-release newer than every release (`no pre-release of transformers newer than 5.24.0 on the index`)."""
    for axis, value in cell.axes:
        if value == PRE and prerelease.newest(releases_of(axis)) is None:
            return prerelease.missing(axis, releases_of(axis))
    return None


def sweep(entry: Sweep, versions: Sequence[Version], declared: str | None = None) -> list[Version]:
    """The releases a sweep stands for, oldest first: every release in its range, or the newest of every minor;
    pre-releases only with `pre`. A local build beside its public release (2.13.0+cpu, 2.13.0) is one release.
    A sweep of the declared range sweeps `declared` (a specifier), and a minor sweep of it adds the lowest release
    it allows."""
    allowed = SpecifierSet(declared or "") if entry.declared else axis_specifier(entry.range)
    inside = list(allowed.filter(versions, prereleases=entry.pre))
    newest: dict[object, Version] = {}
    for version in inside:
        key = version.release[:2] if entry.each == "minor" else Version(version.public)
        newest[key] = max(newest.get(key, version), version)
    lowest = [min(inside)] if entry.declared and inside else []
    return sorted(set(newest.values()) | set(lowest))


def expansions(
    spec: MatrixSpec,
    releases_of: Callable[[str], Sequence[Version]],
    declared: Sequence[Declared] = (),
) -> list[tuple[str, Sweep, list[Version]]]:
    """(package, sweep, its releases) for every sweep of `spec`; a sweep that cannot be listed or is empty, or
    sweeps a declared range that no requirement declares, is a problem of the file (MatrixError), said in one line
    naming the key. `declared`: what the requirements declare (declared_ranges); the first for a package counts."""
    ranges: dict[str, str] = {}
    for d in declared:
        ranges.setdefault(d.package, d.specifier)
    found, problems = [], []
    for axis in spec.axes:
        for index, entry in enumerate(axis.values):
            if not isinstance(entry, Sweep):
                continue
            where = f"{spec.path}: {dotted('axes', axis.package)}[{index}] = {show(str(entry))}"
            if entry.declared and axis.package not in ranges:
                said = ", ".join(spec.requirements)
                problems.append(f"{where}: none of the requirements declares {axis.package} ({said})")
                continue
            try:
                versions = releases_of(axis.package)
            except ResolveError as exc:
                problems.append(f"{where}: cannot list the releases of {axis.package}: {exc}")
                continue
            swept = sweep(entry, versions, ranges.get(axis.package))
            if not swept:
                newest = f"the newest is {versions[-1]}" if versions else "there is none"
                problems.append(f"{where}: no release of {axis.package} in it ({newest})")
            found.append((axis.package, entry, swept))
    if problems:
        raise MatrixError(problems)
    return found


def expand(
    spec: MatrixSpec, releases_of: Callable[[str], Sequence[Version]], declared: Sequence[Declared] = ()
) -> MatrixSpec:
    """`spec` with every sweep replaced by the releases it stands for (exact versions, so each release's cell has
    a stable id of its own); a release that another value of the axis already names is listed once."""
    return with_releases(spec, expansions(spec, releases_of, declared))


def with_releases(spec: MatrixSpec, expanded: Sequence[tuple[str, Sweep, Sequence[Version]]]) -> MatrixSpec:
    """`spec` with every sweep replaced by the releases `expanded` (its `expansions`) lists for it."""
    if not spec.sweeps:
        return spec
    swept = {(package, entry): releases for package, entry, releases in expanded}
    axes = []
    for axis in spec.axes:
        values: list[str] = []
        for entry in axis.values:
            values += [str(v) for v in swept[axis.package, entry]] if isinstance(entry, Sweep) else [entry]
        axes.append(replace(axis, values=tuple(dict.fromkeys(values))))
    return replace(spec, axes=tuple(axes))


@dataclass(frozen=True)
class Checked:
    """What checking matrix files against the index says: lines to show, warnings, and problems (bad input)."""

    lines: tuple[str, ...]
    warnings: tuple[str, ...]
    problems: tuple[str, ...]


def validate(specs: Sequence[MatrixSpec], environ: Mapping[str, str], offline: bool = False) -> Checked:
    """Every axis value of every spec resolved against the index (unless `offline`): per file its cells and what
    each value resolves to. A value that no release matches is a problem; an index that cannot be read, a warning."""
    lines: list[str] = []
    warnings: list[str] = []
    problems: list[str] = []
    for spec in specs:
        if offline:
            count = "sweeps, listed from the package index" if spec.sweeps else plural(len(cells(spec)), "cell")
            lines.append(f"{display_path(spec.path)}: {count}")
            continue
        releases_of = lookup(environ, spec.exclude_newer)
        try:
            declared = declared_ranges(spec, metadata_reader(environ, spec.exclude_newer))
            expanded = expand(spec, releases_of, declared)
            said, found = check_axes(expanded, releases_of)
        except ResolveError as exc:
            warnings.append(f"axes not checked against the package index: {exc} (--offline skips it)")
            continue
        except MatrixError as exc:
            problems += exc.problems
            continue
        lines += [f"{display_path(spec.path)}: {plural(len(cells(expanded)), 'cell')}", *(f"  {s}" for s in said)]
        problems += found
    return Checked(tuple(lines), tuple(warnings), tuple(problems))
