"""Axis values against the package index: answers recorded from PyPI (trimmed to a few releases of transformers,
4.52.0 and 4.57.0 yanked there), a local find-links folder, and a static index on disk. No network."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from packaging.version import Version

from compat_matrix.host import cli, plan
from compat_matrix.host.cells import Cell, cells
from compat_matrix.host.exits import BadInput
from compat_matrix.host.package_index import (
    CACHE_SECONDS,
    PYPI,
    ResolveError,
    cached_uploads,
    lookup,
    parse_html,
    parse_json,
    releases,
    sources,
    uploads_json,
    version_of,
)
from compat_matrix.host.resolve import check_axes, exact, expand, pins, resolve, sweep
from compat_matrix.host.spec import TIMESTAMP, MatrixError, Sweep, load

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


def at(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text)


def test_upload_times_are_each_releases_earliest_file_that_is_not_yanked():
    uploads = uploads_json(ANSWERS["json"], "transformers")
    assert uploads[Version("5.24.0")] == at("2026-11-21T12:24:29Z")  # the wheel, a few seconds before the sdist
    assert uploads[Version("5.14.1")] == at("2026-07-16T09:41:54.143394Z")
    assert Version("4.57.0") not in uploads  # yanked


def get_json(url: str) -> str:
    return ANSWERS["json"]


@pytest.mark.parametrize(
    ("before", "newest", "count"),
    [
        (None, "5.24.0", 13),
        ("2026-11-21T12:24:29Z", "5.14.1", 12),  # uploaded at that very moment: not before it
        ("2026-11-21T12:24:30Z", "5.24.0", 13),
        ("2026-01-01T00:00:00Z", "5.0.0rc1", 5),
        ("2025-01-01T00:00:00Z", None, 0),
    ],
)
def test_releases_as_of_a_moment(before, newest, count):
    found = releases("transformers", {}, get=get_json, before=at(before) if before else None)
    assert len(found) == count and (str(found[-1]) if found else None) == newest


def test_files_without_an_upload_time_count_as_of_any_moment(tmp_path):
    """As uv counts them: a local wheel, and every file of an index that says no upload time (PEP 503 HTML)."""
    (tmp_path / "transformers-9.0.0-py3-none-any.whl").write_bytes(b"")
    early = at("2000-01-01T00:00:00Z")
    assert releases("transformers", {"UV_FIND_LINKS": str(tmp_path)}, get=get_json, before=early) == (Version("9.0.0"),)
    assert len(releases("transformers", {}, get=lambda url: ANSWERS["html"], before=early)) == 13


def test_an_answer_of_the_index_is_kept_for_a_few_minutes(tmp_path):
    asked, clock = [], [1000.0]

    def get(url: str) -> str:
        asked.append(url)
        return ANSWERS["json"]

    def uploads(index: str = "https://mirror/simple/") -> dict:
        return cached_uploads("transformers", {"UV_INDEX_URL": index}, get, tmp_path, lambda: clock[0])

    first = uploads()
    clock[0] += CACHE_SECONDS - 1
    assert uploads() == first and len(asked) == 1  # kept, upload times included
    uploads("https://other/simple/")
    assert len(asked) == 2  # another index, another answer
    clock[0] += 2
    uploads()
    assert len(asked) == 3  # too old: asked again
    for kept in tmp_path.iterdir():
        kept.write_text("{not json")
    assert uploads() == first and len(asked) == 4  # a damaged file is asked again, never an error


def test_lookup_asks_the_index_once_per_package_and_run(tmp_path, monkeypatch):
    (tmp_path / "simple" / "transformers").mkdir(parents=True)
    page = tmp_path / "simple" / "transformers" / "index.html"
    page.write_text(ANSWERS["html"])
    environ = {"UV_DEFAULT_INDEX": (tmp_path / "simple").as_uri(), "COMPAT_MATRIX_CACHE": str(tmp_path / "cache")}
    assert lookup(environ)("transformers")[-1] == Version("5.24.0")
    page.unlink()
    assert lookup(environ)("transformers")[-1] == Version("5.24.0")  # another process of the same run


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("5.14.1", True),
        ("==5.14.1", True),
        ("2.13.0+cpu", True),
        ("5.x", False),
        ("4.57.x", False),
        (">=5.14", False),
        ("latest", False),
        ("==5.*", False),
    ],
)
def test_exact_values_need_no_index(value, expected):
    assert exact(value) is expected


def test_pins_are_the_releases_ranged_values_resolve_to_today():
    cell = Cell("m", (("transformers", "5.x"), ("torch", "2.13.0"), ("python", "3.11")))
    asked = []

    def releases_of(package: str) -> tuple[Version, ...]:
        asked.append(package)
        return tuple(VERSIONS)

    assert pins(cell, releases_of) == {"transformers": "5.24.0"}
    assert asked == ["transformers"]  # exact values and the interpreter ask nothing
    assert pins(Cell("m", (("transformers", "99.x"),)), releases_of) == {}  # uv will say that nothing matches


SWEPT = [Version(v) for v in ["5.13.0", "5.14.0", "5.14.1", "5.15.0rc1", "5.15.0", "5.16.0.dev0", "5.16.0"]]
SWEPT += [Version(v) for v in ["5.17.0rc0", "6.0.0", "2.13.0", "2.13.0+cpu"]]


@pytest.mark.parametrize(
    ("each", "range_", "pre", "expected"),
    [
        ("minor", ">=5.14", False, ["5.14.1", "5.15.0", "5.16.0", "6.0.0"]),
        ("minor", ">=5.14,<6", True, ["5.14.1", "5.15.0", "5.16.0", "5.17.0rc0"]),
        ("release", "5.14.x", False, ["5.14.0", "5.14.1"]),
        ("release", ">=5.15.0rc1,<5.16", False, ["5.15.0"]),  # pre-releases only with pre = true
        ("release", ">=5.15.0rc1,<5.16", True, ["5.15.0rc1", "5.15.0"]),
        ("release", "5.x", False, ["5.13.0", "5.14.0", "5.14.1", "5.15.0", "5.16.0"]),
        ("minor", ">=7", False, []),
        ("release", "==2.13.0", False, ["2.13.0+cpu"]),  # a local build and its public release are one release
    ],
)
def test_a_sweep_stands_for_releases(each, range_, pre, expected):
    assert [str(v) for v in sweep(Sweep(each, range_, pre), SWEPT)] == expected


SWEEP_MATRIX = MATRIX.replace('"4.57.x", "99.0", "5.x"', '"5.14.1", { each = "release", range = ">=5" }, "5.x"')


def test_expand_replaces_sweeps_by_exact_releases(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text(SWEEP_MATRIX)
    spec = load(path)
    expanded = expand(spec, lambda package: tuple(VERSIONS))
    assert expanded.axes[0].values == ("5.14.1", "5.0.0", "5.24.0", "5.x")  # 5.14.1 once
    assert [c.id for c in cells(expanded)][:2] == [
        "cell:m:transformers=5.14.1:python=3.11",
        "cell:m:transformers=5.0.0:python=3.11",
    ]
    assert expand(expanded, lambda package: 1 / 0) == expanded  # nothing left to ask


def test_a_sweep_the_index_cannot_answer_is_one_line_naming_the_key(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text(SWEEP_MATRIX)

    def unreadable(package: str):
        raise ResolveError("https://mirror/simple/: HTTP 503 Service Unavailable")

    with pytest.raises(MatrixError) as info:
        expand(load(path), unreadable)
    assert info.value.problems == [
        f"{path}: axes.transformers[1] = 'every release in >=5': cannot list the releases of transformers: "
        "https://mirror/simple/: HTTP 503 Service Unavailable"
    ]
    with pytest.raises(MatrixError, match=r"axes.transformers\[1\] = .*: no release of transformers in it \("):
        expand(load(path), lambda package: (Version("4.0"),))


def test_a_run_takes_its_exclude_newer_and_expands_its_sweeps(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text(SWEEP_MATRIX.replace('name = "m"', 'name = "m"\nexclude_newer = 2026-01-27'))
    environ = {"UV_DEFAULT_INDEX": "http://127.0.0.1:9/simple", "COMPAT_MATRIX_CACHE": str(tmp_path / "cache")}
    cached_uploads("transformers", environ, get_json)  # as if the run had just asked: nothing more is asked

    def planned(exclude_newer: str | None = None) -> plan.Plan:
        request = plan.Request(tmp_path, tmp_path / "noxfile.py", (path,), exclude_newer=exclude_newer)
        return plan.make(request, environ=environ)

    (matrix,) = planned().matrices
    assert matrix.spec.exclude_newer == "2026-01-27T00:00:00Z"
    assert matrix.spec.axes[0].values == ("5.14.1", "5.0.0", "5.x")
    (matrix,) = planned("2026-11-22").matrices
    assert matrix.spec.axes[0].values == ("5.14.1", "5.0.0", "5.24.0", "5.x")
    with pytest.raises(BadInput) as info:
        planned("2026-01-20")
    assert info.value.problems == [
        f"{path}: axes.transformers[1] = 'every release in >=5': "
        "no release of transformers in it (the newest is 5.0.0rc3)"
    ]
    with pytest.raises(BadInput) as info:
        planned("soon")
    assert info.value.problems == [f"--exclude-newer = 'soon': {TIMESTAMP}"]
