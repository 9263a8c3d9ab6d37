"""Tiny subject instances, built in code. Nothing is downloaded from a model hub, ever.

Runs inside a cell's environment. A factory receives the class to build (either variant) and returns a small
instance; the matrix file may name its own (`factory = "module:callable"`).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib
import inspect
import os
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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


# `TrainingArguments` of every Trainer the probes and the default factory make: on the CPU's main process, nothing
# reported, saved or shown, every column of the rows kept.
QUIET_TRAINING = {
    "report_to": "none",
    "save_strategy": "no",
    "disable_tqdm": True,
    "dataloader_num_workers": 0,
    "dataloader_pin_memory": False,
    "remove_unused_columns": False,
}

# Fields of a library's own arguments that `tiny_trainer` sets where the class has them, to fit its tiny batch:
# completions generated per prompt (a group must divide the batch of two), and as few tokens as make a completion.
TINY_GENERATION = {"num_generations": 2, "max_completion_length": 4}


_PLAIN: dict[Any, tuple[Any, Any, list[Any]]] = {}  # per default dtype: the plain tiny causal LM built first,
# torch's generator after its build, and copies of it made before the variants fork (`stock_plain`)


def tiny_causal_lm(cls: type | None = None) -> Any:
    """A 2-layer LlamaForCausalLM (or `cls`, built like it) from a LlamaConfig made in code, same weights on every
    call. The plain one (no `cls`), the model most builds wrap or train, is built once per process and copied after
    that, with torch's generators seeded and the CPU's left as the build left it: a copy takes half the time of a
    build, and the variants' children build it dozens of times each (taking first the copies their subject's
    process made: `stock_plain`). A class of the subject's is built every time."""
    import torch

    seed_torch()
    if cls is not None:
        return cls(tiny_config())
    model, generator, copies = _plain()
    torch.set_rng_state(generator)
    return copies.pop() if copies else copy.deepcopy(model)


def _plain() -> tuple[Any, Any, list[Any]]:
    """The plain tiny causal LM of the default dtype, built here where it is not yet, with its generator and copies."""
    import torch
    from transformers import LlamaForCausalLM

    dtype = torch.get_default_dtype()
    if dtype not in _PLAIN:
        seed_torch()
        _PLAIN[dtype] = (LlamaForCausalLM(tiny_config()), torch.get_rng_state(), [])
    return _PLAIN[dtype]


def stock_plain(count: int = 32) -> None:
    """`count` copies of the plain tiny causal LM, made once in a subject's process before its variants fork, so
    that each child takes them instead of copying one each time (a variant of the seed subject builds it 28 times)."""
    model, _, copies = _plain()
    copies.extend(copy.deepcopy(model) for _ in range(count - len(copies)))


@functools.cache
def _accelerated() -> bool:
    """Whether torch has a device besides the CPU whose generator `torch.manual_seed` seeds too."""
    import torch

    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None and hasattr(accelerator, "is_available"):
        return bool(accelerator.is_available())
    mps = getattr(torch.backends, "mps", None)
    return torch.cuda.is_available() or bool(mps and mps.is_available())


def seed_torch(value: int = SEED) -> None:
    """`torch.manual_seed(value)`: on a machine with no accelerator, the CPU's generator alone, which is all that
    call seeds there (torch 2.13 also queues seeds for devices not yet started, formatting a stack each time:
    0.3-0.6 ms, and the probes seed about 76 times per variant)."""
    import torch

    if _accelerated():
        torch.manual_seed(value)
    else:
        torch.default_generator.manual_seed(value)


def tiny_dataset() -> list[dict[str, Any]]:
    """Four rows of eight token ids, each its own labels: enough for two training steps of two."""
    import torch

    generator = torch.Generator().manual_seed(SEED + 2)
    return [{"input_ids": ids, "labels": ids} for ids in torch.randint(1, 60, (4, 8), generator=generator)]


