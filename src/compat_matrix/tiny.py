"""Tiny builds of any `PreTrainedModel` subclass with no factory: its own config class, every size shrunk.

Runs inside a cell's environment; standard library only at import time (torch and transformers are imported
inside the functions that need them). `shrink` is the rule book, a pure function over the plain dict a config
serializes to (`config.to_dict()`), sub-configs included; `tiny_config` applies it to a config class and `build`
makes the instance, same weights on every call, or raises `CouldNotBuild` saying why.
"""

from __future__ import annotations

import inspect
import re
import time
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

MAX_PARAMETERS = 1_000_000
MAX_SECONDS = 2.0  # CPU seconds of the build, so that other work on a shared machine does not count

HIDDEN = 32
HEADS = 4
LAYERS = 2
# Sizes a tiny config gets, by kind (see RULES); a size already smaller stays as it is.
TARGETS: dict[str, int] = {
    "vocab": 256,
    "positions": 128,
    "window": 32,
    "kv_heads": 2,
    "heads": HEADS,
    "head_dim": HIDDEN // HEADS,
    "layers": LAYERS,
    "stage_depth": 3,  # blocks per stage (Cvt needs stage i to have more than i)
    "intermediate": 2 * HIDDEN,
    "hidden": HIDDEN,
    "image": 32,
    "patch": 8,
    "experts": 4,
    "experts_per_token": 2,
    "expert_groups": 1,
    "rank": 16,
}
# Token ids at or above this move to their own slot below the vocabulary size, so every id stays inside the
# vocabulary and ids that differed still differ.
KEPT_IDS = TARGETS["vocab"] // 2

# (kind, names): the first kind whose pattern matches the whole name. A name is tried as the config spells it,
# then as its attribute_map aliases it (GPT-2's n_embd is hidden_size, Flaubert's vocab_size is n_words).
RULES: tuple[tuple[str, str], ...] = (
    ("token_id", r"\w*token_(id|ids|index)|(bos|eos|pad|unk|mask|sep|cls)_(id|index)"),
    ("vocab", r"\w*vocab\w*|\w*codebook_size|num_hash_buckets|num_embeds|n_words|n_token|num_\w+_labels"),
    ("positions", r"\w*max_position_embeddings|n_positions|max_\w*pos\w*|\w+_positions|model_max_length"),
    ("window", r"sliding_window(_size)?|attention_chunk_size|\w*window_len"),
    ("kv_heads", r"\w*(key_value_heads|kv_heads)"),
    ("heads", r"\w*(attention_heads|num_heads|n_heads?|_heads)(_per_stage)?"),
    ("head_dim", r"(\w+_)?head_dim|d_kv|d_head|dim_head|attention_head_size|rotary_dim|rotary_emb_dim"),
    ("stage_depth", r"depths|\w+_depths|blocks_per_stage|stage_num_blocks"),
    ("some_layers", r"max_window_layers|num_kv_shared_layers|first_k_dense_replace"),
    ("layers", r"(?!num_feat_extract)(num_|n_)?(\w+_)?(hidden_)?layers?|depth|\w+_depth"),
    ("experts_per_token", r"num_experts_per_tok(en)?|moe_topk|top_k|num_selected_experts"),
    ("experts", r"num_\w*experts|n_\w*experts|\w*_expert_num"),
    ("expert_groups", r"n_group|topk_group|num_expert_group"),
    ("rank", r"kv_lora_rank|q_lora_rank"),
    ("intermediate", r"\w*intermediate\w*|\w*ffn\w*|d_ff|dff|d_inner|n_inner|\w*dim_ff|\w*feedforward\w*|mlp_dim"),
    ("image", r"\w*image_size|\w*img_size|crop_size"),
    ("patch", r"\w*patch_size"),
    # Widths of every sort, by the words of their names: hidden_size, d_model, n_embd, embed_dim, conv_dim,
    # hidden_sizes, out_channels, projection_dim, linear_units…
    (
        "hidden",
        r"d_model|n_embd|n_embed|emb_dim|dim|\w*(embedding|embed|feature)_(size|dim)"
        r"|(\w+_)?(hidden|dims?|channels?|units|width|latents)(_\w+)?",
    ),
)
_PATTERNS = tuple((kind, re.compile(pattern)) for kind, pattern in RULES)
# Names whose words say width but that count something else, or that must match the data (3 colour channels).
_NOT_SIZES = re.compile(r"\w*(kernel|stride|padding|num_channels|input_channels|in_chans)\w*")
MAIN_HIDDEN = ("hidden_size", "d_model", "n_embd", "embed_dim", "emb_dim", "dim")
MAIN_HEAD_DIM = ("head_dim", "d_kv", "d_head", "dim_head", "attention_head_size")
_SKIP = frozenset({"id2label", "label2id", "task_specific_params", "transformers_version", "architectures"})

