"""The advice that decides, on results made by hand: Fix where an override breaks a release that calls it with what
it cannot take and does its job elsewhere, verified by the widened override; Keep only where it does its job on
its own; and the widening itself, on plain classes (no torch)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from compat_matrix.cell import fixes
from compat_matrix.host import wording
from compat_matrix.host.advice import advise
from compat_matrix.host.conclude import Conclusion, OnRelease, conclude_method, contrast, fix_of
from compat_matrix.host.overrides import OverrideConclusions
from compat_matrix.host.verdict import decide
from compat_matrix.shared.results import Code, Observation, SubjectResult
from compat_matrix.shared.vocabulary import AdviceKind, ConclusionKind

TIE = "tie_weights"
RAISES = "TypeError: ValueHeadLM.tie_weights() got an unexpected keyword argument 'recompute_mapping'"
SITE = "tie_weights(missing_keys=…, recompute_mapping=…) at modeling_utils.py:4628"
GAP = ["missing_keys (positional or keyword)", "recompute_mapping (positional or keyword)"]


class Base:
    def tie_weights(self, missing_keys=None, recompute_mapping=True):
        self.received = {"missing_keys": missing_keys, "recompute_mapping": recompute_mapping}
        return "tied"


class Wrapped(Base):
    pass


class Old(Base):
    def tie_weights(self):
        self.ran_mine = True
        return super().tie_weights()


class Forwards(Base):
    def __init__(self):
        self.model = Wrapped()

    def tie_weights(self):
        return self.model.tie_weights()


class Positional(Base):
    def tie_weights(self):
        return super().tie_weights()


def test_the_widened_override_takes_what_it_could_not_and_passes_it_on_through_super():
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        Old().tie_weights(missing_keys=["a"], recompute_mapping=False)
    assert fixes.widen(Old, TIE)
    instance = Old()
    assert instance.tie_weights(missing_keys=["a"], recompute_mapping=False) == "tied"
    assert instance.ran_mine and instance.received == {"missing_keys": ["a"], "recompute_mapping": False}
    assert Old().tie_weights() == "tied"  # called as before, it runs as before


def test_it_passes_them_on_to_a_wrapped_model_that_inherits_the_base_and_names_extra_positionals():
    assert fixes.widen(Forwards, TIE)
    forwards = Forwards()
    forwards.tie_weights(recompute_mapping=False)
    assert forwards.model.received == {"missing_keys": None, "recompute_mapping": False}
    assert fixes.widen(Positional, TIE)
    positional = Positional()
    positional.tie_weights(["k"])  # one positional too many: the base's name for it
    assert positional.received["missing_keys"] == ["k"]


def test_only_a_function_of_the_class_itself_with_a_base_is_widened():
    class NoBase:
        def tie_weights(self):
            return None

    assert not fixes.widen(NoBase, TIE)
    assert not fixes.widen(Wrapped, TIE)  # it inherits it: nothing of its own to widen


def obs(probe, name, override, base, fixed=None, carries=True):
    return Observation(probe, name, override, base, carries, fixed=((TIE, fixed),) if fixed is not None else ())


def cell(broken: bool, fixed_runs: bool | None = True, works: bool = True) -> SubjectResult:
    """One release of a `tie_weights(self)` override: on a release that passes it `recompute_mapping` the build
    raises as shipped; elsewhere it ties a head its own way (the weights differ with it deleted)."""
    reached = obs("build_and_init", "reached", [TIE], [TIE], carries=False)
    if broken:
        fixed = None if fixed_runs is None else ("v_head=0.0" if fixed_runs else "error: " + RAISES)
        observations = (
            obs("build_and_init", "built", "error: " + RAISES, "v_head=0.53", fixed=fixed),
            reached,
            obs("transformers_calls", TIE, {"calls": 1, "cannot_take": [SITE]}, {"calls": 1, "cannot_take": []}),
            obs(
                "signature", TIE, {"cannot_take": GAP, "other_defaults": {}}, {"cannot_take": [], "other_defaults": {}}
            ),
        )
    else:
        shipped = "v_head=0.0" if works else "error: KeyError: 'v_head'"
        observations = (obs("build_and_init", "built", shipped, "v_head=0.53"), reached)
    return SubjectResult("m:ValueHeadLM", (TIE,), observations=observations, probes=("build_and_init",))


def over(*cells: SubjectResult) -> OverrideConclusions:
    labels = [f"transformers 5.{n}.0" for n in range(len(cells))][::-1]  # newest first
    by_release = []
    for label, result in zip(labels, reversed(cells), strict=True):
        by_release.append(OnRelease(label, conclude_method(result, decide(result), TIE, {})))
    return OverrideConclusions("m:ValueHeadLM", TIE, tuple(by_release), advise(by_release))


def advised(target: str, name: str, rows: list[tuple[str, Conclusion]]) -> OverrideConclusions:
    """One override's conclusions on these (label, conclusion) rows, newest first, and the advice on them."""
    return OverrideConclusions(target, name, tuple(OnRelease(*r) for r in rows), advise(rows))


def reason(override: OverrideConclusions) -> str:
    return wording.reason(override, [label for label, _ in override.by_release], wording.PLAIN)


def test_a_fix_is_found_with_what_it_cannot_take_and_where_transformers_passes_it():
    fix = fix_of(cell(broken=True), TIE, {"build_and_init": "build and init_weights"})
    assert fix.parameters == ("missing_keys", "recompute_mapping")  # the call site's, and the error's
    assert fix.sites == (SITE,) and fix.verified is True and fix.still is None
    assert fix.probes == ("build and init_weights",)  # the probe the widened override ran in, as the report calls it
    assert fix_of(cell(broken=False), TIE) is None


