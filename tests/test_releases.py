"""Releases as values: a row's label is made once from them and read back from text alike, and neighbours that read
alike are merged by one helper."""

from __future__ import annotations

import copy

import pytest
from packaging.version import Version

from compat_matrix.host.releases import Label, Release, early_label, public, runs


@pytest.mark.parametrize(
    ("release", "label", "early"),
    [
        (Release.of("transformers", "5.24.0", "5.x"), "transformers 5.24.0", False),
        (Release.of("transformers", None, "99.0"), "transformers 99.0 (requested)", False),
        (Release.of("transformers", "5.25.0rc1", "pre"), "transformers 5.25.0rc1 (pre-release)", True),
        (Release.of("transformers", None, "pre"), "transformers pre (requested)", True),
        (Release.of("torch", "2.13.0+cpu", "2.13.0"), "torch 2.13.0+cpu", False),
    ],
)
def test_a_release_says_its_label_and_a_label_read_back_says_the_same(release, label, early):
    made = Label((release,))
    assert made == label and made.early is early and early_label(label) is early
    read = Label.read(label)
    assert [(r.package, r.installed, r.early) for r in read.releases] == [
        (release.package, release.installed, release.early)
    ]
    assert read.shown == made.shown == release.shown and read.package == release.package


def test_a_label_of_two_axes_names_both_and_keeps_its_releases_through_copies():
    made = Label((Release.of("transformers", "5.14.1", "5.14.1"), Release.of("torch", "2.13.0+cpu", "2.13.0")))
    assert made == "transformers 5.14.1, torch 2.13.0+cpu" and made.package is None
    assert made.shown == "5.14.1, torch 2.13.0+cpu"
    assert copy.deepcopy(made).releases == made.releases
    assert Label.read("?").releases == () and Label.read("?").shown == "?"


def test_versions_are_compared_as_the_releases_they_build():
    assert public("2.13.0+cpu") == Version("2.13.0") and public("5.x") is None and public(None) is None
    asked = [Release.of("t", None, "pre"), Release.of("t", None, "5.x"), Release.of("t", "5.24.0", "5.x")]
    by_rank = sorted(asked, key=lambda r: r.rank)
    assert [r.label for r in by_rank] == ["t 5.24.0", "t 5.x (requested)", "t pre (requested)"]


def test_runs_are_neighbours_whose_key_is_equal():
    assert runs([1, 1, 2, 1, 3, 3], lambda n: n) == [[1, 1], [2], [1], [3, 3]]
    assert runs([], lambda n: n) == []
    assert runs([[1, "a"], [2, "a"], [3, "b"]], lambda row: row[1:]) == [[[1, "a"], [2, "a"]], [[3, "b"]]]
