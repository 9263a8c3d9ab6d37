"""Axis values → releases on the package index that uv is configured with. Host side: standard library + packaging.

    releases("transformers")          the versions uv could install: the index (UV_DEFAULT_INDEX, UV_INDEX_URL, else
                                      PyPI) and the local find-links folders (UV_FIND_LINKS, else PIP_FIND_LINKS);
                                      releases whose every file is yanked are left out; with `before`, as of then
                                      (PEP 700 upload times, as uv's --exclude-newer; files without one count)
    lookup(environ, before)           `releases` for one run: the index's answer is kept in a small file for a few
                                      minutes (`cache_folder`), so that `nox -l` and the run that follows it ask
                                      the index once
    resolve("5.x", versions)          the newest release an axis value allows, or None; for `pre`, the newest
                                      pre-release where it is newer than every release (compat_matrix.host.prerelease)
    declared_ranges(spec, read)       the range each requirement declares for each axis swept over `range = "declared"`,
                                      read from its metadata (`requires`: the index's, or a local checkout's)
    expand(spec, releases_of)         the spec with every sweep replaced by the releases it stands for
    pins(cell, releases_of)           the release each ranged axis value of a cell resolves to today
    validate(specs, environ)          every axis value of matrix files resolved, for `compat-matrix validate`

Only the process that plans a run asks (compat_matrix.host.plan); the processes it starts read the plan.

Reading the index's answer is pure (`uploads_json`, `parse_html`, `versions_in`, `sweep`) and tested on recorded
answers; `fetch` is the one network call.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import hashlib
import json
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from html.parser import HTMLParser
from pathlib import Path
from typing import NamedTuple

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from compat_matrix.host import prerelease
from compat_matrix.host.cells import Cell, cells
from compat_matrix.host.exits import plural
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
    is_local,
    show,
)
from compat_matrix.host.uv import installer_reason, uv_binary, uv_environment
from compat_matrix.shared.results import write_json_atomic

PYPI = "https://pypi.org/simple/"
ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
TIMEOUT = 30.0  # seconds for one answer of the index
CACHE_SECONDS = 600.0  # how long an answer of the index is taken as today's
CACHE_VARIABLE = "COMPAT_MATRIX_CACHE"  # the folder of compat-matrix's own cache


class ResolveError(Exception):
    """The package index could not be read."""


@dataclass(frozen=True)
class Sources:
    index: str  # the simple API's base URL, ending in "/"
    find_links: tuple[str, ...]  # local folders of wheels and source archives


def sources(environ: Mapping[str, str]) -> Sources:
    """Where uv looks for packages, as far as its environment variables say."""
    index = environ.get("UV_DEFAULT_INDEX") or environ.get("UV_INDEX_URL") or PYPI
    links = {**environ, **uv_environment(environ)}.get("UV_FIND_LINKS", "")
    folders = tuple(link.strip() for link in links.split(",") if link.strip() and "://" not in link)
    return Sources(index.rstrip("/") + "/", folders)


def version_of(filename: str, package: str) -> Version | None:
    """The version of `package` a wheel or source archive holds, if the file is one of `package`'s."""
    name = filename.rsplit("/", 1)[-1].split("#", 1)[0]
    try:
        if name.endswith(".whl"):
            project, version, _, _ = parse_wheel_filename(name)
        elif name.endswith((".tar.gz", ".zip")):
            project, version = parse_sdist_filename(name)
        else:
            return None
    except (InvalidWheelFilename, InvalidSdistFilename):
        return None
    return version if project == canonicalize_name(package) else None


def versions_in(filenames: Iterable[str], package: str) -> set[Version]:
    return {v for name in filenames if (v := version_of(name, package)) is not None}


Uploads = dict[Version, "datetime.datetime | None"]  # each release, and when its first file was uploaded if known


def uploads_json(text: str, package: str) -> Uploads:
    """A PEP 691 project page: the versions with at least one file that is not yanked, each with the upload time of
    its earliest such file (PEP 700 `upload-time`; None when the index does not say)."""
    found: Uploads = {}
    for file in json.loads(text).get("files", []):
        version = None if file.get("yanked") else version_of(file["filename"], package)
        if version is None:
            continue
        uploaded = _moment(file.get("upload-time"))
        known = found.get(version, uploaded)
        found[version] = None if uploaded is None or known is None else min(uploaded, known)
    return found


def _moment(text: str | None) -> datetime.datetime | None:
    return datetime.datetime.fromisoformat(text) if isinstance(text, str) else None


def parse_json(text: str, package: str) -> set[Version]:
    """A PEP 691 project page: the versions with at least one file that is not yanked."""
    return set(uploads_json(text, package))


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.files: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "a" and "data-yanked" not in values and values.get("href"):
            self.files.append(urllib.parse.unquote(urllib.parse.urlsplit(values["href"]).path))


