"""Broken overrides of `Trainer` methods, for the Trainer probes (the default factory gives each a tiny causal LM
and dataset); and a control."""

from __future__ import annotations

import dataclasses
import os

import torch
from transformers import Trainer, TrainingArguments


class ScalesLoss(Trainer):
    """`compute_loss` that doubles the loss: training logs, evaluation and prediction all see another loss."""

    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
        loss, outputs = super().compute_loss(model, inputs, return_outputs=True, **kwargs)
        return (loss * 2, outputs) if return_outputs else loss * 2


class SavesNothing(Trainer):
    """`save_model` that writes nothing: there is no model to load back."""

    def save_model(self, output_dir=None, _internal_call=False):
        return None


class PassThroughComputeLoss(Trainer):
    """Control: `compute_loss` that passes everything on to the base."""

    def compute_loss(self, *args, **kwargs):
        return super().compute_loss(*args, **kwargs)


class DividesLossTwice(Trainer):
    """Says its loss is not yet divided for gradient accumulation (`loss_is_scaled_for_ga = False`, which
    transformers reads from 5.19) while the model's loss, given `num_items_in_batch`, already is: with two batches a
    step, the loss and the gradients come out half as large (the double scaling that came with transformers 4.46's
    `num_items_in_batch`, and that trl's trainers each set this flag for)."""

    loss_is_scaled_for_ga = False


class ScalesInItsOwnStep(Trainer):
    """gliner's pair: `compute_loss` calls the model without `num_items_in_batch` (each batch's mean loss), and
    `training_step` divides that by the accumulation steps itself, as transformers did before 4.46. Together, two
    accumulated batches make the step of one over both; deleting either alone breaks that (the base then divides
    twice, or not at all), deleting both changes nothing there. Each reads Keep, not Review, nor Delete."""

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        outputs = model(**inputs)
        return (outputs.loss, outputs) if return_outputs else outputs.loss

    def training_step(self, model, inputs, num_items_in_batch=None):
        model.train()
        inputs = self._prepare_inputs(inputs)
        with self.compute_loss_context_manager():
            loss = self.compute_loss(model, inputs, num_items_in_batch=num_items_in_batch)
        if self.args.gradient_accumulation_steps > 1:
            loss = loss / self.args.gradient_accumulation_steps
        self.accelerator.backward(loss)
        return loss.detach()


# The hooks a plain `train()` never reaches, for the probes of compat_matrix.cell.probes.trainer_hooks


class SavesUnloadableWeights(Trainer):
    """`_save` that writes the state dict under a name transformers never loads (`model.pt`), beside the config: the
    checkpoints look complete, but resuming from one raises "Can't find a valid checkpoint" (what users of many
    fine-tuning scripts report, e.g. shibing624/MedicalGPT#91) and the best model cannot be found at the end."""

    def _save(self, output_dir=None, state_dict=None):
        output_dir = output_dir if output_dir is not None else self.args.output_dir
        os.makedirs(output_dir, exist_ok=True)
        torch.save(self.model.state_dict() if state_dict is None else state_dict, os.path.join(output_dir, "model.pt"))
        self.model.config.save_pretrained(output_dir)


class CheckpointsOnlyTheModel(Trainer):
    """`_save_checkpoint` that saves the model alone (as overrides that save only an adapter or a projector do): no
    optimizer, scheduler, random state or trainer state, so a resumed run starts again from step 0, and the best
    checkpoint is never recorded."""

    def _save_checkpoint(self, model, trial):
        self.save_model(os.path.join(self.args.output_dir, f"checkpoint-{self.state.global_step}"), _internal_call=True)


class SkipsCheckpointsForTheHub(Trainer):
    """`_save_checkpoint` in the manner of trl's, which names its model card by `hub_model_id` where one is set, with
    that branch broken: where a hub repository is named it writes the card and saves no checkpoint, so the best
    model is never recorded. Without `hub_model_id` it checkpoints as the base does."""

    def _save_checkpoint(self, model, trial):
        if self.args.hub_model_id is not None:
            self.create_model_card(model_name=self.args.hub_model_id.split("/")[-1])
            return None
        return super()._save_checkpoint(model, trial)


class IgnoresCheckpoint(Trainer):
    """`_load_from_checkpoint` that loads nothing (the weights are left to someone else, as transformers#29740 asks
    for): a resumed run continues the checkpoint's optimizer and step on the weights it was built with."""

    def _load_from_checkpoint(self, resume_from_checkpoint, model=None):
        return None


class KeepsLastModel(Trainer):
    """`_load_best_model` that loads nothing: with `load_best_model_at_end` the trainer ends with the model it trained
    last, not the best one (the symptom in urchade/GLiNER#159)."""

    def _load_best_model(self):
        return None


class EvaluatesByDatasetOnly(Trainer):
    """`get_eval_dataloader` written for a dataset alone, as overrides from before transformers took a dict of
    evaluation datasets are: given a dataset's name (what `evaluate()` passes for each of a dict), it loads the
    name's characters as rows."""

    def get_eval_dataloader(self, eval_dataset=None):
        from torch.utils.data import DataLoader

        rows = self.eval_dataset if eval_dataset is None else eval_dataset
        return self.accelerator.prepare(
            DataLoader(rows, batch_size=self.args.eval_batch_size, collate_fn=self.data_collator)
        )


