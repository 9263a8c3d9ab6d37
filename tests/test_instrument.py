"""Instrumented copies of audited code: the same behaviour and the same function, a call per statement of the
audited code alone, and every function inside it (the hook an override registers) watched too."""

from __future__ import annotations

import functools
import inspect
import textwrap

import pytest

from compat_matrix.cell import forks, instrument, tracing


class Base:
    def hook(self, x=None, **options):
        return ("base", x, options)

    def _private(self):
        return "base private"


def deco(function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        return function(*args, **kwargs)

    return wrapper


def make_closure(scale):
    class Closed(Base):
        def hook(self, x=None, **options):
            return super().hook(x * scale, **options)

    return Closed


class Subject(Base):
    @deco
    def hook(self, x=None, flag=False, **options):
        """A docstring, which is no statement."""
        total = 0
        try:
            total += 1
        except ValueError:
            total -= 1
        if flag:
            total = -1
        elif x is None:
            total += 3

        def inner(value):
            return value * 2

        twice = lambda value: value + 1  # noqa: E731
        registered = [inner, twice]
        self.__secret = total
        return super().hook(inner(total) + twice(1), **options), registered

    @property
    def secret(self):
        return self.__secret

    @staticmethod
    def helper(value):
        for item in range(value):
            if item > 5:
                return item
        return None

    @classmethod
    def make(cls):
        return cls()

    def gen(self):
        yield 1
        yield 2

    async def coro(self):
        return 7


class OldStyle(Base):
    """Methods that name their own class, as older libraries write `super`, and as an identity check does."""

    def hook(self, x=None, **options):
        if type(self).hook is OldStyle.hook:
            return super(OldStyle, self).hook(x, **options)  # noqa: UP008  as older libraries write it
        return "replaced"


def in_child(job):
    """Run `job` in a forked child: instrumenting swaps code objects, which must not reach the other tests."""
    return forks.forked(job, _progress(), limit=30).answer


def _progress():
    import tempfile
    from pathlib import Path

    folder = Path(tempfile.mkdtemp())
    (folder / "progress").write_text("start")
    return folder / "progress"


def test_a_copy_behaves_as_the_original_and_the_function_stays_the_same_object():
    def job():
        function = inspect.unwrap(vars(Subject)["hook"])
        before = Subject().hook(None, flag=False, level=3)[0]
        units = tracing.install(vars(Subject)["hook"])
        after_result = Subject().hook(None, flag=False, level=3)[0]
        same_function = inspect.unwrap(vars(Subject)["hook"]) is function
        return {
            "same": before == after_result,
            "result": list(after_result[:2]),
            "identity": same_function,
            "units": [u.key for copy in units.values() for u in copy],
            "source": inspect.getsource(function).splitlines()[1].strip(),
        }

    answer = in_child(job)
    assert answer["same"] and answer["identity"]
    assert answer["result"] == ["base", 10]  # inner(0 + 1 + 3) + twice(1): super() and the closure still work
    assert answer["units"] == ["hook@41", "inner@53", "<lambda>@56"]
    assert answer["source"] == "def hook(self, x=None, flag=False, **options):"  # line numbers are the file's


def test_statements_that_ran_are_told_per_unit_and_a_branch_not_taken_is_missing():
    def job():
        tracing.install(vars(Subject)["hook"])
        watched = {"hook": tracing.bodies(vars(Subject)["hook"])}
        with tracing.statements(watched) as ran:
            _, registered = Subject().hook(None)
        hook_only = dict(ran)
        with tracing.statements(watched) as ran_hook:
            registered[0](2)  # the nested function, called later and outside the method: still its code
        return {"hook": hook_only, "later": ran_hook, "qualname": registered[0].__qualname__}

    answer = in_child(job)
    lines = answer["hook"]["hook"]["hook@41"]
    source = inspect.getsource(Subject).splitlines()
    first = inspect.getsourcelines(Subject)[1]

    def text(line):
        return source[line - first].strip()

    assert "total -= 1" not in {text(line) for line in lines}  # the except branch never ran
    assert "total = -1" not in {text(line) for line in lines}  # nor the flag branch
    assert {"total = 0", "total += 3", "self.__secret = total"} <= {text(line) for line in lines}
    assert answer["hook"]["hook"]["inner@53"] == [54]  # inner ran once inside the method
    assert answer["hook"]["hook"]["<lambda>@56"] == [56]
    assert answer["later"] == {"hook": {"inner@53": [54]}}
    assert answer["qualname"] == "Subject.hook.<locals>.inner"


def test_the_units_list_every_statement_with_its_text():
    copy = instrument.instrument(inspect.unwrap(vars(Subject)["hook"]), 1)
    top = copy.units[1]
    texts = [text for _, text in top.statements]
    assert texts[0] == "total = 0" and "total -= 1" in texts and texts[-1].startswith("return super().hook(")
    assert "A docstring, which is no statement." not in " ".join(texts)
    assert copy.units[2].statements == ((54, "return value * 2"),)


@pytest.mark.parametrize(
    ("attribute", "call", "expected"),
    [
        ("helper", lambda: Subject.helper(8), 6),
        ("make", lambda: type(Subject.make()).__name__, "Subject"),
        ("gen", lambda: list(Subject().gen()), [1, 2]),
        ("secret", lambda: ((s := Subject()).hook(None), s.secret)[1], 4),
    ],
)
def test_static_class_generator_and_property_methods_keep_working(attribute, call, expected):
    def job():
        tracing.install(vars(Subject)[attribute])
        tracing.install(vars(Subject)["hook"])
        watched = {attribute: tracing.bodies(vars(Subject)[attribute])}
        with tracing.reached(watched, Subject, frozenset({"helper"})) as seen, tracing.statements(watched) as ran:
            value = call()
        return {"value": value, "seen": sorted(seen), "ran": bool(ran)}

    answer = in_child(job)
    assert answer == {"value": expected, "seen": [attribute], "ran": True}


def test_a_closure_and_private_names_keep_their_meaning():
    def job():
        closed = make_closure(10)
        tracing.install(vars(closed)["hook"])
        tracing.install(vars(Subject)["hook"])
        subject = Subject()
        subject.hook(None)
        return {"closure": list(closed().hook(2)[:2]), "private": subject._Subject__secret}

    assert in_child(job) == {"closure": ["base", 20], "private": 4}


def test_a_method_that_names_its_own_class_is_copied_and_reads_the_class_of_its_module():
    """`super(OldStyle, self)` and `type(self).hook is OldStyle.hook` name the class as a global of the module: the
    copy does too (not a variable it would close over, which made it impossible to swap in: never watched)."""

    def job():
        units = tracing.install(vars(OldStyle)["hook"])
        with tracing.statements({"hook": tracing.bodies(vars(OldStyle)["hook"])}) as ran:
            result = OldStyle().hook(2, level=1)
        return {"units": [u.key for copy in units.values() for u in copy], "result": list(result), "ran": ran}

    answer = in_child(job)
    line = inspect.getsourcelines(OldStyle.hook)[1]
    assert answer["units"] == [f"hook@{line}"]
    assert answer["result"] == ["base", 2, {"level": 1}]
    assert answer["ran"] == {"hook": {f"hook@{line}": [line + 1, line + 2]}}


def test_what_has_no_source_keeps_its_code_and_is_not_copied():
    namespace: dict = {}
    exec(textwrap.dedent("def made(self):\n    return 1\n"), namespace)
    assert instrument.instrument(namespace["made"], 1) is None


def test_reached_still_sees_a_start_of_a_copy_on_the_subject_only():
    def job():
        tracing.install(vars(Subject)["hook"])
        tracing.install(vars(Base)["hook"])
        watched = {"hook": tracing.bodies(vars(Base)["hook"])}
        with tracing.reached(watched, Subject) as on_subject:
            Base().hook()  # the base's code on another object: not a call on the subject
        with tracing.reached(watched, Subject) as later:
            Subject().hook()  # the override's super() runs the base's code on the subject
        return {"other": sorted(on_subject), "subject": sorted(later)}

    assert in_child(job) == {"other": [], "subject": ["hook"]}


def test_the_copy_costs_the_rest_of_the_program_nothing():
    """No trace function is set while watching copies: the rest of the program runs at its normal speed."""
    import sys

    def job():
        tracing.install(vars(Subject)["hook"])
        watched = {"hook": tracing.bodies(vars(Subject)["hook"])}
        with tracing.reached(watched, Subject), tracing.statements(watched):
            during = sys.gettrace()
            Subject().hook(None)
        return during is None

    assert in_child(job) is True
