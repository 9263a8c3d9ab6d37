"""The rule book of tiny builds: `shrink`, a pure function over the plain dict a config serializes to
(`config.to_dict()`, sub-configs included), every size of a kind (RULES) brought to its target (TARGETS), the
constraints between sizes kept (heads dividing widths, layer indices, stages)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

# The size a tiny config gets, by kind of size (see RULES); a size already smaller stays as it is.
TARGETS: Mapping[str, float] = {
    "vocab": 256,
    "positions": 128,
    "window": 32,  # sliding windows, attention chunks, context sizes: below the positions
    "heads": 2,
    "kv_heads": 1,
    "head_dim": 16,  # rotary embeddings split it in halves and sections
    "layers": 2,
    "stage_depth": 3,  # blocks per stage (Cvt needs stage i to have more than i)
    "intermediate": 64,
    "hidden": 32,
    "image": 32,
    "patch": 8,
    "experts": 4,
    "experts_per_token": 2,
    "expert_groups": 1,
    "groups": 1,  # group norms and grouped convolutions: 1 divides any width
    "rank": 16,
    "width_scale": 0.25,  # MobileNet's depth_multiplier, EfficientNet's width_coefficient
    "depth_scale": 1.0,
}
# Where the tiny sizes still make too many parameters (widths that double at every stage of a codec): once more,
# narrower.
SMALLER: Mapping[str, float] = {**TARGETS, "hidden": 8, "intermediate": 16, "head_dim": 4, "rank": 4}
# Token ids at or above this move to their own slot below the vocabulary size, so every id stays inside the
# vocabulary and ids that differed still differ.
KEPT_IDS = int(TARGETS["vocab"]) // 2

# (kind, names): the first kind whose pattern matches the whole name. A name is tried as the config spells it,
# then as its attribute_map aliases it (GPT-2's n_embd is hidden_size, Flaubert's vocab_size is n_words), with
# `_per_layer` taken off (a list of that size, one per layer).
RULES: tuple[tuple[str, str], ...] = (
    ("token_id", r"\w*token_(id|ids|index)|(bos|eos|pad|unk|mask|sep|cls)_(id|index)"),
    ("vocab", r"\w*vocab\w*|\w*codebook_size|num_hash_buckets|num_embeds|n_words|n_token|num_\w+_labels"),
    ("positions", r"\w*max_position_embeddings|n_positions|max_\w*pos\w*|\w+_positions|model_max_length"),
    ("window", r"sliding_window(_size)?|attention_window|attention_chunk_size|\w*window_len|context_size"),
    ("kv_heads", r"\w*(key_value_heads|kv_heads)"),
    ("heads", r"\w*(attention_heads|num_heads|n_heads?|_heads)(_per_stage)?"),
    ("head_dim", r"(\w+_)?head_dim|d_kv|d_head|dim_head|attention_head_size|rotary_dim|rotary_emb_dim"),
    ("stage_depth", r"depths|\w+_depths|blocks_per_stage|stage_num_blocks"),
    ("some_layers", r"max_window_layers|num_kv_shared_layers|first_k_dense_replace|\w*layer_(period|offset)"),
    ("layers", r"(?!num_feat_extract)(num_|n_)?(\w+_)?(hidden_)?layers?|depth|\w+_depth"),
    ("experts_per_token", r"num_experts_per_tok(en)?|moe_topk|moe_k|top_k|num_selected_experts"),
    ("experts", r"num_\w*experts|n_\w*experts|\w*_expert_num"),
    ("expert_groups", r"n_group|topk_group|num_expert_group"),
    ("groups", r"\w*groups"),
    ("rank", r"kv_lora_rank|q_lora_rank"),
    ("intermediate", r"\w*intermediate\w*|\w*ffn\w*|d_ff|dff|d_inner|n_inner|\w*dim_ff|\w*feedforward\w*|mlp_dim"),
    ("image", r"\w*image_size|\w*img_size|crop_size"),
    ("patch", r"\w*patch_size"),
    ("width_scale", r"depth_multiplier|\w*width_(multiplier|coefficient|mult\w*)"),
    ("depth_scale", r"depth_coefficient"),
    # Widths of every sort, by the words of their names: hidden_size, d_model, n_embd, embed_dim, conv_dim,
    # hidden_sizes, out_channels, projection_dim, linear_units…
    (
        "hidden",
        r"d_model|n_embd|n_embed|emb_dim|dim|num_filters|\w*(embedding|embed|feature)_(size|dim)"
        r"|(\w+_)?(hidden|dims?|channels?|units|width|latents)(_\w+)?",
    ),
)
_PATTERNS = tuple((kind, re.compile(pattern)) for kind, pattern in RULES)
# Names whose words say width but that count something else, or that must match the data (3 colour channels).
_NOT_SIZES = re.compile(r"\w*(kernel|stride|padding|num_channels|input_channels|in_chans)\w*")
MAIN_HIDDEN = ("hidden_size", "d_model", "n_embd", "embed_dim", "emb_dim", "dim")
MAIN_HEAD_DIM = ("head_dim", "d_kv", "d_head", "dim_head", "attention_head_size")
_INDICES = re.compile(r"ind(ex|exes|ices)\b|ind(ex|exes|ices)_")  # lists of layer indices, by their names
# The kind of encoder an encoder-decoder class gets, by the input it reads (its main_input_name).
ENCODERS = {"input_ids": "bert", "pixel_values": "vit", "inputs": "wav2vec2", "input_values": "wav2vec2"}
_SKIP = frozenset({"id2label", "label2id", "task_specific_params", "transformers_version", "architectures"})
# Generation parameters every 4.x config carries (PretrainedConfig's defaults) whose names a rule takes for a size
# (`top_k` for the experts per token): at that default they are no size. Shrunk, they are a non-default generation
# parameter, which 4.x moves to the generation config on save and then refuses as invalid (top_k without sampling).
GENERATION = {"top_k": 50}

Values = dict[str, Any]
Kinds = Mapping[str, tuple[str, str | None]]  # key → (the name its kind was found by, the kind)


def kind_of(name: str) -> str | None:
    """The kind of size a config name holds (a key of TARGETS, "some_layers" or "token_id"), or None."""
    name = name.removesuffix("_per_layer")
    if _NOT_SIZES.fullmatch(name):
        return None
    return next((kind for kind, pattern in _PATTERNS if pattern.fullmatch(name)), None)


def shrink(
    values: Mapping[str, Any],
    attribute_map: Mapping[str, str] | None = None,
    attribute_maps: Mapping[str, Mapping[str, str]] | None = None,
    targets: Mapping[str, float] = TARGETS,
) -> Values:
    """`values` (a config as `to_dict()` gives it) with every size shrunk to `targets`, sub-configs included.

    `attribute_map` is the config's own (common name → attribute); `attribute_maps` those of its sub-configs,
    by `model_type`. Sizes only shrink, never grow, and keep the constraints transformers checks: the heads
    divide the hidden size, head_dim keeps its ratio to the hidden size over the heads, key-value heads divide
    the heads (and stay equal to them, or 1, if they were), the patch divides the image, per-layer lists follow
    the number of layers (every kind of layer kept), and every token id stays inside the vocabulary."""
    maps = attribute_maps or {}
    ids = _token_ids(_collect_ids(values, attribute_map or {}, maps))
    return _shrink(values, attribute_map or {}, maps, ids, targets)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _ints(value: Any) -> bool:
    return isinstance(value, list | tuple) and bool(value) and all(map(_is_int, value))


def is_config(value: Any) -> bool:
    return isinstance(value, Mapping) and "model_type" in value


def _kinds(values: Mapping[Any, Any], attribute_map: Mapping[str, str]) -> dict[Any, tuple[str, str | None]]:
    aliases: dict[str, list[str]] = {}
    for common, attribute in attribute_map.items():
        aliases.setdefault(attribute, []).append(common)
        aliases.setdefault(common, []).append(attribute)
    found: dict[Any, tuple[str, str | None]] = {}
    for key in values:
        names = [key, *aliases.get(key, [])] if isinstance(key, str) else []
        found[key] = next(((n, k) for n in names if (k := kind_of(n))), (str(key), None))
    return found


def _sub_map(value: Mapping[str, Any], attribute_maps: Mapping[str, Mapping[str, str]]) -> Mapping[str, str]:
    return attribute_maps.get(str(value.get("model_type")), {}) if is_config(value) else {}


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
    free = [i for i in range(KEPT_IDS, int(TARGETS["vocab"])) if i not in found]
    return {old: free[rank % len(free)] for rank, old in enumerate(moved)}


def _shrink(
    values: Mapping[str, Any],
    attribute_map: Mapping[str, str],
    attribute_maps: Mapping[str, Mapping[str, str]],
    ids: Mapping[int, int],
    targets: Mapping[str, float],
) -> Values:
    kinds = _kinds(values, attribute_map)
    out: Values = {}
    for key, value in values.items():
        kind = kinds[key][1]
        target = targets.get(kind or "")
        if key in _SKIP or (isinstance(key, str) and key.startswith("_")) or _generation(key, value):
            out[key] = value
        elif isinstance(value, Mapping):
            out[key] = _shrink(value, _sub_map(value, attribute_maps), attribute_maps, ids, targets)
        elif kind == "token_id":
            out[key] = _map_ids(value, ids)
        elif target is None:
            out[key] = value
        elif (isinstance(target, float) and isinstance(value, float)) or (isinstance(target, int) and _is_int(value)):
            out[key] = min(value, target)
        elif isinstance(target, int) and _ints(value):  # per stage (or per layer); layers per stage: its depth
            most = int(targets["stage_depth"]) if kind == "layers" else target
            out[key] = type(value)(min(v, most) for v in value)
        else:
            out[key] = value
    _keep_constraints(values, out, kinds, targets)
    return out


def _generation(key: Any, value: Any) -> bool:
    """Whether `key` is a generation parameter at the default every 4.x config gives it (GENERATION)."""
    return isinstance(key, str) and key in GENERATION and _is_int(value) and value == GENERATION[key]


def _map_ids(value: Any, ids: Mapping[int, int]) -> Any:
    if isinstance(value, list | tuple):
        return type(value)(_map_ids(v, ids) for v in value)
    return ids.get(value, value) if _is_int(value) else value


def _keep_constraints(before: Mapping[str, Any], out: Values, kinds: Kinds, targets: Mapping[str, float]) -> None:
    def keys(kind: str, names: tuple[str, ...] = ()) -> list[str]:
        return [k for k, (n, c) in kinds.items() if c == kind and (not names or n in names) and _is_int(out[k])]

    def lists(kind: str) -> list[str]:
        return [k for k, (_, c) in kinds.items() if c == kind and _ints(out[k])]

    main = next(iter(keys("hidden", MAIN_HIDDEN)), None)
    hidden, hidden_before = (out[main], before[main]) if main else (None, None)
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
    stages = {len(out[k]) for k in lists("stage_depth") + [k for k in lists("layers") if kinds[k][0] == "depth"]}
    if stages and main and not lists("hidden"):  # each stage doubles the width (Swin): start narrower
        out[main] = max(out[main] >> (max(stages) - 1), 4)
    for key in lists("heads"):  # per stage: a power of two, dividing that stage's width
        widths = next((out[w] for w in lists("hidden") if len(out[w]) == len(out[key])), None)
        base = out[main] if main else int(targets["hidden"])
        out[key] = type(out[key])(
            _divisor(widths[i] if widths else base << i, 1 << (v.bit_length() - 1)) for i, v in enumerate(out[key])
        )
    vocab = next(iter(keys("vocab", ("vocab_size",))), None)
    for key in keys("hidden", ("embedding_size",)):  # OLMo's: the vocabulary padded, not a width (ALBERT's)
        if vocab and _is_int(before[vocab]) and before[key] >= before[vocab]:
            out[key] = out[vocab]
    patch = next((out[k] for k in keys("patch", ("patch_size",))), None)
    for key in keys("image"):
        if patch:
            out[key] = max(out[key] // patch, 1) * patch
    for key in keys("layers"):
        if before[key] in stages:  # a count of stages (Swin's num_layers) is no count of layers
            out[key] = before[key]
        else:
            out[key] = _backbone_outputs(out, before[key], out[key])
            _follow_layers(before, out, kinds, before[key], out[key], stages)
    head_dim = next((out[k] for k in keys("head_dim", MAIN_HEAD_DIM)), None) or (
        hidden // heads if hidden and heads else None
    )
    for key, value in out.items():
        if isinstance(value, dict) and not is_config(value) and _ints(value.get("mrope_section")) and head_dim:
            value["mrope_section"] = _split(head_dim // 2, value["mrope_section"])
        if key == "axial_pos_embds_dim" and _ints(value) and hidden:  # Reformer: they sum to the hidden size
            out[key] = type(value)(_split(hidden, list(value)))


def _divisor(whole: int, at_most: int) -> int:
    """The largest divisor of `whole` that is at most `at_most`."""
    return next(d for d in range(max(min(at_most, whole), 1), 0, -1) if whole % d == 0)


def _head_dim(was: Any, hidden_was: int, heads_was: int, hidden: int, heads: int) -> Any:
    """head_dim keeping its ratio to hidden size over heads (1 for most, 2 for Mamba2's expand) when it can."""
    if not _is_int(was):
        return was
    new = Fraction(was * heads_was, hidden_was) * hidden / heads
    return int(new) if new.denominator == 1 and new >= 2 and int(new) % 2 == 0 else max(hidden // heads, 2)


def _follow_layers(before: Mapping[str, Any], out: Values, kinds: Kinds, was: int, now: int, stages: set[int]) -> None:
    """Lists per layer get as many entries as the layers, with every kind of entry kept; layer indices stay
    below the count; counts of some of the layers keep their share. A list as long as the stages is per stage."""
    if now >= was:
        return
    for key, value in out.items():
        kind = kinds[key][1]
        if kind == "some_layers" and _is_int(value):
            out[key] = max(min(before[key], was) * now // was, 1 if key.endswith("period") else 0)
        if kind == "stage_depth" or key in ("out_indices", "out_features") or str(key).startswith("_"):
            continue  # backbone outputs: _backbone_outputs
        if not isinstance(value, list | tuple) or not value:
            continue
        if _repeats(value) == was:  # GPT-Neo's attention_types: [[["global", "local"], 12]]
            out[key] = [[value[0][0][:now], 1]]
        elif len(value) == was and was not in stages:
            out[key] = type(value)(_truncate(list(value), now))
        elif _ints(value) and _INDICES.search(str(key)) and max(value) >= now:
            out[key] = type(value)(min(i * now // was, now - 1) for i in value)


def _backbone_outputs(out: Values, was: int, now: int) -> int:
    """A backbone's outputs (out_indices, out_features: layers 1 to `was`, 0 the embeddings) stay distinct: as
    many layers as outputs at least, the outputs the last ones. Returns the number of layers."""
    indices = out.get("out_indices")
    if not (_ints(indices) and all(0 < i <= was for i in indices) and list(indices) == sorted(set(indices))):
        return now
    now = max(now, len(indices))
    moved = {i: now - len(indices) + 1 + rank for rank, i in enumerate(indices)}
    out["out_indices"] = type(indices)(moved.values())
    features = out.get("out_features")
    if isinstance(features, list) and features == [f"stage{i}" for i in indices]:
        out["out_features"] = [f"stage{i}" for i in moved.values()]
    return now


def _truncate(value: list[Any], now: int) -> list[Any]:
    """The first `now` entries, ending with one of each kind that would be lost (Gemma 3's full attention
    layer among its sliding ones), when there is room for all."""
    distinct = [v for i, v in enumerate(value) if v not in value[:i]]
    missing = [v for v in distinct if v not in value[:now]]
    if not missing or len(distinct) > now:
        return value[:now]
    return value[: now - len(missing)] + missing


def _repeats(value: Any) -> int | None:
    """The layer count a list of (pattern, repeats) pairs stands for, or None if it is not one."""
    try:
        pairs = [(p, n) for p, n in value if isinstance(p, list) and _is_int(n)]
    except (TypeError, ValueError):
        return None
    return sum(len(p) * n for p, n in pairs) if pairs and len(pairs) == len(value) else None


def _split(total: int, parts: list[int]) -> list[int]:
    """`total` split in len(parts) positive integers in the proportions of `parts`."""
    shares = [max(1, total * p // sum(parts)) for p in parts]
    shares[-1] += total - sum(shares)
    return shares
