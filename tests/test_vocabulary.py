"""One vocabulary: the words of a run are defined in compat_matrix.shared.vocabulary, which the cell side may import
(standard library only), and the cell side's own spellings of the same words agree with it."""

from __future__ import annotations

import ast
import json
import sys

from compat_matrix.cell import probes
from compat_matrix.shared import results, vocabulary
from compat_matrix.shared.vocabulary import ConclusionKind, ObservationName, Status
from conftest import ROOT


def test_the_vocabulary_is_standard_library_only():
    tree = ast.parse((ROOT / "src" / "compat_matrix" / "shared" / "vocabulary.py").read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= sys.stdlib_module_names | {"__future__"}, imported


def test_the_cell_side_spells_the_words_alike():
    assert {probes.ERROR, probes.WARNINGS, probes.REACHED, probes.LINES, probes.INCONCLUSIVE} == set(ObservationName)
    assert (results.OK, results.CRASHED, results.TIMED_OUT) == (Status.OK, Status.CRASHED, Status.TIMED_OUT)


def test_a_word_is_its_own_string_in_json_and_in_sentences():
    assert json.dumps([Status.NOT_RUN, ConclusionKind.DIFFERENTLY]) == '["not run", "behaves differently"]'
    assert f"{ConclusionKind.HARMFUL} ({ConclusionKind.HARMFUL.symbol})" == "harmful (✗)"
    assert ConclusionKind("inconclusive") is ConclusionKind.UNKNOWN
    assert len({kind.symbol for kind in ConclusionKind}) == len(ConclusionKind)  # a grid tells every kind apart
    assert set(vocabulary.ChangeKind) > vocabulary.FAILING_CHANGES
