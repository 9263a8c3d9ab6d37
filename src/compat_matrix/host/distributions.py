"""What a distribution declares, read from its metadata (the index's, a build's, or a local checkout's
pyproject.toml): its name, version and requirements, and the range it declares for each axis package.

    declared_ranges(spec, read)       the range each requirement declares for each axis swept over `range = "declared"`
    metadata_reader(environ)          `requires` for one run: each requirement read once, its answer kept
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from compat_matrix.host.package_index import CACHE_SECONDS, ResolveError, cache_folder, sources
from compat_matrix.host.spec import Declared, MatrixError, MatrixSpec, Sweep, is_local, show
from compat_matrix.host.uv import installer_reason, uv_binary, uv_environment
from compat_matrix.shared.results import write_json_atomic


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
