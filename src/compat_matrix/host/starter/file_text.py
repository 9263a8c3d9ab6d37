"""The starter matrix file's text: the requirement, the axes with why each says what it says, a subject per class
found (its overrides in a comment), and what was found but is not audited."""

from __future__ import annotations

import json
from collections.abc import Sequence

from compat_matrix import __version__
from compat_matrix.host import factories
from compat_matrix.host.spec import Sweep
from compat_matrix.host.starter.needs import clash_lines, skipped_line, unimported_line
from compat_matrix.host.starter.start import Found, Start, template_path
from compat_matrix.shared.results import THROUGH, Unbuilt


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
        lines += [f"#   {skipped_line(m, why, meta)}" for m, why in skipped]
    for release, failed in found.elsewhere:
        lines += ["", f"# Could not be imported with {release}, but could with {where}:"]
        lines += [f"#   {unimported_line(m, why, found, meta)}" for m, why in failed]
    clashes = clash_lines(found, meta)
    if clashes:
        lines += ["", "# Clashes of two installed distributions (the package's own import fails inside one):"]
        lines += [f"#   {line}" for line in clashes]
    return "\n".join(lines) + "\n"


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