def tiny_trainer(
    cls: type, rows: list[dict[str, Any]] | None = None, model: Any = None, model_init: Callable[..., Any] | None = None
) -> Any:
    """A `Trainer` subclass with a tiny model (`model`, default a tiny causal LM or one of the class its `model`
    parameter names), a tiny dataset for training and evaluation (`rows`, default `tiny_dataset()`), and arguments
    for two logged steps on the CPU that save nothing, writing into a temporary folder of its own. With `model_init`,
    that function makes the model instead (`model_init=` in place of `model=`, as `hyperparameter_search` needs). A
    factory of your own may call it with the model and rows the trainer is written for."""
    import tempfile

    from transformers import TrainingArguments

    arguments = arguments_class(cls)
    # A library's own arguments may default to bf16 where a GPU would run it: a CPU's.
    on_cpu = {} if arguments is TrainingArguments else {"use_cpu": True, "bf16": False, "fp16": False}
    fields = {f.name for f in dataclasses.fields(arguments)}
    args = arguments(
        **on_cpu,
        **{k: v for k, v in TINY_GENERATION.items() if k in fields},
        output_dir=tempfile.mkdtemp(prefix="compat-matrix-trainer-"),
        max_steps=2,
        per_device_train_batch_size=2,
        per_device_eval_batch_size=2,
        logging_strategy="steps",
        logging_steps=1,
        seed=SEED,
        **QUIET_TRAINING,
    )
    data = tiny_dataset() if rows is None else rows
    taken = inspect.signature(cls).parameters
    if model_init is not None:
        chosen = {"model_init": model_init}
    else:
        chosen = {"model": trained_model(cls) if model is None else model}
    given = {**chosen, "args": args, "train_dataset": data, "eval_dataset": data}
    if not any(p.kind == inspect.Parameter.VAR_KEYWORD for p in taken.values()):
        given = {k: v for k, v in given.items() if k in taken}  # a trainer that evaluates on nothing
    try:
        return _made(cls, given)
    except BaseException:
        shutil.rmtree(args.output_dir, ignore_errors=True)  # nobody else will know about it
        raise


def _made(cls: type, given: dict[str, Any]) -> Any:
    """`cls(**given)`, or, for a library's trainer that wants more, with its rows as a datasets.Dataset, a
    tokenizer where it takes one, a copy of its model as the reference or teacher model where it takes one (which it
    would otherwise load from the model's hub name: a model made in code has none), and `tiny_reward` where it takes
    reward functions; then, where its model may be a path, with the folder that model was saved in, in its place (a
    reward trainer loads it with the one output it needs). What still fails says what a factory must give."""
    try:
        return cls(**given)
    except Exception:
        rows = _as_dataset(given["train_dataset"]) if "train_dataset" in given else None
        more = {k: rows for k in ("train_dataset", "eval_dataset") if k in given and rows is not None}
        taken = inspect.signature(cls).parameters
        if "processing_class" in taken:
            more["processing_class"] = tiny_tokenizer()
        if given.get("model") is not None and "args" in given:
            _saved_for_loading(given["model"], given["args"].output_dir)
        for other in ("ref_model", "teacher_model"):
            if other in taken and given.get("model") is not None:
                more[other] = copy.deepcopy(given["model"])
        if "reward_funcs" in taken:
            more["reward_funcs"] = [tiny_reward]
        if not more:
            raise
    try:
        return cls(**{**given, **more})
    except Exception as exc:
        folder = getattr(getattr(given.get("model"), "config", None), "_name_or_path", None)
        if not folder or not takes_path(cls):
            raise
        failed = exc
    try:
        return cls(**{**given, **more, "model": folder})  # a trainer that configures the model it loads itself
    except Exception:
        raise failed from None  # the model as given says what a factory must give, not the guess that it is a path


def takes_path(cls: type) -> bool:
    """Whether the type hint of `cls.__init__`'s `model` names `str` (`model: str | PreTrainedModel`), read from
    its text where the rest of it names what is not installed here."""
    hint = hint_of(cls, "model")
    if hint is not None:
        return str in _types(hint)
    parameter = inspect.signature(cls).parameters.get("model")
    written = None if parameter is None else parameter.annotation
    return isinstance(written, str) and "str" in re.split(r"[^\w.]+", written)


