"""Real cells: real uv environments, real transformers releases, the real utf8-tokenizer package."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from compat_matrix.host.spec import load
from compat_matrix.shared.results import failure_in
from conftest import BROKEN, ROOT, default_matrix_variant, run_matrix

pytestmark = pytest.mark.integration


def test_every_broken_override_is_caught_where_expected_and_the_controls_stay_same(tmp_path):
    """The self-check matrix, run from a folder outside the repository with a local-path requirement: each broken
    override differs where selfcheck.toml expects it, in the observations it names; the controls stay `same`."""
    outside = tmp_path / "my-library"
    shutil.copytree(BROKEN, outside, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    done, report = run_matrix(outside / "selfcheck.toml", tmp_path / "reports")
    assert done.returncode == 0, done.stdout[-3000:]
    assert report["unmet_expectations"] == []
    versions = [cell["resolved"]["transformers"] for cell in report["cells"]]
    assert len(versions) == 3 and versions[1] == "5.14.1" and versions[2].startswith("4.57.")
    expected = {s.target: s for s in load(outside / "selfcheck.toml").subjects}
    assert sum(bool(s.catches) for s in expected.values()) == 39  # every broken override names its catches
    for cell in report["cells"]:
        assert cell["status"] == "ok", cell
        assert {s["target"] for s in cell["subjects"]} == set(expected)
        for subject in cell["subjects"]:
            wanted = expected[subject["target"]]
            verdict = wanted.expected(cell["resolved"]["transformers"])
            if verdict is None:  # expected nothing there: DividesLossTwice's flag, which no release before 5.19 reads
                continue
            assert subject["verdict"] == verdict, (cell["resolved"], subject["target"], subject["reason"])
            if verdict != "differs":
                continue
            for catch in wanted.catches:
                probe, name = catch.split(".", 1)
                (caught,) = [o for o in subject["observations"] if (o["probe"], o["name"]) == (probe, name)]
                assert caught["override"] != caught["base"], (cell["resolved"], caught)
        # advice per method is run, not inferred: the round trip agrees with all three deleted, not with `enable` alone
        (advice,) = [s for s in cell["subjects"] if s["target"].endswith(":DisablesOnlyItsOwnEnable")]
        (trip,) = [o for o in advice["observations"] if (o["probe"], o["name"]) == ("disable_round_trip", "layers_on")]
        assert trip["override"] is trip["base"] is False and trip["base_without"]["gradient_checkpointing_enable"]
        # the default factory sets up a model of the adapters library's kind as its users do: it runs as shipped
        (heads,) = [s for s in cell["subjects"] if s["target"].endswith(":WithAdapterHeads")]
        (ran,) = [o for o in heads["observations"] if (o["probe"], o["name"]) == ("forward_backward", "forward")]
        assert failure_in(ran["override"]) is None and failure_in(ran["base"]) is None, ran
        # an identity check: deleting get_input_embeddings alone turns enable off where the accessor never runs
        (checked,) = [s for s in cell["subjects"] if s["target"].endswith(":EnablesWhereItsAccessorIsOwn")]
        (on,) = [o for o in checked["observations"] if (o["probe"], o["name"]) == ("trainer_step", "default")]
        assert on["override"]["layers_on_during_step"] and on["base"]["layers_on_during_step"], on
        assert on["base_without"]["get_input_embeddings"]["layers_on_during_step"] is False, on
    (accessor,) = [
        o
        for o in report["overrides"]
        if o["target"].endswith(":EnablesWhereItsAccessorIsOwn") and o["name"] == "get_input_embeddings"
    ]
    assert accessor["advice"] != "Delete" and "redundant" not in accessor["by_release"].values(), accessor
    advices = {o["target"].split(":")[1]: o["advice"] for o in report["overrides"]}
    # a property over transformers' method reads otherwise with it deleted: Keep, unless the class breaks as shipped
    assert advices["AdaptersAsProperty"] == "Keep" and advices["CountsParametersAsProperty"] == "Review", advices
    # a refusal of its own is no break, but what it invents against a base that keeps every contract is: not Keep
    (refuses,) = [o for o in report["overrides"] if o["target"].endswith(":RefusesReentrantInventsKwargs")]
    assert refuses["advice"] == "Review" and "it raises the ValueError itself" in refuses["reason"], refuses
    # a pair that keeps the accumulated step whole only together: deleting either alone breaks it, so each is kept
    pair = [o for o in report["overrides"] if o["target"].endswith(":ScalesInItsOwnStep")]
    assert [(o["name"], o["advice"]) for o in pair] == [("compute_loss", "Keep"), ("training_step", "Keep")], pair
    (attribute,) = [o for o in report["overrides"] if o["target"].endswith(":TiesNothingByKeys")]
    by_release = {rid.partition("=")[2][:2]: kind for rid, kind in attribute["by_release"].items()}
    assert by_release == {"4.": "harmful", "5.": "behaves differently"}, attribute  # saving refuses; untied
    (advice,) = [s for s in report["subjects"] if s["target"].endswith(":DisablesOnlyItsOwnEnable")]
    assert not any(line.startswith("gradient_checkpointing_enable: redundant") for line in advice["conclusions"])
    review = re.search(r"Review ([^:]*):", advice["recommendation"])  # Review a, b: deleting it changes …
    assert review and "gradient_checkpointing_enable" in review.group(1), advice["recommendation"]
    (enable,) = [
        o
        for o in report["overrides"]
        if o["target"].endswith(":DisablesOnlyItsOwnEnable") and o["name"] == "gradient_checkpointing_enable"
    ]
    assert enable["advice"] == "Review" and "redundant" not in enable["by_release"].values()


def test_default_matrix_rows_and_a_release_that_does_not_exist(tmp_path):
    """The default matrix plus a nonexistent release: that cell is a labelled row, the others keep their results."""
    text = (ROOT / "matrix" / "char-causal-lm-checkpointing.toml").read_text()
    matrix = tmp_path / "default-plus-missing.toml"
    matrix.write_text(text.replace('"5.x"]', '"5.x", "99.0"]'))
    done, report = run_matrix(matrix, tmp_path / "reports")
    assert done.returncode == 3, done.stdout[-2000:]  # a cell could not run: the documented exit code
    by_version = {c["resolved"].get("transformers", c["requested"]["transformers"]): c for c in report["cells"]}
    assert by_version["99.0"]["status"] == "install-failed"
    assert "99.0" in by_version["99.0"]["reason"] and "\n" not in by_version["99.0"]["reason"]
    for version in ("4.57.6", "5.14.1"):
        (subject,) = by_version[version]["subjects"]
        # get_input_embeddings is needed everywhere (its base raises NotImplementedError); the switches are not
        assert subject["verdict"] == "differs" and subject["follows"] == ["get_input_embeddings"], subject
        assert by_version[version]["resolved"]["torch"].startswith("2.13.0")
    (summary,) = report["subjects"]
    for method in ("gradient_checkpointing_enable", "gradient_checkpointing_disable"):  # redundant where 5.24 is not
        said = f"{method}: redundant on transformers 4.57.6"
        assert any(line.startswith(said) for line in summary["conclusions"]), summary["conclusions"]
    assert any(
        line.startswith("get_input_embeddings: needed on transformers 4.57.6") for line in summary["conclusions"]
    )
    overrides = {o["name"]: o for o in report["overrides"]}
    assert overrides["get_input_embeddings"]["by_release"]["transformers=requested:99.0"] == "could not run"
    markdown = (tmp_path / "reports" / "char-causal-lm-checkpointing.md").read_text()
    # no Delete while a tested value could not run: the switches read Review, saying where to run them first
    assert markdown.startswith("# CharacterCausalLMWrapper: review 2 of 3 overrides\n")
    assert "but it could not run on 99.0 (requested): delete it once it runs there" in markdown
    for version in ("4.57.6", "5.14.1"):
        row = next(line for line in markdown.splitlines() if line.startswith(f"| transformers {version} "))
        assert row == f"| transformers {version} | enable→True, disable→False | enable→True, disable→False |"
    assert "| transformers 99.0 (requested) | install-failed | install-failed |" in markdown
    grid = next(block for block in markdown.split("\n\n") if block.startswith("| override |"))
    assert "| 99.0 (requested) |" in grid.splitlines()[0]  # a column of the grid: it could not run


def test_absent_interpreter_is_a_labelled_row_and_the_other_cell_runs(tmp_path):
    matrix = default_matrix_variant(tmp_path, "pythons", ["5.14.1"], extra='python = ["3.11", "3.4"]')
    done, report = run_matrix(matrix, tmp_path / "reports")
    assert done.returncode == 3
    by_python = {c["requested"]["python"]: c for c in report["cells"]}
    assert by_python["3.4"]["status"] == "interpreter not found"
    assert by_python["3.11"]["status"] == "ok" and by_python["3.11"]["resolved"]["python"].startswith("3.11")


def test_bad_matrix_file_runs_nothing_and_exits_2(tmp_path):
    matrix = tmp_path / "bad.toml"
    matrix.write_text('[matrix]\nname = "bad name"\n')
    env = {**os.environ, "COMPAT_MATRIX": str(matrix), "COMPAT_MATRIX_REPORTS": str(tmp_path / "reports")}
    done = subprocess.run(
        [sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "-s", "matrix"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert f"error: {matrix}: matrix.name = 'bad name'" in done.stderr + done.stdout
    assert not (tmp_path / "reports" / ".cells").exists()


# A probe of the factory itself, in the same cell: the plain tiny model it copies after the first build is what a
# build gives, weight for weight, shares no tensor with another copy, and leaves torch's generator where a build does.
COPIES = """
import torch
from transformers import LlamaForCausalLM

