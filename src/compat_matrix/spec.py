"""Matrix files: parse, validate, and turn into a MatrixSpec.

Standard library plus `packaging` only, so the noxfile can import it from nox's own interpreter. Every problem in
a file is collected and reported together, each naming the file, the key and the bad value.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomllib
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

PYTHON = "python"
VERDICTS = ("same", "differs")
DEFAULT_TIMEOUT = 300.0  # seconds per probe call
DEFAULT_CELL_TIMEOUT = 1800.0  # seconds for a whole cell: install and probes
_SERIES = re.compile(r"^(\d+(?:\.\d+)*)\.x$")
_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_CATCH = re.compile(r"^\w+\.\S+$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

_KNOWN = {
    "matrix": {"name", "requirements", "timeout", "cell_timeout", "description", "probes"},
    "subjects": {"target", "methods", "factory", "expect", "catches"},
}


class MatrixError(ValueError):
    """A matrix file that cannot be used; `problems` holds one line per problem."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Subject:
    target: str  # "module:Class"
    methods: tuple[str, ...]
    factory: str | None = None  # "module:callable"; None means the default factory
    # (version range of the first axis, or "*"; expected verdict), in file order: the first match applies
    expect: tuple[tuple[str, str], ...] = ()
    # "probe.observation" that must differ wherever `differs` is expected, with the base side free of errors there
    catches: tuple[str, ...] = ()

    def expected(self, version: str | None) -> str | None:
        """The verdict this subject is expected to get on `version` of the first axis, if the file says."""
        for spec, verdict in self.expect:
            if spec == "*" or (version and _matches(spec, version)):
                return verdict
        return None