def _saved_for_loading(model: Any, output_dir: str) -> None:
    """Give a model made in code, which has no hub name, a folder to be loaded from, as a trainer does that builds
    its reference or teacher model from the model's `name_or_path`: the model and the tiny tokenizer, saved in the
    trainer's output folder."""
    config = getattr(model, "config", None)
    if config is None or getattr(config, "_name_or_path", None):
        return
    folder = os.path.join(output_dir, "tiny-model")
    model.save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    config._name_or_path = folder


def tiny_reward(completions: Sequence[Any], **_: Any) -> list[float]:
    """A reward function as RL trainers call them (`completions=` and the rows' other columns): a completion's
    length, so that completions differ in reward."""
    return [float(len(str(c))) for c in completions]


def rows_with(columns: Sequence[str]) -> list[dict[str, Any]]:
    """Four rows of the `columns` a trainer asked for (`prompt`, `chosen`, `rejected`), each three words of the tiny
    tokenizer, others per column and row; no token ids, which a trainer that tokenizes its own columns would take
    for rows it need not tokenize."""
    words = tiny_config().vocab_size - 3

    def text(column: int, row: int) -> str:
        return " ".join(f"t{3 + (8 * column + row + k) % words}" for k in range(3))

    return [{c: text(i, row) for i, c in enumerate(columns)} for row in range(4)]


@dataclass(frozen=True)
class TrainerWith:
    """The default factory for a trainer whose dataset needs `columns`: `tiny_trainer` on `rows_with(columns)`."""

    columns: tuple[str, ...]

    def rows(self) -> list[dict[str, Any]]:
        return rows_with(self.columns)

    def __call__(self, cls: type) -> Any:
        return tiny_trainer(cls, self.rows())