def parse_html(text: str, package: str) -> set[Version]:
    """A PEP 503 project page: the versions with at least one file that is not yanked (`data-yanked`)."""
    anchors = _Anchors()
    anchors.feed(text)
    return versions_in(anchors.files, package)


def fetch(url: str) -> str | None:
    """The index's project page at `url` (None when the index has no such project). The one network call."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "file":  # a static index on disk: a folder per project with its index.html
        path = Path(urllib.request.url2pathname(parts.path))
        path = path / "index.html" if path.is_dir() else path
        try:
            return path.read_text(encoding="utf-8")
        except OSError:
            return None
    request = urllib.request.Request(url, headers={"Accept": ACCEPT})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
            return answer.read().decode("utf-8")
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise ResolveError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError, UnicodeDecodeError) as exc:
        raise ResolveError(f"{url}: {getattr(exc, 'reason', exc)}") from None


def index_uploads(package: str, environ: Mapping[str, str] = os.environ, get: Callable = fetch) -> Uploads:
    """The releases of `package` on the index uv uses, with their upload times: one answer of the index."""
    index = sources(environ).index
    text = get(f"{index}{canonicalize_name(package)}/")
    try:
        if text is None:
            return {}
        return (
            uploads_json(text, package) if text.lstrip().startswith("{") else dict.fromkeys(parse_html(text, package))
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ResolveError(f"{index}: unreadable answer for {package} ({type(exc).__name__}: {exc})") from None


def cache_folder(environ: Mapping[str, str]) -> Path:
    """COMPAT_MATRIX_CACHE, else compat-matrix/ in the user's cache folder (XDG_CACHE_HOME, else ~/.cache)."""
    if environ.get(CACHE_VARIABLE):
        return Path(environ[CACHE_VARIABLE])
    return Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "compat-matrix"


