"""One validator per kind of value a matrix file holds: each returns the parsed value, or reports what is wrong with
it (a problem of the `Context`) and returns a stand-in."""

from __future__ import annotations

import datetime
import keyword
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from compat_matrix.host import factories
from compat_matrix.host.prerelease import PRE
from compat_matrix.host.spec.grammar import TIMESTAMP, axis_specifier, timestamp
from compat_matrix.host.spec.model import DECLARED, EACH, Expectation, is_local
from compat_matrix.host.spec.problems import Context, dotted, show
from compat_matrix.shared.vocabulary import EXPECTABLE

MAX_SECONDS = 7 * 24 * 3600.0
NAME_LIMIT = 100  # characters of a matrix name: it names files
_TARGET = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
_CATCH = re.compile(r"\w+\.\S+")
_MODULE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _as_table(value: Any, at: Context) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        at.problem(value, f"a table: write [{at.key}] on a line of its own, then its keys below it")
        return None
    return value


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
