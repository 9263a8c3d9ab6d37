"""Axis values → releases on the package index that uv is configured with. Host side: standard library + packaging.

    releases("transformers")          the versions uv could install: the index (UV_DEFAULT_INDEX, UV_INDEX_URL, else
                                      PyPI) and the local find-links folders (UV_FIND_LINKS, else PIP_FIND_LINKS);
                                      releases whose every file is yanked are left out
    resolve("5.x", versions)          the newest release an axis value allows, or None

Reading the index's answer is pure (`parse_json`, `parse_html`, `versions_in`) and tested on recorded answers;
`fetch` is the one network call.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from compat_matrix.envs import uv_environment
from compat_matrix.spec import PYTHON, MatrixSpec, axis_specifier, dotted, show

PYPI = "https://pypi.org/simple/"
ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
TIMEOUT = 30.0  # seconds for one answer of the index


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


def parse_json(text: str, package: str) -> set[Version]:
    """A PEP 691 project page: the versions with at least one file that is not yanked."""
    files = json.loads(text).get("files", [])
    return versions_in((f["filename"] for f in files if not f.get("yanked")), package)


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


def releases(package: str, environ: Mapping[str, str] = os.environ, get: Callable = fetch) -> tuple[Version, ...]:
    """Every release of `package` that uv could install here, oldest first."""
    where = sources(environ)
    text = get(f"{where.index}{canonicalize_name(package)}/")
    found: set[Version] = set()
    try:
        if text is not None:
            found = parse_json(text, package) if text.lstrip().startswith("{") else parse_html(text, package)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ResolveError(f"{where.index}: unreadable answer for {package} ({type(exc).__name__}: {exc})") from None
    for folder in where.find_links:
        try:
            found |= versions_in((p.name for p in Path(folder).iterdir()), package)
        except OSError:
            continue
    return tuple(sorted(found))


def resolve(value: str, versions: Sequence[Version]) -> Version | None:
    """The newest of `versions` that the axis value allows; pre-releases only when asked for or nothing else fits,
    as installers choose."""
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
        lines.append(f"{axis.package}: " + ", ".join(f"{value} → {version}" for value, version in resolved))
        newest = f"the newest is {versions[-1]}" if versions else "there is none"
        problems += [
            f"{spec.path}: {dotted('axes', axis.package)} = {show(value)}: no release of {axis.package} matches "
            f"({newest})"
            for value, version in resolved
            if version is None
        ]
    return lines, problems