Values = dict[str, Any]


class CouldNotBuild(Exception):
    """A class that `build` could not make tiny, and why; the remedy is a factory of its own."""

    def __init__(self, cls: type | str, why: str) -> None:
        name = cls if isinstance(cls, str) else cls.__name__
        super().__init__(f"could not build {name}: {why}; write a factory (see README)")


def kind_of(name: str) -> str | None:
    """The kind of size a config name holds (a key of TARGETS, or "token_id"), or None for anything else."""
    if _NOT_SIZES.fullmatch(name):
        return None
    return next((kind for kind, pattern in _PATTERNS if pattern.fullmatch(name)), None)


def shrink(
    values: Mapping[str, Any],
    attribute_map: Mapping[str, str] | None = None,
    attribute_maps: Mapping[str, Mapping[str, str]] | None = None,
) -> Values:
    """`values` (a config as `to_dict()` gives it) with every size shrunk to TARGETS, sub-configs included.

    `attribute_map` is the config's own (common name → attribute); `attribute_maps` those of its sub-configs,
    by `model_type`. Sizes only shrink, never grow, and keep the constraints transformers checks: the heads
    divide the hidden size, head_dim keeps its ratio to the hidden size over the heads, key-value heads divide
    the heads (and stay equal to them, or 1, if they were), the patch divides the image, per-layer lists follow
    the number of layers, and every token id stays inside the vocabulary."""
    maps = attribute_maps or {}
    ids = _token_ids(_collect_ids(values, attribute_map or {}, maps))
    return _shrink(values, attribute_map or {}, maps, ids)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _ints(value: Any) -> bool:
    return isinstance(value, list | tuple) and bool(value) and all(map(_is_int, value))


def _is_config(value: Any) -> bool:
    return isinstance(value, Mapping) and "model_type" in value


def _kinds(values: Mapping[str, Any], attribute_map: Mapping[str, str]) -> dict[str, tuple[str, str | None]]:
    """Each key of `values` → (the name its kind was found by, the kind)."""
    aliases: dict[str, list[str]] = {}
    for common, attribute in attribute_map.items():
        aliases.setdefault(attribute, []).append(common)
        aliases.setdefault(common, []).append(attribute)
    found = {}
    for key in values:
        names = [key, *aliases.get(key, [])]
        found[key] = next(((n, k) for n in names if (k := kind_of(n))), (key, None))
    return found


def _sub_map(value: Mapping[str, Any], attribute_maps: Mapping[str, Mapping[str, str]]) -> Mapping[str, str]:
    return attribute_maps.get(str(value.get("model_type")), {})


def _collect_ids(
    values: Mapping[str, Any], attribute_map: Mapping[str, str], attribute_maps: Mapping[str, Mapping[str, str]]
) -> set[int]:
    found: set[int] = set()
    kinds = _kinds(values, attribute_map)
    for key, value in values.items():
        if key in _SKIP:
            continue
        if isinstance(value, Mapping):
            found |= _collect_ids(value, _sub_map(value, attribute_maps), attribute_maps)
        elif kinds[key][1] == "token_id":
            found.update(v for v in (value if isinstance(value, list | tuple) else [value]) if _is_int(v))
    return found


def _token_ids(found: set[int]) -> dict[int, int]:
    moved = sorted(i for i in found if i >= KEPT_IDS)
    free = [i for i in range(KEPT_IDS, TARGETS["vocab"]) if i not in found]
    return {old: free[rank % len(free)] for rank, old in enumerate(moved)}


def _shrink(
    values: Mapping[str, Any],
    attribute_map: Mapping[str, str],
    attribute_maps: Mapping[str, Mapping[str, str]],
    ids: Mapping[int, int],
) -> Values:
    kinds = _kinds(values, attribute_map)
    out: Values = {}
    for key, value in values.items():
        kind = kinds[key][1]
        if key in _SKIP or key.startswith("_"):
            out[key] = value
        elif isinstance(value, Mapping):
            out[key] = _shrink(value, _sub_map(value, attribute_maps) if _is_config(value) else {}, attribute_maps, ids)
        elif kind == "token_id":
            out[key] = _map_ids(value, ids)
        elif kind in TARGETS and _is_int(value):
            out[key] = min(value, TARGETS[kind])
        elif kind in TARGETS and _ints(value):  # per stage; layers per stage are a stage's depth
            target = TARGETS["stage_depth" if kind == "layers" else kind]
            out[key] = type(value)(min(v, target) for v in value)
        else:
            out[key] = value
    _keep_constraints(values, out, kinds)
    return out