from compat_matrix import ANY, probe
from compat_matrix.cell.factory import SEED, tiny_causal_lm, tiny_config


@probe(exercises=ANY)
def copied_like_built(build):
    first, second = tiny_causal_lm(), tiny_causal_lm()
    after_copy = torch.get_rng_state()
    torch.manual_seed(SEED)
    built = LlamaForCausalLM(tiny_config())
    weights = all(torch.equal(a, b) for a, b in zip(built.state_dict().values(), second.state_dict().values()))
    shared = any(a.data_ptr() == b.data_ptr() for a, b in zip(first.parameters(), second.parameters()))
    return {"like_built": [weights, shared, torch.equal(after_copy, torch.get_rng_state())]}
"""


def test_a_probe_module_of_your_own_runs_beside_the_built_in_ones_and_a_broken_one_is_an_observation(tmp_path):
    example = tmp_path / "custom-probe"
    shutil.copytree(ROOT / "examples" / "custom-probe", example)
    (example / "broken_probes.py").write_text('raise RuntimeError("cannot import this")\n')
    (example / "copies.py").write_text(COPIES)
    matrix = example / "matrix.toml"
    matrix.write_text(
        matrix.read_text().replace(
            '"./compat_probes.py"]', '"./compat_probes.py", "./broken_probes.py", "./copies.py"]'
        )
    )
    done, report = run_matrix(matrix, tmp_path / "reports")
    assert done.returncode == 0, done.stdout[-3000:]
    (cell,) = report["cells"]
    (subject,) = cell["subjects"]
    assert cell["status"] == "ok" and subject["verdict"] == "differs"
    observed = {(o["probe"], o["name"]): o for o in subject["observations"]}
    copies = observed["copied_like_built", "like_built"]
    assert copies["override"] == copies["base"] == [True, False, True]  # same weights, nothing shared, same generator
    mine = observed["frozen_model_input_grads", "loss_requires_grad"]
    assert mine["override"] is False  # the module get_input_embeddings returns is never called: no input grads
    broken = observed["broken_probes.py", "error"]  # named as the matrix file names it
    assert broken["override"] == broken["base"] == "RuntimeError: cannot import this" and not broken["carries"]
    # equal on both sides: in the CSV (and the JSON), not in the markdown's evidence, which shows what differs
    csv = (tmp_path / "reports" / "custom-probe.csv").read_text()
    assert ",frozen_model_input_grads,loss_requires_grad,False,False,True,True\n" in csv
    assert "frozen" not in (tmp_path / "reports" / "custom-probe.md").read_text()


def test_your_own_tests_under_both_variants_and_against_broken_overrides(tmp_path):
    """The example of the PR's four tests, on one real cell: by running them, the report finds what the PR's
    reviewers found by reading (the kwargs test adds nothing, the gradient test catches no broken backward) and
    that none of them needs the override."""
    example = tmp_path / "char-wrapper-tests"
    shutil.copytree(ROOT / "examples" / "char-wrapper-tests", example)
    matrix = example / "matrix.toml"
    matrix.write_text(matrix.read_text().replace('transformers = ["4.57.x", "5.14.1"]', 'transformers = ["5.14.1"]'))
    done, report = run_matrix(matrix, tmp_path / "reports")
    assert done.returncode == 0, done.stdout[-3000:]
    (cell,) = report["cells"]
    tests = {t["id"].rsplit("::", 1)[1]: t for t in cell["subjects"][0]["tests"]}
    assert set(tests) == {
        "test_enable_reaches_wrapped_model",
        "test_disable_reaches_wrapped_model",
        "test_enable_forwards_kwargs",
        "test_backward_still_produces_gradients",
    }
    assert all(t["override"] == t["base"] == "passed" for t in tests.values())  # none needs the override
    assert "gradient_checkpointing_enable: drops kwargs" not in tests["test_enable_forwards_kwargs"]["catches"]
    assert set(tests["test_enable_forwards_kwargs"]["catches"]) <= set(
        tests["test_enable_reaches_wrapped_model"]["catches"]
    )
    assert tests["test_backward_still_produces_gradients"]["catches"] == []
    assert tests["test_disable_reaches_wrapped_model"]["catches"] == ["gradient_checkpointing_disable: does nothing"]
    summary = next(s for s in report["subjects"])["tests"]
    assert summary["catch_none"] == ["test_backward_still_produces_gradients"]
    assert summary["adds_nothing"] == {"test_enable_forwards_kwargs": "test_enable_reaches_wrapped_model"}
    markdown = (tmp_path / "reports" / "char-wrapper-tests.md").read_text()
    assert "- test\\_backward\\_still\\_produces\\_gradients catches none: it cannot tell" in markdown


def test_real_breakages_get_the_right_advice_per_override_and_release(tmp_path):
    """Reproductions of what downstream libraries really hit (tests/realcode), on the releases where each breaks or
    stops mattering: the conclusion for every audited override on every release, and what the report says besides."""
    done, report = run_matrix(ROOT / "tests" / "realcode" / "realcode.toml", tmp_path / "reports")
    assert report["unmet_expectations"] == [], report["unmet_expectations"]
    assert done.returncode == 0, done.stdout[-3000:]
    overrides = {(o["target"].split(":")[1], o["name"]): o for o in report["overrides"]}

    def on(subject: str, name: str) -> list[str]:
        by_release = overrides[subject, name]["by_release"]
        return [by_release[f"transformers={v}"] for v in ("4.45.2", "4.51.3", "4.57.6", "5.0.0", "5.24.0")]

    def advice(subject: str, name: str) -> str:
        return overrides[subject, name]["advice"]

    different, orphaned, harmful, needed = "behaves differently", "orphaned", "harmful", "needed"
    # 1. tie_weights(self) raises on 5.x and hides that _init_weights is still needed: "the rest deleted" shows it
    assert on("ValueHeadLM", "tie_weights") == ["redundant"] * 3 + [harmful] * 2
    assert advice("ValueHeadLM", "tie_weights") == "Delete"
    assert on("ValueHeadLM", "_init_weights") == [different] * 5 and advice("ValueHeadLM", "_init_weights") == "Keep"
    assert overrides["ValueHeadLM", "_init_weights"]["context"]["transformers=5.24.0"] == "the rest deleted"
    # 2 and 4. a model without logits: its hidden states differ while LlamaModel calls the mask; orphaned from 4.53
    assert on("BidirectionalLlama", "_update_causal_mask") == [different] * 2 + [orphaned] * 3
    assert advice("BidirectionalLlama", "_update_causal_mask") == "Port"
    assert "port what it did" in overrides["BidirectionalLlama", "_update_causal_mask"]["reason"]
    assert overrides["BidirectionalLlama", "_update_causal_mask"]["first_changed"] == "transformers=4.57.6"
    (error,) = overrides["ValueHeadLM", "tie_weights"]["errors"][:1]
    assert (error["release"], error["variant"], error["type"]) == ("transformers=5.0.0", "override", "TypeError")
    assert "recompute_mapping" in error["message"] and error["observations"]
    # 3. a Trainer subclass: the doubled loss on 4.45; from 4.46 training raises TypeError, but up to 4.56 evaluation
    # still calls it as written and doubles its loss (not safe to delete there); from 4.57 evaluation raises too
    assert on("OldComputeLossTrainer", "compute_loss") == [different] * 2 + [harmful] * 3
    # ... so Fix: accept num_items_in_batch; the widened override ran, and training runs where it raised
    fix = overrides["OldComputeLossTrainer", "compute_loss"]
    # it calls nothing named compute_loss: accept it, nothing to pass it on to
    assert fix["advice"] == "Fix" and fix["reason"].startswith("accept num_items_in_batch (or **kwargs); on ")
    verified = "verified: with it the class runs on 4.51.3–5.24.0 (4 releases) ("  # then the probes it ran in
    assert verified in fix["reason"] and "writing the model card), and on 4.45.2 nothing passes it" in fix["reason"]
    # 4, 5 and 6. generate on a PreTrainedModel without GenerationMixin: needed up to 4.51, then orphaned, and as
    # shipped generate raises (alike on both sides: that probe told nothing)
    assert on("OwnHeadLM", "prepare_inputs_for_generation") == [needed] * 2 + [orphaned] * 3
    assert advice("OwnHeadLM", "prepare_inputs_for_generation") == "Port"
    subjects = {s["target"].split(":")[1]: s for s in report["subjects"]}
    (generate,) = [line for line in subjects["OwnHeadLM"]["as_shipped"] if "generate" in line]
    assert "AttributeError" in generate and "4.57.6, 5.0.0, 5.24.0" in generate and "4.45.2, 4.51.3" in generate
    assert any(t["why"].startswith("AttributeError") for t in subjects["OwnHeadLM"]["told_nothing"])
    # 7. overrides only a setter, a reload or a forward with more inputs exercises; a tie_weights that ties nothing
    assert (
        on("Backbone", "set_input_embeddings") == [needed] * 5 and advice("Backbone", "set_input_embeddings") == "Keep"
    )
    assert on("WithTokenizerLM", "from_pretrained") == [different] * 5  # each does its job as shipped: Keep
    assert on("UntiedLM", "tie_weights") == [different] * 5
    assert advice("WithTokenizerLM", "from_pretrained") == advice("UntiedLM", "tie_weights") == "Keep"
    assert on("NeedsSpans", "forward") == ["inconclusive"] * 5  # every forward failed alike: no evidence
    assert any(t["why"].startswith("TypeError") for t in subjects["NeedsSpans"]["told_nothing"])
    assert on("GivenSpans", "forward") == [different] * 5  # with example inputs, the probes run it
    assert [key for key, o in overrides.items() if o["advice"] == "Delete"] == [("ValueHeadLM", "tie_weights")]
    assert report["counts"] == {"Delete": 1, "Keep": 6, "Review": 1, "Port": 2, "Fix": 1}
    markdown = (tmp_path / "reports" / "realcode.md").read_text()
    title = markdown.splitlines()[0]  # the release's health first: the class that cannot be built, then the advice
    assert title.startswith("# realcode: `ValueHeadLM` cannot be built on transformers 5.0.0, 5.24.0 (TypeError: ")
    assert title.endswith(" — fix 1, delete 1, port 2 and review 1 of 11 overrides") and "**Caution:** " in markdown
    assert len(markdown.encode()) < 65_536


def test_a_released_library_from_its_name_to_a_report_in_two_commands(tmp_path):
    """`compat-matrix init llm2vec==0.2.3 --transformers 4.44.2` then `compat-matrix run`, in a new user's folder:
    one cell, every class found built with no factory (LlamaModel, MistralModel, GemmaModel and Qwen2Model
    subclasses), the library's version recorded, a reproduce line that works there, housekeeping out of `git
    status`. The same release as a package target (`target = "llm2vec"`, one module left out) shares the environment
    init installed: its classes are found in the cell and grouped in the report."""
    command = [sys.executable, "-m", "compat_matrix.host.cli"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    made = subprocess.run(
        [*command, "init", "llm2vec==0.2.3", "--transformers", "4.44.2"],
        cwd=tmp_path, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr[-3000:]
    assert made.stdout.splitlines()[-1] == "compat-matrix run matrix/llm2vec.toml"
    matrix = load(tmp_path / "matrix" / "llm2vec.toml")
    targets = [s.target for s in matrix.subjects]
    assert "llm2vec.models.bidirectional_llama:LlamaBiModel" in targets and len(targets) == 4
    assert matrix.requirements == ("llm2vec==0.2.3",) and not matrix.overrides  # 4.44.2 is what it allows
    ran = subprocess.run([*command, "run", "matrix/llm2vec.toml"], cwd=tmp_path, env=env, capture_output=True,
                         text=True)  # fmt: skip
    assert ran.returncode == 0, ran.stdout[-3000:]
    report = json.loads((tmp_path / "reports" / "llm2vec.json").read_text())
    (cell,) = report["cells"]
    assert cell["resolved"]["llm2vec"] == "0.2.3" and cell["resolved"]["transformers"] == "4.44.2"
    assert {s["target"] for s in cell["subjects"]} == set(targets)
    for subject in cell["subjects"]:  # built with no factory: the probes ran on both variants
        assert subject["verdict"] in ("same", "differs", "inconclusive") and subject["variants"][:2] == [
            "override",
            "base",
        ], subject
    assert report["command"] == "compat-matrix run matrix/llm2vec.toml"
    assert (tmp_path / "reports" / ".gitignore").read_text().splitlines()[1:] == [".cells/", ".logs/", ".lock"]
    whole = (tmp_path / "matrix" / "llm2vec.toml").read_text()
    package = tmp_path / "matrix" / "llm2vec-package.toml"
    package.write_text(
        whole.replace('name = "llm2vec"', 'name = "llm2vec-package"').split("[[subjects]]")[0]
        + '[[subjects]]\ntarget = "llm2vec"\nexclude = ["llm2vec.models.bidirectional_gemma"]\n'
    )
    ran = subprocess.run([*command, "run", str(package)], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stdout[-3000:]
    assert "uv pip install" not in ran.stdout  # the environment init installed, shared
    grouped = json.loads((tmp_path / "reports" / "llm2vec-package.json").read_text())
    assert [s["target"] for s in grouped["subjects"]] == [t for t in targets if "gemma" not in t]
    assert {s["group"] for s in grouped["subjects"]} == {"llm2vec"}
    found = grouped["found"]["llm2vec"]
    assert found.startswith("llm2vec: 3 classes found") and "left out: llm2vec.models.bidirectional_gemma" in found


ST_FACTORY = """
import tempfile

import torch
from datasets import Dataset
from transformers import BertConfig, BertModel, BertTokenizerFast

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *(f"w{i}" for i in range(59))]


def sentence_transformer_trainer(cls):
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainingArguments

    folder = tempfile.mkdtemp(prefix="st-tiny-")
    with open(f"{folder}/vocab.txt", "w") as vocab:
        vocab.write("\\n".join(WORDS) + "\\n")
    BertTokenizerFast(f"{folder}/vocab.txt").save_pretrained(folder)
    config = BertConfig(vocab_size=len(WORDS), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
    torch.manual_seed(0)
    BertModel(config).save_pretrained(folder)
    model = SentenceTransformer(folder, device="cpu")
    args = SentenceTransformerTrainingArguments(
        output_dir=tempfile.mkdtemp(prefix="st-trainer-"), max_steps=2, per_device_train_batch_size=2,
        per_device_eval_batch_size=2, report_to="none", save_strategy="no", use_cpu=True, seed=0, disable_tqdm=True,
    )
    rows = Dataset.from_dict({"anchor": [f"w{i} w{i + 1}" for i in range(4)], "positive": [f"w{i}" for i in range(4)],
                              "score": [1.0, 0.0, 1.0, 0.0]})  # what its default loss, CoSENT, reads
    return cls(model=model, args=args, train_dataset=rows, eval_dataset=rows)
"""


@pytest.mark.network
def test_a_library_whose_overrides_live_on_an_abstract_base_from_init_to_a_report_with_a_factory_beside_it(tmp_path):
    """`compat-matrix init sentence-transformers==6.2.0 --transformers 4.57.x --transformers 5.x --factory-template`:
    4.57.6 cannot be installed beside it (huggingface-hub), so the file leaves it out; `datasets` (its extra `train`,
    which CrossEncoderTrainer cannot be built without) is added; the concrete trainers that inherit BaseTrainer's 14
    overrides are the subjects, the abstract base a comment. With a factory file beside the matrix file (no
    package), the run imports it: SentenceTransformerTrainer is audited through the overrides it inherits, and every
    class that could not be built says why in the markdown, which fits a pull-request comment."""
    command = [sys.executable, "-m", "compat_matrix.host.cli"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    made = subprocess.run(
        [*command, "init", "sentence-transformers==6.2.0", "--transformers", "4.57.x", "--transformers", "5.x",
         "--factory-template"],
        cwd=tmp_path, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr[-3000:]
    path = tmp_path / "matrix" / "sentence-transformers.toml"
    matrix, text = load(path), path.read_text()
    assert matrix.axes[0].values == ("5.x",) and not matrix.overrides  # 4.57.x left out, no cap to lift
    assert "#   4.57.x (transformers 4.57.6): with transformers==4.57.6" in text and "pins conflict" in text
    assert "datasets" in matrix.extra_requirements and "IterableDataset" in text
    trainer = "sentence_transformers.sentence_transformer.trainer:SentenceTransformerTrainer"
    targets = [s.target for s in matrix.subjects]
    assert trainer in targets and "sentence_transformers.base.trainer:BaseTrainer" not in targets
    assert "#   sentence_transformers.base.trainer:BaseTrainer (through " in text
    template = tmp_path / "matrix" / "sentence_transformers_factories.py"
    assert "def sentence_transformer_trainer(cls):" in template.read_text()
    (tmp_path / "matrix" / "st_factories.py").write_text(ST_FACTORY)
    path.write_text(text.replace(f'target = "{trainer}"\n', f'target = "{trainer}"\nfactory = "st_factories:'
                                 'sentence_transformer_trainer"\n'))  # fmt: skip
    ran = subprocess.run([*command, "run", "matrix/sentence-transformers.toml"], cwd=tmp_path, env=env,
                         capture_output=True, text=True)  # fmt: skip
    assert ran.returncode == 3, ran.stdout[-3000:]  # the classes with no factory could not be built
    report = json.loads((tmp_path / "reports" / "sentence-transformers.json").read_text())
    (cell,) = report["cells"]
    subjects = {s["target"]: s for s in cell["subjects"]}
    audited = subjects[trainer]
    assert audited["verdict"] in ("same", "differs", "inconclusive") and audited["variants"][:2] == ["override", "base"]
    markdown = (tmp_path / "reports" / "sentence-transformers.md").read_text()
    assert len(markdown) < 65_536 and "/.nox/" not in markdown
    for row in markdown.split("\n\n", 2)[1].splitlines()[2:]:
        if "could not run" in row:
            assert "could not build" in row, row  # its real cause, not "nothing ran"
