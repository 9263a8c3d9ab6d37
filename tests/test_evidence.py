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
from compat_matrix.shared.results import Code, Observation, Override, SubjectResult

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


def test_a_from_pretrained_that_passes_a_key_mapping_is_never_redundant():
    """colpali's BiQwen3.from_pretrained read Delete on 5.3+: it passes `key_mapping=` for checkpoints saved with
    other keys (the hub's), which the probes' reload of the class's own checkpoint never meets."""
    name = "from_pretrained"
    code = Code(
        name,
        "m.py",
        (
            (
                f"{name}@24",
                (
                    (28, 'key_mapping = kwargs.pop("key_mapping", None)'),
                    (33, "return super().from_pretrained(*args, **kwargs, key_mapping=key_mapping)"),
                ),
            ),
        ),
    )
    lines = obs("save", "lines", {name: {f"{name}@24": [28, 33]}}, None, carries=False)
    loaded = subject(obs("save", "loaded", True, True), reached("save", [name], []), lines, methods=(name,))
    assert judge(loaded, name).verdict == SAME  # without its code, nothing tells
    judged = judge(SubjectResult(**{**vars(loaded), "code": (code,)}), name)
    assert judged.verdict == INCONCLUSIVE and "checkpoints with other keys" in judged.reason


@pytest.mark.parametrize("name", sorted(UNSEEN))
def test_an_attribute_whose_effect_the_probes_cannot_see_is_never_redundant(name):
    """ai2-olmo's OLMoForCausalLM._no_split_modules read redundant on 4.57.6: it decides how device_map splits the
    model, which a tiny model on one CPU never shows."""
    built = subject(obs("build", "built", True, True), reached("build", [name], []), methods=(name,))
    judged = judge(built, name)
    assert judged.verdict == INCONCLUSIVE and judged.reason == f"{name} {UNSEEN[name]}"


# Delete rests on code that ran, all of it: the four patterns real libraries' wrong Deletes had (the override ran in
# a probe that observed something, but the part that matters never did).
EVAL, OPT, LOSS, GRADS = "evaluation_loop", "get_optimizer_cls_and_kwargs", "compute_loss", "enable_input_require_grads"
PATTERNS = {
    "a branch no probe takes": (
        EVAL,
        {
            "evaluation_loop@410": (
                (411, "output = super().evaluation_loop(*args, **kwargs)"),
                (412, "if self.evaluator is not None:"),
                (413, "metrics = self.evaluator(self.model)"),
                (414, "output.metrics.update(metrics)"),
                (415, "return output"),
            )
        },
        {"evaluation_loop@410": [411, 412, 415]},
        "lines 413–414 (`metrics = self.evaluator(self.model)` …) never ran",
    ),
    "a parameter group": (
        OPT,
        {
            "get_optimizer_cls_and_kwargs@88": (
                (89, "cls, kwargs = super().get_optimizer_cls_and_kwargs(args, model)"),
                (90, "if model is not None and hasattr(model, 'classifier'):"),
                (91, "kwargs['params'] = groups(model)"),
                (92, "return cls, kwargs"),
            )
        },
        {"get_optimizer_cls_and_kwargs@88": [89, 90, 92]},
        "line 91 (`kwargs['params'] = groups(model)`) never ran",
    ),
    "a dataset shape": (
        LOSS,
        {
            "compute_loss@120": (
                (121, "if len(inputs) == 3:"),
                (122, "anchor, positive, negative = inputs"),
                (123, "return triplet(anchor, positive, negative)"),
                (124, "return super().compute_loss(model, inputs)"),
            )
        },
        {"compute_loss@120": [121, 124]},
        "lines 122–123 (`anchor, positive, negative = inputs` …) never ran",
    ),
    "a nested hook": (
        GRADS,
        {
            "enable_input_require_grads@60": (
                (61, "def hook(module, inputs, output):"),
                (64, "self._hook = self.get_input_embeddings().register_forward_hook(hook)"),
            ),
            "hook@61": (
                (62, "first = output[0] if isinstance(output, tuple) else output"),
                (63, "first.requires_grad_(True)"),
            ),
        },
        {"enable_input_require_grads@60": [61, 64]},
        "lines 62–63 (`first = output[0] if isinstance(output, tuple) else output` …) never ran",
    ),
}


def covered(name, units, ran):
    code = Code(name, "/site-packages/lib/trainer.py", tuple(units.items()))
    return subject(
        obs("trainer_train", "loss", 1.25, 1.25),
        reached("trainer_train", [name], [name]),
        obs("trainer_train", "lines", {name: ran}, None, carries=False),
        methods=(name,),
        code=(code,),
    )


@pytest.mark.parametrize("pattern", PATTERNS, ids=list(PATTERNS))
def test_an_override_with_a_statement_that_never_ran_is_not_redundant(pattern):
    name, units, ran, said = PATTERNS[pattern]
    judged = judge(covered(name, units, ran), name)
    assert judged.verdict == INCONCLUSIVE
    assert judged.reason == f"{said} as shipped in a probe that observed something"
    every = {key: [line for line, _ in statements] for key, statements in units.items()}
    assert judge(covered(name, units, every), name).verdict == SAME  # the same override, every statement run


