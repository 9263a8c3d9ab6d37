"""What a matrix file says, as values: `MatrixSpec`, its `Axis` values and `Sweep`s, its `Subject`s and their
`Expectation`s, and the ranges its requirements `Declared`; each with its JSON, as a plan file holds it."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from packaging.requirements import Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from compat_matrix.shared.limits import DEFAULT_TIMEOUT

PYTHON = "python"
DEFAULT_CELL_TIMEOUT = 1800.0  # seconds for a whole cell: install and probes
DECLARED = "declared"  # a sweep's range: what the matrix's requirements declare for the package
EACH = ("minor", "release")


class Expectation(NamedTuple):
    """The verdict a matrix file expects on the releases of the first axis that `range` allows."""

    range: str  # a PEP 440 specifier, or "*"
    verdict: str  # one of EXPECTABLE


@dataclass(frozen=True)
class Subject:
    target: str  # "module:Class"
    methods: tuple[str, ...]
    factory: str | None = None  # "module:callable"; None means the default factory
    expect: tuple[Expectation, ...] = ()  # in file order: the first match applies
    # "probe.observation" that must differ wherever `differs` is expected, with the base side free of errors there
    catches: tuple[str, ...] = ()
    tests: tuple[str, ...] = ()  # the user's pytest node ids or paths, made absolute
    inputs: str | None = None  # "module:callable": an instance -> the keyword arguments of a forward pass
    # A module or package target ("mylib.models", no ":Class") stands for every class defined there that subclasses
    # a transformers class and overrides something of it, found in each cell; `exclude` leaves classes or modules out.
    exclude: tuple[str, ...] = ()
    extra_requirements: tuple[str, ...] = ()  # installed in every cell beside the matrix's requirements
    group: str | None = None  # the module or package target this class was found in (the report's subjects)

    @property
    def package(self) -> bool:
        """Whether the target is a module or package (its classes found in the cell), not one class."""
        return ":" not in self.target

    def expected(self, version: str | None) -> str | None:
        """The verdict this subject is expected to get on `version` of the first axis, if the file says."""
        for spec, verdict in self.expect:
            if spec == "*" or (version and _matches(spec, version)):
                return verdict
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "methods": list(self.methods),
            "factory": self.factory,
            "expect": [list(pair) for pair in self.expect],
            "catches": list(self.catches),
            "tests": list(self.tests),
            "inputs": self.inputs,
            "exclude": list(self.exclude),
            "extra_requirements": list(self.extra_requirements),
            "group": self.group,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Subject:
        expect = tuple(Expectation(str(spec), str(verdict)) for spec, verdict in data["expect"])
        return cls(
            data["target"],
            tuple(data["methods"]),
            data["factory"],
            expect,
            tuple(data["catches"]),
            tuple(data["tests"]),
            data.get("inputs"),
            tuple(data.get("exclude", ())),
            tuple(data.get("extra_requirements", ())),
            data.get("group"),
        )


def _matches(spec: str, version: str) -> bool:
    try:
        return SpecifierSet(spec).contains(Version(version), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return False


class Declared(NamedTuple):
    """The range of an axis package that a distribution of the matrix's requirements declares (`Requires-Dist`)."""

    package: str  # the axis package: "transformers"
    distribution: str  # the requirement that declares it: "gliner"
    version: str | None  # of that distribution, where known: "0.2.29"
    specifier: str  # as declared: "<5.17.0,>=4.51.3"; "" for any release

    def to_json(self) -> list[Any]:
        return list(self)

    @classmethod
    def from_json(cls, data: list[Any]) -> Declared:
        return cls(*data)


@dataclass(frozen=True)
class Sweep:
    """An axis entry that stands for several releases, listed from the package index at run time:
    `{ each = "minor", range = ">=5.14" }` the newest release of every minor in the range, `each = "release"` every
    release; pre-releases only with `pre = true`. `range = "declared"`: the range the matrix's requirements declare
    for the package (`Requires-Dist`), and its lowest allowed release too."""

    each: str  # one of EACH
    range: str  # an axis value: exact, X.Y.x, X.x, latest, or a PEP 440 specifier (not pre)
    pre: bool = False

    def __str__(self) -> str:
        where = "the declared range" if self.declared else self.range
        return f"every {self.each} in {where}" + (" (pre-releases too)" if self.pre else "")

    @property
    def declared(self) -> bool:
        return self.range == DECLARED


