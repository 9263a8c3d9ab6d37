"""What a factory of your own may build a subject from (`compat-matrix init --factory-template` writes one that does):
the pieces the default factory uses, from compat_matrix.cell.factory, where the cell runs them. Each imports torch
and transformers only when called.

    tiny_trainer(cls, rows=None)   a Trainer subclass with a tiny model, arguments for two steps on the CPU and `rows`
    tiny_dataset()                 four rows of eight token ids, each its own labels
    tiny_causal_lm(cls=None)       a 2-layer LlamaForCausalLM (or `cls`, built like it)
    tiny_tokenizer()               a word-level tokenizer over its vocabulary (`t3` … `t63`), made in code
    default_factory(cls)           what builds a subject that names no factory
"""

from compat_matrix.cell.factory import SEED, default_factory, tiny_causal_lm, tiny_dataset, tiny_tokenizer, tiny_trainer

__all__ = ["SEED", "default_factory", "tiny_causal_lm", "tiny_dataset", "tiny_tokenizer", "tiny_trainer"]
