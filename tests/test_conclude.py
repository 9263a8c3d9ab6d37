"""The conclusions and recommendations the report derives from verdicts, by its documented rules."""

from __future__ import annotations

import pytest

from compat_matrix.host.collect import SubjectRow
from compat_matrix.host.conclude import Concluded, conclude, conclude_method, deprecations
from compat_matrix.host.overrides import of_subject
from compat_matrix.host.verdict import decide
from compat_matrix.host.wording import PLAIN, glance, phrase, summarize, versions_text
from compat_matrix.shared.results import CellResult, Observation, SubjectResult
from compat_matrix.shared.vocabulary import AdviceKind, ConclusionKind

HARMFUL, NEEDED, DIFFERENTLY = ConclusionKind.HARMFUL, ConclusionKind.NEEDED, ConclusionKind.DIFFERENTLY
REDUNDANT = ConclusionKind.REDUNDANT
A, B = "switch_on", "switch_off"
TITLES = {"trainer_step": "Trainer step"}
# A Trainer step that raises as shipped and runs with `switch_on` deleted alone (not with `switch_off` deleted alone)
RAISES_WITH_A = Observation(
    "trainer_step",
    "default",
    "error: TypeError: x",
    {"steps": 1},
    without=((A, {"steps": 1}), (B, "error: TypeError: x")),
)


def result(*observations, methods=(A,)):
    return SubjectResult("m:C", methods, observations=tuple(observations), probes=("trainer_step",))


@pytest.mark.parametrize(
    ("observation", "kind", "phrased"),
    [
        (
            Observation("trainer_step", "default", "error: TypeError: got 'every_n_layers'", {"steps": 1}),
            HARMFUL,
            "differs: Trainer step: TypeError (override) vs runs (base)",
        ),
        (
            Observation("trainer_step", "error", None, "NotImplementedError: please override"),
            NEEDED,
            "differs: Trainer step: runs (override) vs NotImplementedError (base)",
        ),
        (
            Observation("trainer_step", "default", {"steps": 1, "layers": True}, {"steps": 1, "layers": False}),
            DIFFERENTLY,
            "differs: Trainer step: layers=True (override) vs layers=False (base)",
        ),
    ],
)
def test_a_difference_is_harmful_needed_or_different_and_the_phrase_carries_the_values(observation, kind, phrased):
    subject = result(observation)
    verdict = decide(subject)
    conclusion = conclude(subject, verdict, TITLES)
    assert conclusion.kind == kind and phrase(conclusion, verdict) == phrased


def test_deleting_one_method_alone_is_judged_from_its_own_variant_and_redundant_needs_it_to_have_run():
    ran = Observation("trainer_step", "reached", [A, B], [], without=((A, [B]), (B, [A])), carries=False)
    subject = result(RAISES_WITH_A, ran, methods=(A, B))
    verdict = decide(subject)
    assert verdict.follows == (A,)
    assert conclude_method(subject, verdict, A, TITLES).kind == HARMFUL
    # `switch_off` ran as shipped, but in a probe that failed identically without it: no evidence either way
    unknown = conclude_method(subject, verdict, B, TITLES)
    assert unknown.kind == ConclusionKind.UNKNOWN and "switch_off never ran as shipped" in unknown.why
    clean = Observation("p", "x", 1, 1, without=((A, 1), (B, 1)))
    ran_clean = Observation("p", "reached", [B], [], without=((A, [B]), (B, [])), carries=False)
    subject = result(RAISES_WITH_A, ran, clean, ran_clean, methods=(A, B))
    assert conclude_method(subject, decide(subject), B, TITLES).kind == REDUNDANT


@pytest.mark.parametrize(
    ("labels", "text"),
    [
        (["transformers 5.2.0"], "transformers 5.2.0"),
        (["transformers 5.2.0", "transformers 5.0.0"], "transformers 5.0.0, 5.2.0"),
        (["transformers 5.3.0", "transformers 5.2.0", "transformers 5.1.0"], "transformers 5.1.0, 5.2.0, 5.3.0"),
        (
            ["transformers 5.4.0", "transformers 5.3.0", "transformers 5.2.0", "transformers 5.1.0"],
            "transformers 5.1.0–5.4.0 (4 releases)",  # "…" means text left out, never a run of releases
        ),
        (["transformers 5.3.0", "transformers 5.1.0", "transformers 5.0.0"], "transformers 5.0.0, 5.1.0, 5.3.0"),
    ],
)
def test_versions_are_said_oldest_first_with_runs_as_their_ends(labels, text):
    order = [f"transformers 5.{n}.0" for n in (4, 3, 2, 1, 0)]
    assert versions_text(labels, order) == text


def seen(*methods):
    return Observation("trainer_step", "reached", list(methods), list(methods), carries=False)


