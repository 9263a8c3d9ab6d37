"""The variants of a subject class: as shipped, as if the audited methods were deleted, or one of them.

Standard library only; runs inside each cell's environment.

Every variant runs in its own child process, forked after the imports, so the most literal "as if deleted from
its source" is to delete the names from the subject class itself in that child: each then resolves, through the
unchanged bases, to the nearest class after the subject in its MRO that defines it. Nothing else about the
class changes: its name, its other methods (zero-argument `super()` included), `isinstance`, pickling,
`__slots__`, and library code that checks whether a method is overridden all see exactly that class.
"""

from __future__ import annotations

OVERRIDE = "override"
BASE = "base"
WITHOUT = "base without "  # + a method name: that one deleted, the other audited methods kept


class VariantError(ValueError):
    """An audited method that the subject does not define, or that no base class would provide."""


def defining_class(cls: type, name: str, after: type | None = None) -> type | None:
    """The first class in `cls`'s MRO (strictly after `after`, if given) whose own namespace defines `name`."""
    mro = cls.__mro__
    start = mro.index(after) + 1 if after is not None else 0
    return next((klass for klass in mro[start:] if name in vars(klass)), None)


def check(cls: type, methods: tuple[str, ...]) -> None:
    """Raise VariantError unless every audited name is defined by `cls` itself and by some class after it."""
    for name in methods:
        if name not in vars(cls):
            raise VariantError(f"{cls.__qualname__} does not define {name!r} itself; nothing to delete")
        if defining_class(cls, name, after=cls) is None:
            raise VariantError(f"no base class of {cls.__qualname__} defines {name!r}; deleting it leaves nothing")


def names(methods: tuple[str, ...], per_method: bool = False) -> list[str]:
    """The variants to run: as shipped and with every audited method deleted; with `per_method` (and more than
    one method), also one per method with only that one deleted."""
    single = [WITHOUT + m for m in methods] if per_method and len(methods) > 1 else []
    return [OVERRIDE, BASE, *single]


def deleted(variant: str, methods: tuple[str, ...]) -> tuple[str, ...]:
    """The audited names that `variant` deletes from the subject class."""
    if variant == OVERRIDE:
        return ()
    if variant == BASE:
        return methods
    if variant.startswith(WITHOUT):
        return (variant.removeprefix(WITHOUT),)
    raise VariantError(f"unknown variant {variant!r}")


def apply(cls: type, variant: str, methods: tuple[str, ...]) -> type:
    """Turn `cls` into `variant`, in place. Only ever called in a child process that owns its copy of the class."""
    check(cls, methods)
    for name in deleted(variant, methods):
        delattr(cls, name)
    return cls
