"""The pure parts of the Trainer hook probes: arguments changed in place, checkpoints read by name, model cards
normalised. No torch: the probes themselves run in the self-check's cells."""

from __future__ import annotations

import enum
import json
import tempfile
from dataclasses import dataclass

import pytest

from compat_matrix.cell.probes.trainer_hooks import (
    card_lines,
    checkpoint_step,
    configure,
    recorded_state,
    written_checkpoints,
)
from compat_matrix.cell.probes.training import metrics, volatile


class Strategy(enum.Enum):
    NO = "no"
    STEPS = "steps"


@dataclass
class Arguments:
    save_strategy: Strategy = Strategy.NO
    save_steps: int = 500
    metric_for_best_model: str | None = None


def test_configure_sets_in_place_and_turns_a_string_into_the_enum_the_field_holds():
    args = Arguments()
    assert configure(args, save_strategy="steps", save_steps=1, metric_for_best_model="loss") is args
    assert args == Arguments(Strategy.STEPS, 1, "loss")
    with pytest.raises(ValueError):
        configure(args, save_strategy="sometimes")  # what the enum refuses, it refuses here too


@pytest.mark.parametrize(
    ("name", "step"),
    [("checkpoint-1", 1), ("checkpoint-120", 120), ("checkpoint-", None), ("checkpoint-x", None), ("runs", None)],
)
def test_checkpoint_step_reads_the_step_from_the_folder_name(name, step):
    assert checkpoint_step(name) == step


def test_written_checkpoints_lists_files_in_step_order_and_what_each_state_records(tmp_path):
    for step in (10, 2):
        folder = tmp_path / f"checkpoint-{step}"
        (folder / "adapter").mkdir(parents=True)
        (folder / "model.safetensors").write_text("")
    state = {
        "global_step": 2,
        "best_model_checkpoint": str(tmp_path / "checkpoint-2"),
        "best_metric": 4.198775291442871,
        "log_history": [{"loss": 4.206361293792725, "train_runtime": 0.02, "step": 1}],
    }
    (tmp_path / "checkpoint-2" / "trainer_state.json").write_text(json.dumps(state))
    (tmp_path / "runs").mkdir()  # not a checkpoint
    found = written_checkpoints(str(tmp_path))
    assert list(found) == ["checkpoint-2", "checkpoint-10"]  # by step, not by string ("10" < "2")
    assert found["checkpoint-2"] == {
        "files": ["adapter/", "model.safetensors", "trainer_state.json"],
        "state": {
            "global_step": 2,
            "best_checkpoint": "checkpoint-2",  # by name: the temporary folder around it differs in every run
            "best_metric": 4.199,
            "log_history": [{"loss": 4.206, "step": 1}],
        },
    }
    assert found["checkpoint-10"]["state"] is None


def test_recorded_state_of_a_missing_file_is_none(tmp_path):
    assert recorded_state(str(tmp_path / "trainer_state.json")) is None


CARD = """---
library_name: transformers
model-index:
- name: {folder}
  results: []
---

# {folder}

It achieves the following results on the evaluation set:
- eval_loss: 4.2026
- eval_model_preparation_time: 0.0012
- eval_runtime: 0.016
- eval_samples_per_second: 249.568
Trained on 2026-03-01T12:00:00Z from {tmp}/{folder}/checkpoint-1 at 2026-03-01.
"""


def test_card_lines_take_out_the_folder_name_paths_dates_and_timed_values_and_keep_the_rest():
    folder = "compat-matrix-trainer-4y7twym5"
    text = CARD.format(folder=folder, tmp=tempfile.gettempdir())
    assert card_lines(text, folder) == [
        "---",
        "library_name: transformers",
        "model-index:",
        "- name: <output folder>",
        "  results: []",
        "---",
        "# <output folder>",
        "It achieves the following results on the evaluation set:",
        "- eval_loss: 4.2026",
        "- eval_model_preparation_time: <measured>",
        "- eval_runtime: <measured>",
        "- eval_samples_per_second: <measured>",
        "Trained on <date> from <temporary folder>/checkpoint-1 at <date>.",
    ]


def test_card_lines_of_two_runs_that_differ_only_in_what_varies_are_equal():
    first = CARD.format(folder="compat-matrix-trainer-aaaa", tmp=tempfile.gettempdir())
    second = CARD.format(folder="compat-matrix-trainer-bbbb", tmp=tempfile.gettempdir()).replace("0.016", "0.006")
    assert card_lines(first, "compat-matrix-trainer-aaaa") == card_lines(second, "compat-matrix-trainer-bbbb")
    assert card_lines(first.replace("4.2026", "8.4052"), "x") != card_lines(first, "x")  # a loss is no time


@pytest.mark.parametrize(
    ("key", "times"),
    [
        ("eval_runtime", True),
        ("train_samples_per_second", True),
        ("total_flos", True),
        ("eval_model_preparation_time", True),
        ("eval_loss", False),
        ("grad_norm", False),
        ("learning_rate", False),
    ],
)
def test_volatile_names_the_metrics_that_time_the_run(key, times):
    assert volatile(key) is times
    assert (key in metrics({key: 1.0})) is not times
