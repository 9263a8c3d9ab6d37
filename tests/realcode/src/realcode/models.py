"""Model subclasses whose overrides downstream libraries really wrote (each pattern's upstream report in its
docstring). Built by compat-matrix's default factory: a tiny LlamaConfig made in code."""

from __future__ import annotations

import torch
from torch import nn
from transformers import LlamaForCausalLM, LlamaModel, LlamaPreTrainedModel
from transformers.modeling_outputs import CausalLMOutput


class ValueHeadLM(LlamaForCausalLM):
    """A causal LM with a value head (as TRL's and OpenRLHF's value models have) whose `_init_weights` zeroes the
    head, and a `tie_weights(self)` written against 4.x: 5.x calls it with `missing_keys=` and
    `recompute_mapping=`, so construction raises TypeError there, and hides that `_init_weights` is needed."""

    def __init__(self, config):
        super().__init__(config)
        self.v_head = nn.Linear(config.hidden_size, 1)
        self.post_init()

    def _init_weights(self, module):
        super()._init_weights(module)
        if module is getattr(self, "v_head", None):
            module.weight.data.zero_()
            module.bias.data.zero_()

    def tie_weights(self):
        super().tie_weights()


class BidirectionalLlama(LlamaModel):
    """An encoder made of a decoder (llm2vec, McGill-NLP/llm2vec#87; NVIDIA-NeMo Automodel#1349): its
    `_update_causal_mask` lets every token see every other. LlamaModel calls it up to 4.52; 4.53 removed it, and
    the model silently attends causally again."""

    def _update_causal_mask(self, attention_mask, input_tensor, cache_position, past_key_values, *args, **kwargs):
        batch, length = input_tensor.shape[:2]
        if attention_mask is None:
            attention_mask = torch.ones(batch, length, device=input_tensor.device)
        if attention_mask.dim() == 4:
            return attention_mask
        keep = attention_mask[:, None, None, :].to(input_tensor.dtype)
        hidden = (1.0 - keep) * torch.finfo(input_tensor.dtype).min
        return hidden.expand(batch, 1, length, attention_mask.shape[-1])


class OwnHeadLM(LlamaPreTrainedModel):
    """A language model of its own on a PreTrainedModel, relying on the `generate` every PreTrainedModel had up to
    4.51 (transformers 4.50 warned, 4.52 stopped inheriting GenerationMixin): its `prepare_inputs_for_generation`
    overrides nothing from 4.52 on, and `generate` raises AttributeError with or without it."""

    def __init__(self, config):
        super().__init__(config)
        self.model = LlamaModel(config)
        self.head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, labels=None, **kwargs):
        logits = self.head(self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state)
        loss = None
        if labels is not None:
            loss = nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1))
        return CausalLMOutput(loss=loss, logits=logits)

    def prepare_inputs_for_generation(self, input_ids, **kwargs):
        return {"input_ids": input_ids, "attention_mask": kwargs.get("attention_mask")}


class Backbone(LlamaPreTrainedModel):
    """A span classifier on a decoder stored as `backbone` while `base_model_prefix` says `model`: transformers
    cannot find its embeddings by itself, so its accessors are needed, the setter among them, although no probe
    that only reads would ever call it."""

    base_model_prefix = "model"

    def __init__(self, config):
        super().__init__(config)
        self.backbone = LlamaModel(config)
        self.classifier = nn.Linear(config.hidden_size, 3)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, labels=None, **kwargs):
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        logits = self.classifier(hidden)
        loss = None if labels is None else logits.float().pow(2).mean()
        return CausalLMOutput(loss=loss, logits=logits)

    def get_input_embeddings(self):
        return self.backbone.embed_tokens

    def set_input_embeddings(self, value):
        self.backbone.embed_tokens = value


class WithTokenizerLM(LlamaForCausalLM):
    """`from_pretrained` that attaches what the library needs beside the weights (here a tokenizer's name): without
    it, a reloaded model has none, although loading works."""

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        loaded = super().from_pretrained(*args, **kwargs)
        model = loaded[0] if isinstance(loaded, tuple) else loaded
        model.tokenizer = "utf8"
        return loaded


class UntiedLM(LlamaForCausalLM):
    """Ties its word embeddings in its config, but its `tie_weights` ties nothing: its output head is a second copy
    that training moves apart (what a parameter summary that skips tied duplicates cannot see)."""

    def __init__(self, config):
        config.tie_word_embeddings = True
        super().__init__(config)

    def tie_weights(self, *args, **kwargs):
        return None


class SpanScorer(LlamaForCausalLM):
    """A span extractor's model: its forward needs the span positions besides the token ids."""

    def forward(self, input_ids=None, spans=None, **kwargs):
        if spans is None:
            raise TypeError("forward() missing 1 required argument: 'spans'")
        output = super().forward(input_ids=input_ids, **kwargs)
        output.logits = output.logits * spans[..., None]
        return output


class NeedsSpans(SpanScorer):
    """Overrides a forward that needs inputs the probes cannot make: without example inputs every forward fails the
    same way with and without the override, which tells nothing (never `redundant`)."""

    def forward(self, input_ids=None, spans=None, **kwargs):
        return super().forward(input_ids=input_ids, spans=None if spans is None else spans * 2, **kwargs)


class GivenSpans(SpanScorer):
    """The same override, with example inputs (`span_inputs`): the probes see that it doubles the spans' weight."""

    def forward(self, input_ids=None, spans=None, **kwargs):
        return super().forward(input_ids=input_ids, spans=None if spans is None else spans * 2, **kwargs)


def span_inputs(instance: SpanScorer) -> dict:
    """Example inputs for SpanScorer and its subclasses: token ids and a span mask."""
    generator = torch.Generator().manual_seed(3)
    ids = torch.randint(1, 60, (2, 8), generator=generator)
    return {"input_ids": ids, "spans": (ids % 2).float()}
