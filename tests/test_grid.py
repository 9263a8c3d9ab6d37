"""The decision grid and the words of the first screen, on conclusions made by hand: the rows' order, the columns'
stretches, the title, where each override first changed."""

from __future__ import annotations

import pytest

from compat_matrix.host import grid, wording
from compat_matrix.host.advice import advise
from compat_matrix.host.conclude import Conclusion, OnRelease
from compat_matrix.host.overrides import OverrideConclusions
from compat_matrix.shared.vocabulary import AdviceKind, ConclusionKind

H, N, D, ORPHANED, U, C, R = (
    ConclusionKind.HARMFUL,
    ConclusionKind.NEEDED,
    ConclusionKind.DIFFERENTLY,
    ConclusionKind.ORPHANED,
    ConclusionKind.UNKNOWN,
    ConclusionKind.COULD_NOT_RUN,
    ConclusionKind.REDUNDANT,
)
LABELS = ["v 3", "v 2", "v 1"]  # newest first, as the rows are


def override(name: str, *kinds: ConclusionKind, target: str = "m:C") -> OverrideConclusions:
    """An override with these conclusions, oldest first."""
    by_release = tuple(OnRelease(label, Conclusion(kind)) for label, kind in zip(LABELS, reversed(kinds), strict=True))
    return OverrideConclusions(target, name, by_release, advise(by_release))


@pytest.mark.parametrize(
    ("kinds", "expected"),
    [
        ((R, R, R), (None, "v 3")),
        ((R, H, H), ("v 2", "v 1")),
        ((N, N, ORPHANED), ("v 3", "v 2")),
        ((C, R, H), ("v 3", "v 2")),  # where it could not run is left out: 2 is the oldest that ran
        ((R, C, R), (None, "v 3")),
        ((C, C, C), (None, None)),  # nothing ran: nothing was the same
    ],
)
def test_first_changed_and_last_same(kinds, expected):
    assert override("x", *kinds).changes == expected


def test_rows_go_harmful_port_review_keep_delete_and_columns_join_releases_that_read_alike():
    found = grid.make([])  # no subject: an empty grid
    assert found.rows == () and found.columns == ()
    overrides = [
        override("deleted", R, R, R),
        override("kept", N, N, N),
        override("reviewed", R, U, R),
        override("ported", N, ORPHANED, ORPHANED),
        override("broken", R, R, H),
        override("kept_but_broken", N, N, H),
    ]
    ordered = sorted(overrides, key=grid.rank)
    assert [o.name for o in ordered] == ["broken", "kept_but_broken", "ported", "reviewed", "kept", "deleted"]
    assert [o.advice.kind for o in ordered] == [
        AdviceKind.DELETE,
        AdviceKind.REVIEW,  # needed, then harmful: keeping it breaks the newest, deleting it the others
        AdviceKind.PORT,
        AdviceKind.REVIEW,
        AdviceKind.KEEP,
        AdviceKind.DELETE,
    ]
    assert wording.title("C", ordered, wording.PLAIN) == "C: delete 2, port 1 and review 2 of 6 overrides"


@pytest.mark.parametrize(
    ("kinds", "title"),
    [
        ([(R, R, R)], "C: delete `a`"),
        ([(N, N, N)], "C: keep `a`"),
        ([(R, R, R), (R, R, H)], "C: delete both overrides"),
        ([(N, N, N), (N, N, N), (N, N, N)], "C: keep all 3 overrides"),
        ([(R, R, R), (N, N, N), (R, U, R)], "C: delete 1 and review 1 of 3 overrides"),
        ([(C, C, C), (C, C, C)], "C: nothing ran"),
        ([], "C: nothing audited"),
    ],
)
def test_the_title_is_the_answer(kinds, title):
    overrides = [override(name, *k) for name, k in zip("abc", kinds, strict=False)]
    assert wording.title("C", overrides) == title


def test_a_column_per_stretch_of_releases_on_which_every_row_reads_alike():
    from compat_matrix.host.overrides import SubjectConclusions

    def subject(*overrides: OverrideConclusions) -> SubjectConclusions:
        return SubjectConclusions(overrides[0].target, tuple(o.name for o in overrides), (), overrides)

    made = grid.make([subject(override("a", R, R, H), override("b", N, N, N))])
    assert made.columns == (("v 1", "v 2"), ("v 3",)) and made.labels == ("v 1", "v 2", "v 3")
    assert [row.cells for row in made.rows] == [(R, H), (N, N)] and not made.several
    assert made.kinds == (H, N, R) and made.counts() == {"Delete": 1, "Keep": 1, "Review": 0, "Port": 0, "Fix": 0}
    apart = grid.make([subject(override("a", R, R, H)), subject(override("b", N, D, N, target="m:D"))])
    assert apart.columns == (("v 1",), ("v 2",), ("v 3",)) and apart.several
    assert wording.name_of(apart.rows[0].override, apart.several) == "`C.a`"


def test_a_class_that_could_not_be_built_anywhere_says_so_in_its_reason_not_only_nothing_ran():
    why = "could-not-build: could not build C: AttributeError: no encoder; write a factory (see README)"
    by_release = tuple(OnRelease(label, Conclusion(C, why=why)) for label in LABELS)
    unbuilt = OverrideConclusions("m:C", "forward", by_release, advise(by_release))
    assert wording.reason(unbuilt, LABELS) == why.removeprefix("could-not-build: ")
    assert wording.reason(override("forward", C, C, C), LABELS) == "nothing ran"
