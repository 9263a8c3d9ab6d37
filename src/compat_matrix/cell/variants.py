"""Turning the subject class into a variant, in place, in the child that runs it: delete audited names, put a
broken version of one in its place, or widen one as a Fix proposes (compat_matrix.shared.variants names the
variants)."""

from __future__ import annotations

from compat_matrix.cell import fixes, mutants
from compat_matrix.shared.variants import (
    BASE,
    FIXED,
    ONLY,
    OVERRIDE,
    TOGETHER,
    WITHOUT,
    Variant,
    VariantError,
    broken_parts,
    names,
)

__all__ = [
    "BASE",
    "FIXED",
    "ONLY",
    "OVERRIDE",
    "TOGETHER",
    "WITHOUT",
    "Variant",
    "VariantError",
    "apply",
    "check",
    "defining_class",
    "names",
]


def defining_class(cls: type, name: str, after: type | None = None) -> type | None:
    """The first class in `cls`'s MRO (strictly after `after`, if given) whose own namespace defines `name`."""
    mro = cls.__mro__
    start = mro.index(after) + 1 if after is not None else 0
    return next((klass for klass in mro[start:] if name in vars(klass)), None)


def check(cls: type, methods: tuple[str, ...]) -> None:
    """Raise VariantError unless every audited name is defined by `cls` itself."""
    for name in methods:
        if name not in vars(cls):
            raise VariantError(f"{cls.__qualname__} does not define {name!r} itself; nothing to delete")


def apply(cls: type, variant: str, methods: tuple[str, ...]) -> type:
    """Turn `cls` into `variant`, in place: delete names, or put a broken version (a mutant) of one in its place.
    Only ever called in a child process that owns its copy of the class."""
    check(cls, methods)
    chosen = Variant(variant)
    if chosen.broken:
        method, name = broken_parts(variant)
        base = vars(defining_class(cls, method, after=cls))[method]
        setattr(cls, method, mutants.for_method(method)[name](base))
        return cls
    if chosen.name.startswith(FIXED):
        if not fixes.widen(cls, chosen.method):
            raise VariantError(f"{cls.__qualname__}.{chosen.method} cannot be widened: not a function of its own")
        return cls
    for name in chosen.deleted(methods):
        delattr(cls, name)
    return cls
