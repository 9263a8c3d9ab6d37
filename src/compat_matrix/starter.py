"""`compat-matrix init PACKAGE [--from PATH]`: a starter matrix file, from a package's name to a report in two
commands. Host side: standard library and packaging; the package is looked into in an environment of its own.

    plan_start(asked, environ)       the requirement, what it declares, the axes (the declared range swept, torch
                                     pinned as the machine allows) and the cell to look into the package in
    look(start, envdir, log)         that cell's environment installed (stamped as the cell's own, which the run
                                     then shares), and the classes found there (runner --discover)
    text(start, found)               the matrix file
    init(asked, environ, log)        all of it, the file written and validated; the command that runs it
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from compat_matrix import __version__, envs, resolve
from compat_matrix.cells import ENVIRONMENTS_IGNORED, Cell, cells, ignore_housekeeping, reports_folder
from compat_matrix.exits import BadInput
from compat_matrix.results import Discovery
from compat_matrix.spec import DECLARED, Axis, MatrixError, MatrixSpec, Sweep, display_path, load

FLOOR = ">=4.57"  # what a package that declares no lower bound on transformers is swept from
DISCOVER_TIMEOUT = 900.0  # seconds to import the package and look into it


@dataclass(frozen=True)
class Asked:
    """What `compat-matrix init` is asked, as typed."""

    package: str  # a distribution name (with --from: the checkout's, or what to call the matrix)
    source: Path | None = None  # --from: a local checkout to install instead of the index's release
    transformers: tuple[str, ...] = ()  # --transformers: axis values instead of the declared range ("declared": it)
    extra: tuple[str, ...] = ()  # --extra: what the package imports without declaring it
    output: Path | None = None  # default matrix/<name>.toml below the working directory
    force: bool = False


@dataclass(frozen=True)
class Start:
    """Everything the file says but its subjects, and the cell whose environment they are found in."""

    asked: Asked
    output: Path
    requirement: str  # as written in the file: a pinned release, or a path relative to the file's folder
    metadata: resolve.Metadata
    spec: MatrixSpec  # the file's, subjects aside, sweeps expanded
    axes: tuple[Axis, ...]  # as written (sweeps unexpanded)
    cells: tuple[tuple[Cell, Mapping[str, str]], ...]  # where to look into the package, in order, with their pins
    declared: str | None  # what the package declares for transformers; None: nothing
    comments: Mapping[str, str] = field(default_factory=dict)  # per key of the file, why it says what it says


def plan_start(asked: Asked, environ: Mapping[str, str] = os.environ, read: Callable | None = None) -> Start:
    """The requirement (a local path, else the package's newest release), what it declares for transformers and
    torch, the axes and the cell to look into the package in. BadInput when the package has no release, the
    checkout does not exist, or the file is there already."""
    try:
        wanted = Requirement(asked.package)
    except InvalidRequirement as exc:
        raise BadInput([f"{asked.package!r}: not a package name or requirement ({exc})"]) from None
    name = canonicalize_name(wanted.name)
    output = (asked.output or Path.cwd() / "matrix" / f"{name}.toml").resolve()
    if output.exists() and not asked.force:
        raise BadInput([f"{display_path(output)}: exists already (--force writes over it)"])
    releases_of = resolve.lookup(environ)
    if asked.source is not None:
        source = asked.source.expanduser().resolve()
        if not (source / "pyproject.toml").is_file() and not (source / "setup.py").is_file():
            raise BadInput([f"--from {asked.source}: no pyproject.toml or setup.py there"])
        installed, written = str(source), _relative(source, output.parent)
    else:
        try:
            versions = list(wanted.specifier.filter(releases_of(name)))
        except resolve.ResolveError as exc:
            raise BadInput([f"{asked.package}: cannot list its releases: {exc}"]) from None
        if not versions:
            raise BadInput([f"{asked.package}: no such release on the package index"])
        installed = written = f"{name}=={max(versions)}"
    try:
        metadata = (read or resolve.metadata_reader(environ))(installed)
    except resolve.ResolveError as exc:
        raise BadInput([f"{written}: cannot read its metadata: {exc}"]) from None
    declared = resolve.declared_by(metadata.requires, "transformers")
    torch, torch_why = torch_pin(metadata, environ, releases_of)
    who = f"{metadata.name} {metadata.version or ''}".strip()
    comments = {"torch": torch_why}
    if asked.transformers:
        values: tuple[str | Sweep, ...] = tuple(
            Sweep("minor", DECLARED) if v == DECLARED else v for v in asked.transformers
        )
        comments["transformers"] = f"{who} declares transformers{declared or ' (nothing)'}; tested as asked"
        if DECLARED in asked.transformers and declared is None:
            raise BadInput([f"--transformers declared: {who} declares nothing for transformers"])
    elif declared and any(s.operator in (">", ">=", "==", "~=", "===") for s in SpecifierSet(declared)):
        values = (Sweep("minor", DECLARED),)
        comments["transformers"] = (
            f"{who} declares transformers{declared}: its lowest allowed release and the newest of every minor"
        )
    else:
        values = (Sweep("minor", FLOOR),)
        comments["transformers"] = (
            f"{who} declares no lower bound on transformers: every minor {FLOOR} (widen it to test older ones)"
        )
    axes = (Axis("transformers", values), Axis("torch", (torch,)))
    requires = {"transformers": declared, "torch": resolve.declared_by(metadata.requires, "torch")}
    overrides = lifted(axes, requires, releases_of)
    if overrides:
        comments["overrides"] = f"the releases tested lie outside what {who} declares: its cap lifted for each cell"
    name = canonicalize_name(metadata.name)
    draft = MatrixSpec(output, name, (installed,), axes, (), extra_requirements=asked.extra, overrides=overrides)
    try:
        found = resolve.declared_ranges(draft, lambda requirement: metadata)
        spec = resolve.expand(draft, releases_of, found)
    except MatrixError as exc:
        raise BadInput(exc.problems) from None
    allowed = SpecifierSet(declared or "")
    ordered = sorted(cells(spec), key=lambda c: (allowed.contains(_newest(c, releases_of)), _newest(c, releases_of)))
    looks = tuple((c, resolve.pins(c, releases_of)) for c in reversed(ordered))
    return Start(asked, output, written, metadata, spec, axes, looks, declared, comments)


def _relative(path: Path, folder: Path) -> str:
    """`path` as a local requirement of a matrix file in `folder`: `./`, `../`, or absolute."""
    text = os.path.relpath(path, folder)
    if text == ".":
        return "./"
    if text.startswith(".."):
        return text if text.endswith("/") else f"{text}/"
    return f"./{text}"


def _newest(cell: Cell, releases_of: Callable[[str], Sequence[Version]]) -> Version:
    value = cell.requested["transformers"]
    return resolve.resolve(value, releases_of("transformers")) or Version("0")


def torch_pin(
    metadata: resolve.Metadata, environ: Mapping[str, str], releases_of: Callable[[str], Sequence[Version]]
) -> tuple[str, str]:
    """The torch release to pin, and why: the newest that a local wheel offers (PIP_FIND_LINKS, UV_FIND_LINKS) and
    the package allows, else the newest on the index it allows."""
    allowed = SpecifierSet(resolve.declared_by(metadata.requires, "torch") or "")
    local: set[Version] = set()
    for folder in resolve.sources(environ).find_links:
        try:
            local |= resolve.versions_in((p.name for p in Path(folder).iterdir()), "torch")
        except OSError:
            continue
    fits = [v for v in local if allowed.contains(Version(v.public))]
    if fits or local:
        chosen = max(fits or local)
        return chosen.public, (
            "torch as this machine offers it (a local wheel): pinned, or each cell downloads a CUDA build of several GB"
        )
    index = list(allowed.filter(releases_of("torch")))
    if not index:
        raise BadInput([f"{metadata.name}: no torch release allows torch{allowed}"])
    return str(max(index)), "torch pinned: pin the build your machines install (see README)"


def lifted(
    axes: Sequence[Axis], declared: Mapping[str, str | None], releases_of: Callable[[str], Sequence[Version]]
) -> tuple[str, ...]:
    """The axis packages that some tested release lies outside the package's own requirement for: their caps are
    lifted (`overrides`), so that those cells install what they test."""
    out = []
    for axis in axes:
        allowed = SpecifierSet(declared.get(axis.package) or "")
        values = [v for v in axis.values if isinstance(v, str)]
        releases = [resolve.resolve(v, releases_of(axis.package)) for v in values]
        if any(r is not None and not allowed.contains(Version(r.public), prereleases=True) for r in releases):
            out.append(axis.package)
    return tuple(out)


@dataclass(frozen=True)
class Found:
    """What looking into the package said: its version there, and per top-level module what was found, with the
    overrides of each class found ((name, "method" or "attribute"))."""

    versions: Mapping[str, str]
    discoveries: tuple[Discovery, ...]
    overrides: Mapping[str, tuple[tuple[str, str], ...]]

    @property
    def subjects(self) -> list[str]:
        return [t for d in self.discoveries for t in d.subjects]


def look(start: Start, envdir: Path, log: Callable[[str], None] = print) -> Found:
    """The classes the package defines that subclass transformers and override something, found in a cell's
    environment (installed as the cell installs it, so the run shares it): the newest release the package allows
    first, then the others, until one imports the package. BadInput when none can be installed."""
    reports = reports_folder(start.output, Path.cwd())
    ignore_housekeeping(Path(envdir), ENVIRONMENTS_IGNORED)
    tried: list[str] = []
    found: Found | None = None
    for cell, pins in start.cells:
        shown = ", ".join(f"{a}=={pins[a]}" if a in pins else p for a, p in zip(cell.requested, cell.pins, strict=True))
        home = Path(envdir).resolve() / f"init-{start.spec.name}-{cell.filename.removesuffix('.json')}"
        home.parent.mkdir(parents=True, exist_ok=True)
        log(f"installing {start.requirement} with {shown} into {display_path(home)}")
        python, why = envs.prepared(home, start.spec, cell, reports, pins, log=lambda line: None)
        if why:
            tried.append(f"with {shown}: {why}")
            continue
        log(f"looking into {start.metadata.name} with {shown}")
        found = _discovered(start, python, home)
        if found.subjects:
            return found
        tried.append(f"with {shown}: {_nothing(found)}")
    if found is None:
        raise BadInput([f"{start.requirement}: cannot be installed: {'; '.join(tried)}"])
    hint = declared_hint(start.asked.transformers, start.declared, start.metadata.name)
    raise BadInput([f"{start.metadata.name}: nothing to audit: {'; '.join(tried)}{hint}"])


def declared_hint(transformers: tuple[str, ...], declared: str | None, name: str) -> str:
    """Where the releases asked for (`--transformers`) leave out what the package declares: how to test its own
    range too, and see where it breaks beyond it."""
    if not transformers or declared is None or DECLARED in transformers:
        return ""
    asked = " ".join(f"--transformers {value}" for value in transformers)
    return f" ({name} declares transformers{declared}: --transformers declared {asked} tests that range too)"


def _nothing(found: Found) -> str:
    skipped = [f"{m} ({why})" for d in found.discoveries for m, why in d.skipped]
    said = f"could not import {', '.join(skipped)}" if skipped else "no class to audit"
    reasons = [why for d in found.discoveries for _, why in d.skipped]
    missing = sorted({m.group(1) for why in reasons if (m := _MISSING.search(why))})
    hint = f" (if it imports {', '.join(missing)} without declaring it: --extra {' --extra '.join(missing)})"
    return said + (hint if missing else "")


_MISSING = re.compile(r"No module named '([\w]+)")


def _discovered(start: Start, python: Path, home: Path) -> Found:
    out = home / "compat-matrix-discovered.json"
    out.unlink(missing_ok=True)
    command = [str(python), "-m", "compat_matrix.runner", "--discover", start.metadata.name, str(out)]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, env=envs.runner_environment(home), timeout=DISCOVER_TIMEOUT
        )
    except subprocess.TimeoutExpired:
        raise BadInput([f"{start.metadata.name}: looking into it took more than {DISCOVER_TIMEOUT:g} s"]) from None
    if done.returncode != 0 or not out.exists():
        tail = envs.installer_reason(done.stderr.strip().splitlines()[-1]) if done.stderr.strip() else ""
        raise BadInput([f"{start.metadata.name}: could not be looked into ({tail or done.returncode})"])
    return found_from(json.loads(out.read_text(encoding="utf-8")))


def found_from(data: Mapping[str, Any]) -> Found:
    overrides = {t: tuple((n, k) for n, k in pairs) for item in data["found"] for t, pairs in item["overrides"].items()}
    discoveries = tuple(Discovery.from_json(item["discovery"]) for item in data["found"])
    return Found(dict(data["versions"]), discoveries, overrides)


def _quoted(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a TOML basic string


def _sweep(value: str | Sweep) -> str:
    if isinstance(value, str):
        return _quoted(value)
    return f"{{ each = {_quoted(value.each)}, range = {_quoted(value.range)} }}"


def text(start: Start, found: Found, command: str) -> str:
    """The matrix file: the requirement, the axes with why each says what it says, a subject per class found (its
    overrides in a comment), and what was found but is not audited."""
    meta, comments = start.metadata, start.comments
    where = f"transformers {found.versions.get('transformers', '?')}"
    lines = [
        f"# A starter matrix for {meta.name} {found.versions.get(meta.name, meta.version or '')}".rstrip()
        + f", written by `compat-matrix init` {__version__}.",
        f"# Run it: {command}",
        "[matrix]",
        f"name = {_quoted(start.spec.name)}",
        f"requirements = [{_quoted(start.requirement)}]",
    ]
    if start.spec.extra_requirements:
        lines += [
            f"# what {meta.name} imports without declaring it",
            f"extra_requirements = [{', '.join(map(_quoted, start.spec.extra_requirements))}]",
        ]
    if start.spec.overrides:
        lines += [f"# {comments['overrides']}", f"overrides = [{', '.join(map(_quoted, start.spec.overrides))}]"]
    if not start.spec.extra_requirements:
        lines.append("# extra_requirements = []   what the package imports without declaring it")
    lines += ["", "[axes]"]
    for axis in start.axes:
        if axis.package in comments:
            lines.append(f"# {comments[axis.package]}")
        lines.append(f"{axis.package} = [{', '.join(map(_sweep, axis.values))}]")
    lines += ["", f"# Each class {meta.name} defines that subclasses transformers and overrides something of it"]
    lines += [f"# (found with {where}); methods left out: every override is audited."]
    for target in found.subjects:
        said = ", ".join(f"{n}" + (" (attribute)" if k == "attribute" else "") for n, k in found.overrides[target])
        lines += ["", "[[subjects]]", f"target = {_quoted(target)}", f"# overrides: {said}"]
    unaudited = [(t, kind) for d in found.discoveries for t, kind in d.unaudited]
    skipped = [(m, why) for d in found.discoveries for m, why in d.skipped]
    if unaudited:
        lines += ["", "# Found, not audited (no probe family covers their kind):"]
        lines += [f"#   {t} ({kind})" for t, kind in unaudited]
    if skipped:
        lines += ["", f"# Could not be imported with {where} (exclude them, or add what they need):"]
        lines += [f"#   {m}: {why}" for m, why in skipped]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Written:
    path: Path
    subjects: tuple[str, ...]
    validated: tuple[str, ...]  # what `validate` says of the file
    command: str


def init(
    asked: Asked, envdir: Path, environ: Mapping[str, str] = os.environ, log: Callable[[str], None] = print
) -> Written:
    """The starter matrix file for `asked.package`, written and validated."""
    start = plan_start(asked, environ)
    found = look(start, envdir, log)
    command = f"compat-matrix run {display_path(start.output)}"
    start.output.parent.mkdir(parents=True, exist_ok=True)
    start.output.write_text(text(start, found, command), encoding="utf-8")
    checked = resolve.validate([load(start.output)], environ)
    if checked.problems:
        raise BadInput(list(checked.problems))
    log(f"{start.metadata.name}: {len(found.subjects)} to audit: {', '.join(found.subjects)}")
    return Written(start.output, tuple(found.subjects), (*checked.warnings, *checked.lines), command)
