"""Matrix files: parse, validate, and turn into a MatrixSpec.

Standard library plus `packaging` only, so the noxfile can import it from nox's own interpreter. Every problem in
a file is collected and reported together, one line each, naming the file, the key and the bad value; whatever a
file holds, this module raises nothing but MatrixError.

Each table has one registry of its known keys (`TOP_KEYS`, `MATRIX_KEYS`, `SUBJECT_KEYS`) and each key one
validator, so a new key is one entry and one function. An unknown key is answered with the closest known one, or
with the table it belongs in when TOML put it in another one (a line written below the wrong `[header]`).
"""

from __future__ import annotations

import datetime
import difflib
import json
import keyword
import os
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from compat_matrix.host import factories
from compat_matrix.host.exits import BadInput
from compat_matrix.host.prerelease import PRE
from compat_matrix.shared.limits import DEFAULT_TIMEOUT
from compat_matrix.shared.vocabulary import EXPECTABLE

PYTHON = "python"
DEFAULT_CELL_TIMEOUT = 1800.0  # seconds for a whole cell: install and probes
MAX_SECONDS = 7 * 24 * 3600.0
NAME_LIMIT = 100  # characters of a matrix name: it names files
SHOW_LIMIT = 80  # characters of a value or key quoted in a problem
_SERIES = re.compile(r"([0-9]+(?:\.[0-9]+)*)\.x")
_TARGET = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
DECLARED = "declared"  # a sweep's range: what the matrix's requirements declare for the package
_CATCH = re.compile(r"\w+\.\S+")
_MODULE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_MISSING = object()
TIMESTAMP = "a date (2026-10-01, midnight UTC) or an RFC 3339 timestamp (2026-10-01T12:00:00Z)"


class MatrixError(BadInput):
    """A matrix file that cannot be used; `problems` holds one line per problem."""


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


def axis_specifier(value: str) -> SpecifierSet:
    """What an axis value allows: exact, X.Y.x (newest X.Y), X.x, latest (anything), pre (the newest pre-release,
    where it is newer than every release: resolve.resolve picks it), or a PEP 440 specifier."""
    value = value.strip()
    if value == "latest":
        return SpecifierSet()
    if value == PRE:  # any release, pre-releases too; only the one the index offers is ever installed
        return SpecifierSet(">=0.dev0")
    series = _SERIES.fullmatch(value)
    if series:
        return SpecifierSet(f"=={series.group(1)}.*")
    try:
        return SpecifierSet(f"=={Version(value)}")
    except InvalidVersion:
        pass
    try:
        if value:
            return SpecifierSet(value)
    except InvalidSpecifier:
        pass
    raise ValueError(f"not a version, X.Y.x, X.x, 'latest', 'pre' or PEP 440 specifier: {show(value)}")


def axis_requirement(package: str, value: str) -> str:
    """The installer requirement for one axis value."""
    return f"{package}{axis_specifier(value)}"


def timestamp(value: str) -> str:
    """A date (`2026-10-01`, midnight UTC) or an RFC 3339 timestamp, as the UTC timestamp uv gets
    (`2026-10-01T00:00:00Z`), so that a run resolves alike on every machine whatever its time zone."""
    text = value.strip()
    try:
        if len(text) == 10:
            moment = datetime.datetime.combine(datetime.date.fromisoformat(text), datetime.time(), datetime.UTC)
        else:
            moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(TIMESTAMP) from None
    if moment.tzinfo is None:
        raise ValueError(f"{TIMESTAMP}; a timestamp needs its time zone (Z for UTC)")
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def show(value: Any) -> str:
    """A value as a problem quotes it: its repr on one line, cut to SHOW_LIMIT characters."""
    text = repr(value)
    return text if len(text) <= SHOW_LIMIT else text[: SHOW_LIMIT - 1] + "…"


