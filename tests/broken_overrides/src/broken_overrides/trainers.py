"""Broken overrides of `Trainer` methods, for the Trainer probes (the default factory gives each a tiny causal LM
and dataset); and a control."""

from __future__ import annotations

from transformers import Trainer


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