def test_statements_count_only_from_probes_that_observed_something():
    name, units, _, _ = PATTERNS["a branch no probe takes"]
    every = {key: [line for line, _ in statements] for key, statements in units.items()}
    result = covered(name, units, {"evaluation_loop@410": [411, 412, 415]})
    told_nothing = (
        obs("trainer_evaluate", "metrics", "error: KeyError: 'x'", "error: KeyError: 'x'"),
        reached("trainer_evaluate", [name], [name]),
        obs("trainer_evaluate", "lines", {name: every}, None, carries=False),
    )
    result = SubjectResult(
        result.target, result.methods, observations=result.observations + told_nothing, code=result.code
    )
    assert judge(result, name).verdict == INCONCLUSIVE  # the probe that ran them all failed alike on both sides


def test_a_method_whose_statements_could_not_be_watched_is_not_redundant_and_an_attribute_needs_none():
    plain = subject(obs("p", "x", 1, 1), reached("p", ["forward"], ["forward"]), methods=("forward",), code=())
    assert judge(plain, "forward").verdict == INCONCLUSIVE
    assert "could not be watched" in judge(plain, "forward").reason
    attribute = SubjectResult(
        "m:C",
        ("config_class",),
        observations=(obs("p", "x", 1, 1), reached("p", ["config_class"], ["config_class"])),
        overrides=(Override("config_class", "transformers.PreTrainedModel", True, "attribute"),),
        code=(),
    )
    assert judge(attribute, "config_class").verdict == SAME
    old = subject(obs("p", "x", 1, 1), reached("p", ["forward"], ["forward"]), methods=("forward",))
    assert judge(old, "forward").verdict == SAME  # a result from before statements were watched (code is None)


@pytest.mark.parametrize(
    ("file", "units", "expected"),
    [
        (
            "/w/.nox/cell-x/lib/python3.11/site-packages/utf8_tokenizer/char_causal_lm.py",
            ("enable@97",),
            "utf8_tokenizer/char_causal_lm.py:97",
        ),
        ("C:\\env\\Lib\\site-packages\\pkg\\m.py", ("enable@3", "enable.<locals>.hook@5"), "pkg/m.py:3"),
        ("/home/me/src/mylib/models.py", ("enable@12",), "models.py:12"),  # not installed: the file's name
        ("/x/m.py", (), None),  # no code watched
    ],
)
def test_the_evidence_names_where_an_override_is_defined_as_file_and_line(file, units, expected):
    from compat_matrix.host.wording.evidence import source
    from compat_matrix.shared.results import Code

    code = [
        Code("enable", file, tuple((key, ((1, "pass"),)) for key in units)),
        Code("other", "/y.py", (("other@1", ()),)),
    ]
    assert source("enable", code) == expected
    assert source("missing", code) is None


def test_one_sides_failure_in_a_probe_the_other_side_failed_elsewhere_in_is_no_difference():
    """ai2-olmo's `config_class` on 4.57.6: as shipped `generate` raises (the class has no `generate`); without
    `config_class` the probe raises before it (the class cannot be built). Two errors in one probe are no
    difference; where the class as shipped ran the probe, the build that fails without it is (needed), and what
    the class as shipped gave there beside it is no difference of its own (without it, the probe never got there)."""
    unbuildable = "CouldNotBuild: its config_class is None"
    cls = subject(
        obs("generate", "generated", "error: AttributeError: no attribute 'generate'", None, without=[(TIE, None)]),
        obs("generate", "error", None, None, without=[(TIE, unbuildable)]),
        reached("generate", [TIE], [], without=[(TIE, [])]),
        obs("forward", "logits", "logits=3.2", None, without=[(TIE, None)]),
        obs("forward", "error", None, None, without=[(TIE, unbuildable)]),
        reached("forward", [TIE], [], without=[(TIE, [])]),
        methods=(TIE, INIT),
    )
    found = judge(cls, TIE)
    assert found.verdict == DIFFERS
    assert {(o.probe, o.name) for o in found.differing} == {("forward", "error")}


def test_failures_of_separate_calls_in_a_probe_that_ran_to_its_end_still_count():
    """`no_arguments` calls each accessor on its own: one that fails as shipped and another that fails only
    without its override are two findings, not two errors of one run (adapters' `get_position_embeddings`)."""
    cls = subject(
        obs("no_arguments", TIE, "error: TypeError: 'Stack' object is not callable", "error: ValueError: no peft"),
        obs("no_arguments", INIT, "3", "error: NotImplementedError: not implemented"),
        reached("no_arguments", [TIE, INIT], []),
        methods=(INIT,),
    )
    assert [(o.probe, o.name) for o in judge(cls, INIT).differing] == [("no_arguments", INIT)]


def test_each_side_failing_at_a_step_of_its_own_is_no_evidence_that_deleting_changes_nothing():
    """As shipped the second step raises; without the override the first does, so neither gave what the other
    failed at (never_got_there). Nothing differs, and the probe observed nothing either: inconclusive, never same."""
    cls = subject(
        obs("build_and_init", "built", "v", "error: CouldNotBuild: its config_class is None"),
        obs("build_and_init", "init_weights", "error: AttributeError: no 'all_tied_weights_keys'", None),
        reached("build_and_init", [TIE], [TIE]),
        methods=(TIE,),
    )
    assert judge(cls, TIE).verdict == DIFFERS  # `built` both sides gave still differs
    only = subject(
        obs("build_and_init", "built", None, "error: CouldNotBuild: its config_class is None"),
        obs("build_and_init", "init_weights", "error: AttributeError: no 'all_tied_weights_keys'", None),
        reached("build_and_init", [TIE], [TIE]),
        methods=(TIE,),
    )
    assert judge(only, TIE).verdict != SAME