def cached_uploads(
    package: str,
    environ: Mapping[str, str] = os.environ,
    get: Callable = fetch,
    folder: Path | None = None,
    now: Callable[[], float] = time.time,
) -> Uploads:
    """`index_uploads`, taken from a file in `folder` while it is younger than CACHE_SECONDS."""
    folder = folder or cache_folder(environ) / "index"
    index = sources(environ).index
    path = folder / (hashlib.sha256(f"{index}\0{canonicalize_name(package)}".encode()).hexdigest()[:16] + ".json")
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
        if kept["index"] == index and 0 <= now() - kept["fetched"] < CACHE_SECONDS:
            return {Version(v): _moment(t) for v, t in kept["releases"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    fetched = now()
    found = index_uploads(package, environ, get)
    releases = {str(v): t.isoformat() if t else None for v, t in sorted(found.items())}
    with contextlib.suppress(OSError):  # a cache that cannot be written only costs another answer of the index
        write_json_atomic(path, {"index": index, "package": package, "fetched": fetched, "releases": releases})
    return found


def releases(
    package: str,
    environ: Mapping[str, str] = os.environ,
    get: Callable = fetch,
    before: datetime.datetime | None = None,
    uploads: Callable[..., Uploads] = index_uploads,
) -> tuple[Version, ...]:
    """Every release of `package` that uv could install here, oldest first; with `before`, those it could install
    with `--exclude-newer` then (a file without an upload time counts, as uv counts it)."""
    found = {v for v, at in uploads(package, environ, get).items() if before is None or at is None or at < before}
    for folder in sources(environ).find_links:
        try:
            found |= versions_in((p.name for p in Path(folder).iterdir()), package)
        except OSError:
            continue
    return tuple(sorted(found))


def lookup(environ: Mapping[str, str], exclude_newer: str | None = None) -> Callable[[str], tuple[Version, ...]]:
    """`releases` for one run, as of `exclude_newer` (a spec's timestamp): each package asked once per process,
    and the index's answer shared through the cache folder for CACHE_SECONDS."""
    before = datetime.datetime.fromisoformat(exclude_newer) if exclude_newer else None

    @functools.cache
    def releases_of(package: str) -> tuple[Version, ...]:
        return releases(package, environ, before=before, uploads=cached_uploads)

    return releases_of


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


class Metadata(NamedTuple):
    """What a distribution's metadata says: its name, version (None where a checkout's is dynamic) and the
    `Requires-Dist` lines."""

    name: str
    version: str | None
    requires: tuple[str, ...]


def declared_ranges(spec: MatrixSpec, read: Callable[[str], Metadata]) -> list[Declared]:
    """For each axis that sweeps `range = "declared"`, what each of the matrix's requirements declares for it, in
    the file's order (the first is the subject's distribution's). `read`: a requirement's metadata (`requires`);
    a requirement that cannot be read is a problem of the file (MatrixError)."""
    packages = [a.package for a in spec.axes for v in a.values if isinstance(v, Sweep) and v.declared]
    if not packages:
        return []
    found, problems = [], []
    for requirement in spec.requirements:
        try:
            metadata = read(requirement)
        except ResolveError as exc:
            problems.append(f"{spec.path}: matrix.requirements: {show(requirement)}: cannot read its metadata: {exc}")
            continue
        for package in dict.fromkeys(packages):
            specifier = declared_by(metadata.requires, package)
            if specifier is not None:
                found.append(Declared(package, metadata.name, metadata.version, specifier))
    if problems:
        raise MatrixError(problems)
    return found


def naming(requires: Iterable[str], package: str) -> Iterator[Requirement]:
    """The `Requires-Dist` lines that name `package`, parsed (lines that do not parse skipped)."""
    for line in requires:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if canonicalize_name(requirement.name) == canonicalize_name(package):
            yield requirement


def declared_by(requires: Iterable[str], package: str) -> str | None:
    """The specifier the `Requires-Dist` lines declare for `package` (all of them together, extras aside), or None
    where none names it."""
    found = None
    for requirement in naming(requires, package):
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        found = (found or SpecifierSet()) & requirement.specifier
    return None if found is None else str(found)


def declared_for(requires: Iterable[str], package: str) -> list[str]:
    """The extras of the package under which its metadata requires `package`."""
    extras = [
        extra
        for requirement in naming(requires, package)
        if requirement.marker is not None
        for extra in re.findall(r"""extra\s*==\s*["']([^"']+)["']""", str(requirement.marker))
    ]
    return list(dict.fromkeys(extras))


def parse_metadata(text: str) -> Metadata:
    """A METADATA or PKG-INFO file (RFC 822 headers): Name, Version and Requires-Dist."""
    import email.parser

    headers = email.parser.HeaderParser().parsestr(text)
    return Metadata(str(headers["Name"]), headers["Version"], tuple(headers.get_all("Requires-Dist") or ()))


def local_metadata(path: Path) -> Metadata | None:
    """A local checkout's metadata from its pyproject.toml, where its name and dependencies are written there (not
    dynamic); None otherwise."""
    import tomllib

    try:
        project = tomllib.loads((Path(path) / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    except (OSError, KeyError, TypeError, tomllib.TOMLDecodeError):
        return None
    if "dependencies" in project.get("dynamic", ()) or "name" not in project:
        return None
    return Metadata(project["name"], project.get("version"), tuple(project.get("dependencies", ())))


def requires(requirement: str, environ: Mapping[str, str] = os.environ, exclude_newer: str | None = None) -> Metadata:
    """The metadata of the distribution a requirement names, as the cells would install it: a local checkout's
    pyproject.toml, else the metadata uv reads (the index's, or a build of a source archive or checkout), from an
    install of it alone (`--no-deps`) into a folder of its own. ResolveError when uv cannot."""
    import subprocess
    import tempfile

    if is_local(requirement) and (static := local_metadata(Path(requirement))) is not None:
        return static
    newer = [f"--exclude-newer={exclude_newer}"] if exclude_newer else []
    with tempfile.TemporaryDirectory(prefix="compat-matrix-metadata-") as folder:
        command = [uv_binary(), "pip", "install", "--quiet", "--no-deps", "--target", folder, *newer, requirement]
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, env={**environ, **uv_environment(environ)}, timeout=300
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ResolveError(f"uv: {exc}") from None
        if done.returncode != 0:
            raise ResolveError(installer_reason(done.stderr + done.stdout))
        for path in sorted(Path(folder).glob("*.dist-info/METADATA")):
            return parse_metadata(path.read_text(encoding="utf-8"))
    raise ResolveError(f"uv installed no distribution for {requirement}")


def metadata_reader(environ: Mapping[str, str], exclude_newer: str | None = None) -> Callable[[str], Metadata]:
    """`requires` for one run: each requirement read once per process; an exact pin's answer kept in the cache
    folder for good (its metadata never changes), any other for CACHE_SECONDS."""

    @functools.cache
    def read(requirement: str) -> Metadata:
        if is_local(requirement):
            return requires(requirement, environ, exclude_newer)
        folder = cache_folder(environ) / "metadata"
        key = hashlib.sha256(f"{sources(environ).index}\0{requirement}\0{exclude_newer}".encode()).hexdigest()[:16]
        path = folder / f"{key}.json"
        pins = list(Requirement(requirement).specifier)
        forever = len(pins) == 1 and pins[0].operator in ("==", "===") and "*" not in pins[0].version
        try:
            kept = json.loads(path.read_text(encoding="utf-8"))
            if forever or 0 <= time.time() - kept["fetched"] < CACHE_SECONDS:
                return Metadata(kept["name"], kept["version"], tuple(kept["requires"]))
        except (OSError, ValueError, KeyError, TypeError):
            pass
        found = requires(requirement, environ, exclude_newer)
        with contextlib.suppress(OSError):
            write_json_atomic(path, {"fetched": time.time(), **found._asdict(), "requires": list(found.requires)})
        return found

    return read
