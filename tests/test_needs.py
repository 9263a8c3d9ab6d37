"""What a build that failed needs (compat_matrix.cell.needs) and the dataset columns a trainer asks for
(compat_matrix.cell.trial), on plain Python: no torch."""

from __future__ import annotations

import abc
import importlib
import sys

import pytest

from compat_matrix.cell import needs
from compat_matrix.cell.trial import asked_for

LIBRARY = """
try:
    from not_installed_here import IterableDataset
except ImportError:
    pass


class Trainer:
    def __init__(self, data):
        if isinstance(data, IterableDataset):
            raise ValueError("no")
"""


@pytest.fixture
def library(tmp_path, monkeypatch):
    (tmp_path / "mylib_needs.py").write_text(LIBRARY)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module("mylib_needs")
    sys.modules.pop("mylib_needs", None)


def raised(call) -> BaseException:
    try:
        call()
    except Exception as exc:
        return exc
    raise AssertionError("it did not raise")


def test_a_name_error_is_traced_to_the_module_the_raising_file_imports_it_from(library):
    error = raised(lambda: library.Trainer([]))
    assert isinstance(error, NameError) and needs.provider(error) == "not_installed_here"
    assert needs.missing_module(error) == "not_installed_here"
    wrapped = raised(lambda: _wrap(error))
    assert needs.missing_module(wrapped) == "not_installed_here"  # in the chain
    assert needs.missing_module(raised(lambda: {}["x"])) is None


def _wrap(error: BaseException) -> None:
    raise RuntimeError("could not build") from error


def test_an_import_error_names_its_module_and_one_that_is_installed_needs_nothing():
    assert needs.missing_module(ModuleNotFoundError("No module named 'einops_x'", name="einops_x")) == "einops_x"
    assert needs.missing_module(ImportError("cannot import name 'X' from 'json'", name="json")) is None


def test_the_remedy_names_the_extra_that_declares_it(library, monkeypatch):
    requires = ['datasets>=2.19; extra == "train"', "torch", 'not-installed-here>=1; extra == "train"']
    monkeypatch.setattr(needs, "owners", lambda module: ["mylib"])
    monkeypatch.setattr(needs.importlib.metadata, "requires", lambda name: requires)
    monkeypatch.setattr(needs.importlib.metadata, "version", lambda name: "6.2.0")
    error = raised(lambda: library.Trainer([]))
    assert needs.remedy(library.Trainer, error) == (
        "it needs not_installed_here, which is not installed here (mylib 6.2.0 declares it for its extra train): "
        'add "not-installed-here" to extra_requirements'
    )
    said = RuntimeError("you need to install the `accelerate` and `not-installed-here` modules: the `train` extra")
    assert needs.missing_module(said, library.Trainer) == "not_installed_here"  # named as an extra's requirement
    assert needs.remedy(library.Trainer, KeyError("chosen")) is None


@pytest.mark.parametrize(
    ("error", "columns"),
    [
        (KeyError("chosen"), ["chosen"]),
        (KeyError(3), []),
        (ValueError("a dataset with `chosen`, `rejected` and `reference` columns; got ['input_ids']"),
         ["chosen", "rejected", "reference"]),
        (ValueError("`reward_funcs` must be provided."), []),
    ],
)  # fmt: skip
def test_the_columns_a_trainer_asks_for(error, columns):
    assert asked_for(error) == columns


def test_an_abstract_base_that_cannot_be_built_points_at_its_concrete_classes():
    from compat_matrix.cell import tiny

    class Base(abc.ABC):
        @abc.abstractmethod
        def get_default_loss(self): ...

    said = str(tiny.unbuilt(Base, TypeError("Can't instantiate abstract class Base")))
    assert said == f"could not build Base: TypeError: Can't instantiate abstract class Base; {tiny.ABSTRACT_BASE}"
    assert str(tiny.unbuilt(type("Plain", (), {}), KeyError("x"))).endswith(tiny.WRITE_A_FACTORY)
