"""Tiny builds of any `PreTrainedModel` subclass with no factory: its own config class, every size shrunk.

`tiny_config` applies the rule book (compat_matrix.cell.shrink) to a config class and `build` makes the instance,
same weights on every call, or raises `CouldNotBuild` saying why.
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Mapping
from typing import Any

from compat_matrix.cell import needs
from compat_matrix.cell.shrink import ENCODERS, SMALLER, TARGETS, Values, is_config, shrink
from compat_matrix.shared.results import short_paths

MAX_PARAMETERS = 1_000_000
MAX_SECONDS = 2.0  # CPU seconds of the build, so that other work on a shared machine does not count


WRITE_A_FACTORY = "write a factory (see README)"


class CouldNotBuild(Exception):
    """A class that `build` could not make tiny, and why; the remedy is a factory of its own."""

    def __init__(self, cls: type | str, why: str, remedy: str = WRITE_A_FACTORY) -> None:
        self.name = cls if isinstance(cls, str) else cls.__name__
        self.why = why
        self.remedy = remedy
        super().__init__(f"could not build {self.name}: {why}; {remedy}")

    def __reduce__(self) -> tuple[type, tuple[str, str, str]]:  # it crosses forked children whole
        return type(self), (self.name, self.why, self.remedy)


def unbuilt(cls: type, exc: BaseException, why: str | None = None) -> CouldNotBuild:
    """Why `cls` could not be built from `exc`, with its remedy: the module to install where one is missing here
    (compat_matrix.cell.needs); for an abstract base, its concrete subclasses; else a factory."""
    remedy = needs.remedy(cls, exc) or (ABSTRACT_BASE if inspect.isabstract(cls) else WRITE_A_FACTORY)
    return CouldNotBuild(cls, why or describe(exc), remedy)


ABSTRACT_BASE = "it is abstract: audit the concrete classes that inherit its overrides (compat-matrix init lists them)"


def tiny_config(config_class: type, targets: Mapping[str, float] = TARGETS, main_input: str = "input_ids") -> Any:
    """`config_class` made with every size shrunk (see `shrink`). A config that takes its encoder and decoder
    (EncoderDecoderConfig and its kin) gets tiny ones: the encoder of the kind that reads `main_input`, a BERT
    decoder."""
    if hasattr(config_class, "from_encoder_decoder_configs"):
        from transformers import AutoConfig

        encoder, decoder = (type(AutoConfig.for_model(kind)) for kind in (ENCODERS.get(main_input, "bert"), "bert"))
        return config_class.from_encoder_decoder_configs(tiny_config(encoder, targets), tiny_config(decoder, targets))
    values = config_class().to_dict()
    shrunk = shrink(values, config_class.attribute_map, _attribute_maps(values), targets)
    arguments = _arguments(config_class, values, shrunk)
    config = config_class(**arguments)
    # A config that takes its sizes through **kwargs alone (hf_olmo's OLMoConfig(use_cache, **kwargs)) kept them:
    # they are passed by name too, where that makes the config at all.
    made = config.to_dict()
    kept = {
        k: v
        for k, v in shrunk.items()
        if k not in arguments and not isinstance(v, Mapping) and v != values.get(k) and made.get(k) == values.get(k)
    }
    if kept and not any(k in arguments for k in kept):
        try:
            return config_class(**arguments, **kept)
        except Exception:  # the config as it was made is what there is
            pass
    return config


def wrapped_model(config: Any) -> Any:
    """For a wrapper's config that names the kind of model it wraps (a sub-config: `text_config`, `base_config`…),
    a tiny causal LM of that kind, same weights on every call; None for a config that names none."""
    from transformers import AutoModelForCausalLM, PretrainedConfig

    from compat_matrix.cell.factory import seed_torch

    named = [value for value in vars(config).values() if isinstance(value, PretrainedConfig)]
    if len(named) != 1:
        return None
    seed_torch()
    return AutoModelForCausalLM.from_config(tiny_config(type(named[0])))


def _attribute_maps(values: Mapping[str, Any]) -> dict[str, Mapping[str, str]]:
    """The attribute maps of the sub-configs in `values`, by model_type."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    maps: dict[str, Mapping[str, str]] = {}
    for value in values.values():
        if isinstance(value, Mapping):
            model_type = value.get("model_type")
            if isinstance(model_type, str) and model_type in CONFIG_MAPPING:
                maps[model_type] = CONFIG_MAPPING[model_type].attribute_map
            maps.update(_attribute_maps(value))
    return maps


def _parameters(config_class: type) -> set[str] | None:
    """The names `config_class` takes as arguments, its base classes' included (what it passes on to them in
    **kwargs); None when unknown."""
    from transformers import PretrainedConfig

    try:
        return {
            name
            for klass in config_class.__mro__
            if isinstance(klass, type) and issubclass(klass, PretrainedConfig)
            for name in inspect.signature(klass).parameters
        }
    except (TypeError, ValueError):
        return None


