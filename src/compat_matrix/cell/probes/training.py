"""Probes of `Trainer` subclasses, for any audited name: training steps (the losses it logs), `evaluate`, several
evaluation datasets at once, `predict`, `save_model` and the columns a batch keeps where unused ones are removed, on
a tiny causal LM and a dataset made in code (compat_matrix.cell.factory.tiny_trainer), with the values that come out.
A one-sided error (an override of `compute_loss` that a release calls with `num_items_in_batch=`) shows as one; a
changed loss as a changed value."""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from compat_matrix.cell.probes import ANY, TRAINER, Build, Inconclusive, Values, probe
from compat_matrix.cell.probes.common import attempt, failed
from compat_matrix.cell.probes.outputs import rounded, state_survived, tensor_summary

AS_ONE_BATCH = "as_one_batch"  # trainer_accumulation: the step over two batches is that over one of both
EACH = ("first", "second")  # the names of the evaluation datasets of trainer_evaluate_each
_VOLATILE = ("runtime", "per_second", "flos", "memory", "_time")  # metrics that time the run rather than describe it


def volatile(key: str) -> bool:
    """Whether a metric's name says it times the run or measures the machine (`eval_runtime`, `total_flos`)."""
    return any(word in key for word in _VOLATILE)


def metrics(found: dict[str, Any]) -> Values:
    """A Trainer's metrics without those that measure time or the machine, floats rounded."""
    return {
        key: rounded(value) if isinstance(value, float) else value
        for key, value in sorted(found.items())
        if not volatile(key)
    }


@contextlib.contextmanager
def trainer(build: Callable[[], Any]) -> Iterator[Any]:
    """A fresh Trainer of the variant under test (`build()`); its output folder is removed afterwards."""
    instance = build()
    try:
        yield instance
    finally:
        shutil.rmtree(instance.args.output_dir, ignore_errors=True)


def _with_trainer(build: Build, use: Callable[[Any], Values]) -> Any:
    def run() -> Values:
        with trainer(build) as instance:
            return use(instance)

    return attempt(run)


@probe(exercises=ANY, title="Trainer train", plain="training", kinds=(TRAINER,))
def trainer_train(build: Build) -> Values:
    """`train()` for two steps: the steps run, the training loss and every loss logged on the way (one per step),
    or the error."""

    def train(instance: Any) -> Values:
        output = instance.train()
        logged = [rounded(entry["loss"]) for entry in instance.state.log_history if "loss" in entry]
        return {"steps": output.global_step, "training_loss": rounded(output.training_loss), "logged_losses": logged}

    return {"trained": _with_trainer(build, train)}


@probe(
    exercises=ANY,
    title="Trainer gradient accumulation",
    plain="accumulating gradients over two batches",
    kinds=(TRAINER,),
    contract=(AS_ONE_BATCH,),
)
def trainer_accumulation(build: Build) -> Values:
    """One optimizer step over the four rows as two batches of two (`gradient_accumulation_steps=2`): the loss and
    gradient norm it logs, and whether they are those of the same step as one batch of four (`as_one_batch`), as
    accumulating gradients promises: the loss divided by the steps once, no more (`loss_is_scaled_for_ga`, a
    `compute_loss` that takes `num_items_in_batch`). Or the error. With one batch a step, dividing never shows."""

    def step(batch: int, steps: int) -> Callable[[Any], Values]:
        def train(instance: Any) -> Values:
            instance.args.per_device_train_batch_size, instance.args.gradient_accumulation_steps = batch, steps
            instance._train_batch_size = instance.args.train_batch_size  # what __init__ took from the arguments
            instance.args.max_steps = 1
            instance.train()
            entry = next(e for e in instance.state.log_history if "loss" in e)
            return {key: rounded(entry[key]) for key in ("loss", "grad_norm") if key in entry}

        return train

    accumulated, whole = _with_trainer(build, step(2, 2)), _with_trainer(build, step(4, 1))
    if failed(accumulated) or failed(whole):
        return {"trained": accumulated, AS_ONE_BATCH: whole if failed(whole) else None}
    alike = all(math.isclose(accumulated[k], whole.get(k, math.nan), rel_tol=1e-3) for k in accumulated)
    return {"trained": accumulated, AS_ONE_BATCH: alike}


@probe(exercises=ANY, title="Trainer evaluate", plain="evaluating", kinds=(TRAINER,))
def trainer_evaluate(build: Build) -> Values:
    """`evaluate()` on the evaluation dataset: its metrics (the loss among them), or the error."""
    return {"metrics": _with_trainer(build, lambda instance: metrics(instance.evaluate()))}


@probe(exercises=ANY, title="Trainer evaluate per dataset", plain="evaluating several datasets", kinds=(TRAINER,))
def trainer_evaluate_each(build: Build) -> Values:
    """`evaluate()` with a dict of evaluation datasets (the trainer's own, twice, as `first` and `second`), which
    evaluates each under its name (through `get_eval_dataloader` given that name): the metrics, or the error."""

    def evaluate(instance: Any) -> Values:
        if instance.eval_dataset is None:
            raise Inconclusive("the trainer has no evaluation dataset")
        instance.eval_dataset = {name: instance.eval_dataset for name in EACH}
        return metrics(instance.evaluate())

    return {"metrics": _with_trainer(build, evaluate)}


@probe(exercises=ANY, title="Trainer predict", plain="predicting", kinds=(TRAINER,))
def trainer_predict(build: Build) -> Values:
    """`predict()` on the evaluation dataset: the predictions summarized and the metrics, or the error."""
    import torch

    def predict(instance: Any) -> Values:
        output = instance.predict(instance.eval_dataset)
        predictions = output.predictions[0] if isinstance(output.predictions, tuple) else output.predictions
        return {"predictions": tensor_summary(torch.as_tensor(predictions)), "metrics": metrics(output.metrics)}

    return {"predicted": _with_trainer(build, predict)}


@probe(exercises=ANY, title="Trainer save_model", plain="saving the model", kinds=(TRAINER,))
def trainer_save_model(build: Build) -> Values:
    """`save_model()` to a temporary folder: the files it writes, and whether the model loaded back from them holds
    every tensor of the trained model's state dict, unchanged; or the error."""

    def save(instance: Any) -> Values:
        with tempfile.TemporaryDirectory() as folder:
            instance.save_model(folder)
            reloaded = type(instance.model).from_pretrained(folder)
            return {"files": sorted(os.listdir(folder)), "state_survived": state_survived(instance.model, reloaded)}

    return {"saved": _with_trainer(build, save)}


@probe(exercises=ANY, title="Trainer unused columns", plain="removing unused columns", kinds=(TRAINER,))
def trainer_unused_columns(build: Build) -> Values:
    """With `remove_unused_columns=True` (the default the factory turns off), the first batch of the training and
    evaluation dataloaders (through `_set_signature_columns_if_needed`, `_remove_unused_columns`): the columns it
    holds and their shapes, or the error."""

    def columns(loader: Callable[[], Any]) -> Values:
        batch = next(iter(loader()))
        if not isinstance(batch, Mapping):
            return {"batch": type(batch).__name__}
        return {key: list(getattr(value, "shape", ())) for key, value in sorted(batch.items())}

    def run(instance: Any) -> Values:
        instance.args.remove_unused_columns = True
        kept = {"train": attempt(columns, instance.get_train_dataloader)}
        if instance.eval_dataset is not None:
            kept["eval"] = attempt(columns, instance.get_eval_dataloader)
        return kept

    return {"kept": _with_trainer(build, run)}