def test_fix_where_it_breaks_on_the_new_release_and_does_its_job_on_the_old_one_verified():
    found = over(cell(broken=False), cell(broken=False), cell(broken=True))
    assert found.advice.kind == AdviceKind.FIX
    assert reason(found) == (
        "accept missing_keys and recompute_mapping (or **kwargs) and pass them on; on 5.2.0 transformers calls "
        "tie_weights(missing_keys=…, recompute_mapping=…) at modeling_utils.py:4628; verified: with it the class "
        "runs on 5.2.0 (build and init), and on 5.0.0, 5.1.0 nothing passes it what it cannot take"
    )


def test_a_fix_the_widened_override_does_not_make_run_is_said_not_verified():
    found = over(cell(broken=False), cell(broken=True, fixed_runs=False))
    assert found.advice.kind == AdviceKind.FIX
    assert reason(found).endswith(f"; not verified: with it, {RAISES} on 5.1.0")
    untried = over(cell(broken=False), cell(broken=True, fixed_runs=None))
    assert reason(untried).endswith("; not verified on 5.1.0: the change was not run there")


def test_delete_not_fix_where_it_changes_nothing_elsewhere():
    redundant = SubjectResult(
        "m:ValueHeadLM",
        (TIE,),
        observations=(
            obs("build_and_init", "built", "v", "v"),
            obs("build_and_init", "reached", [TIE], [TIE], carries=False),
        ),
        probes=("build_and_init",),
    )
    assert over(redundant, cell(broken=True)).advice.kind == AdviceKind.DELETE


def test_keep_where_it_does_its_job_everywhere_and_review_where_the_class_as_shipped_breaks():
    assert over(cell(broken=False), cell(broken=False)).advice.kind == AdviceKind.KEEP
    assert over(cell(broken=False), cell(broken=False, works=False)).advice.kind == AdviceKind.REVIEW


def test_an_override_that_differs_only_beside_the_others_is_not_kept():
    """Deleting `enable` alone leaves the layers on after its own `disable`; deleting both changes nothing."""
    enable, disable = "gradient_checkpointing_enable", "gradient_checkpointing_disable"
    both = (enable, disable)
    result = SubjectResult(
        "m:DisablesOnlyItsOwnEnable",
        both,
        observations=(
            Observation("disable_round_trip", "layers_on", False, False, without=((enable, True), (disable, False))),
            Observation("disable_round_trip", "reached", list(both), list(both), False, ((enable, [disable]),)),
        ),
        probes=("disable_round_trip",),
    )
    judged = conclude_method(result, decide(result), enable, {})
    assert judged.kind == ConclusionKind.DIFFERENTLY and judged.coupled and not judged.does_its_job
    by_release = (OnRelease("transformers 5.0.0", judged),)
    assert advise(by_release).kind == AdviceKind.REVIEW
    assert advise((OnRelease("transformers 5.0.0", Conclusion(ConclusionKind.DIFFERENTLY)),)).kind == AdviceKind.KEEP


def test_an_override_that_breaks_what_every_correct_one_keeps_is_not_kept_nor_fixed():
    """Layers after enable hold the switch's contract: an enable that leaves them off is broken, not customised;
    where it also cannot take what a release passes, widening it would not make it right: Review, not Fix."""
    enable = "gradient_checkpointing_enable"
    layers = Observation("enable_reaches_wrapped_model", "layers_on", False, True, contract=True)
    ran = Observation("enable_reaches_wrapped_model", "reached", [enable], [enable], False)
    result = SubjectResult("m:FlagsWrapperOnly", (enable,), observations=(layers, ran), probes=("p",))
    judged = conclude_method(result, decide(result), enable, {"enable_reaches_wrapped_model": "layers after enable"})
    assert judged.kind == ConclusionKind.DIFFERENTLY and judged.breaks and not judged.does_its_job
    found = OverrideConclusions(
        "m:F", enable, (OnRelease("transformers 5.0.0", judged),), advise(((OnRelease("transformers 5.0.0", judged)),))
    )
    assert found.advice.kind == AdviceKind.REVIEW
    assert (
        wording.reason(found, ["transformers 5.0.0"], wording.PLAIN) == "breaks checkpointing its layers on 5.0.0"
    )  # in plain words
    customised = replace(layers, contract=False)  # the same difference where no contract holds: what it is for
    kept = conclude_method(replace(result, observations=(customised, ran)), decide(result), enable, {})
    assert kept.does_its_job


def test_a_probe_says_which_of_its_observations_hold_the_contract():
    from compat_matrix.cell.probes import CONTRACT, Probe

    every = Probe("p", lambda build: {}, ("m",), contract=CONTRACT, informs=("present",))
    some = Probe("q", lambda build: {}, ("m",), contract=("resumes_where_it_stopped",))
    assert every.binding("layers_on") and not every.binding("present") and not every.binding("error")
    assert some.binding("resumes_where_it_stopped") and not some.binding("resumed") and not some.binding("warnings")


def one_release(target: str, name: str, *observations: Observation) -> AdviceKind:
    """The advice for `name` from one release's observations (a `reached` of it in `ran` added)."""
    ran = Observation("ran", "reached", [name], [name], False)
    result = SubjectResult(target, (name,), observations=(*observations, ran), probes=("ran",))
    judged = conclude_method(result, decide(result), name, {})
    return advise((OnRelease("transformers 4.57.6", judged),)).kind


def test_a_difference_only_in_what_reads_the_class_is_no_job():
    """Where a property stands over transformers' method, the probes that read the class see no function to compare
    (`—` against the base's). Alone, with nothing that runs the class differing, that is no job it does: not Keep
    (the probe `reading` is what shows the job: below). The same difference beside one in what the class does is."""
    calls = Observation("transformers_calls", "active_adapters", None, {"calls": 2, "cannot_take": []})
    signature = Observation("signature", "active_adapters", None, {"cannot_take": [], "other_defaults": {}})
    forward = Observation("ran", "loss", 1.5, 1.5)
    assert one_release("m:BertAdapterModel", "active_adapters", calls, signature, forward) == AdviceKind.REVIEW
    logits = Observation("ran", "loss", 1.5, 2.5)
    assert one_release("m:BertAdapterModel", "active_adapters", calls, signature, logits) == AdviceKind.KEEP


