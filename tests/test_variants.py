"""Variants on plain Python classes, each applied in a forked child as the runner does: no torch needed."""

from __future__ import annotations

import abc
import functools
import pickle
import sys
import tempfile
from pathlib import Path

import pytest

from compat_matrix.cell import tracing, variants
from compat_matrix.cell.forks import forked
from compat_matrix.cell.variants import BASE, ONLY, OVERRIDE, WITHOUT, Variant, VariantError
from compat_matrix.shared.results import OK


def logged(func):
    @functools.wraps(func)
    def wrapper(self, *args, **kwargs):
        return "logged>" + func(self, *args, **kwargs)

    return wrapper


class Root:
    __slots__ = ()
    limit = 1

    class Options:
        level = "root"

    def greet(self):
        return "root"

    def shout(self):
        return "ROOT"

    def wave(self):
        return "root-wave"

    @classmethod
    def kind(cls):
        return "root-kind"

    @staticmethod
    def version():
        return "root-1"

    @property
    def loud(self):
        return "root-loud"


class Middle(Root):
    __slots__ = ()

    def greet(self):
        return "middle>" + super().greet()


class Subject(Middle):
    """A subject whose methods use zero-argument super(), one of them through a functools.wraps decorator."""

    __slots__ = ("payload",)
    limit = 2

    class Options:
        level = "subject"

    def __init__(self, payload="p"):
        self.payload = payload

    def greet(self):
        return "subject>" + super().greet()

    @logged
    def shout(self):
        return "SUBJECT>" + super().shout()

    def uses_greet(self):
        return "via:" + self.greet()

    @logged
    def wave(self):
        return "subject-wave>" + super().wave()

    @classmethod
    def kind(cls):
        return "subject>" + super().kind()

    @staticmethod
    def version():
        return "subject-1"

    @property
    def loud(self):
        return "subject-loud>" + super().shout()

    def __reduce__(self):
        return (Subject, (self.payload,))


def is_overridden(obj, name: str) -> bool:
    """The check transformers makes: is the bound method something other than the base class's function?"""
    return getattr(getattr(obj, name), "__func__", None) is not getattr(Root, name)


def in_child(tmp_path: Path, variant: str, methods: tuple[str, ...], look):
    """Apply `variant` to Subject in a forked child, as the runner does, and return `look(instance)` from it."""
    progress = tmp_path / "progress"
    progress.write_text("variant")
    run = forked(lambda: look(variants.apply(Subject, variant, methods)()), progress, limit=30)
    assert run.status == OK, run.reason
    return run.answer


def test_deleted_method_resolves_to_nearest_class_after_subject(tmp_path):
    assert in_child(tmp_path, BASE, ("greet",), lambda s: s.greet()) == "middle>root"
    assert in_child(tmp_path, OVERRIDE, ("greet",), lambda s: s.greet()) == "subject>middle>root"
    assert Subject().greet() == "subject>middle>root"  # the class in this process is untouched


def test_other_methods_zero_arg_super_and_decorated_methods_still_work(tmp_path):
    def look(s):
        return [s.uses_greet(), s.shout(), s.loud, s.kind()]

    assert in_child(tmp_path, BASE, ("greet",), look) == [
        "via:middle>root",
        "logged>SUBJECT>ROOT",
        "subject-loud>ROOT",
        "subject>root-kind",
    ]


@pytest.mark.parametrize(
    ("name", "read", "expected"),
    [
        ("wave", lambda s: s.wave(), "root-wave"),  # a functools.wraps decorated method that uses super()
        ("kind", lambda s: type(s).kind(), "root-kind"),  # classmethod
        ("version", lambda s: s.version(), "root-1"),  # staticmethod
        ("loud", lambda s: s.loud, "root-loud"),  # property
        ("Options", lambda s: s.Options.level, "root"),  # nested class
    ],
)
def test_every_kind_of_attribute_can_be_deleted(tmp_path, name, read, expected):
    assert in_child(tmp_path, BASE, (name,), read) == expected
    assert in_child(tmp_path, OVERRIDE, (name,), read) != expected


def test_class_identity_isinstance_slots_and_pickling_are_those_of_the_subject(tmp_path):
    def look(s):
        copy = pickle.loads(pickle.dumps(s))
        return {
            "name": type(s).__qualname__,
            "isinstance": isinstance(s, Subject) and type(s) is Subject,
            "slots": not hasattr(s, "__dict__") and s.payload == "p",
            "pickled": type(copy) is Subject and copy.payload == "p" and copy.greet() == "middle>root",
            "overridden": is_overridden(s, "shout"),
        }

    seen = in_child(tmp_path, BASE, ("greet", "shout"), look)
    assert seen == {"name": "Subject", "isinstance": True, "slots": True, "pickled": True, "overridden": False}


