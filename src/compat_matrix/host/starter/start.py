"""What `compat-matrix init` is asked (`Asked`), and everything the starter file says but its subjects (`Start`): the
requirement, what it declares for transformers and torch, the axes (the declared range swept, torch pinned as the
machine allows) and the cells to look into the package in; what looking into it found (`Found`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from compat_matrix.host import distributions, factories, package_index, resolve
from compat_matrix.host.cells import Cell, cells
from compat_matrix.host.exits import BadInput
from compat_matrix.host.spec import DECLARED, Axis, MatrixError, MatrixSpec, Sweep, display_path
from compat_matrix.shared.blame import Clash
from compat_matrix.shared.limits import OLDEST_TRANSFORMERS
from compat_matrix.shared.results import Discovery, Unbuilt

FLOOR = ">=4.57"  # what a package that declares no lower bound on transformers is swept from


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
    else:
        values, comments["transformers"] = declared_sweep(who, declared, releases_of)
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


def declared_sweep(
    who: str, declared: str | None, releases_of: Callable[[str], Sequence[Version]]
) -> tuple[tuple[Sweep], str]:
    """The transformers sweep of a starter file where `--transformers` is not given, and why: every minor of the
    declared range (from the oldest release the probes run on, OLDEST_TRANSFORMERS, where it allows older ones), or
    from FLOOR where it declares no lower bound."""
    if not (declared and any(s.operator in (">", ">=", "==", "~=", "===") for s in SpecifierSet(declared))):
        return (
            Sweep("minor", FLOOR),
        ), f"{who} declares no lower bound on transformers: every minor {FLOOR} (widen it to test older ones)"
    if Version(lowest_allowed(declared, releases_of, oldest=False)) >= Version(OLDEST_TRANSFORMERS):
        return (
            Sweep("minor", DECLARED),
        ), f"{who} declares transformers{declared}: its lowest allowed release and the newest of every minor"
    why = (
        f"{who} declares transformers{declared}: the newest of every minor from {OLDEST_TRANSFORMERS}, the oldest "
        f"release the probes run on (they build tiny Llama models, which transformers has from {OLDEST_TRANSFORMERS})"
    )
    return (Sweep("minor", f"{declared},>={OLDEST_TRANSFORMERS}"),), why


ENDS = "ends"  # --transformers ends: the lowest release the package allows, and the newest
LATEST = "latest"


def lowest_allowed(declared: str | None, releases_of: Callable[[str], Sequence[Version]], oldest: bool = True) -> str:
    """The lowest transformers release (no pre-release) that the package's declared range allows, from FLOOR where
    it declares no lower bound, and (`oldest`) from the oldest the probes run on (OLDEST_TRANSFORMERS). BadInput
    where none does."""
    bounded = declared and any(s.operator in (">", ">=", "==", "~=", "===") for s in SpecifierSet(declared))
    allowed = SpecifierSet(declared if bounded else f"{FLOOR},{declared or ''}".rstrip(","))
    allowed &= SpecifierSet(f">={OLDEST_TRANSFORMERS}" if oldest else "")
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


def template_path(output: Path) -> Path:
    """Where `--factory-template` writes the starter factories: beside the matrix file, a module named for it."""
    return output.with_name(f"{factories.module_name(output.stem)}.py")