def display_path(path: Path) -> str:
    """`path` relative to the working directory when it lies below it, else absolute."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(Path(path).resolve())


def dotted(prefix: str, key: str) -> str:
    """`prefix.key`, the key quoted as TOML would need it (and cut) when it is not a bare key."""
    if not _BARE_KEY.fullmatch(key):
        quoted = "".join(c if c.isprintable() else _escape(c) for c in json.dumps(key, ensure_ascii=False))
        key = quoted if len(quoted) <= SHOW_LIMIT else quoted[: SHOW_LIMIT - 2] + '…"'
    return f"{prefix}.{key}" if prefix else key


def _escape(char: str) -> str:
    return f"\\u{ord(char):04x}" if ord(char) <= 0xFFFF else f"\\U{ord(char):08x}"


@dataclass(frozen=True)
class Context:
    """Where a validator is: the file and the dotted key. Problems go into the shared list."""

    path: Path
    key: str
    problems: list[str] = field(default_factory=list)

    def at(self, key: str) -> Context:
        return Context(self.path, key, self.problems)

    def problem(self, value: Any, why: str) -> None:
        shown = "" if value is _MISSING else f" = {show(value)}"
        reason = " ".join(line.strip() for line in str(why).splitlines() if line.strip())
        self.problems.append(f"{self.path}: {self.key}{shown}: {reason}")


@dataclass(frozen=True)
class Key:
    check: Callable[[Any, Context], Any]  # the value as written → the parsed value (problems go to the context)
    required: str | None = None  # the problem to report when the key is missing
    default: Any = None


def load(path: Path) -> MatrixSpec:
    """Read and validate one matrix file; raise MatrixError listing every problem."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MatrixError([f"{path}: no such matrix file"]) from None
    except IsADirectoryError:
        raise MatrixError([f"{path}: a folder, not a matrix file"]) from None
    except UnicodeDecodeError as exc:
        raise MatrixError([f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"]) from None
    except (OSError, ValueError) as exc:
        raise MatrixError([f"{path}: cannot read the matrix file ({type(exc).__name__}: {exc})"]) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MatrixError([f"{path}: invalid TOML: {exc}"]) from None
    return parse(data, path)


def parse(data: dict[str, Any], path: Path) -> MatrixSpec:
    at = Context(Path(path), "")
    top = section(data, TOP_KEYS, "", at, "the top level")
    matrix = top["matrix"] or {}
    axes = top["axes"] or ()
    exclude = _exclude_axes(top["exclude"] or (), axes, at)
    _declared_from(axes, matrix.get("requirements"), at)
    overrides = _overrides(matrix.get("overrides") or (), axes, at)
    if at.problems:
        raise MatrixError(at.problems)
    return MatrixSpec(
        Path(path),
        matrix["name"],
        matrix["requirements"],
        axes,
        top["subjects"],
        matrix["timeout"],
        matrix["cell_timeout"],
        exclude,
        matrix["probes"],
        matrix["mutants"],
        matrix["exclude_newer"],
        matrix["extra_requirements"],
        overrides,
    )


def section(table: dict[str, Any], keys: dict[str, Key], prefix: str, at: Context, header: str) -> dict[str, Any]:
    """Validate one table against its registry of known keys; every known key is in the result (or its default)."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        here = at.at(dotted(prefix, key))
        if key in keys:
            out[key] = keys[key].check(value, here)
        else:
            here.problem(value, unknown_key(key, keys, header))
    for key, spec in keys.items():
        if key not in table:
            if spec.required:
                at.at(dotted(prefix, key)).problem(_MISSING, spec.required)
            out[key] = spec.default
    return out


def unknown_key(key: str, known: dict[str, Key], header: str) -> str:
    """Why `key` is not accepted in the table `header`: where it belongs, or the closest known key."""
    home = _HOMES.get(key)
    if home and home != header:
        moved = f"; TOML put it in {header} because it comes after that header" if header.startswith("[") else ""
        return f"unknown key in {header}: `{key}` belongs in {home}{moved}"
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    if close:
        return f"unknown key; did you mean `{close[0]}`?"
    return f"unknown key (known in {header}: {', '.join(known)})"


def _as_table(value: Any, at: Context) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        at.problem(value, f"a table: write [{at.key}] on a line of its own, then its keys below it")
        return None
    return value


def _matrix(value: Any, at: Context) -> dict[str, Any] | None:
    table = _as_table(value, at)
    if table is None:
        return None
    return section(table, MATRIX_KEYS, "matrix", at, "[matrix]")


def _name(value: Any, at: Context) -> str | None:
    if not isinstance(value, str) or not _NAME.fullmatch(value) or len(value) > NAME_LIMIT:
        at.problem(value, f"letters, digits, '.', '_' or '-', at most {NAME_LIMIT} characters")
        return None
    return value


def _text(value: Any, at: Context) -> str | None:
    if not isinstance(value, str):
        at.problem(value, "a string")
        return None
    return value


def _seconds(default: float) -> Callable[[Any, Context], float]:
    def check(value: Any, at: Context) -> float:
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not number or not 0 < value <= MAX_SECONDS:  # NaN compares false, so it is refused too
            at.problem(value, f"a positive number of seconds, at most {MAX_SECONDS:g}")
            return default
        return float(value)

    return check


def _requirements(values: Any, at: Context) -> tuple[str, ...]:
    if not isinstance(values, list):
        at.problem(values, "a list of strings")
        return ()
    out: list[str] = []
    for index, value in enumerate(values):
        parsed = _requirement(value, at.at(f"{at.key}[{index}]"))
        if parsed is not None:
            out.append(parsed)
    return tuple(out)


def _requirement(value: Any, at: Context) -> str | None:
    why = "a PEP 508 requirement or a local path"
    if not isinstance(value, str) or not value.strip():
        at.problem(value, why)
    elif value.lstrip().startswith("-"):
        at.problem(value, f"installer options are not allowed; {why}")
    elif is_local(value):
        return _local_path(value, at)
    elif "://" in value:
        at.problem(value, f"URLs are not allowed; {why}")
    else:
        try:
            requirement = Requirement(value)
        except InvalidRequirement as exc:
            at.problem(value, f"not a PEP 508 requirement ({exc})")
            return None
        if requirement.url:
            at.problem(value, f"URLs are not allowed; {why}")
            return None
        return str(requirement)
    return None


def _local_path(value: str, at: Context) -> str | None:
    try:
        local = (at.path.parent / Path(value).expanduser()).resolve()
        exists = local.exists()
    except (OSError, RuntimeError, ValueError) as exc:  # no such user for ~name, a NUL byte, a name too long
        at.problem(value, f"not a usable local path ({type(exc).__name__}: {exc})")
        return None
    if not exists:
        at.problem(value, f"local path does not exist: {local}")
        return None
    return str(local)


def _timestamp(value: Any, at: Context) -> str | None:
    if isinstance(value, (datetime.date, datetime.datetime)):  # TOML's own dates, written without quotes
        value = value.isoformat()
    if not isinstance(value, str):
        at.problem(value, TIMESTAMP)
        return None
    try:
        return timestamp(value)
    except ValueError as exc:
        at.problem(value, str(exc))
        return None


def _boolean(value: Any, at: Context) -> bool:
    if not isinstance(value, bool):
        at.problem(value, "true or false")
        return False
    return value


def _each(check: Callable[[Any, Context], str | None], why: str) -> Callable[[Any, Context], tuple[str, ...]]:
    """A validator of a list of strings, each checked by `check`."""

    def checked(values: Any, at: Context) -> tuple[str, ...]:
        if not isinstance(values, list):
            at.problem(values, why)
            return ()
        found = [check(value, at.at(f"{at.key}[{index}]")) for index, value in enumerate(values)]
        return tuple(f for f in found if f is not None)

    return checked


def _probe_module(value: Any, at: Context) -> str | None:
    """A .py file (./, ../ or /, relative to the matrix file) or an importable module name."""
    if isinstance(value, str) and is_local(value):
        local = _local_path(value, at)
        if local is not None and not (local.endswith(".py") and Path(local).is_file()):
            at.problem(value, f"not a .py file: {local}")
            return None
        return local
    if not isinstance(value, str) or not _MODULE.fullmatch(value):
        at.problem(value, "a .py file (./, ../ or /) or an importable module name")
        return None
    return value


def _test(value: Any, at: Context) -> str | None:
    """A pytest node id or path, relative to the matrix file: `tests/test_x.py::TestClass::test_y`."""
    if not isinstance(value, str) or not value.strip() or value.startswith("-"):
        at.problem(value, "a pytest node id or path, relative to the matrix file, e.g. 'tests/test_x.py::TestX'")
        return None
    path, sep, rest = value.partition("::")
    local = _local_path(path if is_local(path) or path.startswith("/") else f"./{path}", at)
    return None if local is None else local + sep + rest


def _axes(value: Any, at: Context) -> tuple[Axis, ...]:
    table = _as_table(value, at)
    if table is None:
        return ()
    if not table:
        at.problem(table, 'at least one axis, e.g. transformers = ["5.x"]')
    axes: list[Axis] = []
    for package, values in table.items():
        here = at.at(dotted("axes", package))
        if package in _HOMES:
            here.problem(values, f"not a package: {unknown_key(package, {}, '[axes]')}")
        elif package != PYTHON and not _NAME.fullmatch(package):
            here.problem(values, "not a package name")
        elif not isinstance(values, list) or not values or not all(isinstance(v, (str, dict)) for v in values):
            here.problem(values, 'a non-empty list of versions or sweeps: ["5.x", {each = "minor", range = ">=5"}]')
        else:
            checked = _axis_values(package, values, here)
            axes.append(Axis(PYTHON if package == PYTHON else canonicalize_name(package), checked))
    return tuple(axes)


def _axis_values(package: str, values: list[str | dict], at: Context) -> tuple[str | Sweep, ...]:
    out: list[str | Sweep] = []
    for index, value in enumerate(values):
        if isinstance(value, dict):
            here = at.at(f"{at.key}[{index}]")
            if package == PYTHON:
                here.problem(value, "a Python version; sweeps list the releases of a package")
            else:
                keys = section(value, SWEEP_KEYS, here.key, here, "a sweep")
                if keys["each"] is not None and keys["range"] is not None:
                    out.append(Sweep(keys["each"], keys["range"], keys["pre"]))
            continue
        try:
            if package == PYTHON:
                Version(value)
            else:
                axis_specifier(value)
            out.append(value)
        except (ValueError, InvalidVersion) as exc:
            at.problem(value, str(exc))
    if len(set(out)) != len(out):
        at.problem(values, "duplicate values")
    return tuple(out)


def _each_kind(value: Any, at: Context) -> str | None:
    if value not in EACH:
        at.problem(value, f"one of {', '.join(map(repr, EACH))}: the newest release of every minor, or every release")
        return None
    return value


def _range(value: Any, at: Context) -> str | None:
    if not isinstance(value, str):
        at.problem(value, 'a version range, e.g. ">=5.14" or "5.x", or "declared"')
        return None
    if value == DECLARED:
        return value
    if value == PRE:
        at.problem(value, f"{PRE!r} stands for one release: write it as an axis value, beside the sweep")
        return None
    try:
        axis_specifier(value)
    except ValueError as exc:
        at.problem(value, str(exc))
        return None
    return value


def _subjects(values: Any, at: Context) -> tuple[Subject, ...]:
    if isinstance(values, dict):
        at.problem(values, "a list of tables: write [[subjects]] (two brackets) above each subject")
        return ()
    if not isinstance(values, list) or not values:
        at.problem(values, "at least one [[subjects]] table")
        return ()
    subjects: list[Subject] = []
    for index, table in enumerate(values):
        here = at.at(f"subjects[{index}]")
        if not isinstance(table, dict):
            here.problem(table, "a [[subjects]] table with target = 'module:Class'")
            continue
        keys = section(table, SUBJECT_KEYS, here.key, here, "[[subjects]]")
        target = keys["target"]
        if target is not None and target in {s.target for s in subjects}:
            here.at(f"{here.key}.target").problem(target, "listed twice; each subject once")
        subjects.append(
            Subject(
                str(target),
                keys["methods"],
                keys["factory"],
                keys["expect"],
                keys["catches"],
                keys["tests"],
                keys["inputs"],
                keys["exclude"],
                keys["extra_requirements"],
            )
        )
        if keys["exclude"] and target is not None and ":" in target:
            here.at(f"{here.key}.exclude").problem(list(keys["exclude"]), "only for a module or package target")
    return tuple(subjects)


def _target(value: Any, at: Context) -> str | None:
    if not isinstance(value, str) or not (_TARGET.fullmatch(value) or _MODULE.fullmatch(value)):
        at.problem(value, "as 'module:Class', or a module or package ('mylib.models') for every class defined there")
        return None
    return value


def _left_out(value: Any, at: Context) -> str | None:
    """A class (`Class` or `module:Class`) or a module (`mylib.legacy`, with everything below it) to leave out."""
    if not isinstance(value, str) or not (_TARGET.fullmatch(value) or _MODULE.fullmatch(value)):
        at.problem(value, "a class ('Class' or 'module:Class') or a module ('mylib.legacy')")
        return None
    return value


def _override(value: Any, at: Context) -> str | None:
    if isinstance(value, str) and is_local(value):
        at.problem(value, "an axis package (transformers) or a PEP 508 requirement (numpy<2), not a path")
        return None
    return _requirement(value, at)


def _overrides(values: tuple[str, ...], axes: tuple[Axis, ...], at: Context) -> tuple[str, ...]:
    """uv's overrides: an axis package stands for its cell's pin; anything else is a requirement, as is."""
    packages = {a.package for a in axes}
    out = []
    for index, value in enumerate(values):
        if canonicalize_name(Requirement(value).name) in packages and Requirement(value).specifier:
            why = "an axis package: name it alone, and each cell's pin of it overrides what requirements declare"
            at.at(f"matrix.overrides[{index}]").problem(value, why)
        else:
            out.append(canonicalize_name(value) if canonicalize_name(value) in packages else value)
    return tuple(out)


def _declared_from(axes: tuple[Axis, ...], requirements: tuple[str, ...] | None, at: Context) -> None:
    """A sweep of the declared range needs a requirement to read it from."""
    declared = [a.package for a in axes for v in a.values if isinstance(v, Sweep) and v.declared]
    if declared and not requirements:
        why = "needs matrix.requirements: the range is read from what they declare for the package"
        at.at(dotted("axes", declared[0])).problem(_MISSING, f'range = "declared" {why}')


def _factory(value: Any, at: Context) -> str | None:
    if not isinstance(value, str) or not _TARGET.fullmatch(value):
        at.problem(value, "as 'module:callable'")
        return None
    why = factories.missing(at.path.parent, value)  # a module beside the file: the cells import it from there
    if why is not None:
        at.problem(value, why)
        return None
    return value


def _methods(value: Any, at: Context) -> tuple[str, ...]:
    names = isinstance(value, list) and all(isinstance(m, str) and _identifier(m) for m in value)
    if not names or not value:
        at.problem(value, "a non-empty list of method names, or leave it out")
        return ()
    if len(set(value)) != len(value):
        at.problem(value, "each method once")
        return ()
    return tuple(value)


def _identifier(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


def _expect(table: Any, at: Context) -> tuple[Expectation, ...]:
    if not isinstance(table, dict):
        at.problem(table, 'a table of version range = verdict, e.g. {">=5.23" = "differs", "*" = "same"}')
        return ()
    for spec, verdict in table.items():
        here = at.at(dotted(at.key, spec))
        if spec != "*":
            try:
                SpecifierSet(spec)
            except InvalidSpecifier:
                here.problem(verdict, f"{show(spec)} is not '*' or a PEP 440 specifier")
        if not isinstance(verdict, str) or verdict not in EXPECTABLE:
            here.problem(verdict, f"expected one of {', '.join(EXPECTABLE)}")
    return tuple(Expectation(spec, verdict) for spec, verdict in table.items())


def _catches(values: Any, at: Context) -> tuple[str, ...]:
    if not isinstance(values, list) or not all(isinstance(v, str) and _CATCH.fullmatch(v) for v in values):
        at.problem(values, 'a list of "probe.observation" names, e.g. ["kwargs_forwarded.set_a"]')
        return ()
    return tuple(values)


def _exclude(rules: Any, at: Context) -> tuple[dict[str, Any], ...]:
    if not isinstance(rules, list) or not all(isinstance(r, dict) and r for r in rules):
        at.problem(rules, "[[exclude]] tables of axis = value")
        return ()
    return tuple(rules)


def _exclude_axes(
    rules: tuple[dict[str, Any], ...], axes: tuple[Axis, ...], at: Context
) -> tuple[tuple[tuple[str, str], ...], ...]:
    values = {axis.package: axis.values for axis in axes}
    out = []
    for index, rule in enumerate(rules):
        for axis, value in rule.items():
            here = at.at(dotted(f"exclude[{index}]", axis))
            if axis not in values:
                here.problem(value, f"not an axis (axes: {', '.join(values)})")
            elif not isinstance(value, str) or not (value in values[axis] or _swept(value, values[axis])):
                shown = [v if isinstance(v, str) else str(v) for v in values[axis]]
                here.problem(value, f"not one of the axis values {shown}")
        out.append(tuple(sorted((axis, str(value)) for axis, value in rule.items())))
    return tuple(out)


def _swept(value: str, values: tuple[str | Sweep, ...]) -> bool:
    """Whether `value` is a release that one of the sweeps among `values` may expand to."""
    try:
        version = Version(value)
    except InvalidVersion:
        return False
    return any(
        isinstance(v, Sweep) and (v.declared or axis_specifier(v.range).contains(version, prereleases=True))
        for v in values
    )


TOP_KEYS: dict[str, Key] = {
    "matrix": Key(_matrix, required="required table [matrix] with name = '...'"),
    "axes": Key(_axes, required='required table [axes], e.g. transformers = ["5.x"]'),
    "subjects": Key(_subjects, required="at least one [[subjects]] table"),
    "exclude": Key(_exclude, default=()),
}
MATRIX_KEYS: dict[str, Key] = {
    "name": Key(_name, required="required; letters, digits, '.', '_' or '-'"),
    "requirements": Key(_requirements, default=()),
    "timeout": Key(_seconds(DEFAULT_TIMEOUT), default=DEFAULT_TIMEOUT),
    "cell_timeout": Key(_seconds(DEFAULT_CELL_TIMEOUT), default=DEFAULT_CELL_TIMEOUT),
    "description": Key(_text),
    "probes": Key(_each(_probe_module, "a list of .py files or module names"), default=()),
    "mutants": Key(_boolean, default=False),
    "exclude_newer": Key(_timestamp),
    "extra_requirements": Key(_requirements, default=()),
    "overrides": Key(_each(_override, "a list of axis packages or PEP 508 requirements"), default=()),
}
EACH = ("minor", "release")
SWEEP_KEYS: dict[str, Key] = {
    "each": Key(_each_kind, required=f"required: one of {', '.join(map(repr, EACH))}"),
    "range": Key(_range, required='required: the releases to sweep, e.g. ">=5.14"'),
    "pre": Key(_boolean, default=False),
}
SUBJECT_KEYS: dict[str, Key] = {
    "target": Key(_target, required="required, as 'module:Class'"),
    "methods": Key(_methods, default=()),  # left out: every method the subject defines that overrides transformers
    "factory": Key(_factory),
    "inputs": Key(_factory),
    "expect": Key(_expect, default=()),
    "catches": Key(_catches, default=()),
    "tests": Key(_each(_test, "a list of pytest node ids or paths"), default=()),
    "exclude": Key(_each(_left_out, "a list of classes or modules to leave out"), default=()),
    "extra_requirements": Key(_requirements, default=()),
}
# Where each known key belongs, to say so when TOML put it in another table.
_HOMES = {
    **{key: "[[subjects]]" for key in SUBJECT_KEYS},
    **{key: "[matrix]" for key in MATRIX_KEYS},
    **{key: "the top level" for key in TOP_KEYS},
}


def matrix_files(selected: str | None, default_dir: Path) -> list[Path]:
    """The files named by COMPAT_MATRIX (several separated by the path separator), else every *.toml in matrix/."""
    if selected:
        return [Path(p).resolve() for p in selected.split(os.pathsep) if p]
    return sorted(Path(default_dir).glob("*.toml"))


def load_all(paths: list[Path]) -> tuple[list[MatrixSpec], list[str]]:
    """The specs that loaded, and every problem of those that did not, including two files with one name."""
    specs: list[MatrixSpec] = []
    problems: list[str] = []
    for path in paths:
        try:
            specs.append(load(path))
        except MatrixError as exc:
            problems += exc.problems
    names: dict[str, Path] = {}
    for matrix in specs:
        if matrix.name in names:
            problems.append(f"{matrix.path}: matrix.name = {matrix.name!r}: also the name of {names[matrix.name]}")
        names.setdefault(matrix.name, matrix.path)
    if not paths:
        problems.append("no matrix files: add matrix/*.toml or set COMPAT_MATRIX=path/to/file.toml")
    return specs, problems
