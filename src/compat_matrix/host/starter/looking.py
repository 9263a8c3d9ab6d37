"""The package looked into: a cell's environment installed (stamped as the cell's own, which the run then shares),
the classes found there (the runner's --discover), what it needs added and looked into again, the other end of the
axis, and the transformers values that cannot be installed left out."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from compat_matrix.host import cell_run, distributions, envs, fallback, package_index, uv
from compat_matrix.host.cells import Cell
from compat_matrix.host.exits import BadInput
from compat_matrix.host.fallback import unsatisfiable
from compat_matrix.host.folders import ENVIRONMENTS_IGNORED, ignore_housekeeping, reports_folder
from compat_matrix.host.spec import DECLARED, display_path
from compat_matrix.host.starter.needs import (
    build_needs,
    clash_fix,
    clash_lines,
    declared_hint,
    nothing_found,
    undeclared,
)
from compat_matrix.host.starter.start import Found, Start, lifted, plan_start
from compat_matrix.shared.blame import Clash
from compat_matrix.shared.results import Discovery, Unbuilt

DISCOVER_TIMEOUT = 900.0  # seconds to import the package and look into it


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
            other = other_end(start.cells[index:], 0)  # not the cells tried before it: they could not be installed
            if other is None:
                return start, replace(found, uninstallable=tuple(failed))
            start, there, why = _look_into(start, *other, envdir, reports, log, environ)
            if there is None:
                failed.append((other[0].requested.get("transformers", ""), _label(other), why or ""))
                return start, replace(found, uninstallable=tuple(failed))
            return start, replace(also(found, there, _label(other)), uninstallable=tuple(failed))
        tried.append(f"with {_shown(cell, pins)}: {nothing_found(found, start)}")
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
        if why and before is None and unsatisfiable(why):  # its newest release cannot be installed here
            python, pins, why = _older(home, start, cell, pins, reports, why, log, releases_of)
            shown = _shown(cell, pins)
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


def _older(
    home: Path,
    start: Start,
    cell: Cell,
    pins: Mapping[str, str],
    reports: Path,
    why: str,
    log: Callable[[str], None],
    releases_of: Callable[[str], Sequence[Version]],
) -> tuple[Path, Mapping[str, str], str | None]:
    """As a run does (compat_matrix.host.fallback): the newest older release of a ranged value that installs, where
    the one `pins` names cannot be installed for want of a solution; else `why` it could not."""
    python = home / "bin" / "python"
    for older in fallback.older(cell, pins, releases_of):
        python, again = envs.prepared(home, start.spec, cell, reports, older, log=lambda line: None)
        if again is None:
            log(f"with {_shown(cell, pins)}: {fallback.note(cell, pins, older, why)}")
            return python, older, None
        if not unsatisfiable(again):
            break
    return python, pins, why


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


def left_out(start: Start, found: Found, releases_of: Callable[[str], Sequence[Version]]) -> Start:
    """The start without the transformers values init tried and could not install: a value as written is taken off
    the axis, a release a sweep stands for gets an [[exclude]] table; each said in a comment with why. The caps
    lifted (`overrides`) are those the values left still need."""
    tried = tuple(dict.fromkeys(found.uninstallable))  # a release init installed twice (to look, then to build) once
    conflicts = tuple(f for f in tried if unsatisfiable(f[2]))
    unsure = tuple(f for f in tried if f not in conflicts)
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
    if not overrides:  # a cap lifted for another package (granite-tsfm's torch) keeps its comment
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
