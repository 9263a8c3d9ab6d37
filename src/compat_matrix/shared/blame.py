"""Where an import failed: the distribution whose code raised, and the installed distributions its message names
(datasets 2.14.4 raising "module 'pyarrow' has no attribute 'PyExtensionType'" beside pyarrow 26.0.1). Two
releases that each install fine and cannot be imported together are a clash no resolver sees.

The cell side (runner --discover, the runner's own imports) says it, the host words it.

    clash(modules, message, owners, versions, own)   the pure part: from the traceback's module names
    clash_of(exc, own)                                the same, read off an exception and the installed metadata
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any


@dataclass(frozen=True)
class Clash:
    """An import that failed in one distribution's code, and the others its message names, with their versions."""

    raised_in: tuple[str, str]  # (distribution, installed version)
    beside: tuple[tuple[str, str], ...]  # the installed distributions the message names, each once

    def to_json(self) -> dict[str, Any]:
        return {"raised_in": list(self.raised_in), "beside": [list(b) for b in self.beside]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Clash:
        name, version = data["raised_in"]
        return cls((name, version), tuple((n, v) for n, v in data["beside"]))


def clash(
    modules: Sequence[str],
    message: str,
    owners: Mapping[str, Sequence[str]],
    versions: Mapping[str, str],
    own: Iterable[str] = (),
) -> Clash | None:
    """The distribution of the innermost frame that belongs to one (`modules`: the traceback's module names,
    outermost first; `owners`: top-level module → distributions, as importlib.metadata.packages_distributions says),
    and the other distributions whose top-level module `message` names as a word (case aside: "NumPy" names numpy).
    None where the innermost such frame is one of `own` (the package's own code failed: not a clash of others) or
    the message names no other distribution."""
    mine = {name.lower() for name in own}
    raised = next((owners[m.split(".")[0]][0] for m in reversed(modules) if owners.get(m.split(".")[0])), None)
    if raised is None or raised.lower() in mine:
        return None
    words = _PATHS.sub("", message)  # "(/…/site-packages/huggingface_hub/__init__.py)" names no distribution
    named: dict[str, str] = {}
    for module, dists in owners.items():
        if dists and re.search(rf"(?<![\w.]){re.escape(module)}(?![\w])", words, re.IGNORECASE):
            dist = dists[0]
            if dist.lower() not in {raised.lower(), *mine} and dist in versions:
                named.setdefault(dist, versions[dist])
    if not named:
        return None
    return Clash((raised, versions.get(raised, "?")), tuple(sorted(named.items())))


_PATHS = re.compile(r"\((?:/|[A-Za-z]:\\)[^)]*\)")  # a parenthesised absolute path, as ImportError's "from 'x' (…)"


def said(found: Clash | None) -> str:
    """A clash as a reason's suffix, " (datasets 2.14.4 fails beside pyarrow 26.0.1)", or "" for none."""
    if found is None:
        return ""
    beside = ", ".join(f"{n} {v}" for n, v in found.beside)
    return f" ({found.raised_in[0]} {found.raised_in[1]} fails beside {beside})"


def owners(module: str) -> list[str]:
    """The installed distributions that hold the top-level module of `module` ("llm2vec.models:X": llm2vec)."""
    return list(importlib.metadata.packages_distributions().get(module.split(":")[0].split(".")[0], ()))


def frame_modules(tb: TracebackType | None) -> list[str]:
    """The module name of every frame of a traceback, outermost first."""
    names = []
    while tb is not None:
        names.append(str(tb.tb_frame.f_globals.get("__name__", "")))
        tb = tb.tb_next
    return names


def innermost(exc: BaseException) -> BaseException:
    """The exception at the bottom of a chain: transformers' lazy modules re-raise a failed import as a RuntimeError
    `from` it (`__cause__`), and an error raised while handling another keeps that one (`__context__`)."""
    seen = {id(exc)}
    while (inner := exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)) is not None:
        if id(inner) in seen:
            break
        seen.add(id(inner))
        exc = inner
    return exc


def clash_of(exc: BaseException, own: Iterable[str] = ()) -> Clash | None:
    """`clash` for an exception raised here (the one at the bottom of its chain), from the installed distributions'
    metadata."""
    exc = innermost(exc)
    owners = importlib.metadata.packages_distributions()
    versions = {}
    for dists in owners.values():
        for dist in dists:
            try:
                versions[dist] = importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                continue
    return clash(frame_modules(exc.__traceback__), str(exc), owners, versions, own)
