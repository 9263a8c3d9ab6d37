"""The package index that uv is configured with, read: the releases uv could install of a package.

    releases("transformers")          the versions uv could install: the index (UV_DEFAULT_INDEX, UV_INDEX_URL, else
                                      PyPI) and the local find-links folders (UV_FIND_LINKS, else PIP_FIND_LINKS);
                                      releases whose every file is yanked are left out; with `before`, as of then
                                      (PEP 700 upload times, as uv's --exclude-newer; files without one count)
    lookup(environ, before)           `releases` for one run: the index's answer is kept in a small file for a few
                                      minutes (`cache_folder`), so that `nox -l` and the run that follows it ask
                                      the index once

Reading the index's answer is pure (`uploads_json`, `parse_html`, `versions_in`) and tested on recorded answers;
`fetch` is the one network call.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import hashlib
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping
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

from compat_matrix.host.uv import uv_environment
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