def test_a_property_that_reads_otherwise_than_the_base_method_does_its_job_unless_the_class_breaks():
    """Read on an instance (`reading`), adapters' `active_adapters` gives the adapter setup where, deleted, every
    reader gets transformers' bound method: by hand, deleting it makes `set_active_adapters` pick another head. The
    class as shipped runs: Keep. `num_parameters` as a property reads otherwise too, but the Trainer's step calls
    `model.num_parameters(exclude_embeddings=True)` and raises as shipped: not Keep."""
    calls = Observation("transformers_calls", "active_adapters", None, {"calls": 2, "cannot_take": []})
    assert one_release("m:BertAdapterModel", ADAPTERS, calls, reading("Stack[tiny]", PEFT_METHOD)) == AdviceKind.KEEP
    counted = Observation(
        "reading", "num_parameters", 4096, "transformers.modeling_utils.ModuleUtilsMixin.num_parameters"
    )
    step = Observation("plain_trainer_step", "error", "TypeError: 'int' object is not callable", None)
    assert one_release("m:CountsAsProperty", "num_parameters", counted, step) == AdviceKind.REVIEW
    assert one_release("m:CountsAsProperty", "num_parameters", counted) == AdviceKind.KEEP


ADAPTERS = "active_adapters"
PEFT_METHOD = "transformers.integrations.peft.PeftAdapterMixin.active_adapters"  # what reading it gives deleted


def reading(override, base) -> Observation:
    return Observation("reading", ADAPTERS, override, base)


def test_a_getter_that_raises_on_a_fresh_instance_is_neither_harmful_nor_a_job():
    """adapters' EncoderDecoderModelWithAdapters, built with no adapter set up: reading `active_adapters` raises as
    shipped (no `adapters_config`), and deleted it gives transformers' bound method, which cannot fail. That fixes
    nothing (harmful would say Delete) and shows no job (Keep): Review, as for a base property that raises."""
    raised = "error: AttributeError: 'EncoderDecoderModelWithAdapters' object has no attribute 'active_adapters'"
    assert one_release("m:EncoderDecoder", ADAPTERS, reading(raised, PEFT_METHOD)) == AdviceKind.REVIEW
    assert one_release("m:EncoderDecoder", ADAPTERS, reading(PEFT_METHOD, "error: ValueError: no adapter")) == (
        AdviceKind.KEEP  # a method over a property that raises: deleting it, every reader gets the error
    )


def test_a_class_that_fails_in_every_probe_that_runs_it_is_not_kept_for_what_reading_it_gives():
    """Reading an attribute does not run the class: where every probe that does failed alike on both sides, the
    class could not run there, whatever `reading` saw (a property's value against a bound method)."""
    crash = "error: RuntimeError: shapes do not match"
    forward = Observation("forward_backward", "forward", crash, crash)
    ran = Observation("forward_backward", "reached", [ADAPTERS], [], False)
    observed = (forward, ran, reading("Stack[tiny]", PEFT_METHOD))
    result = SubjectResult("m:Broken", (ADAPTERS,), observations=observed, probes=("forward_backward", "reading"))
    assert decide(result).verdict == "fails as shipped"
    judged = conclude_method(result, decide(result), ADAPTERS, {})
    assert judged.kind == ConclusionKind.COULD_NOT_RUN
    assert advise((OnRelease("transformers 4.57.6", judged),)).kind == AdviceKind.REVIEW


def accessor(override, base) -> Observation:
    return Observation("no_arguments", "get_decoder", override, base, contract=True)


FOUND = {"module": "transformer.decoder", "used_in_forward": True}


def test_an_accessor_that_finds_what_the_base_does_not_does_its_job():
    """adapters' T5AdapterModel.get_decoder returns `transformer.decoder`; 4.57.6's get_decoder, finding no
    `decoder` of its own, returns the model itself: deleting the override loses the decoder. Keep."""
    assert one_release("m:T5", "get_decoder", accessor(FOUND, {"module": "(subject)", "used_in_forward": True})) == (
        AdviceKind.KEEP
    )
    assert one_release("m:T5", "get_decoder", accessor(FOUND, None)) == AdviceKind.KEEP


@pytest.mark.parametrize(
    ("override", "base"),
    [
        ({"module": "transformer.encoder", "used_in_forward": True}, FOUND),  # the encoder where the base finds it
        ({"module": "transformer.decoder", "used_in_forward": False}, None),  # a module the forward never uses
        ({"module": "a T5Stack outside the subject", "used_in_forward": False}, None),  # a copy, not the model's
        ({"module": "(subject)", "used_in_forward": True}, None),  # the model itself: nothing found either
    ],
)
def test_a_broken_accessor_is_not_kept(override, base):
    assert one_release("m:T5", "get_decoder", accessor(override, base)) == AdviceKind.REVIEW


def logged(override, base) -> Observation:
    return Observation("trainer_log", "keys", override, base, contract=True)


def test_a_log_that_adds_keys_keeps_the_contract_and_one_that_drops_a_key_breaks_it():
    """trl's trainers log their own metrics beside the base's (`rewards/chosen` beside `loss`): what callbacks and
    `metric_for_best_model` look up is still there. A log that drops `loss` breaks it; one that renames it too."""
    base = ["epoch", "grad_norm", "learning_rate", "loss"]
    assert one_release("m:DPOTrainer", "log", logged([*base, "rewards/chosen"], base)) == AdviceKind.KEEP
    assert one_release("m:DPOTrainer", "log", logged(base[:-1], base)) == AdviceKind.REVIEW
    assert one_release("m:DPOTrainer", "log", logged([*base[:-1], "train_loss"], base)) == AdviceKind.REVIEW