def test_per_name_variants_delete_only_that_name_or_all_but_it(tmp_path):
    def look(s):
        return [s.greet(), s.shout()]

    assert variants.names(("greet", "shout"), per_method=True) == [
        *(OVERRIDE, BASE, WITHOUT + "greet", WITHOUT + "shout", ONLY + "greet", ONLY + "shout")
    ]
    assert variants.names(("greet",), per_method=True) == [OVERRIDE, BASE]
    assert in_child(tmp_path, WITHOUT + "greet", ("greet", "shout"), look) == ["middle>root", "logged>SUBJECT>ROOT"]
    assert in_child(tmp_path, WITHOUT + "shout", ("greet", "shout"), look) == ["subject>middle>root", "ROOT"]
    assert in_child(tmp_path, ONLY + "greet", ("greet", "shout"), look) == ["subject>middle>root", "ROOT"]
    assert in_child(tmp_path, ONLY + "shout", ("greet", "shout"), look) == ["middle>root", "logged>SUBJECT>ROOT"]
    assert Variant(ONLY + "greet").reference == BASE and Variant(WITHOUT + "greet").reference == OVERRIDE
    assert Variant(ONLY + "greet").method == Variant("broken greet: does nothing").method == "greet"


def test_the_attribute_as_shipped_is_known_in_every_variant(tmp_path):
    """What the probe `reading` compares: the subject's own `loud` is a property in the variant that deleted it too
    (and the base's a property), so both variants read it the same way."""

    def look(s):
        shipped, now = variants.shipped(Subject, "loud"), vars(Subject).get("loud")
        return [isinstance(shipped, property), shipped.fget.__qualname__, isinstance(now, property)]

    assert in_child(tmp_path, BASE, ("loud",), look) == [True, "Subject.loud", False]
    assert in_child(tmp_path, OVERRIDE, ("loud",), look) == [True, "Subject.loud", True]
    assert variants.shipped(Subject, "greet") is vars(Subject)["greet"] and variants.shipped(Subject, "nothing") is None


def test_a_name_no_base_class_defines_is_deleted_all_the_same(tmp_path):
    """An orphaned override (the release no longer defines what it overrode): its base variant lacks the name."""
    assert in_child(tmp_path, OVERRIDE, ("uses_greet",), lambda s: s.uses_greet()) == "via:subject>middle>root"
    assert in_child(tmp_path, BASE, ("uses_greet",), lambda s: hasattr(s, "uses_greet")) is False


def test_a_name_the_subject_does_not_define_is_refused():
    with pytest.raises(VariantError, match="does not define 'nope' itself"):
        variants.check(Subject, ("nope",))


def test_bodies_are_the_innermost_code_of_functions_decorators_and_descriptors():
    assert tracing.bodies(vars(Subject)["greet"]) == (vars(Subject)["greet"].__code__,)
    assert tracing.bodies(vars(Subject)["wave"]) == (vars(Subject)["wave"].__wrapped__.__code__,)
    assert tracing.bodies(vars(Subject)["kind"]) == (vars(Subject)["kind"].__func__.__code__,)
    assert tracing.bodies(vars(Subject)["loud"]) == (vars(Subject)["loud"].fget.__code__,)
    assert tracing.bodies(vars(Subject)["Options"]) == ()


def test_a_method_under_a_decorator_without_wraps_is_watched_by_its_own_code():
    def bare(func):
        def wrapper(self, *args):
            return func(self, *args)

        return wrapper

    class Decorated:
        @bare
        def get(self):
            return 1

        @bare
        def put(self, value):
            return value

    watched = {name: tracing.bodies(vars(Decorated)[name]) for name in ("get", "put")}
    with tracing.reached(watched, Decorated) as seen:
        Decorated().get()
    assert seen == {"get"}  # the wrapper's code is shared: it would have counted `put` too


def test_reached_names_the_methods_whose_code_ran():
    watched = {name: tracing.bodies(vars(Subject)[name]) for name in ("greet", "wave", "loud")}
    with tracing.reached(watched) as seen:
        Subject().uses_greet()
        Subject().loud  # noqa: B018
    assert seen == {"greet", "loud"}


def test_reached_watches_the_audited_code_alone_where_python_can():
    """From Python 3.12, sys.monitoring reports the start of the watched code objects alone; no trace function makes
    every other frame pay (before 3.12, a trace function is the only way)."""
    watched = {"greet": tracing.bodies(vars(Subject)["greet"])}
    with tracing.reached(watched) as seen:
        traced = sys.gettrace()
        Subject().uses_greet()
    assert seen == {"greet"}
    assert (traced is None) == (sys.version_info >= (3, 12))


