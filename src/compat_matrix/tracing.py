"""Which functions ran: the code objects of audited methods, and a cheap hook on entering them.

Standard library only; runs inside each cell's environment. Python calls a trace function on entering every
frame; returning None from it asks for no line events, so the cost is one Python call per frame entered
(about 20,000 for a `Trainer` step, a few milliseconds). Watching code objects rather than wrapping functions
leaves every class untouched: identity checks such as transformers' `_is_overridden` see exactly what ships.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

OnCall = Callable[[types.FrameType], None]
Watched = dict[str, tuple[types.CodeType, ...]]  # a name, and the code objects that run when it is called

_WATCHED: dict[types.CodeType, list[OnCall]] = {}


def bodies(attribute: Any) -> tuple[types.CodeType, ...]:
    """The code objects that run when `attribute` (a class attribute, as `vars(cls)` holds it) is called or read:
    the innermost function of a decorator chain, the functions of a classmethod, staticmethod or property.
    A generic decorator's own wrapper is left out: it is shared with every other function it decorates."""
    if isinstance(attribute, (classmethod, staticmethod)):
        return bodies(attribute.__func__)
    if isinstance(attribute, property):
        return tuple(code for f in (attribute.fget, attribute.fset, attribute.fdel) if f for code in bodies(f))
    if callable(attribute) and not isinstance(attribute, type):
        function = inspect.unwrap(attribute)
        code = getattr(function, "__code__", None)
        return (code,) if isinstance(code, types.CodeType) else ()
    return ()


def _trace(frame: types.FrameType, event: str, arg: Any) -> None:
    for on_call in _WATCHED.get(frame.f_code, ()):
        on_call(frame)


@contextlib.contextmanager
def on_call(codes: tuple[types.CodeType, ...], callback: OnCall) -> Iterator[None]:
    """Call `callback(frame)` whenever a frame of one of `codes` starts, while the block runs. Nests."""
    for code in codes:
        _WATCHED.setdefault(code, []).append(callback)
    previous = sys.gettrace()
    sys.settrace(_trace)
    try:
        yield
    finally:
        sys.settrace(previous)
        for code in codes:
            _WATCHED[code].remove(callback)
            if not _WATCHED[code]:
                del _WATCHED[code]


def called_on(frame: types.FrameType, owner: type | None) -> bool:
    """Whether the frame's first argument (`self`, or `cls` of a classmethod) is `owner` or an instance of it. A
    base implementation's code also runs for other objects (the wrapped model inherits it too); those calls are
    not calls of the audited method on the subject. `owner` None: any call counts (a staticmethod's)."""
    code = frame.f_code
    if owner is None or not code.co_argcount:
        return True
    first = frame.f_locals.get(code.co_varnames[0])
    return isinstance(first, owner) or (isinstance(first, type) and issubclass(first, owner))


@contextlib.contextmanager
def reached(names: Watched, owner: type | None = None, anyone: frozenset[str] = frozenset()) -> Iterator[set[str]]:
    """The names (of `names`, each with its code objects) whose code ran, on `owner` if given (for the names in
    `anyone`, a staticmethod's, on anything), during the block. A name without code to watch (a nested class, an
    attribute) cannot be told to have run or not: it counts as reached."""
    seen: set[str] = {name for name, codes in names.items() if not codes}

    def hit(name: str) -> OnCall:
        who = None if name in anyone else owner
        return lambda frame: seen.add(name) if called_on(frame, who) else None

    with contextlib.ExitStack() as stack:
        for name, codes in names.items():
            stack.enter_context(on_call(codes, hit(name)))
        yield seen
