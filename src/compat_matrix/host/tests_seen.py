"""What one subject's own tests say across the tested releases: per release, which tests need the override, and
which tests notice a broken override (the mutants). Pure functions over results. The words
are render's (the tables) and wording's (the recommendation's last word)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from compat_matrix.shared.results import SubjectResult

PASSING, FAILING = ("passed",), ("failed", "error")
TEST_COLUMNS = ("needs the override", "fails only with the override", "passes in both", "fails in both", "other")


class TestsOn(NamedTuple):
    """The user's tests on one tested release, in the columns of TEST_COLUMNS."""

    __test__ = False  # not a test class, for pytest's collection of modules that import it

    label: str
    columns: tuple[tuple[str, ...], ...]  # one tuple of tests per column


@dataclass(frozen=True)
class TestsSeen:
    """What one subject's own tests say across the tested versions: per version, the tests in each of
    TEST_COLUMNS; per test, the broken versions it catches; the tests that catch none; the tests that catch
    nothing another test does not catch."""

    __test__ = False  # not a test class, for pytest's collection of modules that import it

    per_version: tuple[TestsOn, ...]
    catches: tuple[tuple[str, str], ...]  # (test, what it catches, said once or per version)
    catch_none: tuple[str, ...]
    adds_nothing: tuple[tuple[str, str], ...]  # (test, a test that catches all it catches)
    mutants: tuple[str, ...]  # the broken versions the tests ran against


def short_tests(ids: list[str]) -> dict[str, str]:
    """Test ids without the part they all share (`tests/test_x.py::`)."""
    prefix = ids[0].rsplit("::", 1)[0] + "::" if ids else ""
    while prefix and not all(i.startswith(prefix) for i in ids):
        prefix = prefix[:-2].rsplit("::", 1)[0] + "::" if "::" in prefix[:-2] else ""
    return {i: i.removeprefix(prefix) or i for i in ids}


def _column(override: str, base: str) -> int:
    if override in PASSING and base in FAILING:
        return 0
    if override in FAILING and base in PASSING:
        return 1
    if override in PASSING and base in PASSING:
        return 2
    return 3 if override in FAILING and base in FAILING else 4


def seen_tests(rows: list[tuple[str, SubjectResult | None]]) -> TestsSeen | None:
    """`rows`: (label, result) newest first. None when the subject names no tests (or none ran)."""
    ran = [(label, r) for label, r in rows if r is not None and r.tests]
    if not ran:
        return None
    names = short_tests(list(dict.fromkeys(t.id for _, r in ran for t in r.tests)))
    per_version = []
    for label, result in ran:
        columns: list[list[str]] = [[] for _ in TEST_COLUMNS]
        for t in result.tests:
            columns[_column(t.override, t.base)].append(names[t.id])
        per_version.append(TestsOn(label, tuple(tuple(c) for c in columns)))
    mutated = [(label, r) for label, r in ran if r.mutants]
    caught: dict[str, dict[str, tuple[str, ...]]] = {}
    for label, result in mutated:
        for t in result.tests:
            if t.override in PASSING:
                caught.setdefault(names[t.id], {})[label] = t.catches
    catches = [(test, _caught_text(by_label)) for test, by_label in caught.items()]
    union = {test: set().union(*by_label.values()) for test, by_label in caught.items()}
    catch_none = tuple(test for test, found in union.items() if not found)
    adds_nothing = tuple((test, other) for test in union if union[test] and (other := _covered_by(test, union)))
    every = tuple(dict.fromkeys(m for _, r in mutated for m in r.mutants))
    return TestsSeen(tuple(per_version), tuple(catches), catch_none, adds_nothing, every)


def _caught_text(by_label: dict[str, tuple[str, ...]]) -> str:
    """What a test catches: once when the same on every version, else per version."""
    said = {", ".join(c) or "none" for c in by_label.values()}
    if len(said) == 1:
        return said.pop()
    return "; ".join(f"{label}: {', '.join(c) or 'none'}" for label, c in by_label.items())


def _covered_by(test: str, union: dict[str, set[str]]) -> str | None:
    """Another test that catches every broken version `test` catches; of two that catch the same, the first
    listed covers the later."""
    order = list(union)
    for other, more in union.items():
        if other != test and union[test] <= more and (union[test] < more or order.index(other) < order.index(test)):
            return other
    return None
