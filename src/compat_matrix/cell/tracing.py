"""Which audited names ran, and which of their statements: the code objects of audited methods, a cheap hook on
entering them, and reads of audited class attributes.

Watching code objects rather than wrapping functions leaves methods untouched: identity checks such as
transformers' `_is_overridden` see exactly what ships. An audited function is watched through an instrumented copy
of its code (compat_matrix.cell.instrument, `install`): it calls `hit` when it starts and before each statement,
which costs the rest of the program nothing. Code that has no copy (no source) falls back on `sys.monitoring` from
Python 3.12, which reports the start of the watched code objects alone, and before 3.12 on a trace function
(`sys.settrace`), which puts the interpreter in its tracing mode for every instruction while it is set; neither
reports statements. A class attribute has no code: while a probe runs, it is read through a descriptor (`Read`)
that notes who read it.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

from compat_matrix.cell import instrument
from compat_matrix.cell.instrument import Unit

OnCall = Callable[[types.FrameType], None]
Watched = dict[str, tuple[types.CodeType, ...]]  # a name, and the code objects that run when it is called

_WATCHED: dict[types.CodeType, list[OnCall]] = {}
_TOP: dict[int, types.CodeType] = {}  # a unit of an instrumented copy: the code of the function it belongs to
_UNITS: dict[int, Unit] = {}
_COPIES: dict[types.CodeType, tuple[Unit, ...]] = {}  # each instrumented copy's code, and its units
_LINES: set[tuple[int, int]] | None = None  # while statements are watched: (unit, line) of each that ran


def _hit(unit: int, line: int) -> None:
    """Called by the instrumented copies: before a statement (`line`), or when a function starts (line 0)."""
    if line:
        if _LINES is not None:
            _LINES.add((unit, line))
        return
    callbacks = _WATCHED.get(_TOP[unit])
    if callbacks:
        frame = inspect.currentframe().f_back
        for on_call in callbacks:
            on_call(frame)


def functions(attribute: Any) -> tuple[types.FunctionType, ...]:
    """The functions that run when `attribute` (a class attribute, as `vars(cls)` holds it) is called or read:
    the innermost function of a decorator chain, the functions of a classmethod, staticmethod or property.
    A generic decorator's own wrapper is left out: it is shared with every other function it decorates."""
    if isinstance(attribute, (classmethod, staticmethod)):
        return functions(attribute.__func__)
    if isinstance(attribute, property):
        return tuple(g for f in (attribute.fget, attribute.fset, attribute.fdel) if f for g in functions(f))
    if callable(attribute) and not isinstance(attribute, type):
        function = inspect.unwrap(attribute)
        while (inner := _wrapped_without_wraps(function)) is not None:
            function = inspect.unwrap(inner)
        return (function,) if isinstance(getattr(function, "__code__", None), types.CodeType) else ()
    return ()


def bodies(attribute: Any) -> tuple[types.CodeType, ...]:
    """The code objects that run when `attribute` is called or read (see `functions`)."""
    return tuple(function.__code__ for function in functions(attribute))


def install(attribute: Any) -> dict[str, tuple[Unit, ...]]:
    """Swap an instrumented copy in for the code of each function of `attribute` that has none yet (in the child
    that owns the class: the copies stay for its variants); per function that has one now, by its code object's
    name, its units. A function whose copy cannot be made keeps its code, and is not among them."""
    import builtins

    setattr(builtins, instrument.HIT, _hit)
    found = {}
    for function in functions(attribute):
        code = function.__code__
        if code not in _COPIES:
            copy = instrument.instrument(function, len(_UNITS) + 1)
            if copy is None:
                continue
            function.__code__ = code = copy.code
            _UNITS.update(copy.units)
            _TOP.update(dict.fromkeys(copy.units, code))
            _COPIES[code] = tuple(copy.units.values())
        found[code.co_qualname] = _COPIES[code]
    return found


@contextlib.contextmanager
def statements(names: Watched) -> Iterator[dict[str, dict[str, list[int]]]]:
    """The statements of the watched names' instrumented code that ran during the block (the functions inside
    them too, wherever they ran): per name, per unit key, the lines. Not nested."""
    global _LINES
    owner = {code: name for name, codes in names.items() for code in codes}
    ran: dict[str, dict[str, list[int]]] = {}
    _LINES = set()
    try:
        yield ran
    finally:
        for unit, line in sorted(_LINES):
            name = owner.get(_TOP[unit])
            if name is not None:
                ran.setdefault(name, {}).setdefault(_UNITS[unit].key, []).append(line)
        _LINES = None


def _wrapped_without_wraps(function: Any) -> Any:
    """The one function a decorator's wrapper closes over, for a decorator written without `functools.wraps`: its
    wrapper's code is shared by everything it decorates, so it would count every one of them as run."""
    cells = getattr(function, "__closure__", None) or ()
    found = [cell.cell_contents for cell in cells if inspect.isfunction(_contents(cell))]
    return found[0] if len(found) == 1 else None


