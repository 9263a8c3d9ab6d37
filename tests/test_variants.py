"""Variant construction on plain Python classes: no torch needed."""

from __future__ import annotations

import pytest

from compat_matrix.variants import BASE, OVERRIDE, VariantError, base_variant, variant_classes


class Root:
    def greet(self):
        return "root"

    def shout(self):
        return "ROOT"

    @classmethod
    def kind(cls):
        return "root-kind"


class Middle(Root):
    def greet(self):
        return "middle>" + super().greet()


class Subject(Middle):
    """A subject whose other methods use zero-argument super()."""

    label = "subject"

    def greet(self):
        return "subject>" + super().greet()

    def shout(self):
        return "SUBJECT>" + super().shout()

    def uses_greet(self):
        return "via:" + self.greet()

    @classmethod
    def kind(cls):
        return "subject>" + super().kind()

    @property
    def loud(self):
        return super().shout()


def is_overridden(obj, name: str) -> bool:
    """The check transformers makes: is the bound method something other than the base class's function?"""
    return getattr(getattr(obj, name), "__func__", None) is not getattr(Root, name)


def test_deleted_method_resolves_to_nearest_class_after_subject():
    base = base_variant(Subject, ("greet",))
    assert base().greet() == "middle>root"  # Middle's, not Root's: the nearest class after the subject


def test_other_methods_and_zero_arg_super_still_work():
    base = base_variant(Subject, ("greet",))
    obj = base()
    assert obj.shout() == "SUBJECT>ROOT"
    assert obj.uses_greet() == "via:middle>root"
    assert base.kind() == "subject>root-kind"
    assert obj.loud == "ROOT"


def test_keeps_name_and_attributes_and_leaves_original_alone():
    base = base_variant(Subject, ("greet", "shout"))
    assert (base.__name__, base.__qualname__, base.__module__) == ("Subject", "Subject", __name__)
    assert base.label == "subject" and base.__doc__ == Subject.__doc__
    assert "greet" not in vars(base) and "shout" not in vars(base)
    assert Subject().greet() == "subject>middle>root"
    assert Subject().shout() == "SUBJECT>ROOT"


def test_library_code_sees_no_override():
    base = base_variant(Subject, ("shout",))
    assert is_overridden(Subject(), "shout")
    assert not is_overridden(base(), "shout")


def test_variant_classes_pairs_shipped_and_base():
    variants = variant_classes(Subject, ("greet",))
    assert variants[OVERRIDE] is Subject
    assert variants[BASE]().greet() == "middle>root"


@pytest.mark.parametrize(
    ("methods", "message"),
    [
        (("missing",), "does not define 'missing' itself"),
        (("uses_greet",), "no base class of Subject defines 'uses_greet'"),
    ],
)
def test_bad_methods_are_refused(methods, message):
    with pytest.raises(VariantError, match=message):
        base_variant(Subject, methods)


def test_init_subclass_runs_again_like_a_reimport():
    seen = []

    class Registry:
        def __init_subclass__(cls, **kwargs):
            super().__init_subclass__(**kwargs)
            seen.append(cls)

        def run(self):
            return "registry"

    class Child(Registry):
        def run(self):
            return "child>" + super().run()

    base = base_variant(Child, ("run",))
    assert seen == [Child, base]
    assert base().run() == "registry"