def rows(*kinds_by_label):
    out = []
    for rank, (label, subject) in enumerate(kinds_by_label):
        verdict = decide(subject)
        per_method = tuple((m, conclude_method(subject, verdict, m, TITLES)) for m in subject.methods)
        row = SubjectRow(rank, label, subject.target, subject, CellResult("m", f"cell:m:{rank}", {}), "", "")
        out.append(Concluded(row, verdict, conclude(subject, verdict, TITLES), per_method, deprecations(subject)))
    return out


def summarized(methods, *kinds_by_label):
    return summarize(of_subject("m:C", methods, rows(*kinds_by_label)))


def test_the_recommendation_follows_the_conclusions_on_every_version():
    harmful = RAISES_WITH_A
    needed = Observation("trainer_step", "error", None, "E: y", without=((A, None), (B, "E: y")))
    warned = Observation(
        "trainer_step",
        "warnings",
        [],
        ["FutureWarning: `switch_on` is deprecated. Use `turn_on` instead."],
        carries=False,
    )
    said = summarized(
        (A, B),
        ("transformers 5.2.0", result(harmful, warned, seen(A, B), methods=(A, B))),
        ("transformers 5.1.0", result(needed, seen(A, B), methods=(A, B))),
        ("transformers 5.0.0", result(Observation("trainer_step", "default", 1, 1), seen(A, B), methods=(A, B))),
    )
    assert said.recommendation == (
        "Delete `switch_on`: safe on every tested version and fixes transformers 5.2.0. "
        "Keep `switch_off`: needed on transformers 5.1.0; redundant on transformers 5.0.0, inconclusive on"
        " transformers 5.2.0."
    )
    assert said.deprecations == ("`switch_on` deprecated in transformers 5.2.0 in favour of `turn_on`",)
    assert said.lines[0].startswith("`switch_on`: **harmful** on transformers 5.2.0: with the override, Trainer step")
    assert "`switch_off`: **needed** on transformers 5.1.0" in said.lines[2]
    same = result(Observation("trainer_step", "x", 1, 1), seen(A, B), methods=(A, B))
    both = of_subject("m:C", (A, B), rows(("v 2", result(harmful, methods=(A, B))), ("v 1", same)))
    # `switch_off` only ran in the Trainer step, which raised with and without it on 2: not established there; the
    # glance says per override what the grid says, harmful first
    assert glance(both) == "`switch_on`: redundant 1 · harmful 2; `switch_off`: redundant 1 · inconclusive 2"
    on, off = both.overrides
    assert on.changes == ("v 2", "v 1") and off.changes == ("v 2", "v 1")
    assert [(f.release, f.variant, f.type, f.observations) for f in on.failures()] == [
        ("v 2", "override", "TypeError", ("trainer_step.default",))
    ]


def test_one_method_redundant_everywhere_is_safe_to_delete():
    same = result(Observation("trainer_step", "default", 1, 1), Observation("trainer_step", "reached", [A], [A], False))
    said = summarized((A,), ("transformers 5.1.0", same), ("transformers 5.0.0", same))
    assert said.lines == ("**redundant** on transformers 5.0.0, 5.1.0: deleting changes nothing there.",)
    assert said.recommendation == "Deleting the override of `switch_on` is safe on every tested version."


def test_a_conclusion_per_override_and_release_with_its_advice():
    """What a grid of one row per audited override renders from: structured, no words."""
    harmful = RAISES_WITH_A
    same = result(Observation("trainer_step", "default", 1, 1), seen(A, B), methods=(A, B))
    answer = of_subject(
        "m:C",
        (A, B),
        rows(("transformers 5.1.0", result(harmful, seen(A, B), methods=(A, B))), ("transformers 5.0.0", same)),
    )
    on, off = answer.overrides
    assert (on.target, on.name, off.name) == ("m:C", A, B)
    assert [(r.label, r.conclusion.kind) for r in on.by_release] == [
        ("transformers 5.1.0", HARMFUL),
        ("transformers 5.0.0", REDUNDANT),
    ]
    (contrast,) = on.by_release[0].conclusion.contrasts
    assert contrast.error == "TypeError: x" and contrast.observation.name == "default"
    assert on.advice.kind == AdviceKind.DELETE and on.advice.on(HARMFUL) == ("transformers 5.1.0",)
    # `switch_off` ran on 5.1.0 only in the Trainer step, which raised alike with and without it: no evidence there
    assert [r.conclusion.kind for r in off.by_release] == [ConclusionKind.UNKNOWN, REDUNDANT]
    assert off.advice.kind == AdviceKind.REVIEW


