"""Bisect as pure functions: the releases each round tests, the budget it keeps, what a round's outcomes leave, and
what a cell says for a subject or one observation. No cells run here (tests/test_integration.py runs real ones)."""

from __future__ import annotations

import math

import pytest
from packaging.version import Version

from compat_matrix.host import bisection, verdict
from compat_matrix.shared.results import CellResult, Observation, SubjectResult

TARGET = "pkg.mod:Wrapper"


def versions(count: int) -> list[Version]:
    return [Version(f"5.{i}.0") for i in range(count)]


def oracle(releases: list[Version], first: int, rounds: list[list[Version]] | None = None):
    """A range whose outcome changes at index `first` (len(releases): never): `same` before, `differs` from it."""

    def test(asked: list[Version]) -> dict[Version, str]:
        if rounds is not None:
            rounds.append(list(asked))
        return {v: "same" if releases.index(v) < first else "differs" for v in asked}

    return test


@pytest.mark.parametrize(
    ("releases", "expected"), [(1, 1), (2, 2), (3, 3), (4, 3), (5, 4), (9, 5), (16, 5), (17, 6), (19, 6), (33, 7)]
)
def test_the_budget_is_the_oldest_release_and_halving_the_candidates(releases, expected):
    assert bisection.budget(releases) == expected


@pytest.mark.parametrize(
    ("candidates", "budget", "lanes", "expected"),
    [
        (1, 0, 2, 0),
        (2, 1, 1, 1),
        (2, 0, 2, math.inf),
        (4, 2, 1, 2),
        (4, 2, 2, 2),  # a second test would not save a round within the budget
        (3, 2, 2, 1),  # two tests split 3 candidates in one round
        (10, 4, 1, 4),
        (10, 4, 2, 3),
        (10, 3, 2, math.inf),  # fewer tests than log2 of the candidates cannot find the answer
        (18, 5, 2, 3),  # 2 tests (3 parts of 6), 2 tests (3 parts of 2), 1 test
    ],
)
def test_rounds_within_a_budget(candidates, budget, lanes, expected):
    assert bisection.rounds(candidates, budget, lanes) == expected


@pytest.mark.parametrize(
    ("lo", "hi", "parts", "expected"),
    [(1, 19, 2, (10,)), (1, 19, 3, (7, 13)), (11, 19, 3, (13, 16)), (3, 4, 2, (3,)), (1, 5, 5, (1, 2, 3, 4))],
)
def test_split_into_parts_as_equal_as_can_be(lo, hi, parts, expected):
    assert bisection.split(lo, hi, parts) == expected


@pytest.mark.parametrize(
    ("lo", "hi", "left", "lanes", "first", "expected"),
    [
        (1, 19, 6, 2, True, (0, 10)),  # the oldest and a split: 10 and 9 candidates left for 4 tests
        (1, 19, 6, 1, True, (0,)),
        (1, 4, 3, 2, True, (0, 2)),
        (1, 1, 1, 2, True, (0,)),  # one release: only the oldest
        (1, 10, 4, 2, False, (4, 7)),  # as many rounds as 1 test at worst, and maybe one fewer
        (1, 9, 4, 2, False, (3, 6)),  # here they do: 3 parts of 3, then one round of 2 tests
        (11, 19, 4, 2, False, (13, 16)),
    ],
)
def test_choose_the_next_round(lo, hi, left, lanes, first, expected):
    assert bisection.choose(lo, hi, left, lanes, first) == expected


@pytest.mark.parametrize("lanes", [1, 2, 3, 4])
@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 7, 8, 9, 12, 19, 25])
def test_every_answer_is_found_within_the_budget_and_the_lanes(count, lanes):
    releases = versions(count)
    for first in range(1, count + 1):
        answer = bisection.bisect(releases, oracle(releases, first), lanes, log=lambda line: None)
        assert answer.first_differing == (releases[first] if first < count else None)
        assert answer.last_same == releases[first - 1]
        assert answer.tested[answer.last_same] == "same"
        assert len(answer.tested) <= bisection.budget(count)
        assert all(len(found) <= lanes for found in answer.rounds)
        assert answer.rounds[0][0] == releases[0]  # the oldest release is always tested first
        assert not answer.contradicted


