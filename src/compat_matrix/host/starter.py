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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from compat_matrix import __version__
from compat_matrix.host import cell_run, distributions, envs, factories, package_index, resolve, uv
from compat_matrix.host.cells import Cell, cells
from compat_matrix.host.exits import BadInput
from compat_matrix.host.folders import ENVIRONMENTS_IGNORED, ignore_housekeeping, reports_folder
from compat_matrix.host.spec import DECLARED, Axis, MatrixError, MatrixSpec, Sweep, display_path, load
from compat_matrix.shared.blame import Clash
from compat_matrix.shared.results import THROUGH, Discovery, Unbuilt

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
    factory_template: bool = False  # --factory-template: also a starter factory module beside the file


@dataclass(frozen=True)
class Start:
    """Everything the file says but its subjects, and the cell whose environment they are found in."""

    asked: Asked
    output: Path
    requirement: str  # as written in the file: a pinned release, or a path relative to the file's folder
    metadata: distributions.Metadata
    spec: MatrixSpec  # the file's, subjects aside, sweeps expanded
    axes: tuple[Axis, ...]  # as written (sweeps unexpanded)
    cells: tuple[tuple[Cell, Mapping[str, str]], ...]  # where to look into the package, in order, with their pins
    declared: str | None  # what the package declares for transformers; None: nothing
    comments: Mapping[str, str] = field(default_factory=dict)  # per key of the file, why it says what it says
    added: tuple[tuple[str, str], ...] = ()  # (extra requirement, why): what init added to what was asked
    left_out: tuple[tuple[str, str, str], ...] = ()  # (transformers value, release, why): cannot be installed
    unsure: tuple[tuple[str, str, str], ...] = ()  # the same, failed for another reason than a conflict: kept
    excluded: tuple[str, ...] = ()  # releases a sweep stands for that cannot be installed: [[exclude]] tables


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
    for path in (output, *([template_path(output)] if asked.factory_template else [])):
        if path.exists() and not asked.force:
            raise BadInput([f"{display_path(path)}: exists already (--force writes over it)"])
    releases_of = package_index.lookup(environ)
    if asked.source is not None:
        source = asked.source.expanduser().resolve()
        if not (source / "pyproject.toml").is_file() and not (source / "setup.py").is_file():
            raise BadInput([f"--from {asked.source}: no pyproject.toml or setup.py there"])
        installed, written = str(source), _relative(source, output.parent)
    else:
        try:
            versions = list(wanted.specifier.filter(releases_of(name)))
        except package_index.ResolveError as exc:
            raise BadInput([f"{asked.package}: cannot list its releases: {exc}"]) from None
        if not versions:
            raise BadInput([f"{asked.package}: no such release on the package index"])
        installed = written = f"{name}=={max(versions)}"
    try:
        metadata = (read or distributions.metadata_reader(environ))(installed)
    except package_index.ResolveError as exc:
        raise BadInput([f"{written}: cannot read its metadata: {exc}"]) from None
    declared = distributions.declared_by(metadata.requires, "transformers")
    torch, torch_why = torch_pin(metadata, environ, releases_of)
    who = f"{metadata.name} {metadata.version or ''}".strip()
    comments = {"torch": torch_why}
    if asked.transformers:
        lowest = lowest_allowed(declared, releases_of) if ENDS in asked.transformers else None
        values: tuple[str | Sweep, ...] = tuple(
            dict.fromkeys(
                w
                for v in asked.transformers
                for w in ((Sweep("minor", DECLARED),) if v == DECLARED else (lowest, LATEST) if v == ENDS else (v,))
            )
        )
        said = f"declares transformers{declared}" if declared else "declares no version range for transformers"
        how = f"; tested as asked ({ENDS}: its lowest allowed release, {lowest}, and the newest)" if lowest else ""
        comments["transformers"] = f"{who} {said if declared is not None else 'does not declare transformers'}" + (
            how or "; tested as asked"
        )
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
    requires = {"transformers": declared, "torch": distributions.declared_by(metadata.requires, "torch")}
    overrides = lifted(axes, requires, releases_of)
    if overrides:
        comments["overrides"] = f"the releases tested lie outside what {who} declares: its cap lifted for each cell"
    name = canonicalize_name(metadata.name)
    draft = MatrixSpec(output, name, (installed,), axes, (), extra_requirements=asked.extra, overrides=overrides)
    try:
        found = distributions.declared_ranges(draft, lambda requirement: metadata)
        spec = resolve.expand(draft, releases_of, found)
    except MatrixError as exc:
        raise BadInput(exc.problems) from None
    allowed = SpecifierSet(declared or "")
    ordered = sorted(cells(spec), key=lambda c: (allowed.contains(_newest(c, releases_of)), _newest(c, releases_of)))
    looks = tuple((c, resolve.pins(c, releases_of)) for c in reversed(ordered))
    return Start(asked, output, written, metadata, spec, axes, looks, declared, comments)


