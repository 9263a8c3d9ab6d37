"""Probes of the `Trainer` hooks that a plain `train()` never reaches, for any audited name: checkpoints saved and
resumed from (`_save_checkpoint`, `_save`, `_load_from_checkpoint`), the best model loaded at the end
(`_load_best_model`), what is logged (`log`), a trainer built with `model_init` (`call_model_init`) and the model card
(`create_model_card`). Each runs the tiny trainer of compat_matrix.cell.factory for two steps at most, with the
arguments that reach the hook set on the trainer as built, and observes what comes out: files by name, states,
losses and weights, never times or the temporary folders' random names."""

from __future__ import annotations

import enum
import json
import os
import re
from collections.abc import Callable
from typing import Any

from compat_matrix.cell.probes import ANY, TRAINER, Build, Inconclusive, Values, probe
from compat_matrix.cell.probes.common import attempt, failed, stable_text
from compat_matrix.cell.probes.outputs import parameter_summary, rounded
from compat_matrix.cell.probes.training import metrics, trainer, volatile

CHECKPOINT = "checkpoint-"  # transformers' PREFIX_CHECKPOINT_DIR, the same in every release
STATE_FILE = "trainer_state.json"
CARD_FILE = "README.md"
CARD_MODEL_NAME = "tiny-model"  # what push_to_hub passes as model_name
# The repository a push would go to, set where the best model is kept (nothing is pushed): an override of
# `_save_checkpoint` that names its card by it (trl's) takes that branch there, and the other in the resume probe.
HUB_MODEL_ID = f"tiny-user/{CARD_MODEL_NAME}"
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b")
_METRIC_LINE = re.compile(r"^(\s*- ([\w./-]+)): .*$")  # `- eval_loss: 4.2026` in a card's list of results
# Saving after each step is what makes a two-step run write two checkpoints.
SAVING = {"save_strategy": "steps", "save_steps": 1}


# --- pure helpers ----------------------------------------------------------------------------------------------


def configure(args: Any, **changes: Any) -> Any:
    """`args` with `changes` set in place, a string given for a field that holds an enum turned into that enum
    (`save_strategy="steps"` → `SaveStrategy.STEPS`). In place because a fresh `TrainingArguments` resets
    accelerate's state under the trainer that was built with the old one, whose next `train()` then fails."""
    for name, value in changes.items():
        current = getattr(args, name)
        setattr(args, name, type(current)(value) if isinstance(current, enum.Enum) else value)
    return args


def checkpoint_step(name: str) -> int | None:
    """The global step of a checkpoint folder's name (`checkpoint-12` → 12), else None."""
    step = name.removeprefix(CHECKPOINT)
    return int(step) if name.startswith(CHECKPOINT) and step.isdigit() else None


def written_checkpoints(folder: str) -> Values:
    """Every checkpoint folder in `folder`, in step order: the names of the files it holds (a subfolder's with a
    trailing `/`) and what its trainer state records, or None where it has none."""
    names = [n for n in os.listdir(folder) if checkpoint_step(n) is not None]
    found: Values = {}
    for name in sorted(names, key=lambda n: checkpoint_step(n) or 0):
        path = os.path.join(folder, name)
        files = sorted(f + "/" if os.path.isdir(os.path.join(path, f)) else f for f in os.listdir(path))
        found[name] = {"files": files, "state": recorded_state(os.path.join(path, STATE_FILE))}
    return found


def recorded_state(path: str) -> Values | None:
    """What a `trainer_state.json` says about the run: its step, the best checkpoint by name and its metric, and
    the log history without times; None where the file is missing."""
    if not os.path.isfile(path):
        return None
    with open(path) as handle:
        state = json.load(handle)
    best = state.get("best_model_checkpoint")
    metric = state.get("best_metric")
    return {
        "global_step": state.get("global_step"),
        "best_checkpoint": os.path.basename(best) if best else None,
        "best_metric": rounded(metric) if isinstance(metric, float) else metric,
        "log_history": [metrics(entry) for entry in state.get("log_history", [])],
    }


def card_lines(text: str, folder_name: str) -> list[str]:
    """A model card's text as its non-empty lines, with what differs between runs taken out: the output folder's
    random name (the default model name), temporary paths and memory addresses, dates, and the values of metrics
    that time the run (`- eval_runtime: 0.016`, listed where no training preceded the evaluation)."""
    text = stable_text(text)  # a path into the output folder goes whole, before its name alone would
    text = text.replace(folder_name, "<output folder>") if folder_name else text
    lines = (_untimed(_DATE.sub("<date>", line).rstrip()) for line in text.splitlines())
    return [line for line in lines if line]


def _untimed(line: str) -> str:
    found = _METRIC_LINE.match(line)
    return f"{found.group(1)}: <measured>" if found and volatile(found.group(2)) else line


# --- running the trainer ---------------------------------------------------------------------------------------