@pytest.mark.parametrize(("lanes", "most_rounds"), [(1, 6), (2, 4)])
def test_nineteen_releases_take_at_most_six_tests(lanes, most_rounds):
    """The done-when range, >=5.14,<=5.24, holds 19 releases."""
    releases = versions(19)
    worst = [bisection.bisect(releases, oracle(releases, k), lanes, log=lambda line: None) for k in range(1, 20)]
    assert max(len(a.tested) for a in worst) == 6
    assert max(len(a.rounds) for a in worst) == most_rounds


def test_rounds_are_printed_and_each_uses_every_lane_that_saves_a_round():
    releases, lines, asked = versions(19), [], []
    answer = bisection.bisect(releases, oracle(releases, 15, asked), 2, log=lines.append)
    assert asked[0] == [releases[0], releases[10]]
    assert answer.first_differing == releases[15] and answer.last_same == releases[14]
    assert lines[0] == "round 1: testing transformers 5.0.0, 5.10.0 (first differing in 5.1.0 … 5.18.0 or none)"
    assert lines[1] == "round 1: 5.0.0 same, 5.10.0 same → first differing in 5.11.0 … 5.18.0 or none"


@pytest.mark.parametrize(
    ("lo", "hi", "outcomes", "expected"),
    [
        (1, 19, {0: "same", 10: "same"}, (11, 19, False)),
        (1, 19, {0: "same", 10: "differs"}, (1, 10, False)),
        (1, 9, {3: "inconclusive", 6: "differs"}, (1, 3, False)),  # any outcome but the oldest's differs
        (1, 9, {3: "differs", 6: "same"}, (1, 3, True)),  # a change back: not a single change
        (4, 9, {6: "same"}, (7, 9, False)),
    ],
)
def test_narrow(lo, hi, outcomes, expected):
    assert bisection.narrow(lo, hi, outcomes, "same") == expected


def cell(status: str = "ok", subjects: tuple[SubjectResult, ...] = ()) -> CellResult:
    return CellResult("m", "cell:m:transformers=5.22.2", {"transformers": "5.22.2"}, status=status, subjects=subjects)


def subject(*observations: Observation, status: str = "ok") -> SubjectResult:
    reached = Observation("p", "reached", ["gradient_checkpointing_enable"], ["gradient_checkpointing_enable"], False)
    return SubjectResult(
        TARGET, ("gradient_checkpointing_enable",), status=status, probes=("p",), observations=(reached, *observations)
    )


@pytest.mark.parametrize(
    ("result", "observation", "expected"),
    [
        (cell(subjects=(subject(Observation("p", "x", 1, 1)),)), None, "same"),
        (cell(subjects=(subject(Observation("p", "x", 1, 2)),)), None, "differs"),
        (cell(subjects=(subject(Observation("p", "x", 1, 2)),)), "p.x", "differs"),
        (cell(subjects=(subject(Observation("p", "x", 1, 2), Observation("q", "y", 3, 3)),)), "q.y", "same"),
        (cell(subjects=(subject(Observation("p", "x", 1, 2)),)), "q.y", "absent"),
    ],
)
def test_outcome_is_the_verdict_or_one_observation(result, observation, expected):
    assert verdict.could_not_run(result, TARGET) is None
    assert bisection.outcome(result, TARGET, observation) == expected


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (cell("install-failed"), "install-failed"),
        (cell(subjects=()), f"{TARGET} not run"),
        (cell(subjects=(subject(status="crashed"),)), f"{TARGET} crashed"),
    ],
)
def test_a_cell_that_gave_no_outcome_says_why(result, expected):
    assert verdict.could_not_run(result, TARGET) == expected