ENDS = "ends"  # --transformers ends: the lowest release the package allows, and the newest
LATEST = "latest"


def lowest_allowed(declared: str | None, releases_of: Callable[[str], Sequence[Version]]) -> str:
    """The lowest transformers release (no pre-release) that the package's declared range allows, from FLOOR where
    it declares no lower bound. BadInput where none does."""
    bounded = declared and any(s.operator in (">", ">=", "==", "~=", "===") for s in SpecifierSet(declared))
    allowed = SpecifierSet(declared if bounded else f"{FLOOR},{declared or ''}".rstrip(","))
    try:
        found = list(allowed.filter(releases_of("transformers")))
    except package_index.ResolveError as exc:
        raise BadInput([f"--transformers {ENDS}: cannot list the releases of transformers: {exc}"]) from None
    if not found:
        raise BadInput([f"--transformers {ENDS}: no transformers release allows transformers{allowed}"])
    return str(min(found))


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
    metadata: distributions.Metadata, environ: Mapping[str, str], releases_of: Callable[[str], Sequence[Version]]
) -> tuple[str, str]:
    """The torch release to pin, and why: the newest that a local wheel offers (PIP_FIND_LINKS, UV_FIND_LINKS) and
    the package allows, else the newest on the index it allows."""
    allowed = SpecifierSet(distributions.declared_by(metadata.requires, "torch") or "")
    local: set[Version] = set()
    for folder in package_index.sources(environ).find_links:
        try:
            local |= package_index.versions_in((p.name for p in Path(folder).iterdir()), "torch")
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
    overrides: Mapping[str, tuple[tuple[str, ...], ...]]  # (name, kind) or (name, kind, the abstract base's)
    clashes: Mapping[str, Clash] = field(default_factory=dict)  # per module that could not be imported, if one
    elsewhere: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()  # (release, (module, why)): the other end
    unbuilt: tuple[Unbuilt, ...] = ()  # the classes found that the default factory could not build, and why
    uninstallable: tuple[tuple[str, str, str], ...] = ()  # (transformers value, release, why) of cells tried

    @property
    def subjects(self) -> list[str]:
        return [t for d in self.discoveries for t in d.subjects]


class NothingToAudit(BadInput):
    """Every cell that could be installed imported nothing to audit: one line saying what each found."""


def look(
    start: Start, envdir: Path, log: Callable[[str], None] = print, environ: Mapping[str, str] = os.environ
) -> tuple[Start, Found]:
    """The classes the package defines that subclass transformers and override something, found in a cell's
    environment (installed as the cell installs it, so the run shares it): the newest release the package allows
    first, then the others, until one imports the package; then the release at the axis's other end, so that an
    import that fails there is said now, not in the run. A top-level module that fails for a module the package
    does not declare gets its distribution added to the extra requirements, and is looked into again (at most
    MAX_ADDED times). Where nothing imports on the releases asked for (`--transformers`), the range the package
    declares is added to them and looked into (llm2vec: 4.43.1 … 4.44.2, beside 4.57.x and 5.x), so that the run
    says where it breaks. BadInput when none can be installed, or nothing is found to audit."""
    reports = reports_folder(start.output, Path.cwd())
    ignore_housekeeping(Path(envdir), ENVIRONMENTS_IGNORED)
    try:
        return _look(start, envdir, reports, log, environ)
    except NothingToAudit as nothing:
        wider = widened(start, environ)
        if wider is None:
            raise BadInput([*nothing.problems[:-1], nothing.problems[-1] + _hint(start)]) from None
        log(
            f"{nothing.problems[-1]}; looking in the range {start.metadata.name} declares, transformers{start.declared}"
        )
        return _look(wider, envdir, reports, log, environ)


def _hint(start: Start) -> str:
    return declared_hint(start.asked.transformers, start.declared, start.metadata.name)


