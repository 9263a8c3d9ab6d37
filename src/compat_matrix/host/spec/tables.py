"""The tables of a matrix file: one registry of known keys per table (`TOP_KEYS`, `MATRIX_KEYS`, `SWEEP_KEYS`,
`SUBJECT_KEYS`), each key one validator, and the checks that span a table. An unknown key is answered with the
closest known one, or with the table it belongs in when TOML put it in another one."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from compat_matrix.host.spec.grammar import axis_specifier
from compat_matrix.host.spec.model import DEFAULT_CELL_TIMEOUT, EACH, PYTHON, Axis, MatrixSpec, Subject, Sweep
from compat_matrix.host.spec.problems import MISSING, Context, MatrixError, dotted
from compat_matrix.host.spec.values import (
    _NAME,
    _as_table,
    _boolean,
    _catches,
    _each,
    _each_kind,
    _exclude,
    _expect,
    _factory,
    _left_out,
    _methods,
    _name,
    _override,
    _probe_module,
    _range,
    _requirements,
    _seconds,
    _target,
    _test,
    _text,
    _timestamp,
)
from compat_matrix.shared.limits import DEFAULT_TIMEOUT


@dataclass(frozen=True)
class Key:
    check: Callable[[Any, Context], Any]  # the value as written → the parsed value (problems go to the context)
    required: str | None = None  # the problem to report when the key is missing
    default: Any = None


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
                at.at(dotted(prefix, key)).problem(MISSING, spec.required)
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


def _matrix(value: Any, at: Context) -> dict[str, Any] | None:
    table = _as_table(value, at)
    if table is None:
        return None
    return section(table, MATRIX_KEYS, "matrix", at, "[matrix]")


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
        at.at(dotted("axes", declared[0])).problem(MISSING, f'range = "declared" {why}')


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


def parse(data: dict[str, Any], path: Path) -> MatrixSpec:
    """A matrix file's TOML, checked: its MatrixSpec, or MatrixError listing every problem."""
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
