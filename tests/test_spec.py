"""Matrix files: parsing, validation errors that name the file, key and value, axis forms."""

from __future__ import annotations

from pathlib import Path

import pytest

from compat_matrix.host.spec import MatrixError, Sweep, axis_requirement, load, load_all, matrix_files, timestamp

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
        ('target = "pkg.mod:Class"', 'target = "pkg.mod:"', "subjects[0].target = 'pkg.mod:'"),
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
        ('"5.x"]', '"5.x", { each = "major", range = ">=5" }]', "axes.transformers[3].each = 'major': one of"),
        ('"5.x"]', '"5.x", { each = "minor" }]', "axes.transformers[3].range: required"),
        (
            '"5.x"]',
            '"5.x", { each = "minor", rnage = ">=5" }]',
            "[3].rnage = '>=5': unknown key; did you mean `range`?",
        ),
        ('"5.x"]', '"5.x", { each = "minor", range = "five" }]', "axes.transformers[3].range = 'five': not a version"),
        ('"5.x"]', '"5.x", { each = "minor", range = ">=5", pre = 1 }]', "axes.transformers[3].pre = 1: true or false"),
        ('"5.x"]', '"5.x", { each = "minor", range = ">=5" }, { range = ">=5", each = "minor" }]', "duplicate values"),
        ("[axes]", '[axes]\npython = [{ each = "minor", range = "3.x" }]', "axes.python[0] = {'each'"),
        ('name = "demo"', 'name = "demo"\nexclude_newer = "last week"', "matrix.exclude_newer = 'last week': a date"),
        ('name = "demo"', 'name = "demo"\nexclude_newer = 2026-10-01T12:00:00', "needs its time zone"),
        ('name = "demo"', 'name = "demo"\nexclude_newer = 20261001', "matrix.exclude_newer = 20261001: a date"),
    ],
)
def test_each_problem_names_file_key_and_value(tmp_path, old, new, expected):
    assert old in GOOD
    path = write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(MatrixError) as info:
        load(path)
    assert any(str(path) in p and expected in p for p in info.value.problems), info.value.problems


def test_every_problem_is_reported_at_once(tmp_path):
    text = GOOD.replace('name = "demo"', 'name = ""').replace('"5.x"]', '"nope"]').replace("pkg.mod:Class", "x:")
    with pytest.raises(MatrixError) as info:
        load(write(tmp_path, text))
    assert len(info.value.problems) == 3


