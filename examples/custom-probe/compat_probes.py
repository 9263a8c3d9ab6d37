"""A probe of your own, registered with compat-matrix's `probe` decorator and named in the matrix file.

PEFT trains adapters on a frozen model and relies on `enable_input_require_grads()`, which hooks the module that
`get_input_embeddings()` returns so that the inputs' embeddings require grad. This probe asks whether that works:
an override of `get_input_embeddings` that returns a module the forward pass never calls defeats it.
"""

from __future__ import annotations

import torch

from compat_matrix import probe


@probe(exercises=("get_input_embeddings",), title="frozen model input grads")
def frozen_model_input_grads(build):
    """With every parameter frozen, `enable_input_require_grads()` and one training forward pass: whether the
    loss still requires grad, which it can only through the hook on the module `get_input_embeddings` returns."""
    instance = build()
    for parameter in instance.parameters():
        parameter.requires_grad_(False)
    instance.enable_input_require_grads()
    instance.train()
    ids = torch.randint(1, 60, (2, 8), generator=torch.Generator().manual_seed(1))
    loss = instance(input_ids=ids, labels=ids).loss
    return {"loss_requires_grad": bool(loss.requires_grad)}