def test_answer_file_and_line():
    releases = versions(5)
    answer = bisection.bisect(releases, oracle(releases, 3), 2, log=lambda line: None)
    data = bisection.answer_json(answer, "m", TARGET, "transformers", ">=5.0", "p.x", None)
    assert data["schema"] == 1 and data["matrix"] == "m" and data["subject"] == TARGET
    assert (data["axis"], data["range"], data["observation"]) == ("transformers", ">=5.0", "p.x")
    assert (data["first_differing"], data["last_same"]) == ("5.3.0", "5.2.0")
    assert data["tested"] == {str(v): o for v, o in sorted(answer.tested.items())}
    assert (
        bisection.answer_line(answer, "transformers", ">=5.0")
        == "first differing release: transformers 5.3.0 (5.2.0 same)"
    )
    nothing = bisection.bisect(releases, oracle(releases, 5), 2, log=lambda line: None)
    assert bisection.answer_json(nothing, "m", TARGET, "transformers", ">=5.0")["first_differing"] is None
    assert bisection.answer_line(nothing, "transformers", ">=5.0") == (
        "first differing release: none in >=5.0 (transformers 5.0.0 … 5.4.0: same throughout)"
    )


def test_outcome_by_method_is_that_override_s_conclusion():
    from test_golden import EMBEDDINGS, ENABLE, wrapper_cell

    def cell_of(version: str) -> CellResult:
        subject = wrapper_cell(version)
        return CellResult("m", f"cell:m:transformers={version}", {"transformers": version}, subjects=(subject,))

    target = wrapper_cell("5.15.1").target
    assert bisection.outcome(cell_of("5.15.1"), target, method=ENABLE) == "redundant"
    assert bisection.outcome(cell_of("5.16.1"), target, method=ENABLE) == "harmful"
    assert bisection.outcome(cell_of("5.16.1"), target, method=EMBEDDINGS) == "needed"
    assert bisection.outcome(cell_of("5.16.1"), target, method="tie_weights") == bisection.ABSENT  # not audited there
    assert bisection.outcome(cell_of("5.15.1"), target) == bisection.outcome(cell_of("5.16.1"), target) == "differs"


# The releases of >=5.14,<=5.24 (19 of them), as the index listed them when the issue was written.
RANGE = [
    Version(f"5.{minor}.{patch}")
    for minor, patches in {
        14: "01",
        15: "01",
        16: "01",
        17: "0",
        18: "012",
        19: "01",
        20: "0",
        21: "03",
        22: "02",
    }.items()
    for patch in patches
] + [Version("5.23.0"), Version("5.24.0")]


def test_bisecting_one_override_finds_where_it_changed_although_another_is_needed_throughout():
    """The verdict differs throughout (get_input_embeddings is needed everywhere); the enable override's conclusion
    changes at 5.16.0, where the switches take every_n_layers."""
    from test_golden import ENABLE, wrapper_cell

    def test(method: str | None):
        def run(asked: list[Version]) -> dict[Version, str]:
            found = {}
            for v in asked:
                subject = wrapper_cell(str(v))
                result = CellResult("m", f"cell:m:transformers={v}", {"transformers": str(v)}, subjects=(subject,))
                found[v] = bisection.outcome(result, subject.target, method=method)
            return found

        return run

    answer = bisection.bisect(RANGE, test(ENABLE), 2, log=lambda line: None)
    assert (answer.first_differing, answer.last_same) == (Version("5.16.0"), Version("5.15.1"))
    assert len(answer.tested) <= 6 and not answer.contradicted
    assert bisection.answer_line(answer, "transformers", ">=5.14,<=5.24") == (
        "first differing release: transformers 5.16.0 (5.15.1 redundant)"
    )
    data = bisection.answer_json(answer, "m", "t", "transformers", ">=5.14,<=5.24", method=ENABLE)
    assert (data["method"], data["first_differing"], data["last_same"]) == (ENABLE, "5.16.0", "5.15.1")
    verdict = bisection.bisect(RANGE, test(None), 2, log=lambda line: None)
    assert verdict.first_differing is None  # the subject's verdict cannot tell
