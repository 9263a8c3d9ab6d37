"""The verdict rules on hand-made subject results: `same` only from real observations."""

from __future__ import annotations

import pytest

from compat_matrix.host.collect import collect
from compat_matrix.host.spec import Subject
from compat_matrix.host.verdict import decide, decide_all, missed, phrase, unmet_expectations
from compat_matrix.shared.results import CellResult, Observation, SubjectResult
from compat_matrix.shared.vocabulary import VerdictKind

SAME, DIFFERS, INCONCLUSIVE, NO_PROBE = (
    VerdictKind.SAME,
    VerdictKind.DIFFERS,
    VerdictKind.INCONCLUSIVE,
    VerdictKind.NO_PROBE,
)

ENABLE, DISABLE = "gradient_checkpointing_enable", "gradient_checkpointing_disable"
BOTH = (ENABLE, DISABLE)


def obs(name, override, base, probe="p", carries=True, without=()):
    return Observation(probe, name, override, base, carries, without)


def reached(probe, override, base=None):
    return Observation(probe, "reached", list(override), list(override if base is None else base), False)


def subject(*observations, methods=BOTH, probes=("p",), unprobed=(), status="ok"):
    return SubjectResult("m:C", methods, status, None, tuple(observations), probes, unprobed=unprobed)


@pytest.mark.parametrize(
    ("result", "verdict", "says"),
    [
        (subject(obs("x", 1, 1), reached("p", BOTH)), SAME, None),
        (subject(obs("x", 1, 1), reached("p", [ENABLE])), INCONCLUSIVE, "gradient_checkpointing_disable never ran"),
        (subject(probes=()), NO_PROBE, "no probe exercises gradient_checkpointing_enable"),
        (subject(methods=(), probes=()), NO_PROBE, "the class overrides no method of transformers"),
        (subject(obs("x", 1, 1), reached("p", [ENABLE]), unprobed=(DISABLE,)), INCONCLUSIVE, "no probe exercises"),
        # every probe that runs the class errored, with the overrides and without: it could not run
        (subject(obs("error", "E: x", "E: y"), reached("p", [])), "fails as shipped", "without: E: x"),
        # one probe errored identically before reaching anything, another observed without them running
        (
            subject(obs("error", "E: x", "E: x"), reached("p", []), obs("y", 1, 1, probe="q"), reached("q", [])),
            INCONCLUSIVE,
            "never ran",
        ),
        # the probe itself says it saw nothing, on both sides
        (
            subject(obs("inconclusive", "no layers", "no layers", carries=False), reached("p", BOTH)),
            INCONCLUSIVE,
            "p: no layers",
        ),
        # a difference in an observation that only informs does not make `differs`
        (subject(obs("x", 1, 1), obs("present", ["a"], ["b"], carries=False), reached("p", BOTH)), SAME, None),
        # the method ran, but the probe observed nothing that carries a verdict (only warnings, or informs)
        (
            subject(obs("warnings", ["W"], ["W"]), reached("p", BOTH)),
            INCONCLUSIVE,
            "never ran in a probe that observed",
        ),
        # a probe without a `reached` observation (an old result, a module that failed to import) is no evidence
        (subject(obs("x", 1, 1)), INCONCLUSIVE, "never ran"),
        (subject(obs("x", 1, 2), reached("p", [])), DIFFERS, None),
        (subject(status="crashed"), "crashed", None),
    ],
)
def test_rules(result, verdict, says):
    decided = decide(result)
    assert decided.verdict == verdict
    assert says is None or says in decided.reason


def test_a_failed_cell_wins_over_its_subjects():
    cell = CellResult("m", "cell:m:t=1", {"t": "1"}, status="install-failed", reason="no such release")
    assert phrase(decide(subject(), cell)) == "install-failed: no such release"


@pytest.mark.parametrize(
    ("without", "follows", "text"),
    [
        (((ENABLE, 2), (DISABLE, 1)), (ENABLE,), "[follows gradient_checkpointing_enable]"),
        (((ENABLE, 2), (DISABLE, 2)), BOTH, "[follows gradient_checkpointing_enable, gradient_checkpointing_disable]"),
        (((ENABLE, 1), (DISABLE, 1)), (), "[only with all deleted]"),
    ],
)
def test_per_method_bases_say_which_override_a_difference_follows(without, follows, text):
    decided = decide(subject(obs("x", 1, 2, without=without)))
    assert decided.verdict == DIFFERS and decided.follows == follows
    assert phrase(decided) == f"differs: p (x) {text}"


def test_one_audited_method_is_what_a_difference_follows():
    assert decide(subject(obs("x", 1, 2), methods=(ENABLE,))).follows == (ENABLE,)


@pytest.mark.parametrize(
    ("observations", "problems"),
    [
        ((obs("x", 1, 2),), []),
        ((obs("x", 1, 1),), ["p.x: both 1"]),
        ((), ["p.x: not observed"]),
        ((obs("x", 1, 2), obs("error", None, "E: base broke")), ["p.x: the base implementation errored"]),
        ((obs("x", 1, "error: E: base broke"),), ["p.x: the base implementation errored"]),
    ],
)
def test_a_catch_counts_only_where_the_base_ran_that_probe_without_error(observations, problems):
    found = [f"{catch}: {why}" for catch, why in missed(subject(*observations), Subject("m:C", BOTH, catches=("p.x",)))]
    assert len(found) == len(problems) and all(f.startswith(p) for f, p in zip(found, problems, strict=True))


def test_an_expectation_of_same_is_not_met_by_inconclusive():
    result = CellResult(
        "m", "cell:m:transformers=5.0", {"transformers": "5.0"}, {"transformers": "5.0.0"}, subjects=(subject(),)
    )
    expect_same = Subject("m:C", BOTH, expect=(("*", SAME),))
    lines = unmet_expectations(decide_all(collect([result], (expect_same,)).subjects), (expect_same,))
    assert lines == [
        f"transformers 5.0.0: m:C expected same, got inconclusive: {', '.join(BOTH)} never ran in a probe"
        " that observed something"
    ]


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        (4.1751, 4.1749, True),  # summaries of the same tensor, added up in another order
        (4.175, 4.3, False),
        ({"loss": 1.0, "steps": 1}, {"loss": 1.0000001, "steps": 1}, True),
        ([1.0, 2.0], [1.0, 2.5], False),
        (True, 1.0, False),
        (1, 1.0004, True),
        ("nan", "nan", True),
    ],
)
def test_floats_agree_within_a_relative_tolerance(a, b, same):
    assert Observation("p", "x", a, b).same is same


def test_a_subject_of_a_kind_no_probe_family_covers_reads_no_probe_naming_its_kind():
    from compat_matrix.shared.results import SubjectResult

    config = SubjectResult("mylib:MyConfig", ("to_dict",), kind="config")
    assert (decide(config).verdict, decide(config).reason) == (
        "no probe",
        "no probe family covers a subject of this kind (config)",
    )
    model = SubjectResult("mylib:MyModel", ("to_dict",), kind="model")
    assert decide(model).reason == "no probe exercises to_dict"
