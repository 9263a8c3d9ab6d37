"""Tiny subject instances, built in code. Nothing is downloaded from a model hub, ever.

Runs inside a cell's environment. A factory receives the class to build (either variant) and returns a small
instance; the matrix file may name its own (`factory = "module:callable"`).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

Factory = Callable[[type], Any]

SEED = 0
HIDDEN_SIZE = 32
LAYERS = 2


def tiny_config() -> Any:
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=64,
        hidden_size=HIDDEN_SIZE,
        intermediate_size=64,
        num_hidden_layers=LAYERS,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        attention_dropout=0.0,
    )


def tiny_causal_lm(cls: type | None = None) -> Any:
    """A 2-layer LlamaForCausalLM (or `cls`, built like it) from a LlamaConfig made in code, same weights on every
    call."""
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(SEED)
    return (cls or LlamaForCausalLM)(tiny_config())


def tiny_dataset() -> list[dict[str, Any]]:
    """Four rows of eight token ids, each its own labels: enough for two training steps of two."""
    import torch

    generator = torch.Generator().manual_seed(SEED + 2)
    return [{"input_ids": ids, "labels": ids} for ids in torch.randint(1, 60, (4, 8), generator=generator)]


def tiny_trainer(cls: type) -> Any:
    """A `Trainer` subclass with a tiny causal LM, a tiny dataset for training and evaluation, and arguments for
    two logged steps on the CPU that save nothing, writing into a temporary folder of its own."""
    import tempfile

    from transformers import TrainingArguments

    args = TrainingArguments(
        output_dir=tempfile.mkdtemp(prefix="compat-matrix-trainer-"),
        max_steps=2,
        per_device_train_batch_size=2,
        per_device_eval_batch_size=2,
        logging_strategy="steps",
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
        dataloader_pin_memory=False,
        remove_unused_columns=False,
        seed=SEED,
    )
    data = tiny_dataset()
    return cls(model=tiny_causal_lm(), args=args, train_dataset=data, eval_dataset=data)


def default_factory(cls: type) -> Any:
    """A `Trainer` subclass: with a tiny causal LM and dataset (`tiny_trainer`). A class whose config is a
    LlamaConfig (LlamaForCausalLM and its subclasses): built from a tiny one. A class built like
    CharacterCausalLMWrapper (it takes `model=`), or no PreTrainedModel: its own config class plus `model=` a tiny
    causal LM (of the kind its config names, else a LlamaForCausalLM). Any other PreTrainedModel subclass: its own
    config class with every size shrunk (compat_matrix.tiny). Raises tiny.CouldNotBuild."""
    import torch
    from transformers import LlamaConfig, PreTrainedModel, Trainer

    from compat_matrix import tiny

    if issubclass(cls, Trainer):
        return tiny_trainer(cls)
    if issubclass(getattr(cls, "config_class", object), LlamaConfig):
        return tiny_causal_lm(cls)
    if issubclass(cls, PreTrainedModel) and "model" not in inspect.signature(cls).parameters:
        return tiny.build(cls)
    try:
        config = cls.config_class()
        model = tiny.wrapped_model(config) or tiny_causal_lm()
        torch.manual_seed(SEED)  # the wrapper's own layers start from the same weights in both variants
        return cls(config, model=model)
    except Exception as exc:
        raise tiny.CouldNotBuild(cls, tiny.describe(exc)) from exc


def load_callable(ref: str) -> Callable[..., Any]:
    """Resolve "package.module:attribute" to the object it names."""
    module_name, _, attribute = ref.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        obj = getattr(obj, part)
    return obj


def resolve_factory(ref: str | None) -> Factory:
    return default_factory if ref is None else load_callable(ref)
