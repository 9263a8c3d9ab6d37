"""The release's health: what breaks for the class as shipped, at which stage and where, said once and in order."""

from __future__ import annotations

from dataclasses import replace

import pytest

from compat_matrix.host import cut, health, render
from compat_matrix.host.health import Stage
from compat_matrix.host.report import make_report
from compat_matrix.shared.results import CellResult, Observation, SubjectResult
from test_first_screen import HF_FOLDER, VERSIONS, library, target

NEWEST = VERSIONS[-1]


def on(results: list[CellResult], version: str, change) -> list[CellResult]:
    """`results` with every subject of the cell of `version` changed by `change`."""
    return [
        replace(r, subjects=tuple(change(s) for s in r.subjects)) if r.resolved.get("transformers") == version else r
        for r in results
    ]


def unimportable(subject: SubjectResult) -> SubjectResult:
    return SubjectResult(subject.target, (), "import-failed", HF_FOLDER.format(v=NEWEST))


def test_a_library_none_of_whose_classes_imports_is_named_and_is_the_headline():
    spec, results = library()
    report = make_report(spec, on(results, NEWEST, unimportable))
    assert report.title.startswith(
        "rlib cannot be imported with transformers 5.24.0 (ImportError: cannot import name 'HfFolder' from"
        " 'huggingface_hub' (site-packages/huggingface_hub/__init__.py)); PreferenceTrainer, PairTrainer and 3 more"
        " classes cannot be built on 4.57.6, 5.14.1 (KeyError: 'chosen'); 1 more below — "
    )
    assert sum(b.stage == Stage.IMPORT for b in report.health) == len(spec.subjects)  # the JSON: one per class
    screen = render.markdown(report).split("<details>", 1)[0]
    assert screen.count("HfFolder") == 1


def broken(subject: SubjectResult, built: bool) -> SubjectResult:
    """Every probe fails with the overrides and without; where `built`, in building it."""
    error = "error: RuntimeError: no CUDA"
    probe, name = ("build_and_init", "built") if built else ("forward_backward", "forward")
    return SubjectResult(
        subject.target,
        ("forward",),
        observations=(Observation(probe, name, error, error), Observation(probe, "reached", ["forward"], [], False)),
        probes=(probe,),
    )


@pytest.mark.parametrize(
    ("built", "stage", "said"), [(False, Stage.RUN, "fails as shipped on"), (True, Stage.BUILD, "cannot be built on")]
)
def test_a_class_that_fails_as_shipped_is_said_at_the_stage_it_fails(built, stage, said):
    spec, results = library()
    legacy = target("LegacyLM")
    results = on(results, NEWEST, lambda s: broken(s, built) if s.target == legacy else s)
    report = make_report(spec, results)
    (found,) = [b for b in report.health if b.target == legacy]
    assert (found.stage, found.error, found.releases) == (stage, "RuntimeError: no CUDA", ("transformers 5.24.0",))
    assert f"`LegacyLM` {said} transformers 5.24.0 (RuntimeError: no CUDA)" in render.markdown(report)


def test_a_cell_that_could_not_be_installed_is_a_line_under_the_title_not_in_it():
    spec, results = library()
    failed = replace(results[-1], status="install-failed", reason="No solution found", subjects=(), resolved={})
    report = make_report(spec, [*results[:-1], failed])
    (cell,) = [b for b in report.health if b.target is None]
    assert (cell.stage, cell.error) == (Stage.INSTALL, "No solution found")
    text = render.markdown(report)
    assert "could not be installed" not in report.title
    assert "\n- transformers 5.24.0 (requested) could not be installed (No solution found)\n" in text


def test_a_skipped_cell_breaks_nothing():
    spec, results = library()
    skipped = replace(results[-1], status="skipped", reason="no pre-release", subjects=(), resolved={})
    report = make_report(spec, [*results[:-1], skipped])
    assert all(b.target is not None for b in report.health)


def test_statements_go_import_build_run_releases_before_pre_releases_and_the_newest_first():
    order = ["transformers 5.25.0rc1 (pre-release)", "transformers 5.24.0", "transformers 5.14.1"]
    breakages = [
        health.Breakage("m:Run", Stage.RUN, "E", ("transformers 5.24.0",)),
        health.Breakage("m:Old", Stage.BUILD, "E", ("transformers 5.14.1",)),
        health.Breakage("m:Pre", Stage.IMPORT, "E", ("transformers 5.25.0rc1 (pre-release)",)),
        health.Breakage("m:New", Stage.BUILD, "E", ("transformers 5.24.0",)),
        health.Breakage("m:Imp", Stage.IMPORT, "E", ("transformers 5.14.1",)),
    ]
    ordered = health.statements(breakages, ["m:Run", "m:Old", "m:Pre", "m:New", "m:Imp"], order, "m")
    assert [s.targets for s in ordered] == [("m:Imp",), ("m:Pre",), ("m:New",), ("m:Old",), ("m:Run",)]
    assert [s.titled for s in ordered] == [True] * 5
    cell = health.Breakage(None, Stage.INSTALL, "E", ("transformers 5.24.0",))
    assert not health.statements([cell], ["m:Run"], order, "m")[0].titled  # not about a class: not in the title


