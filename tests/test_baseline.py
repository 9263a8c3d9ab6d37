"""Baseline comparison: every kind of change, the diff command and `report --baseline`."""

from __future__ import annotations

import copy
import json

from compat_matrix import cli
from compat_matrix.baseline import CHANGED, FLIPPED, NEW, VANISHED, compare

T = "m:C"


def cell(version: str, verdict: str = "same", override=True, base=True) -> dict:
    return {
        "requested": {"transformers": "5.x"},
        "resolved": {"transformers": version},
        "status": "ok",
        "subjects": [
            {
                "target": T,
                "verdict": verdict,
                "observations": [{"probe": "p", "name": "n", "override": override, "base": base}],
            }
        ],
    }


OLD = {"schema": 1, "matrix": "demo", "cells": [cell("5.23.0"), cell("5.14.1"), cell("4.57.6")]}


def test_no_changes():
    assert compare(OLD, copy.deepcopy(OLD)) == []


def test_every_kind_of_change():
    new = {
        "schema": 1,
        "matrix": "demo",
        "cells": [cell("5.24.0"), cell("5.14.1", "differs", override=False), cell("4.57.6", base=[1, 2])],
    }
    changes = compare(OLD, new)
    kinds = [(c.kind, c.row) for c in changes]
    assert (NEW, "transformers 5.24.0") in kinds
    assert (VANISHED, "transformers 5.23.0") in kinds
    assert (FLIPPED, "transformers 5.14.1") in kinds
    assert (CHANGED, "transformers 5.14.1") in kinds
    assert (CHANGED, "transformers 4.57.6") in kinds
    assert len(changes) == 5
    flipped = next(c for c in changes if c.kind == FLIPPED)
    assert flipped.detail == f"{T}: same → differs"


def test_diff_command_exit_codes(tmp_path, capsys):
    old, same, new_version, flipped = (tmp_path / f"{n}.json" for n in ("old", "same", "new", "flipped"))
    old.write_text(json.dumps(OLD))
    same.write_text(json.dumps(OLD))
    new_version.write_text(json.dumps({**OLD, "cells": [*OLD["cells"], cell("5.24.0")]}))
    flipped.write_text(json.dumps({**OLD, "cells": [cell("5.23.0", "differs"), *OLD["cells"][1:]]}))
    assert cli.main(["diff", str(old), str(same)]) == cli.EXIT_OK
    assert cli.main(["diff", str(old), str(new_version)]) == cli.EXIT_OK  # a new release informs, does not fail
    assert cli.main(["diff", str(old), str(flipped)]) == cli.EXIT_UNMET
    assert "verdict flipped: transformers 5.23.0" in capsys.readouterr().out


def test_unreadable_baseline_is_a_one_line_error(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert cli.main(["diff", str(bad), str(bad)]) == cli.EXIT_BAD_MATRIX
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0]