def olmo(fixed: str | None, deleted: str = "error: AttributeError: 'OLMoForCausalLM' has no 'all_tied_weights_keys'"):
    """ai2-olmo's `tie_weights(self)` on 5.x: as shipped `init_weights()` raises the TypeError of a call it cannot
    bind; with it deleted, the base's raises another error (`deleted`); `fixed`: the widened override's value."""
    fixes_seen = ((TIE, fixed),) if fixed is not None else ()
    observations = (
        Observation("build_and_init", "init_weights", "error: " + RAISES, deleted, fixed=fixes_seen),
        obs("build_and_init", "reached", ["can_generate"], ["can_generate"], carries=False),
        obs("no_arguments", "get_input_embeddings", "model.transformer.wte", "model.transformer.wte"),  # it runs
        obs("transformers_calls", TIE, {"calls": 1, "cannot_take": [SITE]}, {"calls": 1, "cannot_take": []}),
        obs("signature", TIE, {"cannot_take": GAP, "other_defaults": {}}, {"cannot_take": [], "other_defaults": {}}),
    )
    return SubjectResult("m:OLMoForCausalLM", (TIE,), observations=observations, probes=("build_and_init",))


def redundant_there() -> SubjectResult:
    return SubjectResult(
        "m:OLMoForCausalLM",
        (TIE,),
        observations=(obs("build_and_init", "built", "v", "v"), obs("build_and_init", "reached", [TIE], [TIE], False)),
        probes=("build_and_init",),
    )


def test_fix_where_deleting_is_no_way_out_and_the_change_is_verified():
    """On 4.57.6 deleting changes nothing; on 5.x the class as shipped cannot be initialized, deleting the override
    fails too (another error: no difference, and no way out), and the widened override runs: Fix, verified."""
    found = over(redundant_there(), olmo(fixed="v_head=0.0"))
    assert found.advice.kind == AdviceKind.FIX
    assert "; verified: with it the class runs on 5.1.0 (build and init), and on 5.0.0 nothing passes" in reason(found)


@pytest.mark.parametrize(
    ("without", "fails"),
    [
        ((), True),  # the `without tie_weights` variant did not run it (nothing it could change): as shipped, it raises
        (((TIE, "v_head=0.0"),), False),  # it ran, and with tie_weights alone deleted the build works
        (((TIE, "error: AttributeError: no all_tied_weights_keys"),), True),
    ],
)
def test_with_several_names_deleting_fails_is_read_from_the_variant_without_that_name_alone(without, fails):
    """With `_init_weights` audited too, whether deleting `tie_weights` is a way out is what its own variant saw (the
    base variant deletes both); where that variant skipped the probe, the class as shipped ran in its place."""
    built = Observation(
        "build_and_init", "init_weights", "error: " + RAISES, "v_head=0.53", without=without, fixed=((TIE, "v_head=0"),)
    )
    olmo_two = replace(olmo(fixed="v_head=0"), methods=(TIE, "_init_weights"))
    subject = replace(olmo_two, observations=(built, *olmo_two.observations[1:]))
    fix = fix_of(subject, TIE)
    assert fix.verified is True and fix.deleting_fails is fails and fix.only_way is fails


@pytest.mark.parametrize(
    ("fixed", "deleted", "advice"),
    [
        ("error: " + RAISES, "error: AttributeError: no all_tied_weights_keys", AdviceKind.REVIEW),  # widening fails
        (None, "error: AttributeError: no all_tied_weights_keys", AdviceKind.REVIEW),  # the change never ran
        ("v_head=0.0", "v_head=0.0", AdviceKind.DELETE),  # deleting fixes it: Delete, not Fix
    ],
)
def test_no_fix_where_the_change_is_not_verified_or_deleting_fixes_it(fixed, deleted, advice):
    found = over(redundant_there(), olmo(fixed=fixed, deleted=deleted))
    assert found.advice.kind == advice


MISSING = "error: TypeError: RerankingModel.forward() missing 3 required positional arguments: 'inputs_embeds', …"
NO_LABELS = "error: TypeError: DPRContextEncoderEnhanced.forward() got an unexpected keyword argument 'labels'"


def test_a_forward_that_cannot_bind_the_probes_inputs_is_no_evidence_not_a_harmful_override():
    """simpletransformers' RerankingModel.forward(inputs_embeds, attention_mask, token_type_ids): called with the
    probe's token ids it raises; deleted, BertModel's forward runs. The probe does not fit the class: not harmful,
    not Delete. A forward that refuses what transformers passes (`cache_position`) still is."""
    forward = Observation("forward_backward", "forward", MISSING, "h=1.0")
    assert one_release("m:RerankingModel", "forward", forward) == AdviceKind.REVIEW
    cache = "error: TypeError: RerankingModel.forward() got an unexpected keyword argument 'cache_position'"
    assert one_release("m:RerankingModel", "forward", replace(forward, override=cache)) == AdviceKind.DELETE


def test_a_forward_that_takes_no_labels_is_kept_for_what_it_does_not_fixed_to_take_labels():
    """DPRContextEncoderEnhanced.forward returns more than the base's; the Trainer step's labels are the probe's,
    which it takes none of: Keep, and no Fix that would have it accept `labels`."""
    outputs = Observation("forward_backward", "forward", "h=1.0, p=2.0", "p=2.0")
    step = Observation(
        "plain_trainer_step", "trained", NO_LABELS, "error: ValueError: no loss", fixed=(("forward", "x"),)
    )
    assert one_release("m:DPRContextEncoderEnhanced", "forward", outputs, step) == AdviceKind.KEEP


def reloaded(name: str, override, base) -> Observation:
    return Observation("save_and_load", name, override, base, contract=True)