@dataclass(frozen=True)
class Axis:
    package: str  # a distribution name, or "python" for the interpreter
    values: tuple[str | Sweep, ...]  # sweeps are expanded into releases before cells are made (resolve.expand)


@dataclass(frozen=True)
class MatrixSpec:
    path: Path
    name: str
    requirements: tuple[str, ...]  # PEP 508 requirements, or absolute paths of local projects
    axes: tuple[Axis, ...]
    subjects: tuple[Subject, ...]
    timeout: float = DEFAULT_TIMEOUT
    cell_timeout: float = DEFAULT_CELL_TIMEOUT
    # Each rule maps axes to values; a cell matching every axis of one rule is left out.
    exclude: tuple[tuple[tuple[str, str], ...], ...] = ()
    probes: tuple[str, ...] = ()  # probe modules of the user's own: absolute paths of .py files, or module names
    mutants: bool = False  # also run the subjects' tests against broken versions of the audited methods
    exclude_newer: str | None = None  # resolve and install as of this moment (RFC 3339, UTC), like uv's option
    extra_requirements: tuple[str, ...] = ()  # installed in every cell, not what is audited (an undeclared import)
    # uv's overrides: an axis package (its cell's pin wins over what any requirement declares: a library's cap
    # lifted), or a requirement as is
    overrides: tuple[str, ...] = ()

    @property
    def sweeps(self) -> bool:
        return any(isinstance(v, Sweep) for axis in self.axes for v in axis.values)

    def to_json(self) -> dict[str, Any]:
        """The spec as a plan file holds it: checked, its sweeps already expanded into releases."""
        if self.sweeps:
            raise ValueError(f"{self.path}: sweeps not expanded into releases")
        return {
            "path": str(self.path),
            "name": self.name,
            "requirements": list(self.requirements),
            "axes": [[axis.package, list(axis.values)] for axis in self.axes],
            "subjects": [subject.to_json() for subject in self.subjects],
            "timeout": self.timeout,
            "cell_timeout": self.cell_timeout,
            "exclude": [[list(pair) for pair in rule] for rule in self.exclude],
            "probes": list(self.probes),
            "mutants": self.mutants,
            "exclude_newer": self.exclude_newer,
            "extra_requirements": list(self.extra_requirements),
            "overrides": list(self.overrides),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MatrixSpec:
        return cls(
            path=Path(data["path"]),
            name=data["name"],
            requirements=tuple(data["requirements"]),
            axes=tuple(Axis(package, tuple(map(str, values))) for package, values in data["axes"]),
            subjects=tuple(Subject.from_json(s) for s in data["subjects"]),
            timeout=float(data["timeout"]),
            cell_timeout=float(data["cell_timeout"]),
            exclude=tuple(tuple((str(a), str(v)) for a, v in rule) for rule in data["exclude"]),
            probes=tuple(data["probes"]),
            mutants=bool(data["mutants"]),
            exclude_newer=data["exclude_newer"],
            extra_requirements=tuple(data.get("extra_requirements", ())),
            overrides=tuple(data.get("overrides", ())),
        )

    @property
    def installs(self) -> tuple[str, ...]:
        """What every cell installs besides its pins: the requirements, then the extra requirements (the matrix's and
        its subjects'), each once."""
        extra = [*self.extra_requirements, *(r for s in self.subjects for r in s.extra_requirements)]
        return tuple(dict.fromkeys([*self.requirements, *extra]))

    @property
    def packages(self) -> tuple[str, ...]:
        """The distributions whose installed versions the report records: every axis package and named requirement
        (a local one by the name its pyproject.toml gives)."""
        named = [Requirement(r).name if not is_local(r) else local_name(r) for r in self.installs]
        axes = [a.package for a in self.axes if a.package != PYTHON]
        return tuple(dict.fromkeys(n for n in [*axes, *named, "torch", "transformers"] if n))


def local_name(path: str) -> str | None:
    """The distribution name a local project declares in its pyproject.toml, if it does."""
    try:
        return tomllib.loads((Path(path) / "pyproject.toml").read_text(encoding="utf-8"))["project"]["name"]
    except (OSError, KeyError, TypeError, tomllib.TOMLDecodeError):
        return None


def is_local(requirement: str) -> bool:
    return requirement.startswith(("./", "../", "/", "~"))