def test_truncate_cuts_the_evidence_the_versions_then_the_whole_grid_never_the_first_screen():
    text = render.markdown(make_report(*library()))
    screen = text.split("\n<details>", 1)[0]
    for limit in (45_000, len(screen.encode()) + 500):
        short = cut.truncate(text, limit)
        assert len(short.encode()) <= limit and short.startswith(screen)
        assert short.count("<details>") == short.count("</details>")
    assert render.WHOLE_GRID in cut.truncate(text, 45_000)  # the whole grid, with its break opportunities
    assert render.WHOLE_GRID not in cut.truncate(text, len(screen.encode()) + 500)


def test_a_class_whose_run_stopped_could_not_run_rather_than_failing_as_shipped():
    spec, results = library()
    legacy = target("LegacyLM")

    def crashed(s: SubjectResult) -> SubjectResult:
        return SubjectResult(s.target, s.methods, "crashed", "signal 9") if s.target == legacy else s

    text = render.markdown(make_report(spec, on(results, NEWEST, crashed)))
    assert "`LegacyLM` could not run on transformers 5.24.0 (crashed: signal 9)" in text


def test_a_class_whose_init_weights_raises_as_shipped_cannot_be_built_and_the_title_says_so():
    """ai2-olmo's OLMoForCausalLM builds, but its `init_weights()` (what `post_init` and `from_pretrained` call)
    raises as shipped: the title says it, as a build that fails, naming the call."""
    spec, results = library()
    legacy = target("LegacyLM")
    error = "error: TypeError: tie_weights() got an unexpected keyword argument 'recompute_mapping'"

    def initless(subject: SubjectResult) -> SubjectResult:
        observations = (
            Observation("build_and_init", "built", "v=1.0", "v=1.0"),
            Observation("build_and_init", "init_weights", error, "v=1.0"),
            Observation("build_and_init", "reached", ["forward"], ["forward"], False),
        )
        return replace(subject, observations=observations) if subject.target == legacy else subject

    report = make_report(spec, on(results, NEWEST, initless))
    (found,) = [b for b in report.health if b.target == legacy]
    assert (found.stage, found.releases) == (Stage.BUILD, ("transformers 5.24.0",))
    assert found.error == "init_weights(): " + error.removeprefix("error: ")
    screen = render.markdown(report).split("<details>", 1)[0]  # the library's title names two: it is a line below
    assert "`LegacyLM` cannot be built on transformers 5.24.0 (init\\_weights(): TypeError: tie" in screen


def test_one_long_error_cut_after_each_class_name_is_said_once_for_the_classes():
    """trl's AsyncGRPOTrainer and AsyncDistillationTrainer: the same OSError with the model's repr in it, each
    reason cut by the cell after its own class name, so at another place. Cut alike here, it is one line."""
    spec, results = library()
    unbuilt = {target("SFTTrainer"), target("OnlineDPOTrainer")}
    error = "OSError: Repo id must use alphanumeric chars: 'LlamaForCausalLM( (model): LlamaModel(" + " (layer)" * 60

    def repo_id(s: SubjectResult) -> SubjectResult:
        if s.target not in unbuilt:
            return s
        said = f"could not build {s.target.split(':')[1]}: {error}"
        return SubjectResult(s.target, s.methods, "could-not-build", said[:300] + "…")

    text = render.markdown(make_report(spec, on(results, NEWEST, repo_id)))
    (line,) = [row for row in text.splitlines() if "Repo id must use" in row]
    assert "`SFTTrainer` and `OnlineDPOTrainer` cannot be built on transformers 5.24.0 (OSError: Repo id" in line, line
    assert len(line) < health.ERROR_KEPT + 200


def test_a_cell_that_could_not_run_on_several_releases_is_said_of_the_cells():
    """span-marker's cells of 4.23–4.27 (the probes' Llama is not there yet): "the cells of … could not run"."""
    order = ["transformers 4.28.1", "transformers 4.27.4", "transformers 4.23.1"]  # newest first
    why = "the probes need transformers.models.llama.modeling_llama, which cannot be imported here"
    several = health.Statement((), Stage.CELL, why, (order[2], order[1]))
    assert health.sentence(several, order).startswith("the cells of transformers 4.23.1, 4.27.4 could not run (")
    one = replace(several, releases=(order[2],))
    assert health.sentence(one, order).startswith("the cell of transformers 4.23.1 could not run (")