LOST = {"changed": [], "missing": ["transformer.h.0.output_adapters.adapters.tiny.adapter_up.weight"], "unexpected": []}
CLEAN = {"missing_keys": [], "mismatched_keys": [], "unexpected_keys": []}
UNEXPECTED = {**CLEAN, "unexpected_keys": LOST["missing"]}


def test_a_reload_the_override_keeps_whole_where_the_base_loses_weights_does_its_job():
    """adapters' `save_pretrained` saves the base model's weights, the adapter's apart: deleted, the adapter's
    weights come back unexpected and go missing from the reloaded model. Keep. An override that loses what the base
    keeps breaks the reload; one that loses something else than the base does breaks it too."""
    shipped = reloaded("state_survived", True, LOST), reloaded("loading_info", CLEAN, UNEXPECTED)
    assert one_release("m:GPT2AdapterModel", "save_pretrained", *shipped) == AdviceKind.KEEP
    losing = reloaded("state_survived", LOST, True), reloaded("loading_info", UNEXPECTED, CLEAN)
    assert one_release("m:GPT2AdapterModel", "save_pretrained", *losing) == AdviceKind.REVIEW
    changed = {**LOST, "missing": [], "changed": ["lm_head.weight"]}
    assert one_release("m:GPT2AdapterModel", "save_pretrained", reloaded("state_survived", changed, LOST)) == (
        AdviceKind.REVIEW
    )


def accumulated(shipped: bool) -> Conclusion:
    """On a release that reads `loss_is_scaled_for_ga`: the step over two batches is (or is not) that over one."""
    seen = Observation("trainer_accumulation", "as_one_batch", shipped, not shipped, contract=True)
    return Conclusion(ConclusionKind.DIFFERENTLY, (contrast(seen, "Trainer gradient accumulation"),))


@pytest.mark.parametrize(
    ("shipped", "expected"),
    [(True, AdviceKind.KEEP), (False, AdviceKind.REVIEW)],
    ids=["keeps-the-accumulated-step-whole", "DividesLossTwice"],
)
def test_a_name_orphaned_only_before_releases_read_it_is_advised_by_those_that_do(shipped, expected):
    """trl's `loss_is_scaled_for_ga`, read from 5.19: orphaned on 4.57.6 is no Port (nothing it did is gone); on
    5.24.0, the flag that makes the accumulated step equal one batch of both does its job, the one that halves it
    breaks it. Orphaned on the newer release, what it did there is gone: Port what did its job, but not what broke
    the step (porting it would port the bug)."""
    rows = [("5.24.0", accumulated(shipped)), ("4.57.6", Conclusion(ConclusionKind.ORPHANED))]
    assert advise(rows).kind == expected
    ported = AdviceKind.PORT if shipped else AdviceKind.REVIEW
    assert advise(list(reversed(rows))).kind == ported


def test_an_override_without_which_the_class_cannot_be_built_reads_so():
    unbuilt = "CouldNotBuild: could not build C: its config_class is None, not a config class; write a factory (see …)"
    needed = Observation("forward", "error", None, unbuilt)
    conclusion = Conclusion(ConclusionKind.NEEDED, (contrast(needed, "forward and backward"),))
    override = OverrideConclusions("m:C", "config_class", (("4.57.6", conclusion),), advise([("4.57.6", conclusion)]))
    assert wording.reason(override, ["4.57.6"]) == (
        "without it, the class cannot be built (its config\\_class is None, not a config class)"
    )


def test_a_fix_of_an_override_that_calls_nothing_of_its_name_says_accept_them_not_pass_them_on():
    """ai2-olmo's `tie_weights` is a no-op (`pass` under its docstring): there is nothing to pass them on to."""
    code = (Code(TIE, "m.py", ((f"{TIE}@1", ((3, "pass"),)),)),)
    noop = replace(cell(broken=True), code=code)
    assert fix_of(noop, TIE).passes_on is False
    assert reason(over(cell(broken=False), noop)).startswith(
        "accept missing_keys and recompute_mapping (or **kwargs); on 5.1.0 transformers calls"
    )
    calls = (Code(TIE, "m.py", ((f"{TIE}@1", ((3, "return super().tie_weights()"),)),)),)
    assert fix_of(replace(cell(broken=True), code=calls), TIE).passes_on is True


def test_a_name_orphaned_where_the_release_did_not_audit_it_is_no_delete():
    """trl's `_BaseTrainer.loss_is_scaled_for_ga = None`: transformers' Trainer has the same None from 5.19, so deleting
    it changes nothing there; 4.56.2 has none, so the release did not audit it and never deleted it, and trl's own
    `__init__` reads it there: deleted, the trainer cannot be built. Delete needs a deletion that ran."""
    same = Conclusion(ConclusionKind.REDUNDANT)
    untested = Conclusion(ConclusionKind.ORPHANED, why="no class of transformers defines it", untested=True)
    assert advise([("5.24.0", same), ("4.56.2", untested)]).kind == AdviceKind.REVIEW
    tested = Conclusion(ConclusionKind.ORPHANED, why="no base class defines it")  # its deletion ran: nothing differed
    assert advise([("5.24.0", same), ("4.56.2", tested)]).kind == AdviceKind.DELETE
    # harmful where it is read, orphaned before: Delete fixes the newer release only where the older one deleted it too
    harmful = Conclusion(ConclusionKind.HARMFUL)
    assert advise([("5.24.0", harmful), ("4.56.2", untested)]).kind == AdviceKind.REVIEW
    assert advise([("5.24.0", harmful), ("4.56.2", tested)]).kind == AdviceKind.DELETE


