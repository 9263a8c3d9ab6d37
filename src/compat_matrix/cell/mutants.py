"""Broken versions of an audited method (mutants), to learn which of a user's tests would notice a broken
override.

A mutant is built from the implementation it breaks (`base`, the function that runs with the override deleted)
and replaces the audited method on the subject class, in a child process of its own. For the gradient
checkpointing switches, the mutants are the mistakes the built-in probes are proven against (tests/broken_overrides
builds its broken classes from the same functions); for any other method, two generic ones.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from compat_matrix.shared.variants import BROKEN as PREFIX

ENABLE = "gradient_checkpointing_enable"
DISABLE = "gradient_checkpointing_disable"

Make = Callable[[Callable[..., Any]], Callable[..., Any]]


def _checkpointed(instance: Any) -> list[Any]:
    """Every module the switch gave a checkpoint function to."""
    return [m for m in instance.modules() if m is not instance and getattr(m, "_gradient_checkpointing_func", None)]


def does_nothing(base: Callable[..., Any]) -> Callable[..., Any]:
    """A body that does nothing and returns None."""

    def mutant(self: Any, *args: Any, **kwargs: Any) -> None:
        return None

    return mutant


def drops_keyword_arguments(base: Callable[..., Any]) -> Callable[..., Any]:
    """Calls the base implementation, but without any of the caller's keyword arguments."""

    @functools.wraps(base)
    def mutant(self: Any, *args: Any, **kwargs: Any) -> Any:
        return base(self, *args)

    return mutant


def flags_wrapper_only(base: Callable[..., Any]) -> Callable[..., Any]:
    """Sets the subject's own `gradient_checkpointing` flag and nothing else."""

    def mutant(self: Any, *args: Any, **kwargs: Any) -> None:
        self.gradient_checkpointing = True

    return mutant


def never_recomputes(base: Callable[..., Any]) -> Callable[..., Any]:
    """Switches checkpointing on, then makes every layer call its forward directly: nothing is recomputed."""

    @functools.wraps(base)
    def mutant(self: Any, *args: Any, **kwargs: Any) -> Any:
        done = base(self, *args, **kwargs)
        for layer in _checkpointed(self):
            layer._gradient_checkpointing_func = lambda function, *a, **k: function(*a)
        return done

    return mutant


def cuts_graph(base: Callable[..., Any]) -> Callable[..., Any]:
    """Switches checkpointing on, then detaches every checkpointed layer's inputs: no gradient flows back."""

    @functools.wraps(base)
    def mutant(self: Any, *args: Any, **kwargs: Any) -> Any:
        done = base(self, *args, **kwargs)
        for layer in _checkpointed(self):
            checkpointed = layer._gradient_checkpointing_func

            def detached(function: Any, *a: Any, checkpointed: Any = checkpointed, **k: Any) -> Any:
                return checkpointed(function, *(x.detach() if hasattr(x, "detach") else x for x in a), **k)

            layer._gradient_checkpointing_func = detached
        return done

    return mutant


GENERIC: dict[str, Make] = {"does nothing": does_nothing, "drops keyword arguments": drops_keyword_arguments}
SPECIFIC: dict[str, dict[str, Make]] = {
    ENABLE: {
        "drops kwargs": drops_keyword_arguments,
        "flags only the wrapper": flags_wrapper_only,
        "never recomputes": never_recomputes,
        "cuts the graph": cuts_graph,
        "does nothing": does_nothing,
    },
    DISABLE: {"does nothing": does_nothing},
}


def for_method(method: str) -> dict[str, Make]:
    """The mutants of `method`: the specific ones where there are, else the generic ones."""
    return SPECIFIC.get(method, GENERIC)


def variant_names(methods: tuple[str, ...]) -> list[str]:
    return [f"{PREFIX}{method}: {name}" for method in methods for name in for_method(method)]