def _map_ids(value: Any, ids: Mapping[int, int]) -> Any:
    if isinstance(value, list | tuple):
        return type(value)(_map_ids(v, ids) for v in value)
    return ids.get(value, value) if _is_int(value) else value


def _keep_constraints(before: Mapping[str, Any], out: Values, kinds: Mapping[str, tuple[str, str | None]]) -> None:
    def keys(kind: str, names: tuple[str, ...] = ()) -> list[str]:
        return [k for k, (n, c) in kinds.items() if c == kind and (not names or n in names) and _is_int(out[k])]

    def lists(kind: str) -> list[str]:
        return [k for k, (_, c) in kinds.items() if c == kind and _ints(out[k])]

    hidden = next((out[k] for k in keys("hidden", MAIN_HIDDEN)), None)
    hidden_before = next((before[k] for k in keys("hidden", MAIN_HIDDEN)), None)
    heads = heads_before = None
    for key in keys("heads"):
        if hidden is not None:
            out[key] = _divisor(hidden, out[key])
        if heads is None:
            heads, heads_before = out[key], before[key]
    for key in keys("kv_heads"):
        if heads is not None:
            was = before[key]
            out[key] = heads if was == heads_before else 1 if was == 1 else _divisor(heads, out[key])
    for key in keys("head_dim", MAIN_HEAD_DIM):
        if hidden and heads and hidden_before and heads_before:
            out[key] = _head_dim(before[key], hidden_before, heads_before, hidden, heads)
    depths = lists("stage_depth") + lists("layers")
    widths = lists("hidden")
    if depths and hidden and not widths:  # the stages double the width (Swin): start narrower
        base = next(k for k in keys("hidden", MAIN_HIDDEN))
        out[base] = max(out[base] >> (len(out[depths[0]]) - 1), 8)
    for key in lists("heads"):  # per stage: a power of two, dividing that stage's width
        stages = next((out[w] for w in widths if len(out[w]) == len(out[key])), None)
        base = next((out[k] for k in keys("hidden", MAIN_HIDDEN)), HIDDEN)
        out[key] = type(out[key])(
            _divisor(stages[i] if stages else base << i, 1 << (v.bit_length() - 1)) for i, v in enumerate(out[key])
        )
    patch = next((out[k] for k in keys("patch", ("patch_size",))), None)
    for key in keys("image"):
        if patch:
            out[key] = max(out[key] // patch, 1) * patch
    for key in keys("layers"):
        _follow_layers(before, out, kinds, before[key], out[key])
    head_dim = next((out[k] for k in keys("head_dim", MAIN_HEAD_DIM)), None) or (hidden // heads if heads else None)
    for value in out.values():
        if isinstance(value, dict) and not _is_config(value) and _ints(value.get("mrope_section")) and head_dim:
            value["mrope_section"] = _split(head_dim // 2, value["mrope_section"])


def _divisor(whole: int, at_most: int) -> int:
    """The largest divisor of `whole` that is at most `at_most`."""
    return next(d for d in range(max(min(at_most, whole), 1), 0, -1) if whole % d == 0)


def _head_dim(was: Any, hidden_was: int, heads_was: int, hidden: int, heads: int) -> Any:
    """head_dim keeping its ratio to hidden size over heads (1 for most, 2 for Mamba2's expand) when it can."""
    if not _is_int(was):
        return was
    new = Fraction(was * heads_was, hidden_was) * hidden / heads
    return int(new) if new.denominator == 1 and new >= 2 and int(new) % 2 == 0 else max(hidden // heads, 2)


def _follow_layers(
    before: Mapping[str, Any], out: Values, kinds: Mapping[str, tuple[str, str | None]], was: int, now: int
) -> None:
    """Lists per layer get as many entries as the layers, layer indices stay below the count, and counts of some
    of the layers (some_layers) keep their share."""
    if now >= was:
        return
    for key, value in out.items():
        kind = kinds[key][1]
        if kind == "some_layers" and _is_int(value):
            out[key] = min(before[key], was) * now // was
        if kind not in (None, "layers", "intermediate") or not isinstance(value, list | tuple) or key.startswith("_"):
            continue
        total = _repeats(value)
        if total == was:  # GPT-Neo's attention_types: [[["global", "local"], 12]]
            out[key] = [[value[0][0], 1]] if len(value[0][0]) == now else [[value[0][0][:now], 1]]
        elif len(value) == was:
            out[key] = type(value)(value[:now])
        elif _ints(value) and re.search(r"layer|index|indices|indexes", key) and max(value) >= now:
            out[key] = type(value)(dict.fromkeys(min(i * now // was, now - 1) for i in value))


def _repeats(value: Any) -> int | None:
    """The layer count a list of (pattern, repeats) pairs stands for, or None if it is not one."""
    try:
        return sum(len(pattern) * count for pattern, count in value if isinstance(pattern, list) and _is_int(count))
    except (TypeError, ValueError):
        return None


def _split(total: int, parts: list[int]) -> list[int]:
    """`total` split in len(parts) positive integers in the proportions of `parts`."""
    shares = [max(1, total * p // sum(parts)) for p in parts]
    shares[-1] += total - sum(shares)
    return shares


def tiny_config(config_class: type) -> Any:
    """`config_class` made with every size shrunk (see `shrink`)."""
    values = config_class().to_dict()
    shrunk = shrink(values, config_class.attribute_map, _attribute_maps(values))
    return config_class(**_arguments(config_class, values, shrunk))


def _attribute_maps(values: Mapping[str, Any]) -> dict[str, Mapping[str, str]]:
    """The attribute maps of the sub-configs in `values`, by model_type."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    maps: dict[str, Mapping[str, str]] = {}
    for value in values.values():
        if isinstance(value, Mapping):
            model_type = value.get("model_type")
            if model_type in CONFIG_MAPPING:
                maps[model_type] = CONFIG_MAPPING[model_type].attribute_map
            maps.update(_attribute_maps(value))
    return maps


def _parameters(config_class: type) -> set[str] | None:
    """The names `config_class` takes as arguments, its base class's included; None when unknown."""
    from transformers import PretrainedConfig

    try:
        names = set(inspect.signature(config_class).parameters)
    except (TypeError, ValueError):
        return None
    return names | set(inspect.signature(PretrainedConfig).parameters)


def _arguments(config_class: type, values: Mapping[str, Any], shrunk: Mapping[str, Any]) -> Values:
    """The arguments that make `config_class` shrunk: what differs from `values` (what it makes with no arguments),
    among the names it takes, as it spells them (what it does not take, it derives); a sub-config as the arguments
    of its own class."""
    takes = _parameters(config_class)
    aliases = {a: c for c, a in config_class.attribute_map.items()} | dict(config_class.attribute_map)
    arguments: Values = {}
    for key, value in shrunk.items():
        if value == values.get(key):
            continue
        name = key if takes is None or key in takes else aliases.get(key)
        if name is None or (takes is not None and name not in takes):
            continue
        arguments[name] = _sub_arguments(value) if _is_config(value) else value
    return arguments


def _sub_arguments(shrunk: Mapping[str, Any]) -> Values:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    try:
        sub_class = CONFIG_MAPPING[shrunk["model_type"]]
        values = sub_class().to_dict()
    except Exception:  # not a registered config, or one that cannot be made with no arguments: as it is
        return dict(shrunk)
    return {"model_type": shrunk["model_type"], **_arguments(sub_class, values, shrunk)}


def build(cls: type) -> Any:
    """A tiny instance of `cls`, a `PreTrainedModel` subclass, from its own config class shrunk; same weights on
    every call. Raises CouldNotBuild when it cannot, or when the result is not tiny (MAX_PARAMETERS, MAX_SECONDS)."""
    import torch

    from compat_matrix.factory import SEED

    start = time.process_time()
    try:
        config = tiny_config(cls.config_class)
        torch.manual_seed(SEED)
        model = cls(config)
    except Exception as exc:
        raise CouldNotBuild(cls, _describe(exc)) from exc
    seconds = time.process_time() - start
    count = parameters(model)
    if count > MAX_PARAMETERS:
        raise CouldNotBuild(cls, f"{count:,} parameters, more than the {MAX_PARAMETERS:,} of a tiny build")
    if seconds > MAX_SECONDS:
        raise CouldNotBuild(cls, f"took {seconds:.1f} s, more than the {MAX_SECONDS:.0f} s of a tiny build")
    return model


def parameters(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())


def _describe(exc: BaseException) -> str:
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
