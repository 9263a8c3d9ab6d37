"""The class as shipped across releases: what stopped working, what changed silently."""

from __future__ import annotations

from compat_matrix.host.shipped import CHANGES, FAILS, shipped_changes
from compat_matrix.shared.results import Observation, SubjectResult


def result(*observations):
    return SubjectResult("m:C", ("m",), observations=tuple(observations))


def obs(probe, name, override, base=None, carries=True):
    return Observation(probe, name, override, base if base is not None else override, carries)


def test_a_probe_that_fails_as_shipped_on_some_releases_and_ran_on_others_is_said_whatever_the_base_did():
    ran = result(obs("generate", "generated", [[1, 2]]))
    gone = result(obs("generate", "generated", "error: AttributeError: no attribute 'generate'"))
    (change,) = shipped_changes([("4.51.3", ran), ("4.57.6", gone), ("5.0.0", gone)])
    assert (change.kind, change.probe, change.releases, change.other) == (
        FAILS,
        "generate",
        ("4.57.6", "5.0.0"),
        ("4.51.3",),
    )
    assert change.error == "AttributeError: no attribute 'generate'"
    assert shipped_changes([("4.57.6", gone), ("5.0.0", gone)]) == ()  # failing everywhere: said elsewhere


def test_outputs_of_name_seeded_weights_that_change_between_neighbouring_releases():
    one, other = {"logits": {"sum": 1.0}}, {"logits": {"sum": 1.5}}
    rows = [
        (r, result(obs("forward_backward", "across_releases", v, carries=False)))
        for r, v in (("4.45.2", one), ("4.51.3", one), ("5.0.0", other), ("5.24.0", other))
    ]
    (change,) = shipped_changes(rows)
    assert (change.kind, change.releases, change.other, change.before, change.after) == (
        CHANGES,
        ("5.0.0",),
        ("4.51.3",),
        one,
        other,
    )
    failed = [*rows[:1], ("4.51.3", result(obs("forward_backward", "across_releases", "error: E: x", carries=False)))]
    assert shipped_changes(failed) == ()  # an error is not a value to compare


def test_warnings_and_cells_that_could_not_run_are_left_out():
    warned = result(obs("p", "warnings", ["error: looks like an error"]), obs("p", "x", 1))
    broken = SubjectResult("m:C", ("m",), status="crashed")
    assert shipped_changes([("1", warned), ("2", broken), ("3", None), ("4", result(obs("p", "x", 1)))]) == ()