def tiny_tokenizer() -> Any:
    """A word-level tokenizer over the tiny causal LM's vocabulary (`t0` … `t63`), made in code."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2, **{f"t{i}": i for i in range(3, tiny_config().vocab_size)}}
    words = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=words, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")


def _as_dataset(rows: list[dict[str, Any]]) -> Any:
    """The rows as a `datasets.Dataset` (tensors as lists of ids, text as is), or None where `datasets` is not
    installed."""
    try:
        from datasets import Dataset
    except ImportError:
        return None
    return Dataset.from_list([{k: getattr(v, "tolist", lambda v=v: v)() for k, v in row.items()} for row in rows])


def hinted(cls: type, parameter: str, base: type) -> type | None:
    """The one subclass of `base` (not `base` itself) that the type hint of `cls.__init__`'s `parameter` names
    (`args: SFTConfig | TrainingArguments | None`, `model: SpanMarkerModel`), if there is one."""
    named = [t for t in _types(hint_of(cls, parameter)) if issubclass(t, base) and t is not base]
    return named[0] if len(named) == 1 else None


def hint_of(cls: type, parameter: str) -> Any:
    """The type hint of `cls.__init__`'s `parameter`, evaluated in its module where it is a string; None where it
    names what cannot be imported here (the hints of other parameters do not matter)."""
    try:
        hint = inspect.signature(cls).parameters[parameter].annotation
    except (KeyError, TypeError, ValueError):
        return None
    if isinstance(hint, str):
        try:
            hint = eval(hint, vars(inspect.getmodule(cls.__init__) or object))
        except Exception:
            return None
    return None if hint is inspect.Parameter.empty else hint


def trained_model(cls: type) -> Any:
    """The model a `Trainer` subclass trains: a tiny one of the class its `model` parameter names (a library's own
    model, built as a subject would be), else a tiny causal LM."""
    from transformers import PreTrainedModel

    named = hinted(cls, "model", PreTrainedModel)
    return default_factory(named) if named is not None else tiny_causal_lm()


def arguments_class(cls: type) -> type:
    """The `TrainingArguments` a `Trainer` subclass reads: the subclass of it that its `args` parameter names, else
    the one its own module defines (a library's arguments with fields of its own, which its overrides read; of
    several, the one the others subclass), else transformers' own."""
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
    roots = [c for c in own if not any(c is not o and issubclass(c, o) for o in own)]  # not one's config's base
    return roots[0] if len(roots) == 1 else TrainingArguments


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
    config class with every size shrunk (compat_matrix.cell.tiny), with an adapter and a head where it is a model of
    the adapters library (`with_adapter`). Raises tiny.CouldNotBuild."""
    from transformers import LlamaConfig, PreTrainedModel, Trainer

    from compat_matrix.cell import tiny

    if issubclass(cls, Trainer):
        try:
            return tiny_trainer(cls)
        except tiny.CouldNotBuild as exc:  # the model it trains
            raise tiny.CouldNotBuild(cls, f"its model {exc.name}: {exc.why}", exc.remedy) from exc
        except Exception as exc:  # a trainer that wants more than a model, arguments and a list of rows
            raise tiny.unbuilt(cls, exc) from exc
    config_class = getattr(cls, "config_class", None)
    if isinstance(config_class, type) and issubclass(config_class, LlamaConfig):
        return with_adapter(tiny_causal_lm(cls))
    if not isinstance(config_class, type):
        raise tiny.CouldNotBuild(cls, f"its config_class is {config_class!r}, not a config class")
    if issubclass(cls, PreTrainedModel) and ("model" not in inspect.signature(cls).parameters or builds_own(cls)):
        return with_adapter(tiny.build(cls))
    try:
        config = cls.config_class()
        model = tiny.wrapped_model(config) or tiny_causal_lm()
        seed_torch()  # the wrapper's own layers start from the same weights in both variants
        return cls(config, model=model)
    except Exception as exc:
        raise tiny.unbuilt(cls, exc) from exc


# The heads of the adapters library's models with flexible heads (`head_types`), in the order the default factory
# picks one: a language model's, so that the model returns a loss and generates, else a classifier's.
HEADS = ("causal_lm", "seq2seq_lm", "masked_lm", "image_classification", "classification")


def with_adapter(model: Any) -> Any:
    """A model of the adapters library (it has `adapters_config` and `train_adapter`) as it is used: with an adapter
    `tiny`, trained alone, and, where it takes heads (`head_types`), the first of HEADS it takes, so that its own
    forward, generation and saving run; any other model as it is. Raises tiny.CouldNotBuild where that fails."""
    from compat_matrix.cell import tiny

    if getattr(model, "adapters_config", None) is None or not callable(getattr(model, "train_adapter", None)):
        return model  # not a model of the adapters library, or one that `adapters.init` has not set up
    head = next((h for h in HEADS if h in getattr(model, "head_types", ())), None)
    try:
        model.add_adapter("tiny")
        if head is not None:
            getattr(model, f"add_{head}_head")("tiny")
        model.train_adapter("tiny")
    except Exception as exc:
        raise tiny.unbuilt(type(model), exc, f"adding an adapter: {tiny.describe(exc)}") from exc
    return model


def builds_own(cls: type) -> bool:
    """Whether a class that takes `model=` builds its own when given none: the parameter has a default and its type
    hint names no transformers model (`model: Optional[OLMo] = None`, a model of the library's own), so a tiny
    causal LM of transformers is not what it wraps."""
    from transformers import PreTrainedModel

    parameter = inspect.signature(cls).parameters["model"]
    if parameter.default is inspect.Parameter.empty:
        return False
    named = [t for t in _types(hint_of(cls, "model")) if t is not type(None)]
    return bool(named) and not any(issubclass(t, PreTrainedModel) for t in named)


def load_callable(ref: str) -> Callable[..., Any]:
    """Resolve "package.module:attribute" to the object it names."""
    module_name, _, attribute = ref.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        obj = getattr(obj, part)
    return obj
