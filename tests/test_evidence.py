"""Per audited name, in two contexts: what counts as evidence, what told nothing, and which context decides."""

from __future__ import annotations

import pytest

from compat_matrix.shared.evidence import (
    DIFFERS,
    INCONCLUSIVE,
    ORPHANED,
    SAME,
    UNSEEN,
    WITH_REST,
    WITHOUT_REST,
    judge,
    redundant,
    together,
    told_nothing,
)
from compat_matrix.shared.results import Observation, SubjectResult

TIE, INIT = "tie_weights", "_init_weights"
CRASH = "error: TypeError: tie_weights() got an unexpected keyword argument 'missing_keys'"


def obs(probe, name, override, base, without=(), alone=(), carries=True):
    return Observation(probe, name, override, base, carries, tuple(without), tuple(alone))


def reached(probe, override, base, without=(), alone=()):
    return obs(probe, "reached", override, base, without, alone, carries=False)


def subject(*observations, methods=(TIE, INIT), **more):
    return SubjectResult("m:C", methods, observations=observations, probes=("p",), **more)


def test_a_crashing_override_does_not_make_the_other_redundant_the_other_context_decides():
    """5.x: construction raises in `tie_weights` as shipped and without `_init_weights`; with `tie_weights`
    deleted too, the value head is 0.0 with `_init_weights` kept and ~0.53 without."""
    masked = subject(
        obs(
            "build",
            "built",
            CRASH,
            "v_head=0.53",
            without=[(TIE, "v_head=0.0"), (INIT, CRASH)],
            alone=[(TIE, CRASH), (INIT, "v_head=0.0")],
        ),
        reached(
            "build", [TIE, INIT], [INIT], without=[(TIE, [INIT]), (INIT, [TIE])], alone=[(TIE, [TIE]), (INIT, [INIT])]
        ),
    )
    init = judge(masked, INIT)
    assert init.verdict == DIFFERS and init.context == WITHOUT_REST
    assert [(o.override, o.base) for o in init.differing] == [("v_head=0.0", "v_head=0.53")]
    assert judge(masked, TIE).verdict == DIFFERS and judge(masked, TIE).context == WITH_REST


def test_identical_failures_are_no_evidence_and_are_told_nothing():
    failing = subject(
        obs(
            "save",
            "loaded",
            "error: ValueError: no model",
            "error: ValueError: no model",
            without=[(INIT, "error: ValueError: no model")],
        ),
        reached("save", [INIT], [], without=[(INIT, [])]),
        methods=(INIT, "other"),
    )
    judged = judge(failing, INIT)
    assert judged.verdict == INCONCLUSIVE and "never ran as shipped in a probe that observed something" in judged.reason
    assert judged.told_nothing == (("save", "ValueError: no model"),)
    assert told_nothing(failing) == (("save", "ValueError: no model"),)


def test_a_probe_that_failed_alike_in_part_is_told_nothing_unless_something_else_in_it_differs():
    backward = "error: TypeError: backward() got an unexpected keyword argument"
    why = backward.removeprefix("error: ")
    alike = [obs("fb", "logits", "sum=1.0", "sum=1.0"), obs("fb", "grads", backward, backward)]
    warned = obs("fb", "warnings", ["deprecated"], [])  # warnings that differ are no telling
    assert told_nothing(subject(*alike, warned)) == (("fb", why),)
    changed = [obs("fb", "logits", "sum=1.0", "sum=2.0"), obs("fb", "grads", backward, backward)]
    assert told_nothing(subject(*changed)) == ()


def test_same_needs_the_name_to_have_run_as_shipped_where_something_was_observed():
    ran = subject(obs("p", "x", 1, 1), reached("p", [INIT], [INIT]), methods=(INIT,))
    assert judge(ran, INIT).verdict == SAME
    never = subject(obs("p", "x", 1, 1), reached("p", [], [INIT]), methods=(INIT,))
    assert judge(never, INIT).verdict == INCONCLUSIVE
    only_warned = subject(obs("p", "warnings", ["w"], ["w"]), reached("p", [INIT], [INIT]), methods=(INIT,))
    assert judge(only_warned, INIT).verdict == INCONCLUSIVE


