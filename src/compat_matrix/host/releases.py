"""The tested releases as values, and runs of neighbours that read alike.

    Release.of(package, installed, asked)    one axis package of a row: what its cell installed (as the environment
                                             wrote it) and what was asked for, with its `version`, `label` and
                                             whether it is an early warning (compat_matrix.host.prerelease)
    Label(releases)                          a row's label (`transformers 5.24.0`): the text the report shows and
                                             keys its tables and JSON with, carrying the releases it was made from
    Label.read(text)                         a label known only as text (an earlier report's JSON), read once
    Label.id                                 the row as the report JSON's release records name it:
                                             `transformers=5.24.0`, `transformers=requested:99.0`
    runs(items, key)                         neighbouring items whose key is equal, as lists
    axis_of(labels)                          the one package some labels name, for a table's header

Collect makes each row's Label once; the words, the grid and the report read its releases instead of splitting the
text again. A Label is a `str`, so the labels in a report's JSON (its `by_release` keys, say) are exactly the text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from packaging.version import InvalidVersion, Version

from compat_matrix.host.prerelease import MARK, PRE, is_pre

REQUESTED = "requested"  # a label's mark where nothing was installed: `transformers 99.0 (requested)`
_SERIES = re.compile(r"(\d+(?:\.\d+)*)\.x")  # "5.x", "4.57.x": what was asked for where nothing installed
_PART = re.compile(rf"(?P<package>\S+) (?P<value>.+?)(?: \((?P<mark>{MARK}|{REQUESTED})\))?")


@dataclass(frozen=True)
class Release:
    """One axis package of a tested row: the version its cell installed (`installed`, as the environment wrote it:
    `2.13.0+cpu`; None where nothing was), what was asked for (`requested`: `5.x`, `pre`; None where only a label was
    read), and whether it is an early warning (a pre-release installed, or `pre` asked for)."""

    package: str
    installed: str | None
    requested: str | None = None
    early: bool = False

    @classmethod
    def of(cls, package: str, installed: str | None, requested: str | None) -> Release:
        early = is_pre(installed) if installed else requested == PRE
        return cls(package, installed or None, requested, early)

    @property
    def version(self) -> Version | None:
        """The version installed, its local label (`+cpu`) left out; None where nothing (or no version) was."""
        return public(self.installed)

    @property
    def shown(self) -> str:
        """`5.24.0`, `5.25.0rc1 (pre-release)`, `99.0 (requested)`: the release without its package."""
        if self.installed is None:
            return f"{self.requested or '?'} ({REQUESTED})"
        return f"{self.installed} ({MARK})" if self.early else self.installed

    @property
    def label(self) -> str:
        return f"{self.package} {self.shown}"

    @property
    def id(self) -> str:
        """`transformers=5.24.0` (as installed: `torch=2.13.0+cpu`), `transformers=requested:99.0` where nothing
        was installed: a key for machines, with no words that only display."""
        return f"{self.package}={self.installed}" if self.installed else f"{self.package}={REQUESTED}:{self.requested}"

    @property
    def rank(self) -> tuple[int, Version]:
        """Where it goes among the releases of its package: by version; a series asked for (`5.x`) after every
        release of it, and `pre` asked for after everything."""
        text = self.installed or self.requested
        if text == PRE:
            return (2, Version("0"))
        version = public(text)
        if version is not None:
            return (1, version)
        series = _SERIES.fullmatch(str(text))
        return (1, Version(f"{series.group(1)}.{10**9}")) if series else (0, Version("0"))


class Label(str):
    """A row's label, `transformers 5.24.0` (`transformers 5.14.1, torch 2.13.0` where two axes name the rows): the
    text a report shows and keys its tables and JSON with, carrying the releases it was made from."""

    releases: tuple[Release, ...]

    def __new__(cls, releases: Sequence[Release], text: str | None = None) -> Label:
        label = super().__new__(cls, ", ".join(r.label for r in releases) if text is None else text)
        label.releases = tuple(releases)
        return label

    def __getnewargs__(self) -> tuple[tuple[Release, ...], str]:  # copies and pickles keep the releases
        return self.releases, str(self)

    @classmethod
    def read(cls, text: str) -> Label:
        """A label known only as text (a row of an earlier report, a test's): its releases read off it once; text
        that is no label (`?`) has none."""
        if isinstance(text, Label):
            return text
        parts = [_PART.fullmatch(part) for part in text.split(", ")]
        if not all(parts):
            return cls((), text)
        releases = []
        for part in parts:
            package, value, mark = part["package"], part["value"], part["mark"]
            if mark == REQUESTED:
                releases.append(Release(package, None, value, value == PRE))
            else:
                releases.append(Release(package, value, None, mark == MARK))
        return cls(releases, text)

    @property
    def id(self) -> str:
        """The row as the report JSON's release records name it: each release's id, `,` between them
        (`transformers=5.14.1,torch=2.13.0+cpu`); text that is no label, as it is."""
        return ",".join(r.id for r in self.releases) if self.releases else str(self)

    @property
    def early(self) -> bool:
        """Whether the row is an early warning: a pre-release was installed, or `pre` asked for."""
        return any(r.early for r in self.releases)

    @property
    def package(self) -> str | None:
        """The one package the label names, where it names one."""
        return self.releases[0].package if len(self.releases) == 1 else None

    @property
    def shown(self) -> str:
        """The label without its first package's name: `5.24.0`, `5.14.1, torch 2.13.0`."""
        if not self.releases:
            return str(self)
        first, *rest = self.releases
        return ", ".join([first.shown, *(r.label for r in rest)])


def axis_of(labels: Sequence[str]) -> str:
    """The one package the labels name (`transformers`), else `release`: a table's header for them."""
    packages = {Label.read(label).package for label in labels}
    return (packages.pop() or "release") if len(packages) == 1 else "release"


def early_label(text: str) -> bool:
    """Whether a row's label (`transformers 5.25.0rc1 (pre-release)`, `transformers pre (requested)`) is an early
    warning's: what the grid, baselines and --fail-on know of a row."""
    return Label.read(text).early


def public(text: str | None) -> Version | None:
    """`2.13.0+cpu` as the release it builds, `2.13.0`; None where `text` is no version."""
    try:
        return Version(Version(text).public) if text else None
    except InvalidVersion:
        return None


T = TypeVar("T")


def runs(items: Iterable[T], key: Callable[[T], object]) -> list[list[T]]:
    """Neighbouring items whose `key` is equal, in order, each stretch a list: `[[a, a], [b], [a]]`."""
    out: list[list[T]] = []
    last: object = None
    for item in items:
        here = key(item)
        if out and here == last:
            out[-1].append(item)
        else:
            out.append([item])
        last = here
    return out
