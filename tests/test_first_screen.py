"""The release's health first, and one screen at library scale: a report of 153 audited overrides over 26 classes,
built by hand (as tests/test_golden.py builds its layouts; this one is its `library` layout).

The library: five preference trainers the default factory cannot build on any release (the same KeyError), a
reward trainer that cannot be imported on the newest release, twelve trainers audited on stand-ins (with hooks no
probe reaches and lines that never ran), three model classes whose shared `tie_weights` breaks their build on
5.14.1 and 5.24.0 (Fix, verified), four model classes to keep and delete, and one to port."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from compat_matrix.host import first_screen, health, render, wording
from compat_matrix.host.report import make_report
from compat_matrix.host.spec import Axis, MatrixSpec, Subject
from compat_matrix.shared.results import CellResult, Code, Observation, SubjectResult
from compat_matrix.shared.vocabulary import AdviceKind
from test_markdown import unwrapped

VERSIONS = ("4.57.6", "5.14.1", "5.24.0")
STAND_IN = (
    "on the default factory's stand-ins, a tiny model and rows of token ids, not the model and data the trainer is "
    "written for: write a factory to confirm"
)
HF_FOLDER = (
    "ImportError: cannot import name 'HfFolder' from 'huggingface_hub' "
    "(/work/x/.nox/cell-{v}/lib/python3.11/site-packages/huggingface_hub/__init__.py)"
)
RECOMPUTE = "TypeError: OLMoPreTrainedModel.tie_weights() got an unexpected keyword argument 'recompute_mapping'"
SITE = "tie_weights(missing_keys=…, recompute_mapping=…) at modeling_utils.py:4628"
GAP = ["missing_keys (positional or keyword)", "recompute_mapping (positional or keyword)"]
TRAINER_METHODS = ("compute_loss", "training_step", "create_optimizer", "get_train_dataloader", "_prepare_inputs")
UNREACHED = ("_save", "log")  # hooks no probe reaches: they never ran as shipped
PREFERENCE = ("PreferenceTrainer", "PairTrainer", "DPOTrainer", "KTOTrainer", "ORPOTrainer")
STAND_INS = (
    "SFTTrainer", "PPOTrainer", "GRPOTrainer", "RLOOTrainer", "OnlineDPOTrainer", "XPOTrainer", "NashTrainer",
    "BCOTrainer", "CPOTrainer", "GKDTrainer", "PRMTrainer", "AlignPropTrainer",
)  # fmt: skip
LINED = ("SFTTrainer", "GKDTrainer")  # a branch of their `compute_loss` never ran
OLMO = ("OLMoForCausalLM", "OLMoModel", "OLMoForSequenceClassification")
MODELS = ("ValueHeadLM", "RewardHead", "PolicyLM", "CriticLM")
MODEL_METHODS = ("forward", "get_input_embeddings", "_init_weights", "gradient_checkpointing_enable")


def target(name: str) -> str:
    return f"rlib.{'trainers' if name.endswith('Trainer') else 'models'}:{name}"


def obs(probe: str, name: str, override, base, methods=(), deleted=None, alone=None, fixed=()) -> Observation:
    """An observation of a class with several audited names: `deleted` (name → value with it deleted, else the
    value as shipped) and `alone` (name → value with it kept alone, else the base's)."""
    without = tuple((m, (deleted or {}).get(m, override)) for m in methods)
    kept = tuple((m, (alone or {}).get(m, base)) for m in methods)
    return Observation(probe, name, override, base, True, without, kept, fixed)


def reached(probe: str, ran: tuple[str, ...], methods: tuple[str, ...]) -> Observation:
    without = tuple((m, [n for n in ran if n != m]) for m in methods)
    alone = tuple((m, [m] if m in ran else []) for m in methods)
    return Observation(probe, "reached", list(ran), [], False, without, alone)


def code_of(name: str, lined: bool) -> tuple[Code, dict[str, list[int]]]:
    """Its statements, and those that ran (all but a branch where `lined`)."""
    units = ((f"{name}@10", ((11, "loss = super().compute_loss(model, inputs)"), (12, "if self.ref_model:"))),)
    units += ((f"{name}@10", ((13, "loss = loss + self.kl(inputs)"),)),) if lined else ()
    ran = {f"{name}@10": [11, 12]}
    return Code(name, "/work/x/site-packages/rlib/trainers.py", units), ran


def stand_in_trainer(name: str, version: str) -> SubjectResult:
    """A trainer audited on the default factory's stand-ins: every override but UNREACHED runs and changes nothing;
    a branch of compute_loss never runs in LINED."""
    methods = (*TRAINER_METHODS, *UNREACHED)
    ran = TRAINER_METHODS
    loss = {"loss": 3.65, "steps": 2}
    codes = [code_of(m, name in LINED and m == "compute_loss") for m in methods]
    lines = {m: dict(c[1]) for m, c in zip(methods, codes, strict=True) if m in ran}
    return SubjectResult(
        target(name),
        methods,
        observations=(
            obs("trainer_train", "trained", loss, loss, methods),
            reached("trainer_train", ran, methods),
            Observation("trainer_train", "lines", lines, None, False),
        ),
        probes=("trainer_train",),
        kind="trainer",
        caveat=STAND_IN,
        code=tuple(c for c, _ in codes),
    )


def reward_trainer(version: str) -> SubjectResult:
    if version == VERSIONS[-1]:
        why = HF_FOLDER.format(v=version)
        return SubjectResult(target("RewardTrainer"), (), status="import-failed", reason=why)
    return stand_in_trainer("RewardTrainer", version)


def preference_trainer(name: str, version: str) -> SubjectResult:
    why = f"could not build {name}: KeyError: 'chosen'; write a factory (see README)"
    return SubjectResult(target(name), (*TRAINER_METHODS, *UNREACHED, "concatenated_forward"), "could-not-build", why,
                         kind="trainer")  # fmt: skip


def olmo(name: str, version: str) -> SubjectResult:
    """`tie_weights` ties the head its own way; from 5.14 transformers passes it `recompute_mapping`, which it
    cannot take: the build raises as shipped, and the widened override (the Fix) builds."""
    tie = "tie_weights"
    broken = version != VERSIONS[0]
    built = f"error: {RECOMPUTE}" if broken else {"tied": False}
    observations = [
        Observation(
            "build_and_init", "built", built, {"tied": True}, fixed=((tie, {"tied": False}),) if broken else ()
        ),
        Observation("build_and_init", "reached", [tie], [], False),
    ]
    if broken:
        calls = {"calls": 1, "cannot_take": [SITE]}
        observations.append(Observation("transformers_calls", tie, calls, {"calls": 1, "cannot_take": []}))
        gap = {"cannot_take": GAP, "other_defaults": {}}
        observations.append(Observation("signature", tie, gap, {"cannot_take": [], "other_defaults": {}}))
    return SubjectResult(target(name), (tie,), observations=tuple(observations), probes=("build_and_init",))


def model(name: str, version: str) -> SubjectResult:
    """`forward` does its job (its outputs differ), `get_input_embeddings` is needed, the other two change nothing."""
    methods = MODEL_METHODS
    own, base = {"sum": 7.641}, {"sum": 20.15}
    embeddings, missing = {"module": "embed_tokens"}, "error: NotImplementedError"
    ran = methods
    return SubjectResult(
        target(name),
        methods,
        observations=(
            obs("forward_backward", "forward", own, base, methods, {"forward": base}, {"forward": own}),
            reached("forward_backward", ran, methods),
            obs(
                "no_arguments",
                "get_input_embeddings",
                embeddings,
                missing,
                methods,
                {"get_input_embeddings": missing},
                {"get_input_embeddings": embeddings},
            ),
            reached("no_arguments", ran, methods),
        ),
        probes=("forward_backward", "no_arguments"),
    )


def legacy(version: str) -> SubjectResult:
    """Its `_update_causal_mask` changes the outputs on 4.57.6, and no base class defines it from 5.14."""
    methods = ("_update_causal_mask", "prepare_inputs_for_generation")
    five = version.startswith("5.")
    own, base = ({"sum": 20.15}, {"sum": 20.15}) if five else ({"sum": 7.641}, {"sum": 20.15})
    ran = ("prepare_inputs_for_generation",) if five else methods
    return SubjectResult(
        target("LegacyLM"),
        methods,
        observations=(
            obs(
                "forward_backward",
                "forward",
                own,
                base,
                methods,
                {"_update_causal_mask": base},
                {"_update_causal_mask": own},
            ),
            reached("forward_backward", ran, methods),
        ),
        probes=("forward_backward",),
        orphaned=(("_update_causal_mask", "no base class defines it"),) if five else (),
    )


def subjects_on(version: str) -> tuple[SubjectResult, ...]:
    return (
        reward_trainer(version),
        *(preference_trainer(n, version) for n in PREFERENCE),
        *(stand_in_trainer(n, version) for n in STAND_INS),
        *(olmo(n, version) for n in OLMO),
        *(model(n, version) for n in MODELS),
        legacy(version),
    )


def library() -> tuple[MatrixSpec, list[CellResult]]:
    names = ("RewardTrainer", *PREFERENCE, *STAND_INS, *OLMO, *MODELS, "LegacyLM")
    spec = MatrixSpec(
        Path("matrix/rlib.toml"),
        "rlib",
        ("rlib==1.4.0",),
        (Axis("transformers", VERSIONS), Axis("torch", ("2.13.0",))),
        tuple(Subject(target(n), ()) for n in names),
    )
    results = []
    for v in VERSIONS:
        resolved = {"python": "3.11.7", "transformers": v, "torch": "2.13.0+cpu", "rlib": "1.4.0"}
        cell = f"cell:rlib:transformers={v}:torch=2.13.0"
        requested = {"transformers": v, "torch": "2.13.0"}
        results.append(CellResult("rlib", cell, requested, resolved, "ok", None, subjects_on(v)))
    return spec, results


def first_screen_of(text: str) -> str:
    return text.split("<details>", 1)[0]


def test_the_library_holds_what_the_layout_promises():
    report = make_report(*library())
    audited = [row.override for row in report.grid.rows if not row.nothing_audited]
    assert len(audited) >= 150 and len({o.target for o in audited}) >= 20
    kinds = {o.advice.kind for o in audited}
    assert {AdviceKind.FIX, AdviceKind.DELETE, AdviceKind.KEEP, AdviceKind.PORT, AdviceKind.REVIEW} <= kinds


def test_the_title_names_the_import_failure_on_the_newest_release_first():
    report = make_report(*library())
    assert report.title.startswith(
        "rlib: RewardTrainer cannot be imported with transformers 5.24.0 (ImportError: cannot import name 'HfFolder'"
        " from 'huggingface_hub' (site-packages/huggingface_hub/__init__.py)); "
    )
    assert "PreferenceTrainer, PairTrainer and 3 more classes cannot be built on 4.57.6, 5.14.1, 5.24.0" in report.title
    assert report.title.endswith(" — fix 3, delete 9, port 1 and review 131 of 152 overrides")


def test_one_screen_at_library_scale():
    text = render.markdown(make_report(*library()))
    screen = first_screen_of(text)
    assert len(screen.encode()) <= 8 * 1024
    assert len(text) <= 65_536
    for cause in ("KeyError: 'chosen'", "HfFolder", "unexpected keyword argument", STAND_IN.split(":")[0]):
        assert screen.count(cause) == 1, cause  # each shared cause once
    assert "/work/x" not in text  # environment paths shortened, everywhere
    shown, whole = unwrapped(screen), unwrapped(text)
    assert "| `OLMoForCausalLM`, `OLMoModel`, `OLMoForSequenceClassification`: `tie_weights` |" in shown  # acts,
    assert "**Fix**" in screen  # in one row for the classes whose rows read alike
    assert "| `ValueHeadLM`, `RewardHead`, `PolicyLM`, `CriticLM`: `_init_weights` |" in shown
    assert "| `LegacyLM.prepare_inputs_for_generation` |" in shown  # a Delete of another name keeps its row
    assert "| `LegacyLM._update_causal_mask` |" in shown  # and so does a row of another advice
    assert "| `SFTTrainer.compute_loss` |" not in shown and "| `SFTTrainer.compute_loss` |" in whole  # the rest
    assert "**Keep 8**" in screen


def test_evidence_past_the_limit_goes_beside_the_report_whole(monkeypatch):
    """trl's report (149 overrides) was 240 KB, 189 KB of it evidence: the report pastes into a pull-request comment
    (65,536 characters) where the evidence that does not fit, the last classes' in the grid's order, is a file
    beside it that the report names. Nothing is lost: each class's evidence is in exactly one of the two."""
    decided = make_report(*library())
    whole, none = render.documents(decided)
    assert none is None and len(whole) <= render.MARKDOWN_LIMIT  # all of it fits: one file, as before
    sections = ["".join(f"{line}\n" for line in render.evidence_section(decided, s)) for s in decided.meta.subjects]
    limit = len(whole) - sum(map(len, sections)) // 2
    monkeypatch.setattr(render, "MARKDOWN_LIMIT", limit)
    text, evidence = render.documents(decided)
    assert evidence is not None and len(text) <= limit
    assert evidence.startswith(f"# {render.inline(decided.title_in(render.MARKDOWN))}: the evidence")
    assert all((section in text) != (section in evidence) for section in sections)
    moved = sum(section in evidence for section in sections)
    assert 0 < moved < len(sections)
    assert f"The evidence for {moved} more classes is in `rlib.evidence.md`, beside this report." in text
    assert text.split(render.EVIDENCE, 1)[0] == whole.split(render.EVIDENCE, 1)[0]  # the rest as before


def test_the_rest_is_one_line_per_cause_naming_its_classes():
    report = make_report(*library())
    screen = report.screen
    assert screen is not None and screen.grouped
    lines = [first_screen.line(g, report.order, True, wording.PLAIN) for g in screen.groups]
    assert (
        "Review PreferenceTrainer, PairTrainer, DPOTrainer, KTOTrainer, ORPOTrainer: 40 overrides not established,"
        " their classes cannot be built (said at the top): write a factory whose dataset has a chosen column"
    ) in lines
    assert (
        "Review RewardTrainer: 5 overrides could not run on transformers 5.24.0, its class cannot be imported (said"
        " at the top): make it importable there"
    ) in lines
    assert (
        "Review RewardTrainer, SFTTrainer, PPOTrainer, GRPOTrainer, RLOOTrainer and 8 more: 26 overrides not"
        " established: they never ran in a probe that observed something: write a factory, or inputs, that call them"
    ) in lines  # the hooks no probe reaches (_save, log), of 13 classes


def test_the_json_says_the_health_once_per_class_and_stage():
    data = render.report_json(make_report(*library()))
    imported = [h for h in data["health"] if h["stage"] == "import"]
    assert imported == [
        {
            "target": "rlib.trainers:RewardTrainer",
            "releases": ["transformers=5.24.0"],
            "stage": "import",
            "error": HF_FOLDER.format(v="5.24.0").replace(
                "/work/x/.nox/cell-5.24.0/lib/python3.11/site-packages/", "site-packages/"
            ),
        }
    ]
    built = [h["target"] for h in data["health"] if h["stage"] == "build"]
    assert built == [target(n) for n in (*PREFERENCE, *OLMO)]


def test_a_report_of_a_few_rows_is_not_grouped_and_its_title_keeps_its_counts_alone():
    from test_report import RESULTS, SPEC

    spec, results = library()
    few = make_report(replace(spec, subjects=spec.subjects[-5:]), results)  # 4 models and LegacyLM: 18 rows
    assert few.screen is not None and few.screen.grouped
    fewer = make_report(replace(spec, subjects=spec.subjects[-3:]), results)
    assert fewer.screen is not None and not fewer.screen.grouped and len(fewer.grid.rows) == 10
    assert "<details><summary>The whole grid" not in render.markdown(fewer)
    assert make_report(SPEC, RESULTS).title == "CharacterCausalLMWrapper: review both overrides"  # no class broke


def test_paths_into_an_environment_are_cut_to_site_packages():
    said = health.short_paths("ImportError: x (/a/b/.nox/c/lib/python3.11/site-packages/hub/__init__.py)")
    assert said == "ImportError: x (site-packages/hub/__init__.py)"
    assert (
        health.short_paths("see ./site-packages/x and a/site-packages/y")
        == "see ./site-packages/x and a/site-packages/y"
    )


def test_one_that_stopped_doing_something_is_kept_and_one_that_differs_only_beside_the_others_is_a_line():
    from compat_matrix.host.advice import advise
    from compat_matrix.host.conclude import Conclusion, OnRelease
    from compat_matrix.host.overrides import OverrideConclusions
    from compat_matrix.shared.vocabulary import ConclusionKind

    def override(name: str, *kinds: Conclusion) -> OverrideConclusions:
        by_release = tuple(OnRelease(f"transformers 5.{i}.0", c) for i, c in reversed(list(enumerate(kinds))))
        return OverrideConclusions("m:A", name, by_release, advise(by_release))

    differs, same = Conclusion(ConclusionKind.DIFFERENTLY), Conclusion(ConclusionKind.REDUNDANT)
    stopped = override("stopped", differs, same)  # it did something on 5.0.0, nothing on 5.1.0: keep it
    coupled = override("coupled", replace(differs, coupled=True), replace(differs, coupled=True))
    assert (stopped.advice.kind, coupled.advice.kind) == (AdviceKind.KEEP, AdviceKind.REVIEW)
    assert first_screen.cause_of(coupled, {}) == first_screen.Cause(first_screen.CauseKind.DIFFERS)
    # adapters' `active_adapters`, a property where transformers' is a method: only its signature and transformers'
    # calls differ, nothing that ran did; the line says so rather than "where the class as shipped fails too"
    from compat_matrix.host.conclude import contrast
    from compat_matrix.shared.results import Observation

    seen = Observation("transformers_calls", "active_adapters", None, {"calls": 2, "cannot_take": []})
    read = override("read", Conclusion(ConclusionKind.DIFFERENTLY, (contrast(seen, "what transformers passes it"),)))
    cause = first_screen.cause_of(read, {})
    assert cause == first_screen.Cause(first_screen.CauseKind.DIFFERS, first_screen.READ_ONLY)


def test_a_line_for_classes_whose_cell_could_not_run_reads_whole_and_has_no_empty_next_step():
    """wtpsplit's cut-off sweep: "…their classes cell could not run (said at the top):" read as one broken clause."""
    cell = health.Breakage(None, health.Stage.CELL, "not run: no result file", ("transformers 4.22.2",))
    assert first_screen._broke(cell, "", True, wording.PLAIN) == "their cells could not run (said at the top)"
    built = health.Breakage(
        "m:A", health.Stage.BUILD, "KeyError: 'chosen'", ("5.0",), status="could-not-build", kind="trainer"
    )
    assert first_screen._broke(built, "", False, wording.PLAIN) == (
        "its class cannot be built (said at the top): write a factory whose dataset has a chosen column"
    )


def test_a_name_no_release_before_some_defines_reads_why_it_is_not_deleted_and_such_rows_share_a_line():
    """trl's `loss_is_scaled_for_ga` on DPOTrainer: redundant where transformers reads it (5.19 on), and no class
    of transformers defines it before, so deleting it never ran there. The grid's reason says so (not "review it"),
    and on a grouped screen the rows are one line."""
    from compat_matrix.host.advice import advise
    from compat_matrix.host.conclude import Conclusion, OnRelease
    from compat_matrix.host.overrides import OverrideConclusions
    from compat_matrix.shared.vocabulary import ConclusionKind

    untested = Conclusion(ConclusionKind.ORPHANED, why="no class of transformers defines it", untested=True)
    order = ["transformers 5.24.0", "transformers 5.19.0", "transformers 4.57.6", "transformers 4.56.2"]
    kinds = (Conclusion(ConclusionKind.REDUNDANT),) * 2 + (untested,) * 2
    by_release = tuple(OnRelease(label, c) for label, c in zip(order, kinds, strict=True))
    flag = OverrideConclusions("trl:DPOTrainer", "loss_is_scaled_for_ga", by_release, advise(by_release))
    assert flag.advice.kind == AdviceKind.REVIEW and flag.untested == ("transformers 4.56.2", "transformers 4.57.6")
    assert wording.reason(flag, order) == (
        "redundant on 5.19.0, 5.24.0, but no class of transformers defines it on 4.56.2, 4.57.6, where deleting it"
        " never ran: delete it if nothing of yours reads it there"
    )
    cause = first_screen.cause_of(flag, {})
    assert cause == first_screen.Cause(first_screen.CauseKind.UNAUDITED, releases=flag.untested)
    group = first_screen.Group(AdviceKind.REVIEW, (flag, replace(flag, target="trl:KTOTrainer")), cause)
    assert first_screen.line(group, order, several=True) == (
        "**Review** `DPOTrainer`, `KTOTrainer`: 2 overrides change nothing where they ran, but no class of"
        " transformers defines them on 4.56.2, 4.57.6, where deleting them never ran: delete them if nothing of"
        " yours reads them there"
    )
