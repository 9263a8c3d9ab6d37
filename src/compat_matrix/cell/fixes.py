"""The change a Fix proposes, applied, so that it can be verified: an override that transformers calls with
arguments it cannot take (`tie_weights(missing_keys=…, recompute_mapping=…)` on 5.x, `compute_loss(…,
num_items_in_batch=…)` from 4.46), widened to take them, and passing them on to the base implementation it calls
(`super().tie_weights()`, `self.model.gradient_checkpointing_enable(...)`), or dropping them where it calls none.

`widen` does it in place, in the child of the `fixed X` variant. What the override is given and does not take
is kept aside while it runs; a call of the base implementation of the same name in that time (through `super()`,
or on a wrapped model that inherits it) gets what it takes of those arguments, unless the override passed them
itself. Extra positional arguments are named by the base's signature.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
from collections.abc import Callable
from typing import Any

_PASSED: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("compat_matrix_passed", default=None)


def _parameters(function: Callable[..., Any]) -> list[inspect.Parameter]:
    try:
        return list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return []


def split(
    function: Callable[..., Any], base: Callable[..., Any], args: tuple, kwargs: dict
) -> tuple[tuple, dict, dict]:
    """(positional, keyword arguments `function` takes; the rest by the base's names) of a call with `args` and
    `kwargs` (`self` first)."""
    ours, theirs = _parameters(function), _parameters(base)
    kinds = {p.kind for p in ours}
    if inspect.Parameter.VAR_POSITIONAL in kinds:
        kept, extra_positional = args, ()
    else:
        room = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in ours)
        kept, extra_positional = args[:room], args[room:]
    named = {p.name for p in ours if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    if inspect.Parameter.VAR_KEYWORD in kinds:
        taken, extra = dict(kwargs), {}
    else:
        taken = {k: v for k, v in kwargs.items() if k in named}
        extra = {k: v for k, v in kwargs.items() if k not in named}
    positional_names = [p.name for p in theirs if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    for index, value in enumerate(extra_positional, start=len(kept)):
        if index < len(positional_names):
            extra.setdefault(positional_names[index], value)
    return kept, taken, extra


def _passing_on(base: Callable[..., Any]) -> Callable[..., Any]:
    """`base`, given what the override was called with and did not take, where it takes it and was not given it."""
    takes = {p.name for p in _parameters(base) if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    anything = any(p.kind == p.VAR_KEYWORD for p in _parameters(base))

    @functools.wraps(base)
    def passes(*args: Any, **kwargs: Any) -> Any:
        pending = _PASSED.get()
        if pending:
            positional = {p.name for p in _parameters(base)[: len(args)]}
            for name, value in pending.items():
                if (name in takes or anything) and name not in kwargs and name not in positional:
                    kwargs[name] = value
        return base(*args, **kwargs)

    return passes


def widen(cls: type, name: str) -> bool:
    """Make `cls.name` (a plain function the class defines) take what transformers passes it and pass it on to
    the base implementation; False where it cannot (not a plain function, or no base implementation)."""
    function = vars(cls).get(name)
    owner = next((k for k in cls.__mro__[1:] if name in vars(k)), None)
    if not inspect.isfunction(function) or owner is None or not inspect.isfunction(vars(owner).get(name)):
        return False
    base = vars(owner)[name]

    @functools.wraps(function)
    def fixed(*args: Any, **kwargs: Any) -> Any:
        kept, taken, extra = split(function, base, args, kwargs)
        if not extra:
            return function(*kept, **taken)
        token = _PASSED.set(extra)
        try:
            return function(*kept, **taken)
        finally:
            _PASSED.reset(token)

    setattr(owner, name, _passing_on(base))
    setattr(cls, name, fixed)
    return True
