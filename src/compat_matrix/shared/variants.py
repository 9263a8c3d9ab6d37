"""The variants of a subject class: as shipped, as if the audited names were deleted, or some of them.

A broken version of an audited method (a mutant, see compat_matrix.cell.mutants) is a variant too.

Every variant runs in its own child process, forked after the imports, so the most literal "as if deleted from
its source" is to delete the names from the subject class itself in that child: each then resolves, through the
unchanged bases, to the nearest class after the subject in its MRO that defines it (or to nothing, where no base
defines it any more: the override is orphaned). Nothing else about the class changes: its name, its other methods
(zero-argument `super()` included), `isinstance`, pickling, `__slots__`, and library code that checks whether a
method is overridden all see exactly that class.

With several audited names, each name X is judged in two contexts: "X deleted, the rest as shipped" against the
class as shipped (`WITHOUT` X), and "X kept, the rest deleted" (`ONLY` X) against the class with all of them
deleted. The second is what tells a needed override from one whose effect another, crashing, override hides.
"""

from __future__ import annotations

from dataclasses import dataclass

OVERRIDE = "override"
BASE = "base"
WITHOUT = "base without "  # + a name: that one deleted, the other audited names kept
ONLY = "only "  # + a name: that one kept, the other audited names deleted
FIXED = "fixed "  # + a name: that one widened to take what transformers passes it, and passing it on (a Fix)
TOGETHER = ", "  # between the names of `base without A, B`: those deleted together


BROKEN = "broken "  # + "<method>: <mutant>": a broken version of that method (a mutant)


class VariantError(ValueError):
    """An audited name that the subject does not define itself: there is nothing to delete."""


@dataclass(frozen=True)
class Variant:
    """One way to run the subject class, by the name the results use for it (`override`, `base`,
    `base without X`, `only X`, `fixed X`, `broken X: mutant`)."""

    name: str

    @property
    def method(self) -> str | None:
        """The audited name a per-name or broken variant is about."""
        for prefix in (WITHOUT, ONLY, FIXED):
            if self.name.startswith(prefix):
                return self.name.removeprefix(prefix)
        return broken_parts(self.name)[0] if self.broken else None

    @property
    def names(self) -> tuple[str, ...]:
        """The audited names a per-name variant is about: one, or for `base without A, B` (the names judged
        redundant one by one, deleted together) several."""
        if self.name.startswith(WITHOUT):
            return tuple(self.name.removeprefix(WITHOUT).split(TOGETHER))
        return (self.method,) if self.method else ()

    @property
    def broken(self) -> bool:
        return self.name.startswith(BROKEN)

    @property
    def reference(self) -> str:
        """The variant this one is compared with: the class as shipped for `base` and `base without X`, the class
        with every audited name deleted for `only X`."""
        return BASE if self.name.startswith(ONLY) else OVERRIDE

    def deleted(self, methods: tuple[str, ...]) -> tuple[str, ...]:
        """The audited names this variant deletes from the subject class."""
        if self.name == OVERRIDE or self.broken or self.name.startswith(FIXED):
            return ()
        if self.name == BASE:
            return methods
        if self.name.startswith(WITHOUT):
            return self.names
        if self.name.startswith(ONLY):
            return tuple(m for m in methods if m != self.method)
        raise VariantError(f"unknown variant {self.name!r}")


def names(methods: tuple[str, ...], per_method: bool = False) -> list[str]:
    """The variants to run: as shipped and with every audited name deleted; with `per_method` (and more than one
    name), also, per name, the variant without it alone and the variant with it alone."""
    if not per_method or len(methods) < 2:
        return [OVERRIDE, BASE]
    return [OVERRIDE, BASE, *(WITHOUT + m for m in methods), *(ONLY + m for m in methods)]


def broken_parts(variant: str) -> tuple[str, str]:
    """(method, mutant name) of a variant named "broken <method>: <mutant>"."""
    method, _, name = variant.removeprefix(BROKEN).partition(": ")
    return method, name
