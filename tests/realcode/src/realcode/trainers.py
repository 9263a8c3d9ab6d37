"""Trainer subclasses whose overrides downstream libraries really wrote."""

from __future__ import annotations

from transformers import Trainer


class OldComputeLossTrainer(Trainer):
    """`compute_loss(self, model, inputs, return_outputs=False)`, written before 4.46 (transformers#36331): it
    doubles the loss where a release calls it as it was written, and raises TypeError where a release passes
    `num_items_in_batch=` (training, from 4.46)."""

    def compute_loss(self, model, inputs, return_outputs=False):
        outputs = model(**inputs)
        loss = outputs.loss * 2
        return (loss, outputs) if return_outputs else loss
