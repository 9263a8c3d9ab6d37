"""Broken overrides of methods other than the checkpointing switches, on a tiny LlamaForCausalLM (which the
default factory builds, and which saves, loads and generates), for the probes of any method; and a control."""

from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM, ViTModel
from transformers.modeling_outputs import CausalLMOutputWithPast


class OldTieWeights(LlamaForCausalLM):
    """`tie_weights` with the signature of 4.57, which 5.x calls with `missing_keys=` and `recompute_mapping=`."""

    def tie_weights(self):
        super().tie_weights()


class PassThroughTieWeights(LlamaForCausalLM):
    """Control: `tie_weights` that passes everything on to the base."""

    def tie_weights(self, *args, **kwargs):
        return super().tie_weights(*args, **kwargs)


class WrongInputEmbeddings(LlamaForCausalLM):
    """`get_input_embeddings` returns the output head, a module the model does not embed its inputs with."""

    def get_input_embeddings(self):
        return self.lm_head


class DoublesInit(LlamaForCausalLM):
    """`_init_weights` that doubles every linear weight after the base initialised it: no error, other values."""

    def _init_weights(self, module):
        super()._init_weights(module)
        if hasattr(module, "weight") and module.weight is not None and module.weight.dim() == 2:
            module.weight.data.mul_(2)


class NegatesLogits(LlamaForCausalLM):
    """`forward` that negates the logits and doubles the loss: greedy decoding picks other tokens, training sees
    another loss."""

    def forward(self, *args, **kwargs):
        output = super().forward(*args, **kwargs)
        output.logits = -output.logits
        if output.loss is not None:
            output.loss = output.loss * 2
        return output


class SaveWithoutWeights(LlamaForCausalLM):
    """`save_pretrained` that writes the configuration only: loading it back gives a freshly initialised model."""

    def save_pretrained(self, save_directory, *args, **kwargs):
        self.config.save_pretrained(save_directory)


class SetterIgnoresModule(LlamaForCausalLM):
    """`set_input_embeddings` that keeps the module aside instead of embedding the inputs with it."""

    def set_input_embeddings(self, value):
        self.spare_embeddings = value


class SkipsHeadInit(LlamaForCausalLM):
    """`_init_weights` that leaves the output head as it was drawn: one parameter group initialised otherwise."""

    def _init_weights(self, module):
        if module is not getattr(self, "lm_head", None):
            super()._init_weights(module)


class OwnLlamaConfig(LlamaConfig):
    """A library's own config class, with a field of its own (a retriever's projection size, say)."""

    def __init__(self, projection_dim: int = 16, **kwargs):
        self.projection_dim = projection_dim
        super().__init__(**kwargs)


class OwnConfigLM(LlamaForCausalLM):
    """A class attribute: `config_class` names the library's own config. Deleted, `from_pretrained` makes a plain
    LlamaConfig, and the reloaded model's `config.projection_dim` is gone."""

    config_class = OwnLlamaConfig


class RefusesSdpa(LlamaForCausalLM):
    """A class attribute: `_supports_sdpa = False` on a model whose attention runs through transformers' own (which
    supports sdpa): `from_pretrained(…, attn_implementation="sdpa")` raises, and the default falls back to eager."""

    _supports_sdpa = False


class TiesNothingByKeys(LlamaForCausalLM):
    """A class attribute: `_tied_weights_keys` emptied on a model whose config ties its word embeddings. From 5.0
    transformers ties what this attribute names, so the output head becomes a second copy; 4.x ties by config."""

    _tied_weights_keys = {}  # noqa: RUF012  the class attribute transformers reads, as libraries write it

    def __init__(self, config):
        config.tie_word_embeddings = True
        super().__init__(config)


class SwapsChannels(ViTModel):
    """A vision model's `forward` that reads its images' channels in reverse order (BGR for RGB, as an image loaded
    with OpenCV has them): the probes must give it `pixel_values`, the input it reads first, to see it."""

    def forward(self, pixel_values=None, **kwargs):
        return super().forward(pixel_values=None if pixel_values is None else pixel_values.flip(1), **kwargs)


class WithAdapterHeads(LlamaForCausalLM):
    """A model in the manner of the adapters library's (`adapters_config`, `add_adapter`, `head_types` and
    `add_causal_lm_head`, `train_adapter`), whose `forward` refuses to run without an active adapter and adds the
    adapter's output where one is: the default factory must set one up, as its users do, for the probes to run it."""

    head_types = ("classification", "causal_lm")

    def __init__(self, config):
        super().__init__(config)
        self.adapters_config = {}
        self.active = None

    def add_adapter(self, name):
        self.adapters_config[name] = torch.nn.Linear(self.config.hidden_size, self.config.hidden_size)
        self.add_module(f"adapter_{name}", self.adapters_config[name])

    def add_causal_lm_head(self, name):
        self.heads = {name: "causal_lm"}

    def train_adapter(self, name):
        self.active = name

    def forward(self, input_ids=None, labels=None, **kwargs):
        if self.active is None:
            raise ValueError("There are adapters available but none are activated for the forward pass.")
        hidden = self.model(input_ids=input_ids, **kwargs).last_hidden_state
        logits = self.lm_head(hidden + self.adapters_config[self.active](hidden))
        loss = None if labels is None else self.loss_function(logits, labels, self.config.vocab_size)
        return CausalLMOutputWithPast(loss=loss, logits=logits)


class AdaptersAsProperty(LlamaForCausalLM):
    """`active_adapters` as a property giving the adapter setup, where transformers defines a method (adapters'
    `ModelAdaptersMixin`): reading it gives the setup as shipped and a bound method with it deleted. The class as
    shipped runs: a property that does its job."""

    @property
    def active_adapters(self):
        return ["default"]


class CountsParametersAsProperty(LlamaForCausalLM):
    """`num_parameters` as a property: the Trainer counts each step's floating-point operations through
    `model.floating_point_ops(inputs)` (or directly, on newer releases), which calls
    `num_parameters(exclude_embeddings=True)`: an int cannot take the call, so a Trainer step raises `TypeError:
    'int' object is not callable` as shipped. Reading it differs too; it must not read Keep."""

    @property
    def num_parameters(self):
        return sum(p.numel() for p in self.parameters())