class KeepsOnlyTheInputs(Trainer):
    """`_set_signature_columns_if_needed` that keeps the model's inputs alone (as an override written for one
    model's `forward` does): where unused columns are removed, the batches lose their `labels`, and training has no
    loss to follow."""

    def _set_signature_columns_if_needed(self):
        if self._signature_columns is None:
            self._signature_columns = ["input_ids"]


class RenamesLoggedKeys(Trainer):
    """`log` that prefixes every key with `train/` to group them in a dashboard (what transformers declined in
    huggingface/transformers#7935, since other components read the names): the log history has no `loss` any more."""

    def log(self, logs, start_time=None):
        super().log({f"train/{key}": value for key, value in logs.items()}, start_time)


class ReusesFirstModel(Trainer):
    """`call_model_init` that makes the model once and hands back the same one afterwards (as trainers that prepare
    their model once in `__init__` do, huggingface/trl#484): every `train()` after the first continues from the weights
    the last one left instead of a fresh model."""

    def call_model_init(self, trial=None):
        if getattr(self, "_prepared_model", None) is None:
            self._prepared_model = super().call_model_init(trial)
        return self._prepared_model


class WritesNoModelCard(Trainer):
    """`create_model_card` that writes nothing (a library that drafts its card only when it pushes to the hub):
    `push_to_hub` uploads no README.md."""

    def create_model_card(self, *args, **kwargs):
        return None


# A trainer whose dataset needs columns of its own: the default factory builds it as `init` learnt to


class PrefersChosen(Trainer):
    """A preference trainer in the manner of trl's `DPOTrainer`: its rows hold `chosen` and `rejected` text (read one
    by one, so a dataset without them raises `KeyError: 'chosen'` and then `'rejected'`), tokenized with its
    processing class, and a reference model, loaded by the model's hub name where none is given (a model made in
    code has none). Its `compute_loss` is the preference loss; the base's would pass the rejected ids on to the
    model's `forward`, which refuses them: deleting it breaks training."""

    def __init__(self, model, args=None, train_dataset=None, eval_dataset=None, processing_class=None, ref_model=None):
        from transformers import AutoModelForCausalLM, default_data_collator

        if ref_model is None:
            ref_model = AutoModelForCausalLM.from_pretrained(model.config._name_or_path)

        def tokenized(rows):
            return [{"input_ids": tokens(r["chosen"]), "rejected_ids": tokens(r["rejected"])} for r in rows or ()]

        def tokens(text):
            return torch.tensor(processing_class(text)["input_ids"])

        super().__init__(
            model, args, default_data_collator, tokenized(train_dataset), tokenized(eval_dataset), processing_class
        )
        self.ref_model = ref_model.eval()

    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
        chosen, rejected = inputs["input_ids"], inputs["rejected_ids"]
        with torch.no_grad():
            reference = self._log_odds(self.ref_model, chosen, rejected)
        loss = -torch.nn.functional.logsigmoid(self._log_odds(model, chosen, rejected) - reference).mean()
        return (loss, {"logits": model(chosen).logits}) if return_outputs else loss

    @staticmethod
    def _log_odds(model, chosen, rejected):
        def log_prob(ids):
            logits = model(ids).logits[:, :-1].log_softmax(-1)
            return logits.gather(-1, ids[:, 1:, None]).squeeze(-1).sum(-1)

        return log_prob(chosen) - log_prob(rejected)


@dataclasses.dataclass
class GroupConfig(TrainingArguments):
    """Arguments in the manner of trl's `GRPOConfig`: completions generated per prompt, a group that must divide the
    batch (its default, 8, does not divide the tiny batch of two)."""

    num_generations: int = 8

    def __post_init__(self):
        super().__post_init__()
        if self.per_device_train_batch_size % self.num_generations:
            raise ValueError(
                f"generation_batch_size ({self.per_device_train_batch_size}) must be divisible by num_generations "
                f"({self.num_generations})."
            )


class RewardsGroups(Trainer):
    """An RL trainer in the manner of trl's `RLOOTrainer`: arguments of its own (`GroupConfig`), reward functions it
    cannot do without, a reference model it loads by the model's name (a model made in code has none), and rows
    handed over untouched, whose `prompt` it reads only once it trains (its build takes any rows). Its
    `compute_loss` tokenizes the prompts, weighs the loss by their rewards and adds the distance to the reference:
    deleting it breaks training (the base passes the rows to the model's `forward`)."""

    def __init__(
        self,
        model,
        reward_funcs,
        args: GroupConfig | None = None,
        train_dataset=None,
        eval_dataset=None,
        processing_class=None,
    ):
        from transformers import AutoModelForCausalLM

        self.reference = AutoModelForCausalLM.from_pretrained(model.config._name_or_path).eval()
        self.reward_funcs = reward_funcs if isinstance(reward_funcs, list) else [reward_funcs]
        super().__init__(
            model,
            args,
            data_collator=lambda rows: {"rows": rows},
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
            processing_class=processing_class,
        )

    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
        prompts = [row["prompt"] for row in inputs["rows"]]
        ids = torch.tensor(self.processing_class(prompts)["input_ids"])
        outputs = model(input_ids=ids, labels=ids)
        rewards = torch.tensor([f(completions=prompts) for f in self.reward_funcs]).sum(0)
        with torch.no_grad():
            reference = self.reference(input_ids=ids).logits
        distance = (outputs.logits - reference).pow(2).mean()
        loss = outputs.loss * (rewards / rewards.max()).mean() + distance
        return (loss, outputs) if return_outputs else loss
