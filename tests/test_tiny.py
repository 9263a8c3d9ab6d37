"""The rules that shrink a config, on plain dicts shaped like `config.to_dict()`: no torch, no transformers."""

from __future__ import annotations

import pickle

import pytest

from compat_matrix.cell import shrink as rules
from compat_matrix.cell import tiny
from compat_matrix.cell.shrink import TARGETS, shrink

LLAMA = {
    "model_type": "llama",
    "vocab_size": 32000,
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 4096,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": None,
    "rms_norm_eps": 1e-6,
    "hidden_act": "silu",
    "id2label": {"0": "LABEL_0", "1": "LABEL_1"},
}


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("hidden_size", "hidden"),
        ("d_model", "hidden"),
        ("embed_dim", "hidden"),
        ("text_hidden_size", "hidden"),
        ("hidden_sizes", "hidden"),
        ("conv_dim", "hidden"),
        ("out_channels", "hidden"),
        ("projection_dim", "hidden"),
        ("intermediate_size", "intermediate"),
        ("encoder_ffn_dim", "intermediate"),
        ("d_ff", "intermediate"),
        ("num_attention_heads", "heads"),
        ("encoder_attention_heads", "heads"),
        ("n_head", "heads"),
        ("num_key_value_heads", "kv_heads"),
        ("num_key_value_heads_per_layer", "kv_heads"),
        ("head_dim", "head_dim"),
        ("qk_rope_head_dim", "head_dim"),
        ("d_kv", "head_dim"),
        ("num_hidden_layers", "layers"),
        ("n_layer", "layers"),
        ("decoder_layers", "layers"),
        ("depth", "layers"),
        ("depths", "stage_depth"),
        ("max_window_layers", "some_layers"),
        ("vocab_size", "vocab"),
        ("codebook_size", "vocab"),
        ("max_position_embeddings", "positions"),
        ("n_positions", "positions"),
        ("sliding_window", "window"),
        ("image_size", "image"),
        ("patch_size", "patch"),
        ("num_local_experts", "experts"),
        ("n_routed_experts", "experts"),
        ("num_experts_per_tok", "experts_per_token"),
        ("kv_lora_rank", "rank"),
        ("num_groups", "groups"),
        ("depth_multiplier", "width_scale"),
        ("bos_token_id", "token_id"),
        ("image_token_index", "token_id"),
        ("pad_index", "token_id"),
        # not sizes: they must keep matching the data or the code
        ("num_channels", None),
        ("kernel_size", None),
        ("conv_stride", None),
        ("rms_norm_eps", None),
        ("num_labels", None),
        ("layer_types", None),
    ],
)
def test_kind_of(name: str, kind: str | None) -> None:
    assert rules.kind_of(name) == kind


def test_a_llama_config_shrinks_to_the_targets_and_keeps_the_rest() -> None:
    small = shrink(LLAMA)
    assert small == {
        **LLAMA,
        "vocab_size": TARGETS["vocab"],
        "hidden_size": TARGETS["hidden"],
        "intermediate_size": TARGETS["intermediate"],
        "num_hidden_layers": TARGETS["layers"],
        "num_attention_heads": TARGETS["heads"],
        "num_key_value_heads": 1,
        "head_dim": TARGETS["hidden"] // TARGETS["heads"],
        "max_position_embeddings": TARGETS["positions"],
    }


def test_shrinking_does_not_change_its_input() -> None:
    before = repr(LLAMA)
    shrink(LLAMA)
    assert repr(LLAMA) == before


def test_sizes_already_small_stay() -> None:
    values = {"hidden_size": 16, "num_attention_heads": 2, "num_hidden_layers": 1, "vocab_size": 99}
    assert shrink(values) == values