def test_a_step_one_side_never_reached_is_no_difference_and_the_build_it_needs_is_kept():
    """granite-tsfm's `config_class`: as shipped the class builds and its `init_weights` raises; without it the class
    cannot be built, so it never called `init_weights`. That error is no harm of the override's: it is needed."""
    unbuilt = "error: CouldNotBuild: could not build C: its config_class is None, not a config class; write a factory"
    init = "error: AttributeError: 'C' object has no attribute 'all_tied_weights_keys'"
    built = Observation("build_and_init", "built", "parameters=0", unbuilt)
    after = Observation("build_and_init", "init_weights", init, None)
    result = SubjectResult("m:C", ("config_class",), observations=(built, after), probes=("build_and_init",))
    judged = conclude_method(result, decide(result), "config_class", {})
    assert judged.kind == ConclusionKind.NEEDED and [c.observation.name for c in judged.contrasts] == ["built"]
    # a step both sides reached still counts: with the base built, the error as shipped is the override's harm
    reached = replace(result, observations=(replace(built, base="parameters=0"), replace(after, base="ok")))
    assert conclude_method(reached, decide(reached), "config_class", {}).kind == ConclusionKind.HARMFUL


def coupled_step(keeps: bool) -> Conclusion:
    """gliner's `training_step` beside its `compute_loss`: deleted alone, the accumulated step is (`keeps`: no
    longer) one batch of both; deleted with the other override, nothing differs."""
    step, loss = "training_step", "compute_loss"
    whole = Observation(
        "trainer_accumulation", "as_one_batch", keeps, keeps, without=((step, not keeps), (loss, not keeps))
    )
    ran = Observation("trainer_accumulation", "reached", [step, loss], [step, loss], False, ((step, [loss]),))
    result = SubjectResult("m:T", (step, loss), observations=(whole, ran), probes=("trainer_accumulation",))
    return conclude_method(result, decide(result), step, {})


def test_an_override_that_keeps_a_contract_only_beside_the_others_is_kept_and_says_so():
    kept = coupled_step(keeps=True)
    assert kept.coupled and kept.keeps_alone and kept.does_its_job
    override = OverrideConclusions("m:T", "training_step", (OnRelease("5.16.1", kept),), advise([("5.16.1", kept)]))
    assert override.advice.kind == AdviceKind.KEEP
    assert reason(override).endswith("(deleting it with the other overrides changes nothing on 5.16.1)")
    broken = coupled_step(keeps=False)  # as shipped it halves the step; deleted alone, it is whole
    assert broken.coupled and not broken.keeps_alone and advise([("5.16.1", broken)]).kind == AdviceKind.REVIEW


def test_keep_where_it_does_its_job_on_some_releases_and_elsewhere_changes_nothing_or_is_not_established():
    job = over(cell(broken=False)).by_release[0].conclusion
    same, unknown = Conclusion(ConclusionKind.REDUNDANT), Conclusion(ConclusionKind.UNKNOWN, why="never ran")
    rows = [("5.2.0", same), ("5.1.0", job), ("5.0.0", unknown)]
    override = advised("m:ValueHeadLM", TIE, rows)
    assert override.advice.kind == AdviceKind.KEEP
    assert reason(override) == (
        "it does its job: deleting it changes build and init on 5.1.0; changes nothing on 5.2.0;"
        " not established on 5.0.0"
    )
    # not where it breaks a release, nor where what differs elsewhere is no job it does
    broken = over(cell(broken=False, works=False)).by_release[0].conclusion
    assert advise([("5.2.0", broken), ("5.1.0", job), ("5.0.0", unknown)]).kind == AdviceKind.REVIEW
    assert advise([("5.2.0", same), ("5.1.0", unknown)]).kind == AdviceKind.REVIEW


def test_a_call_of_transformers_it_cannot_take_that_no_run_showed_is_said_with_its_place():
    """gliner's `create_optimizer(self)`: transformers 5.3+ calls `create_optimizer(model)` where it delays creating
    the optimizer, a path no probe takes. Only transformers' calls differ: Review, saying the call and where."""
    site = "create_optimizer(…) at trainer.py:1592"
    calls = Observation("transformers_calls", "create_optimizer", {"calls": 2, "cannot_take": [site]}, None)
    result = SubjectResult("m:T", ("create_optimizer",), observations=(calls,), probes=("transformers_calls",))
    judged = conclude_method(result, decide(result), "create_optimizer", {})
    rows = [("5.3.0", judged)]
    override = advised("m:T", "create_optimizer", rows)
    assert override.advice.kind == AdviceKind.REVIEW
    assert reason(override) == (
        "on 5.3.0 transformers calls create_optimizer(…) at trainer.py:1592, which it cannot take: accept what it"
        " passes"
    )


def test_an_error_the_override_raises_itself_is_said_as_its_own_with_its_line():
    """adapters' `gradient_checkpointing_enable` refuses `use_reentrant=True` with a `raise ValueError(` of its own:
    Review says so, with the line, so the maintainer can tell a refusal on purpose from a breakage."""
    enable = "gradient_checkpointing_enable"
    refused = "ValueError: Gradient checkpointing with use_reentrant=True is not supported."
    code = Code(
        enable, "m.py", ((f"{enable}@1955", ((1980, "if kwargs['use_reentrant']:"), (1981, "raise ValueError("))),)
    )
    observations = (
        Observation("kwargs_forwarded", "error", refused, None),
        Observation("kwargs_forwarded", "forwarded", None, True, contract=True),
        Observation("kwargs_forwarded", "reached", [enable], [enable], False),
        Observation("kwargs_forwarded", "lines", {enable: {f"{enable}@1955": [1980, 1981]}}, None, False),
    )
    result = SubjectResult("m:BertAdapterModel", (enable,), observations=observations, probes=("p",), code=(code,))
    judged = conclude_method(result, decide(result), enable, {"kwargs_forwarded": "checkpoint kwargs"})
    assert judged.raised_by_it == (1981, "raise ValueError(")
    rows = [("4.57.6", judged)]
    override = advised("m:B", enable, rows)
    assert judged.kind == ConclusionKind.HARMFUL and override.advice.kind == AdviceKind.REVIEW  # not Delete
    assert reason(override) == (
        "harmful on 4.57.6 (it raises the ValueError itself: raise ValueError( at line 1981; review whether that"
        " refusal still holds)"
    )
    # an error raised elsewhere (transformers, torch) is not its own, even where its code raises other errors
    other = replace(result, observations=(replace(observations[0], override="KeyError: 'x'"), *observations[1:]))
    harmful = conclude_method(other, decide(other), enable, {})
    assert harmful.raised_by_it is None and advise([("4.57.6", harmful)]).kind == AdviceKind.DELETE