def widened(start: Start, environ: Mapping[str, str]) -> Start | None:
    """The start with the package's declared range added to the releases asked for, where it declares one with a
    lower bound and they leave it out; None otherwise."""
    if not _hint(start):
        return None
    specifiers = SpecifierSet(start.declared or "")
    if not any(s.operator in (">", ">=", "==", "~=", "===") for s in specifiers):
        return None
    asked = replace(start.asked, transformers=(DECLARED, *start.asked.transformers), force=True)
    wider = plan_start(asked, environ)
    releases = ", ".join(start.asked.transformers)
    said = (
        f"{start.metadata.name} {start.metadata.version or ''} declares transformers{start.declared}; nothing to "
        f"audit could be imported with {releases} (as asked), so init added that range: the report says where it breaks"
    )
    return replace(wider, asked=start.asked, comments={**wider.comments, "transformers": said})


def _look(
    start: Start, envdir: Path, reports: Path, log: Callable[[str], None], environ: Mapping[str, str]
) -> tuple[Start, Found]:
    tried: list[str] = []
    failed: list[tuple[str, str, str]] = []  # cells that could not be installed: left out of the file
    installed = False
    for index, (cell, pins) in enumerate(start.cells):
        start, found, why = _look_into(start, cell, pins, envdir, reports, log, environ)
        if found is None:
            tried.append(why or "")
            failed.append((cell.requested.get("transformers", ""), _label((cell, pins)), why or ""))
            continue
        installed = True
        if found.subjects:
            other = other_end(start.cells, index)
            if other is None:
                return start, replace(found, uninstallable=tuple(failed))
            start, there, why = _look_into(start, *other, envdir, reports, log, environ)
            if there is None:
                failed.append((other[0].requested.get("transformers", ""), _label(other), why or ""))
                return start, replace(found, uninstallable=tuple(failed))
            return start, replace(also(found, there, _label(other)), uninstallable=tuple(failed))
        tried.append(f"with {_shown(cell, pins)}: {_nothing(found, start)}")
    if not installed:
        raise BadInput([f"{start.requirement}: cannot be installed: {'; '.join(tried)}"])
    raise NothingToAudit([f"{start.metadata.name}: nothing to audit: {'; '.join(tried)}"])


MAX_ADDED = 3  # extra requirements init adds on its own, at most, before it says what it could not import


def _shown(cell: Cell, pins: Mapping[str, str]) -> str:
    return ", ".join(f"{a}=={pins[a]}" if a in pins else p for a, p in zip(cell.requested, cell.pins, strict=True))


def _label(end: tuple[Cell, Mapping[str, str]]) -> str:
    cell, pins = end
    return f"transformers {pins.get('transformers', cell.requested.get('transformers', '?'))}"


def _look_into(
    start: Start,
    cell: Cell,
    pins: Mapping[str, str],
    envdir: Path,
    reports: Path,
    log: Callable[[str], None],
    environ: Mapping[str, str],
) -> tuple[Start, Found | None, str | None]:
    """One cell's environment installed and the package looked into there, again with each undeclared module's
    distribution added while the package's own modules fail for one: the start (with what was added), what was
    found, and why it could not be installed (None when it was). What it added that then cannot be installed is
    left out again, and what was found before it stands."""
    releases_of = package_index.lookup(environ)
    before: tuple[Start, Found] | None = None
    while True:
        shown = _shown(cell, pins)
        home = Path(envdir).resolve() / f"init-{start.spec.name}-{cell.filename.removesuffix('.json')}"
        home.parent.mkdir(parents=True, exist_ok=True)
        log(f"installing {start.requirement} with {shown} into {display_path(home)}")
        python, why = envs.prepared(home, start.spec, cell, reports, pins, log=lambda line: None)
        if why and before is not None:
            added = ", ".join(r for r, _ in start.added[len(before[0].added) :])
            log(f"with {shown}, what init added cannot be installed ({why}): {added} left out")
            return before[0], before[1], None
        if why:
            return start, None, f"with {shown}: {why}"
        log(f"looking into {start.metadata.name} with {shown}")
        found = _discovered(start, python, home)
        missing = [
            (d, w) for d, w in undeclared(found, start.metadata, start.spec.installs) if _on_index(d, releases_of)
        ]
        missing += [
            (d, w) for d, w in build_needs(found, start.metadata, start.spec.installs) if _on_index(d, releases_of)
        ]
        missing += fixes(found, start, lambda package: package_index.cached_uploads(package, environ))
        if not missing or len(start.added) >= MAX_ADDED:
            for line in clash_lines(found, start.metadata):
                log(f"with {shown}: {line}")
            return start, found, None
        for requirement, why in missing:
            log(f"{why}: added {requirement} to extra_requirements, looking again")
        before = (start, found)
        start = with_extra(start, missing[: MAX_ADDED - len(start.added)])