def test_sweeps_and_exclude_newer_load(tmp_path):
    text = GOOD.replace(
        '"5.x"]', '{ each = "minor", range = ">=5.14" }, { each = "release", range = "5.x", pre = true }]'
    )
    text = text.replace('name = "demo"', 'name = "demo"\nexclude_newer = 2026-10-01')
    text += '[[exclude]]\ntransformers = "5.15.1"\n'  # a release the sweep may stand for
    spec = load(write(tmp_path, text))
    assert spec.axes[0].values == ("4.57.x", "5.14.1", Sweep("minor", ">=5.14"), Sweep("release", "5.x", True))
    assert spec.sweeps and spec.exclude_newer == "2026-10-01T00:00:00Z"
    assert str(spec.axes[0].values[2]) == "every minor in >=5.14"
    with pytest.raises(MatrixError, match=r"exclude\[0\].transformers = '4.0.0': not one of the axis values"):
        load(write(tmp_path, text.replace('"5.15.1"', '"4.0.0"')))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-10-01", "2026-10-01T00:00:00Z"),
        ("2026-10-01T12:30:00Z", "2026-10-01T12:30:00Z"),
        ("2026-10-01T12:30:00+02:00", "2026-10-01T10:30:00Z"),
        (" 2026-10-01 ", "2026-10-01T00:00:00Z"),
    ],
)
def test_exclude_newer_is_one_utc_moment_wherever_it_runs(value, expected):
    assert timestamp(value) == expected


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


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a string where a table belongs, a table where a list belongs, lists where strings belong, and so on
        ('subjects = ["x"]\n[matrix]\nname = "a"\n[axes]\nt = ["1"]', "subjects[0] = 'x': a [[subjects]] table"),
        ('matrix = "x"', "matrix = 'x': a table: write [matrix]"),
        ('axes = ["5.x"]', "axes = ['5.x']: a table"),
        ("[subjects]\ntarget = 'a:B'", "subjects = {'target': 'a:B'}: a list of tables: write [[subjects]]"),
        ("exclude = 3", "exclude = 3: [[exclude]] tables"),
        ("[matrix]\nname = 5", "matrix.name = 5: letters"),
        ("[matrix]\nname = true", "matrix.name = True"),
        ('[matrix]\nname = ""', "matrix.name = ''"),
        ('[matrix]\nname = "a\\nb"', "matrix.name = 'a\\nb'"),
        ('[matrix]\nname = "ünïcode"', "matrix.name = 'ünïcode'"),
        ('[matrix]\nrequirements = "utf8-tokenizer"', "matrix.requirements = 'utf8-tokenizer': a list of strings"),
        ("[matrix]\nrequirements = [[1]]", "matrix.requirements[0] = [1]"),
        ('[matrix]\nrequirements = ["~no_such_user_here/x"]', "not a usable local path"),
        ('[matrix]\nrequirements = ["./a\\u0000b"]', "not a usable local path"),
        ("[matrix]\ntimeout = nan", "matrix.timeout = nan"),
        ("[matrix]\ntimeout = inf", "matrix.timeout = inf"),
        ("[matrix]\ntimeout = 99999999999999999999", "matrix.timeout = 99999999999999999999"),
        ("[matrix]\ntimeout = 1979-05-27", "matrix.timeout = datetime.date(1979, 5, 27)"),
        ("[matrix]\ndescription = []", "matrix.description = []: a string"),
        ('[axes]\ntransformers = "5.x"', "axes.transformers = '5.x': a non-empty list"),
        ('[axes]\ntransformers = [["5.x"]]', "axes.transformers = [['5.x']]"),
        ('[axes]\ntransformers = ["５.x"]', "axes.transformers = '５.x': not a version"),
        ('[axes]\n"trans formers" = ["5.x"]', "axes.\"trans formers\" = ['5.x']: not a package name"),
        ("[axes]\ntransformers = {}", "axes.transformers = {}"),
        ("[[subjects]]\ntarget = ['a:B']", "subjects[0].target = ['a:B']: as 'module:Class'"),
        ("[[subjects]]\ntarget = 'a:B'\nmethods = 'm'", "subjects[0].methods = 'm'"),
        ("[[subjects]]\ntarget = 'a:B'\nmethods = ['class']", "subjects[0].methods = ['class']"),
        ("[[subjects]]\ntarget = 'a:B'\nexpect = ['same']", "subjects[0].expect = ['same']"),
        ("[[subjects]]\ntarget = 'a:B'\nexpect = {'*' = 1}", 'subjects[0].expect."*" = 1'),
        ("[[subjects]]\ntarget = 'a:B'\n[[subjects]]\ntarget = 'a:B'", "subjects[1].target = 'a:B': listed twice"),
        ('[matrix]\nname = "' + "n" * 500 + '"', "matrix.name = 'nnnnnnnnnn"),
    ],
)
def test_wrong_types_are_one_line_problems(tmp_path, text, expected):
    path = write(tmp_path, text)
    with pytest.raises(MatrixError) as info:
        load(path)
    assert any(str(path) in p and expected in p for p in info.value.problems), info.value.problems
    assert all("\n" not in p and len(p) < 400 for p in info.value.problems)


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "requirements =",
            "requirments =",
            "matrix.requirments = ['utf8-tokenizer==0.8.5']: unknown key; did you mean `requirements`?",
        ),
        ("methods =", "method =", "did you mean `methods`?"),
        ("[[subjects]]", "[[subject]]", "subject = [{'target'"),
        # a top-level line written below [axes] lands in [axes]: say so, do not take it for a package
        (
            'torch = ["2.13.0"]',
            'torch = ["2.13.0"]\nexclude = [{ torch = "2.13.0" }]',
            "axes.exclude = [{'torch': '2.13.0'}]: not a package: unknown key in [axes]: `exclude` belongs in the top "
            "level; TOML put it in [axes] because it comes after that header",
        ),
        ('torch = ["2.13.0"]', 'torch = ["2.13.0"]\nsubjects = ["x"]', "axes.subjects = ['x']: not a package"),
        (
            'torch = ["2.13.0"]',
            'torch = ["2.13.0"]\nrequirements = ["x"]',
            "`requirements` belongs in [matrix]; TOML put it in [axes]",
        ),
        (
            'methods = ["gradient_checkpointing_enable"]',
            'methods = ["gradient_checkpointing_enable"]\ntimeout = 5',
            "subjects[0].timeout = 5: unknown key in [[subjects]]: `timeout` belongs in [matrix]",
        ),
        (
            "[matrix]",
            'target = "a:B"\n[matrix]',
            "target = 'a:B': unknown key in the top level: `target` belongs in [[subjects]]",
        ),
    ],
)
def test_unknown_keys_get_the_closest_known_one_or_their_table(tmp_path, old, new, expected):
    assert old in GOOD
    path = write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(MatrixError) as info:
        load(path)
    assert any(expected in p for p in info.value.problems), info.value.problems


@pytest.mark.parametrize("content", [b"\xff\xfe[matrix]", b"[matrix\n"])
def test_unreadable_or_invalid_files_are_one_line(tmp_path, content):
    path = tmp_path / "m.toml"
    path.write_bytes(content)
    with pytest.raises(MatrixError) as info:
        load(path)
    (problem,) = info.value.problems
    assert problem.startswith(f"{path}: ") and "\n" not in problem


def test_a_folder_is_not_a_matrix_file(tmp_path):
    with pytest.raises(MatrixError, match="a folder, not a matrix file"):
        load(tmp_path)


def test_a_subject_with_every_key_set_survives_the_plan_file():
    """The plan hands specs down as JSON: every field of a subject must come back as it was."""
    import dataclasses

    from compat_matrix.host.spec import Expectation, Subject

    full = Subject(
        "a.b",
        ("m",),
        "a.b:make",
        (Expectation("*", "same"),),
        ("p.x",),
        ("/t/test_a.py",),
        "a.b:inputs",
        ("a.b.legacy",),
        ("einops",),
        "a",
    )
    assert all(
        getattr(full, f.name) != f.default for f in dataclasses.fields(Subject) if f.default is not dataclasses.MISSING
    )
    assert Subject.from_json(full.to_json()) == full