def refusing(error: str, recomputed: tuple[str, str]) -> SubjectResult:
    """One release of adapters' `gradient_checkpointing_enable` on 4.57: `error` as shipped where the probe asks for
    `use_reentrant=True` (its own `raise ValueError(` at line 1981 ran there); elsewhere it hands torch's checkpoint
    a context of its own and `use_reentrant=False`, and the backward recomputes `recomputed` (shipped, base)."""
    enable = "gradient_checkpointing_enable"
    code = Code(
        enable, "m.py", ((f"{enable}@1955", ((1980, "if kwargs['use_reentrant']:"), (1981, "raise ValueError("))),)
    )
    lines = {enable: {f"{enable}@1955": [1980, 1981]}}

    def step(reentrant: bool, context: str) -> dict:
        return {"checkpoint_kwargs": [{"context_fn": context, "use_reentrant": reentrant}], "steps": 1}

    observations = (
        Observation("kwargs_forwarded", "error", error, None),
        Observation("kwargs_forwarded", "reached", [enable], [enable], False),
        Observation("kwargs_forwarded", "lines", lines, None, False),
        Observation("backward_through_checkpointed_model", "recomputed_layers", *recomputed, contract=True),
        Observation("trainer_step", "default", step(False, "adapters' context"), step(True, "noop"), contract=True),
        Observation("trainer_step", "reached", [enable], [enable], False),
    )
    return SubjectResult("m:BertAdapterModel", (enable,), observations=observations, probes=("p",), code=(code,))


def test_an_override_that_refuses_one_input_itself_and_keeps_what_the_base_loses_elsewhere_is_kept():
    """adapters' `gradient_checkpointing_enable` refuses `use_reentrant=True` with a `raise` of its own; elsewhere,
    without it, a model whose adapters are trained recomputes no layer in the backward (checked by hand on 4.57.6:
    deleted, the backward raises "element 0 of tensors does not require grad"). The refusal is its decision, not
    a break; against a base that loses a contract, its other kwargs are how it keeps it: Keep, saying the refusal.
    Not where the error is not its own, where the base loses nothing, nor where it recomputes fewer layers."""
    enable = "gradient_checkpointing_enable"
    refused = "ValueError: Gradient checkpointing with use_reentrant=True is not supported."
    titles = {"backward_through_checkpointed_model": "gradients with checkpointing on"}

    def advice(result: SubjectResult) -> OverrideConclusions:
        return advised("m:B", enable, [("4.57.6", conclude_method(result, decide(result), enable, titles))])

    kept = advice(refusing(refused, ("2/2", "0/2")))
    assert kept.advice.kind == AdviceKind.KEEP
    assert reason(kept) == (
        "it does its job: deleting it changes gradients with checkpointing on and trainer step on 4.57.6 (it raises"
        " the ValueError itself: raise ValueError( at line 1981; review whether that refusal still holds)"
    )
    assert advice(refusing("KeyError: 'x'", ("2/2", "0/2"))).advice.kind == AdviceKind.REVIEW  # not its own
    # the base recomputes every layer too: the kwargs it invents break what the Trainer gives torch's checkpoint
    assert advice(refusing(refused, ("2/2", "2/2"))).advice.kind == AdviceKind.REVIEW
    fewer = advice(refusing(refused, ("1/2", "2/2")))
    assert fewer.advice.kind == AdviceKind.REVIEW and "breaks gradients with checkpointing on" in reason(fewer)


def reloading(ran: list[int], fails: bool = True) -> Conclusion:
    """One release of span-marker's `from_pretrained`: its reload raises as shipped (`fails`) where the base's runs;
    `ran`: its statements that ran (line 263 reads a saved model, 283–284 build one from an encoder and labels)."""
    code = Code(
        "from_pretrained",
        "m.py",
        (("from_pretrained@250", ((263, "model = super().from_pretrained(path)"), (283, "if labels:"), (284, "x()"))),),
    )
    shipped = "error: AttributeError: 'tuple' object has no attribute 'set_tokenizer'" if fails else {"sum": 1.0}
    observations = (
        Observation("save_and_load", "reloaded_output", shipped, {"sum": 1.0}),
        Observation("save_and_load", "reached", ["from_pretrained"], ["from_pretrained"], False),
        Observation("save_and_load", "lines", {"from_pretrained": {"from_pretrained@250": ran}}, None, False),
    )
    result = SubjectResult("m:SpanMarkerModel", ("from_pretrained",), observations=observations, probes=("p",))
    result = replace(result, code=(code,))
    return conclude_method(result, decide(result), "from_pretrained", {})