def fixes(found: Found, start: Start, uploads_of: Callable[[str], package_index.Uploads]) -> list[tuple[str, str]]:
    """The pins `clash_fix` finds for the package's own modules that clash, each once, and none for a
    distribution already pinned in the extra requirements (a fix that did not fix is not tried again)."""
    pinned = envs.asked(start.spec.extra_requirements)
    out: dict[str, str] = {}
    for clash in found.clashes.values():
        if canonicalize_name(clash.raised_in[0]) in pinned:
            continue
        try:
            fix = clash_fix(clash, start.metadata, uploads_of)
        except package_index.ResolveError:
            fix = None
        if fix is not None:
            out.setdefault(*fix)
    return list(out.items())


def _on_index(distribution: str, releases_of: Callable[[str], Sequence[Version]]) -> bool:
    try:
        return bool(releases_of(distribution))
    except package_index.ResolveError:
        return False


def with_extra(start: Start, added: Sequence[tuple[str, str]]) -> Start:
    """`start` with these (requirement, why) added to the matrix's extra requirements."""
    extra = (*start.spec.extra_requirements, *(r for r, _ in added))
    spec = replace(start.spec, extra_requirements=extra)
    return replace(start, spec=spec, added=(*start.added, *added))


# Import names that are not their distribution's name (most are: `datasets`, `einops`)
DISTRIBUTIONS = {
    "sklearn": "scikit-learn",
    "yaml": "PyYAML",
    "cv2": "opencv-python",
    "PIL": "pillow",
    "skimage": "scikit-image",
    "bs4": "beautifulsoup4",
    "attr": "attrs",
    "dateutil": "python-dateutil",
    "google.protobuf": "protobuf",
    "jwt": "PyJWT",
    "Levenshtein": "levenshtein",
    "fitz": "PyMuPDF",
    "dotenv": "python-dotenv",
}


def distribution_of(module: str) -> str | None:
    """The distribution that most likely provides `module`, a module Python could not find; None where only a
    submodule is missing (`transformers.models.foo`, `torch.distributed.tensor`): Python names the first part that
    is missing, so the package it belongs to is installed, and installing it again changes nothing."""
    if module in DISTRIBUTIONS:
        return DISTRIBUTIONS[module]
    return None if "." in module else module.replace("_", "-")


def undeclared(found: Found, metadata: distributions.Metadata, installs: Sequence[str]) -> list[tuple[str, str]]:
    """(distribution, why) for each module that a top-level module of the package fails to import for
    (ModuleNotFoundError) and that the package does not require (extras aside) nor the matrix installs: what the
    package itself cannot be imported without. A submodule's missing module is an optional integration's: left out."""
    asked = envs.asked(installs)
    out: dict[str, str] = {}
    for discovery in found.discoveries:
        for module, reason in discovery.skipped:
            hit = _MISSING.search(reason)
            if module != discovery.target or not reason.startswith("ModuleNotFoundError") or not hit:
                continue
            dist = distribution_of(hit.group(1))
            if dist is None or canonicalize_name(dist) in asked:
                continue
            if distributions.declared_by(metadata.requires, dist) is not None:
                continue
            extras = distributions.declared_for(metadata.requires, dist)
            said = f"declares only for its extra {', '.join(extras)}" if extras else "does not declare"
            who = f"{metadata.name} {metadata.version or ''}".strip()
            out.setdefault(dist, f"{module} imports {hit.group(1)} ({reason}), which {who} {said}")
    return list(out.items())


def build_needs(found: Found, metadata: distributions.Metadata, installs: Sequence[str]) -> list[tuple[str, str]]:
    """(distribution, why) for each module that a class found could not be built without (cell.needs: a NameError
    for what the library imports from it only when it is installed, an ImportError, a message naming an extra's
    requirement) and that the matrix does not install: what an extra of the package provides."""
    asked = envs.asked(installs)
    who = f"{metadata.name} {metadata.version or ''}".strip()
    out: dict[str, str] = {}
    for item in found.unbuilt:
        dist = distribution_of(item.needs) if item.needs else None
        if (
            dist is None
            or canonicalize_name(dist) in asked
            or distributions.declared_by(metadata.requires, dist) is not None
        ):
            continue
        extras = distributions.declared_for(metadata.requires, dist)
        said = f"declares only for its extra {', '.join(extras)}" if extras else "does not declare"
        name = item.target.rsplit(":", 1)[-1]
        error = item.reason.removeprefix(f"could not build {name}: ").split("; ")[0]
        out.setdefault(dist, f"{name} cannot be built without {item.needs} ({error}), which {who} {said}")
    return list(out.items())


