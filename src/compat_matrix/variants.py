"""The two variants of a subject class: as shipped, and as if the audited methods were deleted from its source.

Standard library only; runs inside each cell's environment.

Deleting a method from a class's source means: the class is created again from the same body minus those names.
So the base variant is a new class with the subject's name, bases and metaclass, built from the subject's own
namespace without the audited names. Each audited name then resolves, through the unchanged bases, to the
nearest class after the subject in its MRO that defines it; library code that compares the attribute with the
base class's sees no override. Functions whose body uses zero-argument `super()` (or `__class__`) close over the
class they were defined in; they are copied with that cell pointing at the new class, as the compiler would have
done, so `super()` keeps working and the original class is untouched.
"""

from __future__ import annotations

import types
from typing import Any

OVERRIDE = "override"
BASE = "base"

# Created per class by `type` itself; copying them into a new class would shadow the new class's own.
_TYPE_MANAGED = frozenset({"__dict__", "__weakref__"})


class VariantError(ValueError):
    """An audited method that the subject does not define, or that no base class would provide."""


def defining_class(cls: type, name: str, after: type | None = None) -> type | None:
    """The first class in `cls`'s MRO (strictly after `after`, if given) whose own namespace defines `name`."""
    mro = cls.__mro__
    start = mro.index(after) + 1 if after is not None else 0
    return next((klass for klass in mro[start:] if name in vars(klass)), None)


def base_variant(cls: type, methods: tuple[str, ...]) -> type:
    """`cls` as if `methods` had been deleted from its class body."""
    for name in methods:
        if name not in vars(cls):
            raise VariantError(f"{cls.__qualname__} does not define {name!r} itself; nothing to delete")
        if defining_class(cls, name, after=cls) is None:
            raise VariantError(f"no base class of {cls.__qualname__} defines {name!r}; deleting it leaves nothing")
    namespace = {key: value for key, value in vars(cls).items() if key not in methods and key not in _TYPE_MANAGED}
    rebuilt = _rebuild(cls, namespace)
    for key, value in namespace.items():
        rebound = _rebind_class_cell(value, cls, rebuilt)
        if rebound is not value:
            setattr(rebuilt, key, rebound)
    return rebuilt


def _rebuild(cls: type, namespace: dict[str, Any]) -> type:
    # `__init_subclass__` and the metaclass run again, exactly as they would on a re-import of the edited source.
    return types.new_class(cls.__name__, cls.__bases__, {"metaclass": type(cls)}, lambda ns: ns.update(namespace))


def _rebind_class_cell(value: Any, old: type, new: type) -> Any:
    """A copy of `value` whose `__class__` cell names `new` instead of `old`; `value` itself if it has none."""
    if isinstance(value, types.FunctionType):
        return _rebind_function(value, old, new)
    if isinstance(value, (staticmethod, classmethod)):
        inner = _rebind_class_cell(value.__func__, old, new)
        return value if inner is value.__func__ else type(value)(inner)
    if isinstance(value, property):
        parts = [_rebind_class_cell(f, old, new) for f in (value.fget, value.fset, value.fdel)]
        if all(p is f for p, f in zip(parts, (value.fget, value.fset, value.fdel), strict=True)):
            return value
        return property(*parts, value.__doc__)
    return value


def _rebind_function(func: types.FunctionType, old: type, new: type) -> types.FunctionType:
    freevars = func.__code__.co_freevars
    if "__class__" not in freevars:
        return func
    index = freevars.index("__class__")
    if func.__closure__[index].cell_contents is not old:
        return func
    closure = list(func.__closure__)
    closure[index] = types.CellType(new)
    copy = types.FunctionType(func.__code__, func.__globals__, func.__name__, func.__defaults__, tuple(closure))
    copy.__kwdefaults__ = func.__kwdefaults__
    copy.__dict__.update(func.__dict__)
    copy.__qualname__ = func.__qualname__
    copy.__doc__ = func.__doc__
    copy.__annotations__ = func.__annotations__
    copy.__module__ = func.__module__
    return copy


def variant_classes(cls: type, methods: tuple[str, ...]) -> dict[str, type]:
    """Both variants, keyed by variant name."""
    return {OVERRIDE: cls, BASE: base_variant(cls, methods)}