def test_delete_of_a_harmful_override_needs_every_statement_to_have_run_on_some_release():
    """span-marker's `from_pretrained` raises in the probes' reload on every release, so deleting it "fixes" that;
    but its branch that builds a model from an encoder and labels, the entry point its users call, never ran (checked
    by hand: deleted, `from_pretrained(encoder, labels=…)` raises TypeError). Delete vouches only for code that ran:
    Review, naming what never ran. Where a release ran it all, or it changes nothing on another (all of it ran
    there), Delete stands."""
    partly = [("4.57.6", reloading([263])), ("4.28.1", reloading([263]))]
    review = advised("m:S", "from_pretrained", partly)
    assert review.advice.kind == AdviceKind.REVIEW
    assert reason(review) == (
        "harmful on 4.28.1, 4.57.6, but lines 283–284 (`if labels:` …) never ran as shipped in any probe"
    )
    somewhere = [("4.57.6", reloading([263])), ("4.28.1", reloading([263, 283, 284]))]
    assert advised("m:S", "from_pretrained", somewhere).advice.kind == AdviceKind.DELETE
    redundant = reloading([263, 283, 284], fails=False)
    assert redundant.kind == ConclusionKind.REDUNDANT
    elsewhere = [("4.57.6", reloading([263])), ("4.28.1", redundant)]
    assert advised("m:S", "from_pretrained", elsewhere).advice.kind == AdviceKind.DELETE


def test_a_value_one_side_never_reached_is_no_break_of_the_contract_and_a_forward_call_names_no_site():
    """simpletransformers' DPR encoders on 5.x: as shipped the forward raises, so the reload's outputs are never
    compared (`same_outputs` has no value), where without the override they are the same. The failure is the
    difference: harmful, not also a reload that breaks its contract."""
    raised = "error: AttributeError: 'DPR' object has no attribute 'get_extended_attention_mask'"
    failed = Observation("save_and_load", "reloaded_output", raised, {"abs_sum": 417.0})
    compared = Observation("save_and_load", "same_outputs", None, True, contract=True)
    result = SubjectResult("m:DPR", ("forward",), observations=(failed, compared), probes=("save_and_load",))
    judged = conclude_method(result, decide(result), "forward", {})
    assert judged.kind == ConclusionKind.HARMFUL and not judged.breaks
    assert [c.observation.name for c in judged.contrasts] == ["reloaded_output"]
    # transformers calls `.forward(` of objects of every kind: a site that passes what it cannot take is no caller
    site = "forward(…, …, …, …, …, …) at activations.py:304"
    calls = Observation("transformers_calls", "forward", {"calls": 9, "cannot_take": [site]}, None)
    only = SubjectResult("m:R", ("forward",), observations=(calls,), probes=("transformers_calls",))
    rows = [("5.24.0", conclude_method(only, decide(only), "forward", {}))]
    override = advised("m:R", "forward", rows)
    assert "activations.py" not in reason(override)


def test_a_key_error_of_its_own_lookup_is_said_as_its_own_and_is_no_delete():
    """colpali's ColGemma3.forward multiplies by `kwargs["attention_mask"]`, which the probes' token ids come
    without: it raises KeyError as shipped and the base does not. Deleting it would fix only the probe's inputs and
    lose the model's embeddings: Review, saying whose lookup raised."""
    code = Code(
        "forward",
        "m.py",
        (("forward@74", ((84, "proj = self.proj(h)"), (88, 'p = p * kwargs["attention_mask"]  # mask'))),),
    )
    observations = (
        Observation("forward_backward", "forward", "error: KeyError: 'attention_mask'", {"sum": 1.0}),
        Observation("forward_backward", "reached", ["forward"], ["forward"], False),
        Observation("forward_backward", "lines", {"forward": {"forward@74": [84, 88]}}, None, False),
    )
    result = SubjectResult("m:ColGemma3", ("forward",), observations=observations, probes=("p",), code=(code,))
    judged = conclude_method(result, decide(result), "forward", {})
    assert judged.kind == ConclusionKind.HARMFUL and judged.raised_by_it == (88, 'p = p * kwargs["attention_mask"]')
    rows = [("5.24.0", judged)]
    override = advised("m:C", "forward", rows)
    assert override.advice.kind == AdviceKind.REVIEW
    assert reason(override) == (
        'harmful on 5.24.0 (the KeyError is its own: p = p * kwargs["attention_mask"] at line 88 reads a key it was'
        " not given; review what it needs)"
    )
    # a store, a guarded load, a list or a comment of the key raises no KeyError of its own
    for text in (
        'kwargs["attention_mask"] = m',
        'm = kwargs["attention_mask"] if "attention_mask" in kwargs else 1',
        'names = ["attention_mask"]',
        'p = p * 2  # kwargs["attention_mask"]',
    ):
        unit = (("forward@74", ((84, "proj = self.proj(h)"), (88, text))),)
        guarded = replace(result, code=(Code("forward", "m.py", unit),))
        assert conclude_method(guarded, decide(guarded), "forward", {}).raised_by_it is None, text
    # a KeyError of another key, raised elsewhere, is not its own: deleting it fixes that
    other = replace(
        result, observations=(replace(observations[0], override="error: KeyError: 'labels'"), *observations[1:])
    )
    harmful = conclude_method(other, decide(other), "forward", {})
    assert harmful.raised_by_it is None and advise([("5.24.0", harmful)]).kind == AdviceKind.DELETE


def test_port_asks_what_it_did_before_the_newest_orphaning_to_be_worth_porting():
    """Port where what is gone was needed; Review where it was harmful (porting would port the bug); an older
    stretch where it was orphaned too ends what counts (its harmful past before that is not what is gone now)."""
    kind = ConclusionKind
    gone, needed, harmful = Conclusion(kind.ORPHANED), Conclusion(kind.NEEDED), Conclusion(kind.HARMFUL)
    assert advise([("5.24.0", gone), ("5.0.0", needed)]).kind == AdviceKind.PORT
    assert advise([("5.24.0", gone), ("5.0.0", harmful)]).kind == AdviceKind.REVIEW
    rows = [("5.24.0", gone), ("5.0.0", harmful)]
    override = advised("m:C", "x", rows)
    assert reason(override) == "harmful on 5.0.0; orphaned on 5.24.0"  # the Review says where it is gone
    stretches = [("5.24.0", gone), ("5.0.0", needed), ("4.57.6", gone), ("4.45.2", harmful)]
    assert advise(stretches).kind == AdviceKind.PORT
