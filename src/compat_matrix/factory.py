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

    args = arguments_class(cls)(
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
    return cls(model=trained_model(cls), args=args, train_dataset=data, eval_dataset=data)


def hinted(cls: type, parameter: str, base: type) -> type | None:
    """The one subclass of `base` (not `base` itself) that the type hint of `cls.__init__`'s `parameter` names
    (`args: SFTConfig | TrainingArguments | None`, `model: SpanMarkerModel`), if there is one."""
    import typing

    try:
        hint = typing.get_type_hints(cls.__init__).get(parameter)
    except Exception:  # a hint that names what cannot be imported here
        return None
    named = [t for t in _types(hint) if issubclass(t, base) and t is not base]
    return named[0] if len(named) == 1 else None


def trained_model(cls: type) -> Any:
    """The model a `Trainer` subclass trains: a tiny one of the class its `model` parameter names (a library's own
    model, built as a subject would be), else a tiny causal LM."""
    from transformers import PreTrainedModel

    named = hinted(cls, "model", PreTrainedModel)
    return default_factory(named) if named is not None else tiny_causal_lm()


def arguments_class(cls: type) -> type:
    """The `TrainingArguments` a `Trainer` subclass reads: the subclass of it that its `args` parameter names, else
    the one its own module defines (a library's arguments with fields of its own, which its overrides read), else
    transformers' own."""
    import sys

    from transformers import TrainingArguments

    named = hinted(cls, "args", TrainingArguments)
    if named is not None:
        return named
    module = vars(sys.modules.get(cls.__module__, object))
    own = [
        value
        for value in module.values()
        if isinstance(value, type)
        and issubclass(value, TrainingArguments)
        and value is not TrainingArguments
        and value.__module__ == cls.__module__
    ]
    return own[0] if len(own) == 1 else TrainingArguments


def _types(hint: Any) -> list[type]:
    """The classes a type hint names (`A | B | None`, `Optional[A]`)."""
    import typing

    if isinstance(hint, type):
        return [hint]
    return [t for arg in typing.get_args(hint) for t in _types(arg)]


def default_factory(cls: type) -> Any:
    """A `Trainer` subclass: with a tiny causal LM and dataset (`tiny_trainer`), and the arguments class its module
    defines, if any. A class whose config is a
    LlamaConfig (LlamaForCausalLM and its subclasses): built from a tiny one. A class built like
    CharacterCausalLMWrapper (it takes `model=`), or no PreTrainedModel: its own config class plus `model=` a tiny
    causal LM (of the kind its config names, else a LlamaForCausalLM). Any other PreTrainedModel subclass: its own
    config class with every size shrunk (compat_matrix.tiny). Raises tiny.CouldNotBuild."""
    import torch
    from transformers import LlamaConfig, PreTrainedModel, Trainer

    from compat_matrix import tiny

    if issubclass(cls, Trainer):
        try:
            return tiny_trainer(cls)
        except Exception as exc:  # a trainer that wants more than a model, arguments and a list of rows
            raise tiny.CouldNotBuild(cls, tiny.describe(exc)) from exc
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
