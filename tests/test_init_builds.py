"""`compat-matrix init` on a library's real classes: abstract bases audited through their concrete subclasses, what
the default factory could not build (the module an extra provides, the dataset columns a trainer asked for, a
factory template), axis values that cannot be installed left out, and `--transformers ends`. No cell runs here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from packaging.version import Version

from compat_matrix.host import distributions, factories, starter
from compat_matrix.host.exits import BadInput
from compat_matrix.host.spec import Axis, MatrixSpec, Sweep, load
from compat_matrix.shared.results import THROUGH, Discovery, Unbuilt

ST = distributions.Metadata(
    "sentence-transformers",
    "6.2.0",
    ("transformers<6.0.0,>=5.0.0", 'datasets>=2.19.0; extra == "train"', 'accelerate>=0.20.3; extra == "train"'),
)
BASE = "sentence_transformers.base.trainer:BaseTrainer"
CROSS = "sentence_transformers.cross_encoder.trainer:CrossEncoderTrainer"
DPO = "trl.trainer.dpo_trainer:DPOTrainer"
NEEDS = (
    "could not build CrossEncoderTrainer: NameError: name 'IterableDataset' is not defined; it needs datasets, which "
    'is not installed here (sentence-transformers 6.2.0 declares it for its extra train): add "datasets" to '
    "extra_requirements"
)
COLUMNS = Unbuilt(
    DPO, "could not build DPOTrainer: KeyError: 'chosen'; write a factory (see README)", None, ("chosen", "rejected"),
    "OSError: Repo id must use alphanumeric chars", "trainer",
)  # fmt: skip


def start_of(tmp_path: Path, values=("4.57.x", "5.x"), factory_template=False, overrides=("transformers",)):
    output = tmp_path / "matrix" / "sentence-transformers.toml"
    axes = (Axis("transformers", values), Axis("torch", ("2.13.0",)))
    spec = MatrixSpec(output, "sentence-transformers", ("sentence-transformers==6.2.0",), axes, (), overrides=overrides)
    asked = starter.Asked("sentence-transformers", factory_template=factory_template)
    comments = {"transformers": "tested as asked", "torch": "local", "overrides": "its cap lifted"}
    return starter.Start(asked, output, "sentence-transformers==6.2.0", ST, spec, axes, (), "<6.0.0,>=5.0.0", comments)


def found_of(unbuilt=(), uninstallable=()) -> starter.Found:
    inherited = tuple((name, "method", "sentence_transformers.base.trainer.BaseTrainer") for name in ("log", "_save"))
    discovery = Discovery("sentence_transformers", (CROSS,), ((BASE, THROUGH + "CrossEncoderTrainer"),))
    return starter.Found(
        {"sentence-transformers": "6.2.0", "transformers": "5.24.0"},
        (discovery,),
        {CROSS: (("compute_loss", "method", None), *inherited)},
        unbuilt=tuple(unbuilt),
        uninstallable=tuple(uninstallable),
    )


RELEASES = {"transformers": [Version(v) for v in ("4.56.2", "4.57.6", "5.0.0", "5.24.0")], "torch": [Version("2.13.0")]}
CONFLICT = (
    "4.57.x",
    "transformers 4.57.6",
    "with transformers==4.57.6, torch==2.13.0: pins conflict: transformers==4.57.6 requires huggingface-hub<1.0, "
    "sentence-transformers>=6.2.0 requires huggingface-hub>=1.3.0",
)


def test_a_value_that_cannot_be_installed_is_left_out_with_why_and_the_cap_it_needed_is_not_lifted(tmp_path):
    start = starter.left_out(start_of(tmp_path), found_of(uninstallable=[CONFLICT]), RELEASES.__getitem__)
    assert start.axes[0].values == ("5.x",) and start.spec.overrides == ()  # 5.24.0 is what it allows
    start.output.parent.mkdir()
    start.output.write_text(starter.text(start, found_of(), "compat-matrix run matrix/sentence-transformers.toml"))
    text = start.output.read_text()
    assert "#   4.57.x (transformers 4.57.6): with transformers==4.57.6, torch==2.13.0: pins conflict:" in text
    assert "overrides = " not in text and "could not be imported" not in text.lower()
    assert load(start.output).axes[0].values == ("5.x",)


def test_a_value_init_tried_twice_is_left_out_and_said_once(tmp_path):
    """wtpsplit: init installs the newest release to look, then again to build; its warning and comment came twice."""
    start = starter.left_out(start_of(tmp_path), found_of(uninstallable=[CONFLICT, CONFLICT]), RELEASES.__getitem__)
    assert start.left_out == (CONFLICT,)


def test_a_cap_lifted_for_torch_keeps_its_comment_where_a_transformers_value_is_left_out(tmp_path):
    """granite-tsfm 0.3.11: init lifts its cap on torch for the machine's torch, and leaves out a transformers
    release that cannot be installed; the file still says why the cap is lifted (init raised KeyError: 'overrides'
    where it took that comment away with the transformers cap)."""
    lifted = start_of(tmp_path, overrides=("torch",))
    start = starter.left_out(lifted, found_of(uninstallable=[CONFLICT]), RELEASES.__getitem__)
    assert start.spec.overrides == ("torch",)
    assert '# its cap lifted\noverrides = ["torch"]\n' in starter.text(start, found_of(), "run")


def test_a_release_a_sweep_stands_for_that_cannot_be_installed_is_excluded(tmp_path):
    start = start_of(tmp_path, values=(Sweep("minor", ">=4.57"),), overrides=())
    left = starter.left_out(start, found_of(uninstallable=[("4.57.6", *CONFLICT[1:])]), RELEASES.__getitem__)
    assert left.excluded == ("4.57.6",)
    left.output.parent.mkdir()
    left.output.write_text(starter.text(left, found_of(), "run"))
    assert load(left.output).exclude == ((("transformers", "4.57.6"),),)


def test_classes_an_abstract_base_stands_for_are_listed_with_what_they_inherit_and_why_they_were_not_built(tmp_path):
    unbuilt = Unbuilt(CROSS, NEEDS, "datasets", kind="trainer")
    start = start_of(tmp_path, factory_template=True)
    start.output.parent.mkdir()
    start.output.write_text(starter.text(start, found_of([unbuilt]), "run"))
    text = start.output.read_text()
    assert f'target = "{CROSS}"\n# overrides: compute_loss\n' in text
    assert (
        "# inherits from the abstract sentence_transformers.base.trainer.BaseTrainer, where the base variant " in text
    )
    assert f"#   {BASE} (through CrossEncoderTrainer)" in text and f'target = "{BASE}"' not in text
    assert f"# could not be built with no factory (with transformers 5.24.0): {NEEDS}" in text
    assert '# factory = "sentence_transformers_factories:cross_encoder_trainer"   once filled in' in text
    assert [s.target for s in load(start.output).subjects] == [CROSS]


def test_a_module_a_build_needs_that_an_extra_provides_is_added_with_why():
    needs = starter.build_needs(found_of([Unbuilt(CROSS, NEEDS, "datasets")]), ST, ("sentence-transformers==6.2.0",))
    assert needs == [
        (
            "datasets",
            "CrossEncoderTrainer cannot be built without datasets (NameError: name 'IterableDataset' is not defined), "
            "which sentence-transformers 6.2.0 declares only for its extra train",
        )
    ]
    assert starter.build_needs(found_of([Unbuilt(CROSS, NEEDS, "datasets")]), ST, ("x", "datasets>=3")) == []
    assert starter.build_needs(found_of([COLUMNS]), ST, ()) == []  # nothing missing: a factory to write


def test_the_factory_template_has_a_function_per_class_with_its_error_and_the_columns_it_asked_for():
    text = factories.template(
        "trl 1.16.0", "transformers 5.24.0", [COLUMNS, Unbuilt("m.x:SpanModel", "e", kind="model")]
    )
    tree = ast.parse(text)
    assert [f.name for f in tree.body if isinstance(f, ast.FunctionDef)] == ["dpo_trainer", "span_model"]
    assert '"""DPOTrainer: the default factory could not build it: KeyError: \'chosen\'"""' in text
    assert '"chosen": "t3 t4 t5", "rejected": "t5 t6 t7"' in text and "OSError: Repo id" in text
    assert all(len(line) <= 120 for line in text.splitlines())
    assert factories.function_name("a:GPT2ForXModel") == "gpt2_for_x_model"
    assert factories.module_name("sentence-transformers") == "sentence_transformers_factories"


