"""Matrix files: parsing, validation errors that name the file, key and value, axis forms."""

from __future__ import annotations

from pathlib import Path

import pytest

from compat_matrix.spec import MatrixError, axis_requirement, load, load_all, matrix_files

GOOD = """
[matrix]
name = "demo"
requirements = ["utf8-tokenizer==0.8.5"]

[axes]
transformers = ["4.57.x", "5.14.1", "5.x"]
torch = ["2.13.0"]

[[subjects]]
target = "pkg.mod:Class"
methods = ["gradient_checkpointing_enable"]
"""


def write(tmp_path: Path, text: str, name: str = "m.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_good_file_loads(tmp_path):
    spec = load(write(tmp_path, GOOD))
    assert spec.name == "demo"
    assert [a.package for a in spec.axes] == ["transformers", "torch"]
    assert spec.subjects[0].target == "pkg.mod:Class"
    assert spec.packages == ("transformers", "torch", "utf8-tokenizer")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("5.14.1", "transformers==5.14.1"),
        ("4.57.x", "transformers==4.57.*"),
        ("5.x", "transformers==5.*"),
        ("latest", "transformers"),
        (">=5.20,<5.23", "transformers<5.23,>=5.20"),
        ("~=4.57.0", "transformers~=4.57.0"),
    ],
)
def test_axis_forms(value, expected):
    assert axis_requirement("transformers", value) == expected


@pytest.mark.parametrize("value", ["5.x.y", "five", "=>5", ""])
def test_bad_axis_value_is_refused(value):
    with pytest.raises(ValueError, match="not a version"):
        axis_requirement("transformers", value)


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ('name = "demo"', 'name = "has space"', "matrix.name = 'has space'"),
        ('name = "demo"', 'name = "demo"\ncolour = "red"', "matrix.colour = 'red': unknown key"),
        ('"5.x"]', '"5.x.y"]', "axes.transformers = '5.x.y'"),
        ('torch = ["2.13.0"]', "torch = []", "axes.torch = []"),
        ('["utf8-tokenizer==0.8.5"]', '["--index-url=https://example.org"]', "installer options are not allowed"),
        ('["utf8-tokenizer==0.8.5"]', '["-e ./pkg"]', "installer options are not allowed"),
        ('["utf8-tokenizer==0.8.5"]', '["https://example.org/x.whl"]', "URLs are not allowed"),
        ('["utf8-tokenizer==0.8.5"]', '["pkg @ https://example.org/x.whl"]', "URLs are not allowed"),
        ('["utf8-tokenizer==0.8.5"]', '["./missing"]', "local path does not exist"),
        ('["utf8-tokenizer==0.8.5"]', '["utf8 tokenizer"]', "not a PEP 508 requirement"),
        ('target = "pkg.mod:Class"', 'target = "pkg.mod.Class"', "subjects[0].target = 'pkg.mod.Class'"),
        ('methods = ["gradient_checkpointing_enable"]', "methods = []", "subjects[0].methods = []"),
        ('methods = ["gradient_checkpointing_enable"]', 'methods = ["x"]\nfactory = "nope"', "subjects[0].factory"),
        ('name = "demo"', 'name = "demo"\ntimeout = -1', "matrix.timeout = -1"),
        ('name = "demo"', 'name = "demo"\ncell_timeout = "soon"', "matrix.cell_timeout = 'soon'"),
        ("[matrix]", '[[exclude]]\ntorch = "9"\n[matrix]', "exclude[0].torch = '9': not one of the axis values"),
        ("[matrix]", '[[exclude]]\njax = "1"\n[matrix]', "exclude[0].jax = '1': not an axis"),
        ("[matrix]", 'colour = "red"\n[matrix]', "colour = 'red': unknown key"),
        ("[[subjects]]", '[[subjects]]\nexpect = { "*" = "maybe" }', "subjects[0].expect.\"*\" = 'maybe'"),
        ("[[subjects]]", '[[subjects]]\nexpect = { "=>5" = "same" }', "is not '*' or a PEP 440 specifier"),
        ('target = "pkg.mod:Class"', 'target = "pkg.mod:Class"\ncolour = 1', "subjects[0].colour = 1: unknown key"),
        ("[axes]", '[axes]\npython = ["three"]', "axes.python = 'three'"),
    ],
)
def test_each_problem_names_file_key_and_value(tmp_path, old, new, expected):
    assert old in GOOD
    path = write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(MatrixError) as info:
        load(path)
    assert any(str(path) in p and expected in p for p in info.value.problems), info.value.problems


def test_every_problem_is_reported_at_once(tmp_path):
    text = GOOD.replace('name = "demo"', 'name = ""').replace('"5.x"]', '"nope"]').replace("pkg.mod:Class", "x")
    with pytest.raises(MatrixError) as info:
        load(write(tmp_path, text))
    assert len(info.value.problems) == 3


def test_toml_syntax_error_names_the_line(tmp_path):
    with pytest.raises(MatrixError, match=r"m\.toml: invalid TOML: .*line 2"):
        load(write(tmp_path, "[matrix]\nname = \n"))


def test_local_requirement_resolves_against_the_files_folder(tmp_path):
    (tmp_path / "lib").mkdir()
    spec = load(write(tmp_path, GOOD.replace('["utf8-tokenizer==0.8.5"]', '["./lib"]')))
    assert spec.requirements == (str(tmp_path / "lib"),)


def test_matrix_files_default_and_selected(tmp_path):
    a, b = write(tmp_path, GOOD, "b.toml"), write(tmp_path, GOOD, "a.toml")
    assert matrix_files(None, tmp_path) == [b, a]
    assert matrix_files(str(a), Path("elsewhere")) == [a]


def test_two_files_with_one_name_are_refused(tmp_path):
    specs, problems = load_all([write(tmp_path, GOOD, "a.toml"), write(tmp_path, GOOD, "b.toml")])
    assert len(specs) == 2 and "also the name of" in problems[0]