def _arguments(config_class: type, values: Mapping[str, Any], shrunk: Mapping[str, Any]) -> Values:
    """The arguments that make `config_class` shrunk: what differs from `values` (what it makes with no arguments),
    among the names it takes, as it spells them (what it does not take, it derives); a sub-config as the arguments
    of its own class."""
    takes = _parameters(config_class)
    aliases = {a: c for c, a in config_class.attribute_map.items()} | dict(config_class.attribute_map)
    subs = getattr(config_class, "sub_configs", None)
    subs = subs if isinstance(subs, Mapping) else {}  # in some releases a property, on instances only
    arguments: Values = {}
    for key, value in shrunk.items():
        if value == values.get(key):
            continue
        name = key if takes is None or key in takes else aliases.get(key)
        if name is None or (takes is not None and name not in takes):
            continue
        if isinstance(value, Mapping) and (key in subs or is_config(value)):
            value = _sub_arguments(subs.get(key), values.get(key), value)
        arguments[name] = value
    return arguments


def _sub_arguments(sub_class: Any, values: Any, shrunk: Mapping[str, Any]) -> Values:
    """A sub-config's arguments, against the defaults of its own class: the one its parent names, else the one
    registered for its model_type; else against what its parent made (`values`)."""
    from transformers import PretrainedConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    model_type = shrunk.get("model_type")
    named = isinstance(sub_class, type) and issubclass(sub_class, PretrainedConfig)
    if not named or model_type not in (None, getattr(sub_class, "model_type", None)):  # AutoConfig, or a base
        # its .get is a plain dict's, which does not load lazily
        sub_class = CONFIG_MAPPING[model_type] if model_type in CONFIG_MAPPING else None  # noqa: SIM401
    kept = {"model_type": shrunk["model_type"]} if "model_type" in shrunk else {}
    try:
        return kept | _arguments(sub_class, sub_class().to_dict(), shrunk)
    except Exception:  # no class, or one that cannot be made with no arguments
        values = values if isinstance(values, Mapping) else {}
        return kept | {k: v for k, v in shrunk.items() if v != values.get(k)}


def build(cls: type) -> Any:
    """A tiny instance of `cls`, a `PreTrainedModel` subclass, from its own config class shrunk (to TARGETS, or
    SMALLER where that still makes more than MAX_PARAMETERS); same weights on every call. Raises CouldNotBuild
    when it cannot, or when the result is not tiny (MAX_PARAMETERS, MAX_SECONDS)."""

    from compat_matrix.cell.factory import seed_torch

    targets = sizes(cls)
    start = time.process_time()
    try:
        config = tiny_config(cls.config_class, targets, getattr(cls, "main_input_name", "input_ids"))
        if config.is_encoder_decoder and getattr(config, "decoder_start_token_id", None) is None:
            config.decoder_start_token_id = config.pad_token_id  # T5's: its checkpoints set it, its config does not
        seed_torch()
        model = cls(config)
    except Exception as exc:
        raise unbuilt(cls, exc) from exc
    seconds = time.process_time() - start
    if (count := parameters(model)) > MAX_PARAMETERS:
        raise CouldNotBuild(cls, _too_many(count))
    if seconds > MAX_SECONDS:
        raise CouldNotBuild(cls, f"took {seconds:.1f} s, more than the {MAX_SECONDS:.0f} s of a tiny build")
    return model


@functools.cache
def sizes(cls: type) -> Mapping[str, float]:
    """TARGETS, or SMALLER where TARGETS make more than MAX_PARAMETERS, counted on the meta device (no memory, no
    time: a class the rules do not shrink would take minutes to build for real). Raises CouldNotBuild where both
    do; a class that cannot be counted there gets TARGETS, and `build` counts it for real."""
    import torch

    counts = []
    for targets in (TARGETS, SMALLER):
        try:
            with torch.device("meta"):
                config = tiny_config(cls.config_class, targets, getattr(cls, "main_input_name", "input_ids"))
                counts.append(parameters(cls(config)))
        except Exception as exc:
            if not counts:
                return TARGETS
            raise CouldNotBuild(cls, f"{_too_many(counts[0])}; narrower: {describe(exc)}") from exc
        if counts[-1] <= MAX_PARAMETERS:
            return targets
    raise CouldNotBuild(cls, f"{_too_many(counts[0])}, and {counts[1]:,} narrower")


def _too_many(count: int) -> str:
    return f"{count:,} parameters, more than the {MAX_PARAMETERS:,} of a tiny build"


def parameters(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())


def describe(exc: BaseException) -> str:
    message = " ".join(short_paths(str(exc)).split())
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