def clash_lines(found: Found, metadata: distributions.Metadata) -> list[str]:
    """A line per top-level module that failed inside another distribution's code beside a third: both named with
    their installed versions, and the pin to write."""
    lines = []
    for discovery in found.discoveries:
        for module, reason in discovery.skipped:
            if module == discovery.target and module in found.clashes:
                lines.append(clash_line(module, reason, found.clashes[module], metadata))
    return lines


def clash_line(module: str, reason: str, clash: Clash, metadata: distributions.Metadata) -> str:
    """`could not import hf_olmo: pyarrow 26.0.1 fails beside numpy 1.26.4 (…); ai2-olmo 0.6.0 requires numpy<2:
    pin an older pyarrow …`. Where the package's own requirements fix the version of the other distribution, the
    one that raised has to move (an older release); else either may: a newer one of the one that raised, or an
    older one of the other."""
    (name, version), beside = clash.raised_in, clash.beside
    who = f"{metadata.name} {metadata.version or ''}".strip()
    others = ", ".join(f"{n} {v}" for n, v in beside)
    pinned = [(n, distributions.declared_by(metadata.requires, n)) for n, _ in beside]
    fixed = [f"{n}{spec}" for n, spec in pinned if capped(spec)]
    older = f'"{name}<{version}"'
    said = f"could not import {module}: {name} {version} fails beside {others} ({reason})"
    if fixed:
        pin = f"pin an older {name} in extra_requirements ({older}, lower until it imports)"
        return f"{said}; {who} requires {', '.join(fixed)}: {pin}"
    first, first_version = beside[0]
    back = f'"{first}<{first_version}"'
    return f'{said}: pin one in extra_requirements: "{name}>{version}" (a newer {name}) or {back} (an older {first})'


def capped(specifier: str | None) -> bool:
    """Whether a declared requirement holds its distribution back from newer releases (`<2`, `==1.26.4`)."""
    return bool(specifier) and any(s.operator in ("<", "<=", "==", "~=", "===") for s in SpecifierSet(specifier))


def clash_fix(
    clash: Clash, metadata: distributions.Metadata, uploads_of: Callable[[str], package_index.Uploads]
) -> tuple[str, str] | None:
    """Where the package's own requirements cap a distribution that the one that raised fails beside (ai2-olmo's
    numpy<2, pyarrow 26.0.1 requiring NumPy 2): (the pin, why) that takes a release of the one that raised from
    before the first release the cap excludes (numpy 2.0.0, 2024-06-16: "pyarrow<17", 17.0.0 came after), which
    cannot need what did not exist yet. None where nothing caps the other, or the upload times do not say."""
    name = clash.raised_in[0]
    who = f"{metadata.name} {metadata.version or ''}".strip()
    for other, version in clash.beside:
        cap = distributions.declared_by(metadata.requires, other)
        if not capped(cap):
            continue
        uploads = uploads_of(other)
        try:
            installed = Version(version)
        except InvalidVersion:  # a local build's own version string: nothing to compare releases with
            continue
        excluded = [v for v in uploads if not v.is_prerelease and v > installed and v not in SpecifierSet(cap)]
        if not excluded or uploads.get(min(excluded)) is None:
            continue
        first, when = min(excluded), uploads[min(excluded)]
        assert when is not None
        after = [v for v, at in uploads_of(name).items() if at is not None and at > when and not v.is_prerelease]
        if not after:
            continue
        pin = f"{name}<{min(after)}"
        why = (
            f"{name} {clash.raised_in[1]} fails beside {other} {version}, and {who} requires {other}{cap}: a {name} "
            f"from before {other} {first} ({when.date()})"
        )
        return pin, why
    return None


def other_end(cells: Sequence[tuple[Cell, Mapping[str, str]]], looked: int) -> tuple[Cell, Mapping[str, str]] | None:
    """Of the cells (with their pins), the one at the other end of the transformers axis from the one looked into:
    the oldest release where that was the newest, else the newest; None where every cell tests the same release."""
    releases = [_release(cell, pins) for cell, pins in cells]
    oldest, newest = releases.index(min(releases)), releases.index(max(releases))
    other = oldest if releases[looked] == releases[newest] else newest
    return None if releases[other] == releases[looked] else cells[other]