def test_reached_counts_a_staticmethod_called_anywhere_and_an_attribute_read_on_the_subject():
    watched = {name: tracing.bodies(vars(Subject)[name]) for name in ("version", "Options", "greet", "limit")}
    static = frozenset({"version"})
    with tracing.reached(watched, Subject, static) as seen:
        Subject.version()
    assert seen == {"version"}  # greet never ran, nothing read Options or limit
    with tracing.reached(watched, Subject, static) as seen:
        assert Subject().limit == 2 and Subject.Options.level == "subject" and Middle.limit == 1
    assert seen == {"Options", "limit"}
    assert vars(Subject)["limit"] == 2 and vars(Subject)["Options"].level == "subject"  # put back as they were
    uses = {"uses_greet": tracing.bodies(vars(Subject)["uses_greet"])}
    with tracing.reached(uses, Subject) as seen:
        Subject.uses_greet(Middle())  # the watched code, but not on a Subject: the wrapped model's, say
    assert seen == set()


def test_a_deleted_attribute_is_watched_where_the_subject_reads_it_from(tmp_path):
    """In the base variant, `limit` comes from Root: its reads on the subject count, those on Root itself do not."""

    def look(s):
        with tracing.reached({"limit": ()}, Subject) as seen:
            assert Root.limit == 1
            first = set(seen)
            assert s.limit == 1
        return [sorted(first), sorted(seen), vars(Root)["limit"]]

    assert in_child(tmp_path, BASE, ("limit",), look) == [[], ["limit"], 1]


class Hub:
    """transformers' stand-in: another library."""

    __module__ = "hub.trainer"

    def compute_loss(self):
        return "hub-loss"

    def log(self):
        return "hub-log"


class AbstractBase(Hub, abc.ABC):
    """The library's abstract base (`BaseTrainer`): it cannot be built, so it is audited through its subclasses."""

    __module__ = "mylib.base"

    @abc.abstractmethod
    def get_default_loss(self): ...

    def compute_loss(self):
        return "base-loss>" + super().compute_loss()

    def log(self):
        return "base-log"


class Concrete(AbstractBase):
    __module__ = "mylib.concrete"

    def get_default_loss(self):
        return "loss"

    def log(self):
        return "concrete-log>" + super().log()


@pytest.mark.parametrize(
    ("variant", "expected"),
    [
        (OVERRIDE, ("base-loss>hub-loss", "concrete-log>base-log")),
        (BASE, ("hub-loss", "base-log")),  # compute_loss deleted where it is defined; log from the subject alone
        (WITHOUT + "compute_loss", ("hub-loss", "concrete-log>base-log")),
        (ONLY + "compute_loss", ("base-loss>hub-loss", "base-log")),
    ],
)
def test_a_name_inherited_from_the_librarys_base_is_deleted_there(tmp_path, variant, expected):
    progress = tmp_path / "progress"
    progress.write_text("variant")

    def look():
        made = variants.apply(Concrete, variant, ("compute_loss", "log"))()
        return made.compute_loss(), made.log()

    run = forked(look, progress, limit=30)
    assert run.status == OK, run.reason
    assert tuple(run.answer) == expected
    assert Concrete().compute_loss() == "base-loss>hub-loss"  # only ever in the child


def test_the_class_a_name_is_deleted_from_is_the_subjects_or_its_librarys():
    assert variants.owner(Concrete, "compute_loss") is AbstractBase and variants.owner(Concrete, "log") is Concrete
    assert variants.base_of(Concrete, "compute_loss") is Hub and variants.base_of(Concrete, "log") is AbstractBase
    assert variants.owner(AbstractBase, "compute_loss") is AbstractBase
    with pytest.raises(VariantError, match="does not define 'compute_loss' itself"):
        variants.check(type("Other", (Hub,), {"__module__": "other"}), ("compute_loss",))  # another library's


def test_a_name_deleted_keeps_its_owner_as_shipped_so_what_runs_is_compared_with_the_base_of_that_owner():
    """Deleting `forward` from a class whose parent (of the same library) defines it too: the parent's forward is
    what runs there, and the base it is compared with stays the one after the class it was deleted from."""
    other = type("Base", (), {"forward": lambda self: "transformers", "__module__": "otherlib.models"})
    parent = type("Parent", (other,), {"forward": lambda self: "parent", "__module__": "mylib.models"})
    child = type("Child", (parent,), {"forward": lambda self: "child", "__module__": "mylib.models"})

    def look():
        variants.apply(child, "base", ("forward",))
        return {
            "runs": child().forward(),
            "owner": variants.owner(child, "forward").__name__,
            "base": variants.base_of(child, "forward").__name__,
        }

    progress = Path(tempfile.mkdtemp()) / "progress"
    progress.write_text("start")
    assert forked(look, progress, limit=30).answer == {"runs": "parent", "owner": "Child", "base": "Parent"}
