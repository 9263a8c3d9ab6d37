"""A golden file per layout of the report: one subject (the demo), a sweep of 11 releases, 5 subjects, and a library
of 152 overrides over 26 classes (tests/test_first_screen.py); each also rendered through a GitHub-flavoured markdown
renderer. `UPDATE_GOLDEN=1` writes them again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from compat_matrix.host import render
from compat_matrix.host.report import make_report
from compat_matrix.host.spec import Axis, MatrixSpec, Subject
from compat_matrix.shared.results import CellResult, Observation, SubjectResult
from test_first_screen import library
from test_markdown import gfm, source_tables
from test_report import RESULTS, SPEC

GOLDEN = Path(__file__).parent / "golden"
ENABLE, DISABLE, EMBEDDINGS = "gradient_checkpointing_enable", "gradient_checkpointing_disable", "get_input_embeddings"
WRAPPER = "utf8_tokenizer.char_causal_lm:CharacterCausalLMWrapper"
EVERY_N = "error: TypeError: CharacterCausalLMWrapper.gradient_checkpointing_enable() got an unexpected keyword"
NOT_HANDLED = "error: NotImplementedError: `get_input_embeddings` not auto-handled for CharacterCausalLMWrapper"
DEPRECATED = "FutureWarning: `gradient_checkpointing_enable` is deprecated. Use `activation_checkpointing_enable`."
MINORS = ("5.14.1", "5.15.1", "5.16.1", "5.17.0", "5.18.2", "5.19.1", "5.20.0", "5.21.3", "5.22.2", "5.23.0", "5.24.0")


def reached(probe: str, *names: str, without: tuple[str, ...] = ()) -> Observation:
    """Which audited names ran in `probe`: as shipped, with everything deleted, and with each of `without` deleted."""
    ran = list(names)
    alone = tuple((m, [n for n in ran if n != m]) for m in without)
    return Observation(probe, "reached", ran, [], False, alone)


def wrapper_cell(version: str) -> SubjectResult:
    """The default subject on one release of the sweep: `every_n_layers` from 5.16 on (the enable override cannot
    take it), `get_input_embeddings` needed throughout, a deprecation from 5.24."""
    methods = (ENABLE, DISABLE, EMBEDDINGS)
    new = tuple(int(p) for p in version.split(".")[:2]) >= (5, 16)
    observed = [
        Observation("enable_reaches_wrapped_model", "layers_on", True, True, without=((ENABLE, True),)),
        reached("enable_reaches_wrapped_model", ENABLE, without=(ENABLE,)),
        Observation("disable_round_trip", "layers_on", False, False, without=((ENABLE, False), (DISABLE, False))),
        reached("disable_round_trip", ENABLE, DISABLE, without=(ENABLE, DISABLE)),
        Observation(
            "no_arguments", EMBEDDINGS, {"module": "char_embedding"}, NOT_HANDLED, without=((EMBEDDINGS, NOT_HANDLED),)
        ),
        reached("no_arguments", EMBEDDINGS, without=(EMBEDDINGS,)),
    ]
    if new:
        step = f"{EVERY_N} argument 'every_n_layers'"
        calls = {"checkpoint_calls": 1, "layers": [True, False]}
        observed += [
            Observation(
                "switch_parameters",
                "activation_checkpointing_enable(every_n_layers=2)",
                step,
                calls,
                without=((ENABLE, calls), (DISABLE, step), (EMBEDDINGS, step)),
            ),
            reached("switch_parameters", ENABLE, without=(ENABLE,)),
        ]
    if version == "5.24.0":
        observed.append(Observation("trainer_step", "warnings", [DEPRECATED], [DEPRECATED], False))
    return SubjectResult(WRAPPER, methods, observations=tuple(observed), probes=("no_arguments",))


def cell_of(matrix: str, version: str, *subjects: SubjectResult, status: str = "ok") -> CellResult:
    requested = {"transformers": version, "torch": "2.13.0"}
    resolved = {"python": "3.11.7", "transformers": version, "torch": "2.13.0+cpu"} if status == "ok" else {}
    cell = f"cell:{matrix}:transformers={version}:torch=2.13.0"
    return CellResult(matrix, cell, requested, resolved, status, None, subjects if status == "ok" else ())


def sweep_of_11() -> tuple[MatrixSpec, list[CellResult]]:
    spec = MatrixSpec(
        Path("matrix/sweep.toml"),
        "sweep",
        ("utf8-tokenizer==0.8.5",),
        (Axis("transformers", MINORS), Axis("torch", ("2.13.0",))),
        (Subject(WRAPPER, (ENABLE, DISABLE, EMBEDDINGS)),),
    )
    return spec, [cell_of("sweep", v, wrapper_cell(v)) for v in MINORS]


ORPHANED_WHY = "no base class defines it"
NO_GENERATE = "error: AttributeError: 'OwnHeadLM' object has no attribute 'generate'"


def five(version: str) -> tuple[SubjectResult, ...]:
    """Five subjects, one of each: harmful from 5.x, needed, orphaned from 5.14 (Port), told nothing (and a factory
    that fails on 5.24.0), redundant."""
    five_x = version.startswith("5.")
    crash = "error: TypeError: HarmfulLM.tie_weights() got an unexpected keyword argument 'recompute_mapping'"
    weights = {"groups": 3, "tied": True}
    harmful = SubjectResult(
        "mylib.models:HarmfulLM",
        ("tie_weights",),
        observations=(
            Observation("build_and_init", "built", crash if five_x else weights, weights),
            reached("build_and_init", "tie_weights"),
        ),
        probes=("build_and_init",),
    )
    needed = SubjectResult(
        "mylib.models:Backbone",
        ("get_input_embeddings",),
        observations=(
            Observation("no_arguments", EMBEDDINGS, {"module": "embed_tokens"}, "error: NotImplementedError"),
            reached("no_arguments", EMBEDDINGS),
        ),
        probes=("no_arguments",),
    )
    mask = (
        (
            Observation("forward_backward", "forward", {"sum": 7.641}, {"sum": 20.15}),
            reached("forward_backward", "_update_causal_mask"),
        )
        if not five_x
        else (Observation("forward_backward", "forward", {"sum": 20.15}, {"sum": 20.15}),)
    )
    generate = (
        Observation("generate", "generated", NO_GENERATE, NO_GENERATE)
        if five_x
        else Observation("generate", "generated", [[1, 2]], [[1, 2]])
    )
    orphaned = SubjectResult(
        "mylib.models:OwnHeadLM",
        ("_update_causal_mask",),
        observations=(*mask, generate),
        probes=("forward_backward",),
        orphaned=(("_update_causal_mask", ORPHANED_WHY),) if five_x else (),
    )
    spans = "error: TypeError: forward() missing 1 required argument: 'spans'"
    silent = SubjectResult(
        "mylib.models:NeedsSpans",
        ("forward",),
        observations=(Observation("forward_backward", "forward", spans, spans), reached("forward_backward", "forward")),
        probes=("forward_backward",),
        **({"status": "factory-failed", "reason": "ValueError: no config"} if version == "5.24.0" else {}),
    )
    losses = {"loss": 3.65, "steps": 2}
    redundant = SubjectResult(
        "mylib.trainers:MyTrainer",
        ("compute_loss",),
        observations=(
            Observation("trainer_train", "trained", losses, losses),
            reached("trainer_train", "compute_loss"),
        ),
        probes=("trainer_train",),
        kind="trainer",
    )
    return harmful, needed, orphaned, silent, redundant


def five_subjects() -> tuple[MatrixSpec, list[CellResult]]:
    versions = ("4.57.6", "5.14.1", "5.24.0")
    subjects = five("5.24.0")
    spec = MatrixSpec(
        Path("matrix/mylib.toml"),
        "mylib",
        ("../",),
        (Axis("transformers", versions), Axis("torch", ("2.13.0",))),
        tuple(Subject(s.target, s.methods) for s in subjects),
    )
    return spec, [cell_of("mylib", v, *five(v)) for v in versions]


LAYOUTS = {
    "demo": lambda: (SPEC, RESULTS),
    "sweep-11": sweep_of_11,
    "five-subjects": five_subjects,
    "library": library,
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_each_layout_matches_its_golden_file_and_renders_as_github_does(layout):
    spec, results = LAYOUTS[layout]()
    text = render.markdown(make_report(spec, results))
    golden = GOLDEN / f"{layout}.md"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text()
    parsed, sources = gfm(text), source_tables(text)
    assert len(parsed.tables) == len(sources) >= 2
    for rendered, source in zip(parsed.tables, sources, strict=True):
        assert len(rendered) == len(source) - 1 and len(set(rendered)) == 1, source  # every row as wide as its header
    assert parsed.details == 0 and text.count("<details>") == text.count("</details>") >= 2
    assert "\\\\" not in text  # escaped once: no backslash shows
    first_screen = text.split("\n<details>", 1)[0]
    assert len(first_screen.splitlines()) <= 40  # one screen, with the evidence (and a long grid) collapsed


def test_the_sweep_s_grid_stays_a_few_columns_wide_and_its_summary_table_short():
    text = render.markdown(make_report(*sweep_of_11()))
    grid, summary = source_tables(text)[:2]
    assert grid[0] == "| override | transformers 5.14.1, 5.15.1 | 5.16.1–5.24.0 (9 releases) | advice |"
    assert grid[2].startswith(f"| `{ENABLE}` | = redundant | ✗ harmful | **Delete**: fixes the TypeError on 5.16.1")
    assert len(summary) == 2 + 1 and summary[2].startswith("| transformers 5.14.1–5.24.0 (11 releases) | enable→True")
    deprecated = (
        "Deprecated in transformers 5.24.0: `gradient_checkpointing_enable` (use `activation_checkpointing_enable`)"
    )
    assert deprecated in text


def test_five_subjects_sorted_harmful_port_review_keep_delete():
    report = make_report(*five_subjects())
    names = [f"{row.override.target.rsplit(':')[1]}.{row.override.name}" for row in report.grid.rows]
    assert names == [
        "HarmfulLM.tie_weights",
        "OwnHeadLM._update_causal_mask",
        "NeedsSpans.forward",
        "Backbone.get_input_embeddings",
        "MyTrainer.compute_loss",
    ]
    assert report.title == (
        "mylib: HarmfulLM cannot be built on transformers 5.14.1, 5.24.0 (TypeError: HarmfulLM.tie_weights() got an"
        " unexpected keyword argument 'recompute_mapping'); NeedsSpans cannot be built on 5.24.0 (ValueError: no"
        " config); 1 more below — delete 2, port 1 and review 1 of 5 overrides"
    )
    text = render.markdown(report)
    assert "- `OwnHeadLM`: as shipped, generate raises “AttributeError:" in text


SHOWN = "enable→True, disable→False"


def test_several_subjects_share_one_summary_table_a_row_per_stretch_that_reads_alike():
    """Two classes that switch alike on every release share their row (adapters' 21 model classes: one row)."""
    from dataclasses import replace

    spec, results = sweep_of_11()
    other = "mylib:OtherWrapper"
    spec = replace(spec, subjects=(*spec.subjects, Subject(other, (ENABLE, DISABLE, EMBEDDINGS))))
    results = [replace(r, subjects=(*r.subjects, replace(r.subjects[0], target=other))) for r in results]
    text = render.markdown(make_report(spec, results))
    summary = next(t for t in source_tables(text) if t[0].startswith("| class |"))
    assert summary == [
        "| class | transformers | with override | base implementation |",
        "|---|---|---|---|",
        f"| `CharacterCausalLMWrapper`, `OtherWrapper` | 5.14.1–5.24.0 (11 releases) | {SHOWN} | {SHOWN} |",
    ]
    assert text.count(render.BASE_MEANING) == 1
    assert (
        "`gradient_checkpointing_enable` (use `activation_checkpointing_enable`) in CharacterCausalLMWrapper and"
        in text
    )