def test_each_format_escapes_its_own_text():
    """The same sentences in markdown (code in backticks, observed text escaped) and in plain text (as observed)."""
    hostile = Observation("trainer_step", "error", None, "NotImplementedError: *_[x]`y`")
    answer = of_subject("m:C", (A,), rows(("transformers 5.1.0", result(hostile))))
    markdown, plain = summarize(answer), summarize(answer, style=PLAIN)
    assert markdown.lines == (
        "**needed** on transformers 5.1.0 (follows `switch_on`): without the override, Trainer step raise"
        " “NotImplementedError: \\*\\_\\[x\\]'y'”; with it they run.",
    )
    assert plain.lines == (
        "needed on transformers 5.1.0 (follows switch_on): without the override, Trainer step raise"
        " “NotImplementedError: *_[x]`y`”; with it they run.",
    )
    assert markdown.recommendation == "Keep the override of `switch_on`: needed on transformers 5.1.0."
    assert plain.recommendation == "Keep the override of switch_on: needed on transformers 5.1.0."


def test_an_override_that_errors_somewhere_and_changes_values_elsewhere_is_not_safe_to_delete():
    """A forward that doubles the logits (a feature) but breaks `generate`: deleting it fixes generate and loses the
    feature, so it behaves differently (Review), never harmful (Delete). Differences that only a probe reading the
    class sees, or that a probe which failed on one side recorded besides, do not count against harmful."""
    breaks = Observation("generate", "generated", "error: TypeError: forward() got an unexpected keyword", [[1, 2]])
    doubled = Observation("forward_backward", "forward", {"logits": {"sum": 2.0}}, {"logits": {"sum": 1.0}})
    signature = Observation("signature", "forward", {"cannot_take": ["kwargs (**kwargs)"]}, {"cannot_take": []})
    assert conclude(result(breaks, doubled), decide(result(breaks, doubled)), TITLES).kind == DIFFERENTLY
    assert conclude(result(breaks, signature), decide(result(breaks, signature)), TITLES).kind == HARMFUL
    besides = Observation("generate", "tokens", 3, 1)
    assert conclude(result(breaks, besides), decide(result(breaks, besides)), TITLES).kind == HARMFUL


def test_a_name_one_release_discovers_and_another_does_not_is_orphaned_there():
    """With `methods` left out each release audits what overrides something there: `switch_off` overrides a hook
    on 1 that release 2 no longer defines, so on 2 it is orphaned, and the advice says to port what it did."""
    needed = Observation("trainer_step", "error", None, "E: y", without=((A, None), (B, "E: y")))
    older = result(needed, seen(A, B), methods=(A, B))
    newer = result(Observation("trainer_step", "x", 1, 1), seen(A), methods=(A,))
    answer = of_subject("m:C", (), rows(("v 2", newer), ("v 1", older)))
    _, off = answer.overrides
    assert [r.conclusion.kind for r in off.by_release] == [ConclusionKind.ORPHANED, NEEDED]
    assert off.advice.kind == AdviceKind.PORT


def test_on_stand_ins_or_a_model_with_nothing_in_it_the_advice_is_review_never_delete():
    from dataclasses import replace

    from compat_matrix.cell.subject import ABSTRACT, STAND_IN, caveat
    from compat_matrix.host.wording import caution, reason

    assert caveat("trainer", None, 22_688) == STAND_IN  # no factory: a tiny model on rows of token ids
    assert caveat("trainer", None, 22_688, ("chosen", "rejected")) == STAND_IN.replace(
        "token ids,", "token ids with a few words in `chosen`, `rejected`,"
    )  # the columns it asked for, as `init` learnt them
    assert caveat("trainer", "mylib.tiny:trainer", 22_688) is None  # the maintainer's own model and data
    assert caveat("model", None, 0) == ABSTRACT and caveat("model", None, 20_640) is None
    harmful = replace(result(RAISES_WITH_A, seen(A, B), methods=(A, B)), caveat=STAND_IN)
    answer = of_subject("m:C", (A, B), rows(("transformers 5.1.0", harmful)))
    on = answer.overrides[0]
    assert on.advice.kind == AdviceKind.REVIEW and on.advice.caveat == STAND_IN
    order = ["transformers 5.1.0"]
    assert reason(on, order, PLAIN) == f"harmful on 5.1.0, but {STAND_IN}"
    assert "(on the default factory's stand-ins" in caution(answer.overrides, order, several=False, style=PLAIN)
    same = result(Observation("trainer_step", "default", 1, 1), Observation("trainer_step", "reached", [A], [A], False))
    (alone,) = of_subject("m:C", (A,), rows(("transformers 5.1.0", replace(same, caveat=ABSTRACT)))).overrides
    assert (
        alone.advice.kind == AdviceKind.REVIEW and reason(alone, order, PLAIN) == f"redundant on 5.1.0, but {ABSTRACT}"
    )