def weights(model: Any) -> dict[str, Any]:
    """A copy of every tensor of the model's state dict, to compare with later."""
    return {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}


def same_weights(model: Any, other: dict[str, Any]) -> bool:
    """Whether the model holds `other`'s tensors (the same keys, values equal to float rounding)."""
    import torch

    def close(a: Any, b: Any) -> bool:
        return torch.allclose(a, b, rtol=1e-5, atol=1e-7) if a.is_floating_point() else torch.equal(a, b)

    now = model.state_dict()
    return now.keys() == other.keys() and all(close(now[k], other[k]) for k in now)


def trained(output: Any, instance: Any) -> Values:
    """What a finished `train()` says: its steps, its training loss, the losses it logged, the weights after."""
    return {
        "steps": output.global_step,
        "training_loss": rounded(output.training_loss),
        "logged_losses": [rounded(entry["loss"]) for entry in instance.state.log_history if "loss" in entry],
        "weights": parameter_summary(instance.model),
    }


def step_snapshots(into: dict[int, dict[str, Any]]) -> Any:
    """A callback that copies the model's weights into `into` at the end of every optimizer step, by step."""
    from transformers import TrainerCallback

    class Snapshots(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
            if model is not None:
                into[state.global_step] = weights(model)

    return Snapshots()


def log_recorder(into: list[Values]) -> Any:
    """A callback that keeps every dict the trainer's `log` hands to its callbacks (what W&B or TensorBoard get)."""
    from transformers import TrainerCallback

    class Recorder(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
            into.append(metrics(dict(logs or {})))

    return Recorder()


def resumed_from(build: Build, checkpoint: str, uninterrupted: dict[str, Any]) -> Values:
    """A fresh trainer's `train(resume_from_checkpoint=checkpoint)`, saving as the run it resumes did, and whether it
    ends with the weights that run ended with (`uninterrupted`)."""
    with trainer(build) as instance:
        configure(instance.args, **SAVING)
        output = instance.train(resume_from_checkpoint=checkpoint)
        return {**trained(output, instance), "same_as_uninterrupted": same_weights(instance.model, uninterrupted)}


def _attempted(names: tuple[str, ...], run: Callable[[], Values]) -> Values:
    """`run()`'s observations; where it raised, the error under every one of `names`."""
    values = attempt(run)
    return {name: values for name in names} if failed(values) else values


# --- the probes ------------------------------------------------------------------------------------------------


@probe(
    exercises=ANY,
    title="Trainer checkpoint and resume",
    plain="resuming training from a checkpoint",
    kinds=(TRAINER,),
    contract=("resumes_where_it_stopped",),
)
def trainer_checkpoint_resume(build: Build) -> Values:
    """`train()` for two steps saving a checkpoint after each (`save_steps=1`, through `_save_checkpoint`, `_save`):
    the files of every checkpoint by name and what its trainer state records (`written`); then a fresh trainer's
    `train(resume_from_checkpoint=` the first checkpoint `)` (through `_load_from_checkpoint`): its steps, training
    loss, logged losses and weights (`resumed`), and whether it ends with the weights of the run it resumed (the
    contract: `resumes_where_it_stopped`); or the error."""

    def run() -> Values:
        with trainer(build) as first:
            configure(first.args, **SAVING)
            first.train()
            folder = first.args.output_dir
            resumed = attempt(resumed_from, build, os.path.join(folder, f"{CHECKPOINT}1"), weights(first.model))
            same = resumed if failed(resumed) else resumed.pop("same_as_uninterrupted")
            return {"written": written_checkpoints(folder), "resumed": resumed, "resumes_where_it_stopped": same}

    return _attempted(("written", "resumed", "resumes_where_it_stopped"), run)


@probe(
    exercises=ANY,
    title="Trainer load_best_model_at_end",
    plain="keeping the best model",
    kinds=(TRAINER,),
    contract=("holds_the_best",),
)
def trainer_load_best_model(build: Build) -> Values:
    """`train()` for two steps with an evaluation and a checkpoint after each, `load_best_model_at_end` and a
    `hub_model_id` (HUB_MODEL_ID; `push_to_hub` stays off), the best by the evaluation loss with
    `greater_is_better=True`, so that the best checkpoint is the first (two steps lower the loss) and a run that
    keeps its last model reads otherwise: the best checkpoint the state names and its metric, the step whose weights
    the model holds at the end (through `_load_best_model`), and those weights; and whether it holds the best
    checkpoint's (the contract: `holds_the_best`); or the error."""

    def run() -> Values:
        with trainer(build) as instance:
            if instance.eval_dataset is None:
                raise Inconclusive("the trainer has no evaluation dataset to choose the best model by")
            configure(
                instance.args,
                **SAVING,
                hub_model_id=HUB_MODEL_ID,
                eval_strategy="steps",
                eval_steps=1,
                load_best_model_at_end=True,
                metric_for_best_model="loss",
                greater_is_better=True,
            )
            snapshots: dict[int, dict[str, Any]] = {}
            instance.add_callback(step_snapshots(snapshots))
            instance.train()
            best = instance.state.best_model_checkpoint
            holds = [step for step, saved in sorted(snapshots.items()) if same_weights(instance.model, saved)]
            return {
                "best_checkpoint": os.path.basename(best) if best else None,
                "best_metric": rounded(instance.state.best_metric) if instance.state.best_metric is not None else None,
                "holds_weights_of_steps": holds,
                "weights": parameter_summary(instance.model),
            }

    loaded = attempt(run)
    best = None if failed(loaded) or not loaded["best_checkpoint"] else int(loaded["best_checkpoint"].split("-")[-1])
    return {"loaded": loaded, "holds_the_best": loaded if failed(loaded) else best in loaded["holds_weights_of_steps"]}


@probe(exercises=ANY, title="Trainer log", plain="the training log", kinds=(TRAINER,), contract=("keys",))
def trainer_log(build: Build) -> Values:
    """`train()` for two steps logging each, then `evaluate()` (each calls `log`): every entry of the state's log
    history (`history`) and every dict the callbacks received (`callbacks`), keys and values, times left out and
    floats rounded, and the keys logged (the contract: what callbacks and `metric_for_best_model` look up); or the
    error."""

    def run() -> Values:
        with trainer(build) as instance:
            received: list[Values] = []
            instance.add_callback(log_recorder(received))
            instance.train()
            if instance.eval_dataset is not None:
                instance.evaluate()
            history = [metrics(entry) for entry in instance.state.log_history]
            keys = sorted({key for entry in [*history, *received] for key in entry})
            return {"history": history, "callbacks": received, "keys": keys}

    return _attempted(("history", "callbacks", "keys"), run)


@probe(
    exercises=ANY,
    title="Trainer model_init",
    plain="a fresh model each run",
    kinds=(TRAINER,),
    contract=("fresh_each_run",),
)
def trainer_model_init(build: Build) -> Values:
    """A trainer built by the default factory (on the rows it built the subject with) with `model_init=` (a function
    that makes the factory's model afresh) instead of `model=`, then `train()` twice, each of which must start again
    from a fresh model (through `call_model_init`): whether the second run ended where the first did, what
    `model_init` received on each call, and the steps, losses and weights of both runs; or the error. Inconclusive
    for a subject with a factory of its own, or whose class takes no `model_init`."""
    import inspect

    from compat_matrix.cell.factory import TrainerWith, default_factory, tiny_trainer, trained_model

    if build.factory is not default_factory and not isinstance(build.factory, TrainerWith):
        raise Inconclusive("the subject's own factory builds its trainer with a model, not with model_init")
    rows = build.factory.rows() if isinstance(build.factory, TrainerWith) else None
    taken = inspect.signature(build.cls).parameters
    if "model_init" not in taken and not any(p.kind == p.VAR_KEYWORD for p in taken.values()):
        raise Inconclusive(f"{build.cls.__name__} takes no model_init")
    received: list[str] = []

    def model_init(trial: Any) -> Any:
        received.append(repr(trial))  # `None` outside a hyperparameter search; shown as such, not as a dash
        return trained_model(build.cls)

    def run() -> Values:
        with trainer(lambda: tiny_trainer(build.cls, rows, model_init=model_init)) as made:
            first = trained(made.train(), made)
            after_first = weights(made.model)
            second = trained(made.train(), made)
            fresh = same_weights(made.model, after_first)  # both runs start from the same fresh model and seed
            return {"fresh_each_run": fresh, "model_init_received": received, "runs": [first, second]}

    ran = attempt(run)
    return {"trained": ran, "fresh_each_run": ran if failed(ran) else ran.pop("fresh_each_run")}


@probe(
    exercises=ANY,
    title="Trainer model card",
    plain="writing the model card",
    kinds=(TRAINER,),
    contract=("wrote_a_card",),
)
def trainer_model_card(build: Build) -> Values:
    """`evaluate()` (where the trainer has an evaluation dataset), then `create_model_card(model_name=…)` as
    `push_to_hub` calls it: the lines of the README.md it writes into the output folder, normalised (the output
    folder's random name, temporary paths and dates taken out), or that it wrote none; or the error."""

    def run() -> Values | str:
        with trainer(build) as instance:
            if instance.eval_dataset is not None:
                instance.evaluate()
            instance.create_model_card(model_name=CARD_MODEL_NAME)
            folder = instance.args.output_dir
            path = os.path.join(folder, CARD_FILE)
            if not os.path.isfile(path):
                return f"no {CARD_FILE} written"
            with open(path) as handle:
                return card_lines(handle.read(), os.path.basename(os.path.normpath(folder)))

    card = attempt(run)
    return {"card": card, "wrote_a_card": card if failed(card) else isinstance(card, list)}
