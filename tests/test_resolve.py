"""Axis values against the package index: answers recorded from PyPI (trimmed to a few releases of transformers,
4.52.0 and 4.57.0 yanked there), a local find-links folder, and a static index on disk. No network."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from compat_matrix import cli
from compat_matrix.resolve import (
    PYPI,
    ResolveError,
    check_axes,
    parse_html,
    parse_json,
    releases,
    resolve,
    sources,
    version_of,
)
from compat_matrix.spec import load

INDEX = Path(__file__).parent / "index"
ANSWERS = {kind: (INDEX / f"transformers.{kind}").read_text() for kind in ("json", "html")}
PUBLISHED = ["4.57.1", "4.57.2", "4.57.3", "4.57.4", "4.57.5", "4.57.6", "5.0.0rc0", "5.0.0rc1", "5.0.0rc2"]
PUBLISHED += ["5.0.0rc3", "5.0.0", "5.14.1", "5.24.0"]


@pytest.mark.parametrize("parse", [parse_json, parse_html])
def test_recorded_answers_give_the_releases_less_the_yanked(parse):
    kind = "json" if parse is parse_json else "html"
    assert sorted(parse(ANSWERS[kind], "transformers")) == [Version(v) for v in PUBLISHED]


VERSIONS = sorted(parse_json(ANSWERS["json"], "transformers"))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("4.57.x", "4.57.6"),
        ("5.x", "5.24.0"),
        ("latest", "5.24.0"),
        ("5.14.1", "5.14.1"),
        ("5.14.1.0", "5.14.1"),
        (">=5.1,<5.20", "5.14.1"),
        ("~=4.57.2", "4.57.6"),
        ("<5", "4.57.6"),  # pre-releases of 5.0.0 only when asked for
        ("==5.0.0rc1", "5.0.0rc1"),
        (">=5.0.0rc0,<5.0.0rc3", "5.0.0rc2"),
        ("4.57.0", None),  # yanked
        ("99.0", None),
        ("3.x", None),
    ],
)
def test_axis_values_resolve_to_the_newest_matching_release(value, expected):
    assert resolve(value, VERSIONS) == (Version(expected) if expected else None)


def test_local_version_labels_match_an_exact_value():
    assert resolve("2.13.0", [Version("2.12.0"), Version("2.13.0+cpu")]) == Version("2.13.0+cpu")


@pytest.mark.parametrize(
    ("filename", "version"),
    [
        ("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", "2.13.0+cpu"),
        ("torch-2.12.0.tar.gz", "2.12.0"),
        ("utf8_tokenizer-0.8.5-py3-none-any.whl", None),  # another package
        ("torch-2.13.0.txt", None),
        ("torch-not-a-version.whl", None),
    ],
)
def test_file_names_give_versions(filename, version):
    assert version_of(filename, "torch") == (Version(version) if version else None)


def test_sources_follow_uvs_variables():
    assert sources({}) == sources({"PIP_FIND_LINKS": ""}) == type(sources({}))(PYPI, ())
    assert sources({"UV_INDEX_URL": "https://mirror/simple"}).index == "https://mirror/simple/"
    assert (
        sources({"UV_INDEX_URL": "https://a/simple/", "UV_DEFAULT_INDEX": "https://b/simple"}).index
        == "https://b/simple/"
    )
    assert sources({"PIP_FIND_LINKS": "/w /x"}).find_links == ("/w", "/x")
    assert sources({"PIP_FIND_LINKS": "/w", "UV_FIND_LINKS": "/y,https://z"}).find_links == ("/y",)


def test_releases_join_the_index_and_local_folders(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "transformers-9.0.0-py3-none-any.whl").write_bytes(b"")
    (wheels / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    asked = []

    def get(url: str) -> str:
        asked.append(url)
        return ANSWERS["json"]

    found = releases("Transformers", {"PIP_FIND_LINKS": str(wheels)}, get=get)
    assert asked == [f"{PYPI}transformers/"]
    assert found[-1] == Version("9.0.0") and Version("5.24.0") in found and Version("2.13.0+cpu") not in found


def test_a_static_index_on_disk(tmp_path):
    (tmp_path / "simple" / "transformers").mkdir(parents=True)
    (tmp_path / "simple" / "transformers" / "index.html").write_text(ANSWERS["html"])
    environ = {"UV_INDEX_URL": (tmp_path / "simple").as_uri()}
    assert resolve("5.x", releases("transformers", environ)) == Version("5.24.0")
    assert releases("torch", environ) == ()  # the index has no such project


def test_an_unreadable_answer_is_a_resolve_error():
    with pytest.raises(ResolveError, match="unreadable answer"):
        releases("transformers", {}, get=lambda url: '{"files": [{"nope": 1}]}')


MATRIX = """
[matrix]
name = "m"
[axes]
transformers = ["4.57.x", "99.0", "5.x"]
python = ["3.11"]
[[subjects]]
target = "a:B"
"""


def test_check_axes_names_the_value_that_no_release_matches(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text(MATRIX)
    lines, problems = check_axes(load(path), lambda package: VERSIONS)
    assert lines == ["transformers: 4.57.x → 4.57.6, 99.0 → None, 5.x → 5.24.0"]
    assert problems == [
        f"{path}: axes.transformers = '99.0': no release of transformers matches (the newest is 5.24.0)"
    ]


def test_validate_resolves_against_the_index_unless_offline(tmp_path, capsys, monkeypatch):
    (tmp_path / "simple" / "transformers").mkdir(parents=True)
    (tmp_path / "simple" / "transformers" / "index.html").write_text(ANSWERS["html"])
    monkeypatch.setenv("UV_DEFAULT_INDEX", (tmp_path / "simple").as_uri())
    path = tmp_path / "m.toml"
    path.write_text(MATRIX)
    assert cli.main(["validate", str(path)]) == cli.EXIT_BAD_MATRIX
    assert "axes.transformers = '99.0': no release of transformers matches" in capsys.readouterr().err
    assert cli.main(["validate", "--offline", str(path)]) == cli.EXIT_OK
    path.write_text(MATRIX.replace('"99.0", ', ""))
    assert cli.main(["validate", str(path)]) == cli.EXIT_OK
    assert "transformers: 4.57.x → 4.57.6, 5.x → 5.24.0" in capsys.readouterr().out


def test_an_unreachable_index_is_a_warning_not_bad_input(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("UV_DEFAULT_INDEX", "http://127.0.0.1:9/simple")  # the discard port: nothing listens
    path = tmp_path / "m.toml"
    path.write_text(MATRIX)
    assert cli.main(["validate", str(path)]) == cli.EXIT_OK
    err = capsys.readouterr().err
    assert "warning: " in err and "not checked against the package index" in err and "--offline" in err