def _contents(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None


def _trace(frame: types.FrameType, event: str, arg: Any) -> None:
    for on_call in _WATCHED.get(frame.f_code, ()):
        on_call(frame)


def _started(code: types.CodeType, offset: int) -> None:
    """sys.monitoring's callback on starting or resuming a watched code object, called from its frame."""
    frame = inspect.currentframe().f_back
    for on_call in _WATCHED.get(code, ()):
        on_call(frame)


MONITORING = getattr(sys, "monitoring", None)  # Python 3.12 and later


@functools.cache
def _tool() -> int:
    """The sys.monitoring tool id of this module, taken the first time (the first one no other tool holds), with
    `_started` called on starting or resuming a watched code object (a generator's resumption too, as a trace
    function's `call` event)."""
    free = next(i for i in range(6) if MONITORING.get_tool(i) is None)
    MONITORING.use_tool_id(free, "compat-matrix")
    for event in (MONITORING.events.PY_START, MONITORING.events.PY_RESUME):
        MONITORING.register_callback(free, event, _started)
    return free


@contextlib.contextmanager
def on_call(codes: tuple[types.CodeType, ...], callback: OnCall) -> Iterator[None]:
    """Call `callback(frame)` whenever a frame of one of `codes` starts, while the block runs. Nests."""
    plain = tuple(code for code in codes if code not in _COPIES)  # no instrumented copy calls `_hit` for them
    for code in codes:
        _WATCHED.setdefault(code, []).append(callback)
    if plain and MONITORING is not None:
        events = MONITORING.events.PY_START | MONITORING.events.PY_RESUME
        for code in plain:
            MONITORING.set_local_events(_tool(), code, events)
    elif plain:
        previous = sys.gettrace()
        sys.settrace(_trace)
    try:
        yield
    finally:
        if plain and MONITORING is None:
            sys.settrace(previous)
        for code in codes:
            _WATCHED[code].remove(callback)
            if not _WATCHED[code]:
                del _WATCHED[code]
                if code in plain and MONITORING is not None:
                    MONITORING.set_local_events(_tool(), code, 0)


def called_on(frame: types.FrameType, owner: type | None) -> bool:
    """Whether the frame's first argument (`self`, or `cls` of a classmethod) is `owner` or an instance of it. A
    base implementation's code also runs for other objects (the wrapped model inherits it too); those calls are
    not calls of the audited method on the subject. `owner` None: any call counts (a staticmethod's)."""
    code = frame.f_code
    if owner is None or not code.co_argcount:
        return True
    first = frame.f_locals.get(code.co_varnames[0])
    return isinstance(first, owner) or (isinstance(first, type) and issubclass(first, owner))


class Read:
    """A class attribute, watched: reading it through the class or an instance calls `on_read(owner)` and gives
    the value as before. Only while a probe runs, in a variant's own child."""

    def __init__(self, value: Any, on_read: Callable[[type], None]):
        self.value, self.on_read = value, on_read

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        self.on_read(owner if owner is not None else type(instance))
        getter = getattr(type(self.value), "__get__", None)
        return getter(self.value, instance, owner) if getter else self.value


@contextlib.contextmanager
def reads(cls: type, names: tuple[str, ...], callback: Callable[[str, type], None]) -> Iterator[None]:
    """Call `callback(name, owner)` whenever one of `names`, class attributes of `cls` (its own, or where a variant
    deleted them, its nearest base's), is read through any class, while the block runs; then put them back."""
    kept = {}
    for name in names:
        klass = next((k for k in cls.__mro__ if name in vars(k)), None)
        if klass is not None:
            kept[name] = (klass, vars(klass)[name])
    try:
        for name, (klass, value) in kept.items():
            setattr(klass, name, Read(value, lambda owner, name=name: callback(name, owner)))
        yield
    finally:
        for name, (klass, value) in kept.items():
            setattr(klass, name, value)


@contextlib.contextmanager
def reached(names: Watched, owner: type | None = None, anyone: frozenset[str] = frozenset()) -> Iterator[set[str]]:
    """The names (of `names`, each with its code objects) whose code ran, on `owner` if given (for the names in
    `anyone`, a staticmethod's, on anything), during the block. A name without code to watch (a class attribute, a
    nested class) counts when it is read on `owner` (or, without `owner`, always)."""
    seen: set[str] = set() if owner is not None else {name for name, codes in names.items() if not codes}

    def hit(name: str) -> OnCall:
        who = None if name in anyone else owner
        return lambda frame: seen.add(name) if called_on(frame, who) else None

    def read(name: str, by: type) -> None:
        if owner is not None and issubclass(by, owner):
            seen.add(name)

    attributes = tuple(name for name, codes in names.items() if not codes)
    with contextlib.ExitStack() as stack:
        for name, codes in names.items():
            stack.enter_context(on_call(codes, hit(name)))
        if owner is not None:
            stack.enter_context(reads(owner, attributes, read))
        yield seen