def _release(cell: Cell, pins: Mapping[str, str]) -> Version:
    try:
        return Version(pins.get("transformers") or cell.requested.get("transformers", "0"))
    except ValueError:
        return Version("0")


def also(found: Found, there: Found, label: str) -> Found:
    """What was found, with what the other end adds: the classes only found there, and per module that could not
    be imported there but could here, why."""
    here = {m for d in found.discoveries for m, _ in d.skipped}
    failed = tuple((m, w) for d in there.discoveries for m, w in d.skipped if m not in here)
    known = set(found.subjects)
    extra = tuple(Discovery(d.target, tuple(t for t in d.subjects if t not in known)) for d in there.discoveries)
    extra = tuple(d for d in extra if d.subjects)
    overrides = {**there.overrides, **found.overrides}
    clashes = {**{m: there.clashes[m] for m, _ in failed if m in there.clashes}, **found.clashes}
    elsewhere = (*found.elsewhere, (label, failed)) if failed else found.elsewhere
    built_here = {u.target for u in found.unbuilt} | known
    unbuilt = (*found.unbuilt, *(u for u in there.unbuilt if u.target not in built_here))
    return replace(
        found,
        discoveries=(*found.discoveries, *extra),
        overrides=overrides,
        clashes=clashes,
        elsewhere=elsewhere,
        unbuilt=unbuilt,
    )


def declared_hint(transformers: tuple[str, ...], declared: str | None, name: str) -> str:
    """Where the releases asked for (`--transformers`) leave out what the package declares: how to test its own
    range too, and see where it breaks beyond it."""
    if not transformers or not declared or DECLARED in transformers:
        return ""
    asked = " ".join(f"--transformers {value}" for value in transformers)
    return f" ({name} declares transformers{declared}: --transformers declared {asked} tests that range too)"


def _nothing(found: Found, start: Start | None = None) -> str:
    clashes = found.clashes if start is not None else {}
    skipped = [
        clash_line(m, why, clashes[m], start.metadata)
        if start is not None and m in clashes
        else f"could not import {m} ({why})"
        for d in found.discoveries
        for m, why in d.skipped
    ]
    said = "; ".join(skipped) if skipped else "no class to audit"
    reasons = [why for d in found.discoveries for _, why in d.skipped]
    missing = sorted({d for why in reasons if (m := _MISSING.search(why)) and (d := distribution_of(m.group(1)))})
    hint = f" (if it imports {', '.join(missing)} without declaring it: --extra {' --extra '.join(missing)})"
    return said + (hint if missing else "")


_MISSING = re.compile(r"No module named '([\w.]+)'")


def _discovered(start: Start, python: Path, home: Path) -> Found:
    out = home / "compat-matrix-discovered.json"
    out.unlink(missing_ok=True)
    command = [str(python), "-m", "compat_matrix.cell", "--discover", start.metadata.name, str(out)]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, env=cell_run.runner_environment(home), timeout=DISCOVER_TIMEOUT
        )
    except subprocess.TimeoutExpired:
        raise BadInput([f"{start.metadata.name}: looking into it took more than {DISCOVER_TIMEOUT:g} s"]) from None
    if done.returncode != 0 or not out.exists():
        tail = uv.installer_reason(done.stderr.strip().splitlines()[-1]) if done.stderr.strip() else ""
        raise BadInput([f"{start.metadata.name}: could not be looked into ({tail or done.returncode})"])
    return found_from(json.loads(out.read_text(encoding="utf-8")))


