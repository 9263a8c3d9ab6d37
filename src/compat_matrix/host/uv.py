"""uv, as compat-matrix calls it: the binary nox's uv backend uses, the variables that point it at the machine's local
wheels, the install arguments as it takes them (overrides in a file), and its complaints in one line."""

from __future__ import annotations

import contextlib
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from compat_matrix.host.cells import OVERRIDE
from compat_matrix.shared.results import short_paths, write_text_atomic

REASON_LIMIT = 400
_DECORATION = " ×╰─▶│├╭╮╯┬┴┼|:-"


def uv_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """Variables that point uv at the machine's local wheels, which uv does not learn from pip's settings.

    pip's PIP_FIND_LINKS is whitespace-separated; uv's UV_FIND_LINKS is comma-separated. An explicit
    UV_FIND_LINKS wins.
    """
    links = environ.get("PIP_FIND_LINKS", "").split()
    if "UV_FIND_LINKS" in environ or not links:
        return {}
    return {"UV_FIND_LINKS": ",".join(links)}


def installer_reason(output: str) -> str:
    """The installer's complaint in one line: its message lines, decorations stripped, joined and cut. Where uv
    says that two requirements conflict, the package and both constraints first."""
    lines = [line.strip().strip(_DECORATION).strip() for line in output.splitlines()]
    useful = [line for line in lines if line and not line.startswith(("Using ", "Resolved ", "Prepared "))]
    text = short_paths(" ".join(useful)) or "installer failed without a message"
    text = conflict(text) or text
    return text if len(text) <= REASON_LIMIT else text[: REASON_LIMIT - 1] + "…"


# uv: "Because gliner>=0.2.29 depends on transformers>=4.51.3,<5.17.0 and you require transformers==5.24.0, …"
_SPEC = r"[^\s,]+(?:,[<>=!~][^\s,]+)*"  # a requirement as uv writes it: `tokenizers>=0.14.0,<=0.14.1`
_CONFLICT = re.compile(
    rf"[Bb]ecause (?P<who>[^\s,]+) depends on (?P<needs>{_SPEC}) and (?P<other>you require|[^\s,]+ depends on)"
    rf" (?P<wants>{_SPEC})(?:, we can conclude that (?P<so>{_SPEC} depends on {_SPEC}))?"
)


def conflict(text: str) -> str | None:
    """`pins conflict: <who> requires <a>, <the cell or another package> requires <b>` from uv's explanation of a
    resolution that failed, naming how to lift a library's cap on an axis package; None when it says no such thing.
    A first step that only joins releases of one package (`tokenizers==0.14.1 depends on huggingface-hub<0.18 and
    tokenizers==0.14.0 depends on …`) is not the conflict: the next step is, with what that one concluded after it."""
    steps = list(_CONFLICT.finditer(text))
    if not steps:
        return None
    found, lemma = steps[0], ""
    if len(steps) > 1 and _name(found["who"]) == _name(found["other"].removesuffix(" depends on")):
        so = (steps[0]["so"] or "").rstrip(".").replace(" depends on ", " requires ")
        found, lemma = steps[1], f" ({so})" if so else ""
    other = found["other"]
    wants = "the cell pins" if other == "you require" else f"{other.removesuffix(' depends on')} requires"
    hint = ""
    with contextlib.suppress(InvalidRequirement):
        package = canonicalize_name(Requirement(found["needs"]).name)
        if other == "you require":
            hint = f' (to test it anyway, lift the cap: overrides = ["{package}"] in [matrix])'
    return f"pins conflict: {found['who']} requires {found['needs']}, {wants} {found['wants']}{lemma}{hint}"


def _name(requirement: str) -> str | None:
    with contextlib.suppress(InvalidRequirement):
        return canonicalize_name(Requirement(requirement).name)
    return None


def uv_binary() -> str:
    """The uv that nox's uv backend uses too: the one installed with compat-matrix, else the one on PATH."""
    try:
        import uv  # the `uv` package from PyPI ships the binary and says where it is

        return uv.find_uv_bin()
    except (ImportError, FileNotFoundError):
        return shutil.which("uv") or "uv"


OVERRIDES = "compat-matrix-overrides.txt"  # in the environment: the overrides uv gets (`--override`)


def uv_args(args: list[str], home: Path) -> list[str]:
    """The install arguments as uv takes them: the overrides (cells.OVERRIDE + a requirement) in a file of the
    environment, given with `--override`."""
    overrides = [arg.removeprefix(OVERRIDE) for arg in args if arg.startswith(OVERRIDE)]
    rest = [arg for arg in args if not arg.startswith(OVERRIDE)]
    if not overrides:
        return rest
    write_text_atomic(home / OVERRIDES, "\n".join(overrides) + "\n")
    return [*rest, "--override", str(home / OVERRIDES)]
