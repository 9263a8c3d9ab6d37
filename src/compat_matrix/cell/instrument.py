"""Instrumented copies of audited functions: the same source, compiled again with a call of `hit` before every
statement, swapped in as the function's `__code__`, so that what ran is known without a trace function.

A trace function (`sys.settrace`, all there is before Python 3.12) puts the interpreter in its tracing mode for
every instruction of the program; an instrumented copy costs one call per statement of the audited code alone.
The function object stays the one that ships (identity checks such as transformers' `_is_overridden` see it),
and so do its name, globals, defaults, closure and line numbers; only its code object is new.

A *unit* is one function of the copy: the function itself, and every function or lambda defined inside it (the
hook an override registers is its code too). Each statement of a unit calls `hit(unit, line)` before it runs;
the function itself also calls `hit(unit, 0)` when it starts (after its docstring), which is how a start is told
from a statement. Comprehensions run as part of their statement and are no units of their own.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
import types
from dataclasses import dataclass

HIT = "__compat_matrix_hit__"  # the name the copies call, put among the builtins of the process that runs them


@dataclass(frozen=True)
class Unit:
    """One function of an instrumented copy: its key (`name@line` of its `def`), the file, and each statement's
    first line with its text, in source order."""

    key: str
    file: str
    statements: tuple[tuple[int, str], ...]


@dataclass(frozen=True)
class Copy:
    """What instrumenting one function gave: the new code object of the function itself, and its units by the
    number each one passes to `hit` (the first is the function itself)."""

    code: types.CodeType
    units: dict[int, Unit]


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _source(function: types.FunctionType) -> tuple[ast.AST, int] | None:
    """The function's definition as a tree whose line numbers are the file's, or None without a source."""
    try:
        lines, first = inspect.getsourcelines(function)
    except (OSError, TypeError):
        return None
    text = "".join(lines)
    for source, shift in ((textwrap.dedent(text), 0), ("if 1:\n" + text, 1)):  # a method's body, or a strange indent
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        ast.increment_lineno(tree, first - 1 - shift)
        node = tree.body[0].body[0] if shift else tree.body[0]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == function.__name__:
            return node, first
    return None


def _call(unit: int, line: int, at: ast.AST) -> ast.Expr:
    call = ast.Call(ast.Name(HIT, ast.Load()), [ast.Constant(unit), ast.Constant(line)], [])
    return ast.copy_location(ast.Expr(call), at)


def _is_docstring(statement: ast.stmt) -> bool:
    value = getattr(statement, "value", None)
    return isinstance(statement, ast.Expr) and isinstance(value, ast.Constant) and isinstance(value.value, str)


_BODIES = ("body", "orelse", "finalbody")


def _blocks(statement: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists of a compound statement (if, for, while, with, try, match), in its own frame."""
    found = [getattr(statement, field) for field in _BODIES if getattr(statement, field, None)]
    found += [handler.body for handler in getattr(statement, "handlers", ())]
    return found + [case.body for case in getattr(statement, "cases", ())]


class _Instrument(ast.NodeTransformer):
    """Puts `hit(unit, line)` before every statement of every function in the tree, numbering the units."""

    def __init__(self, file: str, first_unit: int):
        self.file, self.next_unit = file, first_unit
        self.units: dict[int, Unit] = {}

    def _new_unit(self, node: ast.AST, name: str, lines: list[int]) -> int:
        unit = self.next_unit
        self.next_unit += 1
        statements = tuple((line, linecache.getline(self.file, line).strip()) for line in sorted(set(lines)))
        self.units[unit] = Unit(f"{name}@{node.lineno}", self.file, statements)
        return unit

    def _statements(self, body: list[ast.stmt], unit: int) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for statement in body:
            out += [_call(unit, statement.lineno, statement), self._statement(statement, unit)]
        return out

    def _statement(self, statement: ast.stmt, unit: int) -> ast.stmt:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            return self.visit(statement)
        if isinstance(statement, ast.ClassDef):  # its body runs once, with the class statement: its methods are units
            statement.body = [self.visit(s) if isinstance(s, _FUNCTIONS) else s for s in statement.body]
            return statement
        blocks = _blocks(statement)
        if not blocks:
            return self.visit(statement)  # a simple statement: only the lambdas in it change
        for field, value in ast.iter_fields(statement):  # the expressions of the compound statement itself
            if isinstance(value, ast.expr):
                setattr(statement, field, self.visit(value))
        for field in _BODIES:
            if getattr(statement, field, None):
                setattr(statement, field, self._statements(getattr(statement, field), unit))
        for part in (*getattr(statement, "handlers", ()), *getattr(statement, "cases", ())):
            part.body = self._statements(part.body, unit)
        return statement

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
        unit = self._new_unit(node, node.name, [s.lineno for s in _own_statements(node)])
        docstring = node.body[:1] if _is_docstring(node.body[0]) else []
        rest = node.body[len(docstring) :]
        start = _call(unit, 0, node.body[0])
        node.body = [*docstring, start, *self._statements(rest, unit)]
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        node.args = self.visit(node.args)
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        unit = self._new_unit(node, "<lambda>", [node.lineno])
        hit = ast.Call(ast.Name(HIT, ast.Load()), [ast.Constant(unit), ast.Constant(node.lineno)], [])
        pair = ast.Subscript(ast.Tuple([hit, self.visit(node.body)], ast.Load()), ast.Constant(1), ast.Load())
        node.body = ast.copy_location(pair, node.body)
        return node