def found_from(data: Mapping[str, Any]) -> Found:
    overrides = {t: tuple(tuple(p) for p in pairs) for item in data["found"] for t, pairs in item["overrides"].items()}
    discoveries = tuple(Discovery.from_json(item["discovery"]) for item in data["found"])
    clashes = {
        item["discovery"]["target"]: Clash.from_json(item["clash"]) for item in data["found"] if item.get("clash")
    }
    unbuilt = tuple(Unbuilt.from_json(item) for item in data.get("unbuilt", ()))
    return Found(dict(data["versions"]), discoveries, overrides, clashes, unbuilt=unbuilt)


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
        added = dict(start.added)
        heading = "needs that it does not require" if start.added else "imports without declaring it"
        lines.append(f"# what {meta.name} {heading}")
        lines += [f"# {r}: added by init: {added[r]}" for r in start.spec.extra_requirements if r in added]
        lines.append(f"extra_requirements = [{', '.join(map(_quoted, start.spec.extra_requirements))}]")
    if start.spec.overrides:
        lines += [f"# {comments['overrides']}", f"overrides = [{', '.join(map(_quoted, start.spec.overrides))}]"]
    if not start.spec.extra_requirements:
        lines.append("# extra_requirements = []   what the package imports without declaring it")
    lines += ["", "[axes]"]
    for axis in start.axes:
        if axis.package in comments:
            lines.append(f"# {comments[axis.package]}")
        if axis.package == "transformers" and start.left_out:
            lines.append("# left out: their requirements conflict, so every run would fail there:")
            lines += [f"#   {value} ({release}): {why}" for value, release, why in start.left_out]
        if axis.package == "transformers" and start.unsure:
            lines.append("# init could not install these, for a reason other than a conflict (kept: try the run):")
            lines += [f"#   {value} ({release}): {why}" for value, release, why in start.unsure]
        lines.append(f"{axis.package} = [{', '.join(map(_sweep, axis.values))}]")
    for release in start.excluded:
        lines += ["", "[[exclude]]  # init could not install it (see [axes])", f"transformers = {_quoted(release)}"]
    lines += ["", f"# Each class {meta.name} defines that subclasses transformers and overrides something of it"]
    lines += [f"# (found with {where}); methods left out: every override is audited."]
    unbuilt = {u.target: u for u in found.unbuilt}
    for target in found.subjects:
        lines += ["", "[[subjects]]", f"target = {_quoted(target)}", *overrides_comment(found.overrides[target])]
        if target in unbuilt:
            lines += unbuilt_comment(unbuilt[target], where, start)
    unaudited = [(t, kind) for d in found.discoveries for t, kind in d.unaudited if not kind.startswith(THROUGH)]
    abstract = [(t, kind) for d in found.discoveries for t, kind in d.unaudited if kind.startswith(THROUGH)]
    skipped = [(m, why) for d in found.discoveries for m, why in d.skipped]
    if abstract:
        lines += ["", "# Abstract bases, not audited alone: the classes above that inherit their overrides audit them"]
        lines += [f"#   {t} (through {kind.removeprefix(THROUGH)})" for t, kind in abstract]
    if unaudited:
        lines += ["", "# Found, not audited (no probe family covers their kind):"]
        lines += [f"#   {t} ({kind})" for t, kind in unaudited]
    if skipped:
        lines += ["", f"# Could not be imported with {where} (exclude them, or add what they need):"]
        lines += [f"#   {m}: {why}" for m, why in skipped]
    for release, failed in found.elsewhere:
        lines += ["", f"# Could not be imported with {release}, but could with {where}:"]
        lines += [f"#   {_why(m, why, found, meta)}" for m, why in failed]
    clashes = clash_lines(found, meta)
    if clashes:
        lines += ["", "# Clashes of two installed distributions (the package's own import fails inside one):"]
        lines += [f"#   {line}" for line in clashes]
    return "\n".join(lines) + "\n"


def template_path(output: Path) -> Path:
    """Where `--factory-template` writes the starter factories: beside the matrix file, a module named for it."""
    return output.with_name(f"{factories.module_name(output.stem)}.py")


def unbuilt_comment(item: Unbuilt, where: str, start: Start) -> list[str]:
    """Under a subject the default factory could not build: why, the columns its dataset asked for, and the factory
    line to turn on once the template's function is filled in (or how to get the template)."""
    lines = [f"# could not be built with no factory (with {where}): {item.reason}"]
    if item.columns:
        then = f"; with them: {item.then}" if item.then else "; with them it builds"
        lines.append(f"# its dataset needs the columns it asked for: {', '.join(item.columns)}{then}")
    module = template_path(start.output).stem
    if start.asked.factory_template:
        lines.append(f"# factory = {_quoted(f'{module}:{factories.function_name(item.target)}')}   once filled in")
    else:
        lines.append("# (compat-matrix init --factory-template writes a starter factory for it beside this file)")
    return lines


def overrides_comment(overrides: Sequence[Sequence[str | None]]) -> list[str]:
    """The comment under a subject: its own overrides, then those it inherits from each abstract base of its library
    (deleted there in the base variant)."""

    def said(names: Sequence[Sequence[str | None]]) -> str:
        return ", ".join(f"{n}" + (" (attribute)" if k == "attribute" else "") for n, k, *_ in names)

    own = [o for o in overrides if len(o) < 3 or not o[2]]
    vias = dict.fromkeys(o[2] for o in overrides if len(o) > 2 and o[2])
    lines = [f"# overrides: {said(own)}"] if own else []
    for via in vias:
        inherited = [o for o in overrides if len(o) > 2 and o[2] == via]
        lines.append(f"# inherits from the abstract {via}, where the base variant deletes them: {said(inherited)}")
    return lines