def test_the_attribute_map_names_the_sizes() -> None:
    gpt2 = {"n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024, "vocab_size": 50257}
    amap = {"hidden_size": "n_embd", "num_attention_heads": "n_head", "num_hidden_layers": "n_layer"}
    assert shrink(gpt2, amap) == {"n_embd": 32, "n_head": 2, "n_layer": 2, "n_positions": 128, "vocab_size": 256}
    # and the other way round: Flaubert's common name is the attribute, its alias the odd one
    flaubert = {"vocab_size": 30145, "emb_dim": 2048, "bos_index": 0, "eos_index": 1}
    assert shrink(flaubert, {"n_words": "vocab_size", "bos_index": "bos_token_id"})["vocab_size"] == 256


@pytest.mark.parametrize(
    ("heads", "kv_heads", "expected_kv"),
    [
        (32, 8, 1),  # grouped-query attention stays grouped
        (32, 32, 2),  # multi-head attention stays multi-head: as many key-value heads as heads
        (32, 1, 1),  # multi-query attention stays multi-query
    ],
)
def test_key_value_heads_divide_the_heads(heads: int, kv_heads: int, expected_kv: int) -> None:
    small = shrink({**LLAMA, "num_attention_heads": heads, "num_key_value_heads": kv_heads})
    assert small["num_key_value_heads"] == expected_kv
    assert small["num_attention_heads"] % small["num_key_value_heads"] == 0


@pytest.mark.parametrize(
    ("hidden", "heads", "head_dim", "expected"),
    [
        (4096, 32, 128, 16),  # head_dim = hidden / heads, as most models have it
        (8192 // 2, 128, 64, 32),  # Mamba2: heads * head_dim = 2 * hidden (expand 2): the ratio is kept
        (3072, 16, 256, 16),  # Gemma: a ratio (4/3) that does not fit: hidden / heads
    ],
)
def test_head_dim_keeps_its_ratio_to_the_hidden_size_over_the_heads(
    hidden: int, heads: int, head_dim: int, expected: int
) -> None:
    small = shrink({"hidden_size": hidden, "num_attention_heads": heads, "head_dim": head_dim})
    assert small["head_dim"] == expected


def test_heads_divide_a_hidden_size_that_stays_small() -> None:
    small = shrink({"hidden_size": 6, "num_attention_heads": 4})
    assert small == {"hidden_size": 6, "num_attention_heads": 2}


def test_token_ids_stay_inside_the_vocabulary_and_distinct() -> None:
    llava = {
        "image_token_index": 32000,
        "text_config": {"model_type": "llama", "vocab_size": 32064, "bos_token_id": 1, "eos_token_id": [2, 32001]},
        "vision_config": {"model_type": "clip_vision_model", "pad_token_id": 32000},
    }
    small = shrink(llava)
    ids = [small["image_token_index"], small["text_config"]["eos_token_id"][1], small["text_config"]["bos_token_id"]]
    assert all(i < small["text_config"]["vocab_size"] for i in ids)
    assert len(set(ids)) == 3
    assert small["vision_config"]["pad_token_id"] == small["image_token_index"]  # one id, one slot everywhere


def test_sub_configs_shrink_with_their_own_attribute_maps() -> None:
    values = {"model_type": "vlm", "text_config": {"model_type": "gpt2", "n_embd": 768, "n_layer": 12}}
    small = shrink(values, {}, {"gpt2": {"hidden_size": "n_embd"}})
    assert small["text_config"] == {"model_type": "gpt2", "n_embd": 32, "n_layer": 2}


def test_per_layer_lists_follow_the_layers_keeping_every_kind() -> None:
    layer_types = ["sliding_attention"] * 5 + ["full_attention"]
    values = {**LLAMA, "num_hidden_layers": 6, "layer_types": layer_types, "no_rope_layers": [1, 1, 1, 0, 1, 1]}
    small = shrink(values)
    assert small["num_hidden_layers"] == 2
    assert small["layer_types"] == ["sliding_attention", "full_attention"]
    assert small["no_rope_layers"] == [1, 0]


def test_layer_indices_stay_below_the_layer_count() -> None:
    small = shrink({"depth": 12, "global_attn_indexes": [2, 5, 8, 11]})
    assert small["global_attn_indexes"] == [0, 0, 1, 1]


def test_gpt_neo_attention_types_add_up_to_the_layers() -> None:
    small = shrink({"num_layers": 24, "attention_types": [[["global", "local"], 12]]})
    assert small["attention_types"] == [[["global", "local"], 1]]


def test_backbone_outputs_stay_distinct_stages() -> None:
    dinov2 = {
        "num_hidden_layers": 12,
        "out_indices": [9, 10, 11, 12],
        "out_features": [f"stage{i}" for i in range(9, 13)],
    }
    small = shrink(dinov2)
    assert small == {
        "num_hidden_layers": 4,
        "out_indices": [1, 2, 3, 4],
        "out_features": ["stage1", "stage2", "stage3", "stage4"],
    }


def test_a_share_of_the_layers_keeps_its_share() -> None:
    gemma3n = {"num_hidden_layers": 30, "num_kv_shared_layers": 15, "attn_layer_period": 6}
    assert shrink(gemma3n) == {"num_hidden_layers": 2, "num_kv_shared_layers": 1, "attn_layer_period": 1}


def test_stages_double_the_width_so_swin_starts_narrower() -> None:
    swin = {"embed_dim": 96, "depths": [2, 2, 6, 2], "num_heads": [3, 6, 12, 24], "num_layers": 4}
    small = shrink(swin, {"num_attention_heads": "num_heads", "num_hidden_layers": "num_layers"})
    assert small["depths"] == [2, 2, 3, 2]
    assert small["num_layers"] == 4  # the number of stages, not of layers
    widths = [small["embed_dim"] << i for i in range(4)]
    assert all(width % heads == 0 for width, heads in zip(widths, small["num_heads"], strict=True))


def test_heads_per_stage_divide_the_widths_per_stage() -> None:
    small = shrink({"embed_dim": [64, 192, 384], "num_heads": [1, 3, 6], "depth": [1, 2, 10]})
    assert small["embed_dim"] == [32, 32, 32]
    assert small["depth"] == [1, 2, 3]
    assert all(32 % h == 0 for h in small["num_heads"])


def test_the_patch_divides_the_image() -> None:
    assert shrink({"image_size": 30, "patch_size": 14}) == {"image_size": 24, "patch_size": 8}


def test_mrope_sections_add_up_to_half_the_head_dim() -> None:
    qwen2_vl = {**LLAMA, "rope_parameters": {"rope_type": "default", "mrope_section": [16, 24, 24]}}
    sections = shrink(qwen2_vl)["rope_parameters"]["mrope_section"]
    assert len(sections) == 3 and sum(sections) == TARGETS["hidden"] // TARGETS["heads"] // 2


def test_reformer_axial_dimensions_add_up_to_the_hidden_size() -> None:
    small = shrink({"hidden_size": 256, "axial_pos_embds_dim": [64, 192]})
    assert sum(small["axial_pos_embds_dim"]) == small["hidden_size"]


def test_width_multipliers_shrink_as_floats() -> None:
    assert shrink({"depth_multiplier": 1.0, "width_coefficient": 2.0}) == {
        "depth_multiplier": 0.25,
        "width_coefficient": 0.25,
    }


def test_smaller_targets_make_it_narrower_still() -> None:
    assert shrink(LLAMA, targets=rules.SMALLER)["hidden_size"] == rules.SMALLER["hidden"]


def test_generation_parameters_every_4x_config_carries_are_no_sizes() -> None:
    """A 4.x config's `to_dict()` holds `top_k=50` (a generation default); shrunk, 4.x's save moves it to the
    generation config and refuses it there. An MoE's experts per token under that name still shrink."""
    config = {"model_type": "llama", "hidden_size": 4096, "top_k": 50, "num_beams": 1}
    assert shrink(config)["top_k"] == 50
    moe = {"model_type": "moe", "hidden_size": 4096, "num_experts": 64, "top_k": 8}
    assert shrink(moe)["top_k"] == TARGETS["experts_per_token"]


def test_labels_names_and_private_keys_stay() -> None:
    values = {"id2label": {"0": "A"}, "_name_or_path": "x", "num_labels": 1000, 7: 4096}
    assert shrink(values) == values


def test_could_not_build_says_what_and_what_to_do() -> None:
    error = tiny.CouldNotBuild("MyModel", "ValueError: no")
    assert str(error) == "could not build MyModel: ValueError: no; write a factory (see README)"


def test_could_not_build_survives_pickling() -> None:
    error = pickle.loads(pickle.dumps(tiny.CouldNotBuild("MyModel", "ValueError: no")))
    assert (error.name, error.why, str(error)) == (
        "MyModel",
        "ValueError: no",
        str(tiny.CouldNotBuild("MyModel", "ValueError: no")),
    )
