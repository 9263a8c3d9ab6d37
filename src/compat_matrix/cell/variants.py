"""Turning the subject class into a variant, in place, in the child that runs it: delete audited names, put a
broken version of one in its place, or widen one as a Fix proposes (compat_matrix.shared.variants names the
variants).

An audited name is deleted (or changed) where it is defined: on the subject class, or on the class of the subject's
own library it inherits it from (an abstract base that cannot be built itself, `BaseTrainer`, audited through the
concrete subclasses users build). Deleting it there is what deleting it from the library's source does.
"""

from __future__ import annotations

from typing import Any

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
    "base_of",
    "check",
    "defining_class",
    "library",
    "names",
    "owner",
    "shipped",
]


def defining_class(cls: type, name: str, after: type | None = None) -> type | None:
    """The first class in `cls`'s MRO (strictly after `after`, if given) whose own namespace defines `name`."""
    mro = cls.__mro__
    start = mro.index(after) + 1 if after is not None else 0
    return next((klass for klass in mro[start:] if name in vars(klass)), None)


def library(cls: type) -> str:
    """The top-level package a class belongs to: what `cls`'s own library is, for the classes in its MRO."""
    return cls.__module__.split(".")[0]


_SHIPPED: dict[tuple[type, str], type | None] = {}  # in a variant's child: each audited name's owner as shipped


def owner(cls: type, name: str) -> type | None:
    """The class an audited name of `cls` is deleted from: the nearest in its MRO that defines it, where that is
    `cls` or a class of the same library; None where only classes of other libraries do (nothing of `cls`'s to
    delete). Once a variant is applied, the owner as shipped: deleting the name does not move it to the next
    class of the library that defines it, whose own definition is then what runs."""
    if (cls, name) in _SHIPPED:
        return _SHIPPED[cls, name]
    klass = defining_class(cls, name)
    return klass if klass is not None and library(klass) == library(cls) else None


_AS_SHIPPED: dict[tuple[type, str], Any] = {}  # in a variant's child: each audited name's attribute as shipped


def shipped(cls: type, name: str) -> Any:
    """The attribute `name` as `cls`'s library ships it (what its owner defines), whatever the variant applied since
    deleted or changed; None where nothing of `cls`'s defines it."""
    if (cls, name) in _AS_SHIPPED:
        return _AS_SHIPPED[cls, name]
    klass = owner(cls, name)
    return vars(klass).get(name) if klass is not None else None


def base_of(cls: type, name: str) -> type | None:
    """The class that defines what runs for `name` once it is deleted from its owner: the nearest after the owner
    in `cls`'s MRO; None where none does (the release orphaned it)."""
    return defining_class(cls, name, after=owner(cls, name) or cls)


def check(cls: type, methods: tuple[str, ...]) -> None:
    """Raise VariantError unless every audited name is defined by `cls` or a class of its library it inherits."""
    for name in methods:
        if owner(cls, name) is None:
            raise VariantError(f"{cls.__qualname__} does not define {name!r} itself; nothing to delete")


def apply(cls: type, variant: str, methods: tuple[str, ...]) -> type:
    """Turn `cls` into `variant`, in place: delete names, or put a broken version (a mutant) of one in its place.
    Only ever called in a child process that owns its copy of the class."""
    check(cls, methods)
    for name in methods:
        _AS_SHIPPED.setdefault((cls, name), shipped(cls, name))
    _SHIPPED.update({(cls, name): owner(cls, name) for name in methods})
    chosen = Variant(variant)
    if chosen.broken:
        method, name = broken_parts(variant)
        base = vars(base_of(cls, method))[method]
        setattr(owner(cls, method), method, mutants.for_method(method)[name](base))
        return cls
    if chosen.name.startswith(FIXED):
        if not fixes.widen(owner(cls, chosen.method) or cls, chosen.method):
            raise VariantError(f"{cls.__qualname__}.{chosen.method} cannot be widened: not a function of its own")
        return cls
    owners = [(owner(cls, name), name) for name in chosen.deleted(methods)]  # before any is deleted
    for klass, name in owners:
        delattr(klass, name)
    return cls