def _why(module: str, why: str, found: Found, metadata: distributions.Metadata) -> str:
    clash = found.clashes.get(module)
    return clash_line(module, why, clash, metadata) if clash else f"{module}: {why}"


def left_out(start: Start, found: Found, releases_of: Callable[[str], Sequence[Version]]) -> Start:
    """The start without the transformers values init tried and could not install: a value as written is taken off
    the axis, a release a sweep stands for gets an [[exclude]] table; each said in a comment with why. The caps
    lifted (`overrides`) are those the values left still need."""
    conflicts = tuple(f for f in found.uninstallable if unsatisfiable(f[2]))
    unsure = tuple(f for f in found.uninstallable if f not in conflicts)
    if not conflicts:
        return replace(start, unsure=unsure)
    values = {value for value, _, _ in conflicts}
    axes = tuple(
        replace(a, values=tuple(v for v in a.values if not (isinstance(v, str) and v in values)))
        if a.package == "transformers"
        else a
        for a in start.axes
    )
    written = {v for a in start.axes if a.package == "transformers" for v in a.values if isinstance(v, str)}
    excluded = tuple(value for value in values if value not in written)
    requires = {"transformers": start.declared, "torch": distributions.declared_by(start.metadata.requires, "torch")}
    overrides = tuple(o for o in start.spec.overrides if o != "transformers") + tuple(
        o for o in lifted(axes, requires, releases_of) if o == "transformers"
    )
    comments = dict(start.comments)
    if "transformers" not in overrides:
        comments.pop("overrides", None)
    spec = replace(start.spec, overrides=overrides)
    return replace(
        start,
        axes=axes,
        spec=spec,
        comments=comments,
        left_out=conflicts,
        unsure=unsure,
        excluded=tuple(sorted(excluded)),
    )


def unsatisfiable(why: str) -> bool:
    """Whether an install failed because its requirements conflict (what installing again cannot change), not for
    a reason of the moment (the network, a full disk)."""
    return "pins conflict" in why or "No solution found" in why or "unsatisfiable" in why


@dataclass(frozen=True)
class Written:
    path: Path
    subjects: tuple[str, ...]
    validated: tuple[str, ...]  # what `validate` says of the file
    command: str
    template: Path | None = None  # --factory-template: the starter factory module, where one was written


def init(
    asked: Asked, envdir: Path, environ: Mapping[str, str] = os.environ, log: Callable[[str], None] = print
) -> Written:
    """The starter matrix file for `asked.package`, written and validated."""
    start = plan_start(asked, environ)
    start, found = look(start, envdir, log, environ)
    start = left_out(start, found, package_index.lookup(environ))
    for value, release, why in start.left_out:
        log(f"warning: left out transformers {value} ({release}): it cannot be installed: {why}")
    for value, release, why in start.unsure:
        log(f"warning: could not install transformers {value} ({release}), kept: {why}")
    for release, failed in found.elsewhere:
        for module, why in failed:
            log(f"warning: with {release}: {_why(module, why, found, start.metadata)}")
    command = f"compat-matrix run {display_path(start.output)}"
    start.output.parent.mkdir(parents=True, exist_ok=True)
    start.output.write_text(text(start, found, command), encoding="utf-8")
    checked = resolve.validate([load(start.output)], environ)
    if checked.problems:
        raise BadInput(list(checked.problems))
    log(f"{start.metadata.name}: {len(found.subjects)} to audit: {', '.join(found.subjects)}")
    unbuilt = [u for u in found.unbuilt if u.target in found.subjects]
    for item in unbuilt:
        log(f"warning: {item.reason}")
    template = None
    if start.asked.factory_template and unbuilt:
        template = template_path(start.output)
        who = f"{start.metadata.name} {found.versions.get(start.metadata.name, start.metadata.version or '')}".strip()
        where = f"transformers {found.versions.get('transformers', '?')}"
        template.write_text(factories.template(who, where, unbuilt), encoding="utf-8")
        log(f"wrote {display_path(template)}: a factory to fill in for each of {len(unbuilt)} classes")
    return Written(start.output, tuple(found.subjects), (*checked.warnings, *checked.lines), command, template)
