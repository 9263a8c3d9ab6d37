"""`compat-matrix init`, all of it: the start planned, the package looked into, the file written and validated (with
the starter factories where asked); the command that runs it."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from compat_matrix.host import factories, package_index, resolve
from compat_matrix.host.exits import BadInput
from compat_matrix.host.spec import display_path, load
from compat_matrix.host.starter.file_text import text
from compat_matrix.host.starter.looking import left_out, look
from compat_matrix.host.starter.needs import unimported_line
from compat_matrix.host.starter.start import Asked, plan_start, template_path


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
            log(f"warning: with {release}: {unimported_line(module, why, found, start.metadata)}")
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
