"""Tests written in the spirit of the motivating PR's four, for CharacterCausalLMWrapper's gradient
checkpointing overrides, the way the PR wrote them: two of them its reviewers found could not fail. The matrix
file beside this folder runs them as shipped, without the overrides, and against broken versions of them."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM
from utf8_tokenizer.char_causal_lm import CharacterCausalLMWrapper


@pytest.fixture
def tiny_wrapper():
    """A 2-layer Llama built in code, wrapped: nothing is downloaded."""
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return CharacterCausalLMWrapper(CharacterCausalLMWrapper.config_class(), model=LlamaForCausalLM(config))


class TestGradientCheckpointing:
    def test_enable_reaches_wrapped_model(self, tiny_wrapper):
        assert not tiny_wrapper.model.is_gradient_checkpointing
        tiny_wrapper.gradient_checkpointing_enable()
        assert tiny_wrapper.model.is_gradient_checkpointing

    def test_disable_reaches_wrapped_model(self, tiny_wrapper):
        tiny_wrapper.gradient_checkpointing_enable()
        tiny_wrapper.gradient_checkpointing_disable()
        assert not tiny_wrapper.model.is_gradient_checkpointing

    def test_enable_forwards_kwargs(self, tiny_wrapper):
        # The reviewers' first finding: this only checks that checkpointing is on, not that the kwargs arrived.
        tiny_wrapper.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        assert tiny_wrapper.model.is_gradient_checkpointing

    def test_backward_still_produces_gradients(self, tiny_wrapper):
        # The reviewers' second finding: this parameter gets gradients without passing through the checkpointed
        # model, so a broken checkpointed backward leaves it green.
        tiny_wrapper.gradient_checkpointing_enable()
        tiny_wrapper.train()
        ids = torch.randint(1, 60, (2, 8), generator=torch.Generator().manual_seed(1))
        tiny_wrapper(input_ids=ids, labels=ids).loss.backward()
        assert tiny_wrapper.char_embedding.embedding.bit_proj_w.grad is not None