def test_a_name_that_never_ran_in_its_variant_runs_its_references_code():
    """`base without X` did not run a probe where X never ran as shipped: equal to shipped there, not a difference."""
    quiet = subject(obs("p", "x", 1, 2, without=[(TIE, 2)]), reached("p", [TIE], [TIE], without=[(TIE, [])]))
    assert judge(quiet, INIT).verdict == INCONCLUSIVE  # no variant value: nothing differs, nothing observed
    assert judge(quiet, TIE).verdict == DIFFERS


def test_orphaned_where_nothing_differs_and_a_difference_wins_over_it():
    gone = subject(
        obs("p", "x", 1, 1), reached("p", [], []), methods=(INIT,), orphaned=((INIT, "no base class defines it"),)
    )
    assert (judge(gone, INIT).verdict, judge(gone, INIT).reason) == (ORPHANED, "no base class defines it")
    still = subject(obs("p", "x", 1, 2), reached("p", [INIT], []), methods=(INIT,), orphaned=((INIT, "no base"),))
    assert judge(still, INIT).verdict == DIFFERS


def test_one_side_finding_nothing_to_look_at_is_a_difference():
    one_sided = subject(obs("p", "inconclusive", None, "cannot generate", carries=False), methods=(INIT,))
    assert judge(one_sided, INIT).verdict == DIFFERS
    both = subject(obs("p", "inconclusive", "cannot generate", "cannot generate", carries=False), methods=(INIT,))
    assert told_nothing(both) == (("p", "cannot generate"),)


def test_two_overrides_that_each_provide_what_the_other_does_are_not_deleted_together():
    """Each alone changes nothing (the other still provides it); deleting both does: neither is redundant then."""
    A, B, C = "provide_a", "provide_b", "needed"
    ran = reached("p", [A, B, C], [], without=[(A, [B, C]), (B, [A, C]), (C, [A, B]), (f"{A}, {B}", [C])])
    both = subject(
        obs("p", "x", 1, 0, without=[(A, 1), (B, 1), (C, 0), (f"{A}, {B}", 0)], alone=[(A, 0), (B, 0)]),
        ran,
        methods=(A, B, C),
    )
    assert redundant(both) == (A, B)
    assert [(o.override, o.base) for o in together(both)] == [(1, 0)]
    alone = subject(
        obs("p", "x", 1, 0, without=[(A, 1), (B, 1), (C, 0), (f"{A}, {B}", 1)], alone=[(A, 0), (B, 0)]),
        ran,
        methods=(A, B, C),
    )
    assert together(alone) == ()  # deleting both changes nothing either: they may go together


def test_an_attribute_that_decides_how_other_checkpoints_load_is_never_redundant():
    keys = "_keys_to_ignore_on_load_unexpected"
    loaded = subject(obs("save", "loaded", True, True), reached("save", [keys], []), methods=(keys,))
    judged = judge(loaded, keys)
    assert judged.verdict == INCONCLUSIVE and "checkpoints with other keys" in judged.reason


def test_the_name_of_the_main_input_is_never_redundant():
    """granite-tsfm's PatchTSTFMForPrediction: `main_input_name = "past_values"` read Delete on a tiny model fed
    token ids, where deleting it makes generate and the Trainer's token count look for `inputs` instead."""
    name = "main_input_name"
    built = subject(obs("build", "built", True, True), reached("build", [name], []), methods=(name,))
    judged = judge(built, name)
    assert judged.verdict == INCONCLUSIVE and "not this model's inputs" in judged.reason


@pytest.mark.parametrize("name", sorted(UNSEEN))
def test_an_attribute_whose_effect_the_probes_cannot_see_is_never_redundant(name):
    """ai2-olmo's OLMoForCausalLM._no_split_modules read redundant on 4.57.6: it decides how device_map splits the
    model, which a tiny model on one CPU never shows."""
    built = subject(obs("build", "built", True, True), reached("build", [name], []), methods=(name,))
    judged = judge(built, name)
    assert judged.verdict == INCONCLUSIVE and judged.reason == f"{name} {UNSEEN[name]}"