@pytest.mark.parametrize(
    ("declared", "lowest"),
    [(">=4.56.2", "4.56.2"), ("<6.0.0,>=5.0.0", "5.0.0"), ("<5", "4.57.6"), (None, "4.57.6"), ("", "4.57.6")],
)
def test_the_ends_are_the_lowest_release_the_package_allows_and_the_newest(declared, lowest):
    assert starter.lowest_allowed(declared, RELEASES.__getitem__) == lowest
    with pytest.raises(BadInput, match="no transformers release allows"):
        starter.lowest_allowed(">=9", RELEASES.__getitem__)


def test_a_value_that_failed_to_install_for_another_reason_than_a_conflict_is_kept(tmp_path):
    failed = ("5.x", "transformers 5.24.0", "with transformers==5.24.0: error: Failed to download: timed out")
    start = starter.left_out(start_of(tmp_path), found_of(uninstallable=[failed]), RELEASES.__getitem__)
    assert start.axes[0].values == ("4.57.x", "5.x") and start.unsure == (failed,) and not start.left_out
    start.output.parent.mkdir()
    start.output.write_text(starter.text(start, found_of(), "run"))
    assert (
        "#   5.x (transformers 5.24.0): with transformers==5.24.0: error: Failed to download"
        in start.output.read_text()
    )
