"""Factory modules beside the matrix file: found, checked by `validate`, keyed for `--cached`, and the reason a
subject gives when its factory cannot be imported (no cell runs here)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from compat_matrix.cell.factory import _made, takes_path
from compat_matrix.cell.subject import unloadable
from compat_matrix.host import factories, fingerprints, wording
from compat_matrix.host.spec import MatrixError, load

MATRIX = """
[matrix]
name = "mylib"
requirements = ["mylib==1.0"]

[axes]
transformers = ["5.x"]

[[subjects]]
target = "mylib.train:MyTrainer"
factory = "{factory}"
"""


def matrix(folder: Path, factory: str, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(textwrap.dedent(text))
    path = folder / "mylib.toml"
    path.write_text(MATRIX.format(factory=factory))
    return path


@pytest.mark.parametrize(
    ("factory", "files", "problem"),
    [
        ("my_factories:make", {"my_factories.py": "def make(cls):\n    return cls()\n"}, None),
        ("my_factories:make", {"my_factories.py": "from elsewhere import make\n"}, None),
        ("mine.tiny:make", {"mine/__init__.py": "", "mine/tiny.py": "make = lambda cls: cls()\n"}, None),
        ("mylib.tiny:make", {}, None),  # nothing beside the file: the cells must install it
        (
            "my_factories:make",
            {"my_factories.py": "def make_dpo(cls): ...\ndef _helper(): ...\n"},
            "my_factories.py beside the matrix file defines no 'make' (it defines make_dpo)",
        ),
        (
            "my_factories:make",
            {"my_factories.py": "def make(cls)\n"},
            "my_factories.py beside the matrix file does not",
        ),
    ],
)
def test_a_factory_module_beside_the_matrix_file_must_define_what_the_file_names(tmp_path, factory, files, problem):
    path = matrix(tmp_path, factory, files)
    if problem is None:
        assert load(path).subjects[0].factory == factory
        return
    with pytest.raises(MatrixError) as info:
        load(path)
    (said,) = info.value.problems
    assert said.startswith(f"{path}: subjects[0].factory = {factory!r}: ") and problem in said


@pytest.mark.parametrize(
    ("factory", "files", "warned"),
    [
        ("my_factories:make", {"my_factories.py": "def make(cls): ...\n"}, False),
        ("mylib.tiny:make", {}, False),  # of the requirement's own package
        ("my_factories:make", {}, True),  # neither: the run would say "No module named 'my_factories'"
    ],
)
def test_validate_warns_of_a_factory_neither_beside_the_file_nor_of_a_requirement(tmp_path, factory, files, warned):
    said = factories.unplaced(load(matrix(tmp_path, factory, files)))
    assert bool(said) is warned
    if warned:
        assert "no my_factories.py beside the matrix file" in said[0] and "subjects[0].factory" in said[0]


def test_an_edit_to_a_factory_beside_the_file_makes_earlier_results_stale(tmp_path):
    path = matrix(tmp_path, "my_factories:make", {"my_factories.py": "def make(cls): ...\n"})
    before = fingerprints.inputs_key(load(path))
    (tmp_path / "my_factories.py").write_text("def make(cls):\n    return cls(seed=1)\n")
    assert fingerprints.inputs_key(load(path)) != before


def test_a_factory_that_cannot_be_imported_says_so_and_where_it_goes():
    missing = ModuleNotFoundError("No module named 'my_factories'", name="my_factories")
    assert unloadable("factory", "my_factories:make", missing) == (
        "could not import the factory my_factories:make: ModuleNotFoundError: No module named 'my_factories' "
        "(a module of your own goes beside the matrix file: my_factories.py)"
    )
    inside = ModuleNotFoundError("No module named 'peft'", name="peft")
    assert unloadable("inputs", "my_factories:inputs", inside).endswith("No module named 'peft'")


@pytest.mark.parametrize(
    ("whys", "said"),
    [
        (["install-failed: pins conflict: a", "could-not-build: could not build T: KeyError: 'chosen'"],
         "could not build T: KeyError: 'chosen'"),
        (["install-failed: pins conflict: a", "import-failed: could not import the factory f:m: boom"],
         "could not import the factory f:m: boom"),
        (["install-failed: pins conflict: a", "import-failed: ImportError: x"], "import-failed: ImportError: x"),
        (["install-failed: pins conflict: a"], "install-failed: pins conflict: a"),
        ([], None),
    ],
)  # fmt: skip
def test_a_row_that_could_not_run_says_its_real_cause_first(whys, said):
    assert wording.stopped(whys) == said


class _Hinted:
    """`model` hints as trainers write them: a string naming what is not installed here, a type, none."""

    def __init__(self, model: str | NotInstalled, args=None):  # noqa: F821 - a name this machine lacks
        pass


class _ModelOnly:
    def __init__(self, model: PreTrainedModel | torch.nn.Module):  # noqa: F821
        pass


class _Unhinted:
    def __init__(self, model):
        pass


@pytest.mark.parametrize(("cls", "takes"), [(_Hinted, True), (_ModelOnly, False), (_Unhinted, False)])
def test_the_default_factory_hands_a_path_only_to_a_trainer_whose_model_may_be_one(cls, takes):
    """Where a trainer still fails, the default factory tries the folder its model was saved in (trl's
    RewardTrainer configures the model it loads itself): only where the `model` hint names `str`."""
    assert takes_path(cls) is takes


class LoadsWhatItIsGiven:
    """A trainer whose model may be a path, and that can be built neither way: its error as given is what counts."""

    def __init__(self, model: str | TinyModel, reward_funcs=None):  # noqa: F821 (named, not installed here)
        if isinstance(model, str):
            raise OSError(f"{model} is no folder of weights")
        raise ValueError("this trainer needs a model with a value head")


def test_where_the_model_as_a_path_fails_too_the_error_of_the_model_as_given_is_said():
    model = SimpleNamespace(config=SimpleNamespace(_name_or_path="/tmp/tiny-model"))
    with pytest.raises(ValueError, match="value head"):
        _made(LoadsWhatItIsGiven, {"model": model})
