"""What every probe family needs: a fixed batch, a training step, values that JSON and `==` understand."""

from __future__ import annotations

import math
import re
import tempfile
from collections.abc import Callable
from typing import Any

from compat_matrix.shared.results import failure, failure_in

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_TEMPORARY = re.compile(re.escape(tempfile.gettempdir()) + r"/[\w.-]+")


def batch() -> Any:
    """A fixed batch of token ids valid for a character wrapper and a tiny vocabulary alike."""
    import torch

    generator = torch.Generator().manual_seed(1)
    return torch.randint(1, 60, (2, 8), generator=generator)


def images(config: Any) -> Any:
    """A fixed batch of two images for a vision model: its config's channels, at its image size."""
    import torch

    size = getattr(config, "image_size", 32)
    height, width = size if isinstance(size, (list, tuple)) else (size, size)
    generator = torch.Generator().manual_seed(1)
    return torch.randn(2, getattr(config, "num_channels", 3), height, width, generator=generator)


def training_loss(instance: Any) -> Any:
    """The loss of a forward pass in training mode, with the graph for backward."""
    instance.train()
    ids = batch()
    return instance(input_ids=ids, labels=ids).loss


def train_step(instance: Any) -> None:
    training_loss(instance).backward()


def fraction(count: int, total: int) -> str:
    return f"{count}/{total}"


def stable_text(text: str) -> str:
    """`text` without memory addresses or temporary folders' names, which differ between processes and runs and
    say nothing about behaviour."""
    return _TEMPORARY.sub("<temporary folder>", _ADDRESS.sub("", text))


def jsonable(value: Any) -> Any:
    """`value` as plain JSON: containers kept, a function by its qualified name, anything else by its repr."""
    if isinstance(value, str):
        return stable_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # JSON has no NaN that equals itself
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{getattr(value, '__module__', '?')}.{value.__qualname__}"
    return stable_text(repr(value))


def distinct(items: list[Any]) -> list[Any]:
    """The distinct JSON values of `items`, in a stable order."""
    return [value for _, value in sorted({repr(jsonable(i)): jsonable(i) for i in items}.items())]


def attempt(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`call(...)`, or the text `error: Type: message` if it raises; a probe that found nothing to look at
    (`Inconclusive`) stays so."""
    from compat_matrix.cell.probes import Inconclusive

    try:
        return call(*args, **kwargs)
    except Inconclusive:
        raise
    except Exception as exc:
        return failure(exc)


def failed(value: Any) -> bool:
    return failure_in(value) is not None