def _own_statements(function: ast.AST) -> list[ast.stmt]:
    """The statements of a function that run in its own frame, its docstring apart: not those of functions or
    classes inside it (a nested `def` or `class` statement itself is the outer function's)."""
    body = function.body[1:] if _is_docstring(function.body[0]) else function.body
    found: list[ast.stmt] = []
    todo = list(body)
    while todo:
        statement = todo.pop()
        found.append(statement)
        if not isinstance(statement, (*_FUNCTIONS, ast.ClassDef)):
            todo += [s for block in _blocks(statement) for s in block]
    return found


def _factory(node: ast.FunctionDef | ast.AsyncFunctionDef, function: types.FunctionType) -> ast.Module:
    """A module whose one function returns the instrumented function, defined where its free variables are: the
    outer function's locals, and `__class__` in a class of the original's name (so that private names are mangled
    as in the original, and zero-argument `super()` finds its class), a name global in the factory as it is in the
    original's module."""
    free = function.__code__.co_freevars
    node.decorator_list = []
    inner: ast.stmt = node
    owner = function.__qualname__.split(".")[-2] if "." in function.__qualname__ else None
    if owner and owner != "<locals>":
        inner = ast.ClassDef(owner, [], [], [node], [])
    cells = [
        ast.Assign([ast.Name(name, ast.Store())], ast.Constant(None), lineno=node.lineno)
        for name in free
        if name != "__class__"
    ]
    get = ast.Attribute(ast.Name(owner, ast.Load()), node.name, ast.Load()) if inner is not node else None
    returned = ast.Return(get if get is not None else ast.Name(node.name, ast.Load()))
    # The class's own name, read in a method (`super(Owner, self)`, `type(self).x is Owner.x`), is a global there:
    # so it is here too, not a variable of the factory that the copy would close over.
    named = [ast.Global([owner])] if inner is not node and owner not in free else []
    outer = ast.FunctionDef(
        "__compat_matrix_factory__",
        ast.arguments([], [], None, [], [], None, []),
        [*named, *cells, inner, returned],
        [],
    )
    module = ast.Module([outer], [])
    return ast.fix_missing_locations(module)


def instrument(function: types.FunctionType, first_unit: int) -> Copy | None:
    """An instrumented copy of `function` (its units numbered from `first_unit`), or None where it cannot be made
    (no source, a source that does not compile alone, free variables that do not match)."""
    found = _source(function)
    if found is None:
        return None
    node, _ = found
    file = function.__code__.co_filename
    transformer = _Instrument(file, first_unit)
    node = transformer.visit(node)
    try:
        compiled = compile(_factory(node, function), file, "exec")
    except (SyntaxError, ValueError):
        return None
    factory = next(c for c in compiled.co_consts if isinstance(c, types.CodeType))
    code = _find(factory, function.__code__.co_name)
    if code is None or code.co_freevars != function.__code__.co_freevars:
        return None
    code = _renamed(code, code.co_qualname, function.__code__.co_qualname)
    return Copy(code.replace(co_firstlineno=function.__code__.co_firstlineno), transformer.units)


def _renamed(code: types.CodeType, compiled: str, original: str) -> types.CodeType:
    """`code` and the code inside it with the qualified names of the original (`Subject.hook.<locals>.inner`),
    not of the factory they were compiled in: a nested function's `__qualname__` comes from its code."""
    consts = tuple(_renamed(c, compiled, original) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    qualname = (
        original + code.co_qualname[len(compiled) :] if code.co_qualname.startswith(compiled) else code.co_qualname
    )
    return code.replace(co_consts=consts, co_qualname=qualname)


def _find(code: types.CodeType, name: str) -> types.CodeType | None:
    """The code object named `name` inside `code` (one level of class body allowed)."""
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if const.co_name == name:
                return const
            if found := next((c for c in const.co_consts if isinstance(c, types.CodeType) and c.co_name == name), None):
                return found
    return None