def _matches(spec: str, version: str) -> bool:
    try:
        return SpecifierSet(spec).contains(Version(version), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return False


@dataclass(frozen=True)
class Axis:
    package: str  # a distribution name, or "python" for the interpreter
    values: tuple[str, ...]


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
    # Probe modules of the user's own: absolute paths of .py files, or importable module names.
    probes: tuple[str, ...] = ()

    @property
    def packages(self) -> tuple[str, ...]:
        """The distributions whose installed versions the report records: every axis package and named requirement."""
        named = [Requirement(r).name for r in self.requirements if not is_local(r)]
        axes = [a.package for a in self.axes if a.package != PYTHON]
        return tuple(dict.fromkeys([*axes, *named, "torch", "transformers"]))


def is_local(requirement: str) -> bool:
    return requirement.startswith(("./", "../", "/", "~"))


def axis_requirement(package: str, value: str) -> str:
    """The installer requirement for one axis value: exact, X.Y.x (newest X.Y), X.x, latest, or a specifier."""
    value = value.strip()
    if not value:
        raise ValueError(f"not a version, X.Y.x, X.x, 'latest' or PEP 440 specifier: {value!r}")
    if value == "latest":
        return package
    series = _SERIES.match(value)
    if series:
        return f"{package}=={series.group(1)}.*"
    try:
        return f"{package}=={Version(value)}"
    except InvalidVersion:
        pass
    try:
        return f"{package}{SpecifierSet(value)}"
    except InvalidSpecifier:
        raise ValueError(f"not a version, X.Y.x, X.x, 'latest' or PEP 440 specifier: {value!r}") from None


def load(path: Path) -> MatrixSpec:
    """Read and validate one matrix file; raise MatrixError listing every problem."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MatrixError([f"{path}: no such matrix file"]) from None
    except tomllib.TOMLDecodeError as exc:
        raise MatrixError([f"{path}: invalid TOML: {exc}"]) from None
    return parse(data, path)


def parse(data: dict[str, Any], path: Path) -> MatrixSpec:
    problems: list[str] = []

    def problem(key: str, value: Any, why: str) -> None:
        problems.append(f"{path}: {key} = {value!r}: {why}")

    for key in data.keys() - {"matrix", "axes", "subjects", "exclude"}:
        problem(key, data[key], "unknown key (expected [matrix], [axes], [[subjects]], [[exclude]])")

    matrix = _table(data, "matrix", problem)
    for key in matrix.keys() - _KNOWN["matrix"]:
        problem(f"matrix.{key}", matrix[key], "unknown key")
    name = matrix.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        problem("matrix.name", name, "required; letters, digits, '.', '_' or '-'")
    requirements = _requirements(matrix.get("requirements", []), path, problem)
    probes = _probe_modules(matrix.get("probes", []), path, problem)
    timeout = _seconds(matrix, "timeout", DEFAULT_TIMEOUT, problem)
    cell_timeout = _seconds(matrix, "cell_timeout", DEFAULT_CELL_TIMEOUT, problem)
    axes = _axes(_table(data, "axes", problem), problem)
    if data.get("axes") == {}:
        problem("axes", {}, 'at least one axis, e.g. transformers = ["5.x"]')
    subjects = _subjects(data.get("subjects"), problem)
    exclude = _exclude(data.get("exclude", []), axes, problem)

    if problems:
        raise MatrixError(problems)
    return MatrixSpec(path, name, requirements, axes, subjects, timeout, cell_timeout, exclude, probes)


def _table(data: dict[str, Any], key: str, problem) -> dict[str, Any]:
    table = data.get(key)
    if not isinstance(table, dict):
        problem(key, table, f"required table [{key}]")
        return {}
    return table


def _seconds(table: dict[str, Any], key: str, default: float, problem) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        problem(f"matrix.{key}", value, "a positive number of seconds")
        return default
    return float(value)


def _requirements(values: Any, path: Path, problem) -> tuple[str, ...]:
    if not isinstance(values, list):
        problem("matrix.requirements", values, "a list of strings")
        return ()
    out: list[str] = []
    for index, value in enumerate(values):
        key = f"matrix.requirements[{index}]"
        if not isinstance(value, str) or not value.strip():
            problem(key, value, "a PEP 508 requirement or a local path")
        elif value.lstrip().startswith("-"):
            problem(key, value, "installer options are not allowed; a PEP 508 requirement or a local path")
        elif is_local(value):
            local = (path.parent / value).expanduser().resolve()
            if not local.exists():
                problem(key, value, f"local path does not exist: {local}")
            out.append(str(local))
        elif "://" in value:
            problem(key, value, "URLs are not allowed; a PEP 508 requirement or a local path")
        else:
            try:
                requirement = Requirement(value)
            except InvalidRequirement as exc:
                problem(key, value, f"not a PEP 508 requirement ({exc})")
                continue
            if requirement.url:
                problem(key, value, "URLs are not allowed; a PEP 508 requirement or a local path")
            out.append(str(requirement))
    return tuple(out)


def _probe_modules(values: Any, path: Path, problem) -> tuple[str, ...]:
    """Paths of .py files (relative to the matrix file) or dotted module names that register probes."""
    if not isinstance(values, list):
        problem("matrix.probes", values, "a list of .py files or module names")
        return ()
    out: list[str] = []
    for index, value in enumerate(values):
        key = f"matrix.probes[{index}]"
        if isinstance(value, str) and is_local(value):
            local = (path.parent / value).expanduser().resolve()
            if local.suffix != ".py" or not local.is_file():
                problem(key, value, f"not a .py file: {local}")
            out.append(str(local))
        elif isinstance(value, str) and _MODULE.match(value):
            out.append(value)
        else:
            problem(key, value, "a .py file (./, ../ or /) or an importable module name")
    return tuple(out)


def _axes(table: dict[str, Any], problem) -> tuple[Axis, ...]:
    axes: list[Axis] = []
    for package, values in table.items():
        key = f"axes.{package}"
        if package != PYTHON and not _NAME.match(package):
            problem(key, values, "not a package name")
            continue
        if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
            problem(key, values, "a non-empty list of version strings")
            continue
        for value in values:
            try:
                if package == PYTHON:
                    Version(value)
                else:
                    axis_requirement(package, value)
            except (ValueError, InvalidVersion) as exc:
                problem(key, value, str(exc))
        if len(set(values)) != len(values):
            problem(key, values, "duplicate values")
        axes.append(Axis(PYTHON if package == PYTHON else canonicalize_name(package), tuple(values)))
    return tuple(axes)


def _subjects(values: Any, problem) -> tuple[Subject, ...]:
    if not isinstance(values, list) or not values:
        problem("subjects", values, "at least one [[subjects]] table")
        return ()
    subjects: list[Subject] = []
    for index, table in enumerate(values):
        key = f"subjects[{index}]"
        for extra in table.keys() - _KNOWN["subjects"]:
            problem(f"{key}.{extra}", table[extra], "unknown key")
        target = table.get("target")
        if not isinstance(target, str) or not _TARGET.match(target):
            problem(f"{key}.target", target, "required, as 'module:Class'")
        methods = table.get("methods", [])  # none: every discovered override that a probe covers
        if (
            not isinstance(methods, list)
            or ("methods" in table and not methods)
            or not all(isinstance(m, str) and m.isidentifier() for m in methods)
        ):
            problem(f"{key}.methods", methods, "a non-empty list of method names, or leave it out")
            methods = []
        factory = table.get("factory")
        if factory is not None and (not isinstance(factory, str) or not _TARGET.match(factory)):
            problem(f"{key}.factory", factory, "as 'module:callable'")
        if target in {s.target for s in subjects}:
            problem(f"{key}.target", target, "listed twice; each subject once")
        expect = _expectations(table.get("expect", {}), f"{key}.expect", problem)
        catches = _catches(table.get("catches", []), f"{key}.catches", problem)
        subjects.append(Subject(str(target), tuple(methods), factory, expect, catches))
    return tuple(subjects)


def _exclude(rules: Any, axes: tuple[Axis, ...], problem) -> tuple[tuple[tuple[str, str], ...], ...]:
    if not isinstance(rules, list) or not all(isinstance(r, dict) and r for r in rules):
        problem("exclude", rules, "[[exclude]] tables of axis = value")
        return ()
    values = {axis.package: axis.values for axis in axes}
    out = []
    for index, rule in enumerate(rules):
        for axis, value in rule.items():
            if axis not in values:
                problem(f"exclude[{index}].{axis}", value, f"not an axis (axes: {', '.join(values)})")
            elif value not in values[axis]:
                problem(f"exclude[{index}].{axis}", value, f"not one of the axis values {list(values[axis])}")
        out.append(tuple(sorted(rule.items())))
    return tuple(out)


def _expectations(table: Any, key: str, problem) -> tuple[tuple[str, str], ...]:
    if not isinstance(table, dict):
        problem(key, table, 'a table of version range = verdict, e.g. {">=5.23" = "differs", "*" = "same"}')
        return ()
    for spec, verdict in table.items():
        if spec != "*":
            try:
                SpecifierSet(spec)
            except InvalidSpecifier:
                problem(f'{key}."{spec}"', verdict, f"{spec!r} is not '*' or a PEP 440 specifier")
        if verdict not in VERDICTS:
            problem(f'{key}."{spec}"', verdict, f"expected one of {', '.join(VERDICTS)}")
    return tuple(table.items())


def _catches(values: Any, key: str, problem) -> tuple[str, ...]:
    if not isinstance(values, list) or not all(isinstance(v, str) and _CATCH.match(v) for v in values):
        problem(key, values, 'a list of "probe.observation" names, e.g. ["kwargs_forwarded.set_a"]')
        return ()
    return tuple(values)


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
