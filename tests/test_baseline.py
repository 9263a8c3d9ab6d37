"""Baseline comparison: every kind of change, the diff command and `report --baseline`."""

from __future__ import annotations

import copy
import json

from compat_matrix.host import cli
from compat_matrix.host.baseline import (
    APPEARED,
    CHANGED,
    CONCLUDED,
    FLIPPED,
    GONE,
    GONE_OVERRIDE,
    NEW,
    VANISHED,
    compare,
    failing,
)

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


def with_observations(version: str, *names: str, requested: str = "5.x") -> dict:
    data = cell(version)
    data["requested"] = {"transformers": requested}
    data["subjects"][0]["observations"] = [{"probe": "p", "name": n, "override": 1, "base": 1} for n in names]
    return data


def test_an_observation_that_appears_or_vanishes_is_a_failing_change():
    old = {"schema": 1, "matrix": "demo", "cells": [with_observations("5.24.0", "a", "b")]}
    new = {"schema": 1, "matrix": "demo", "cells": [with_observations("5.24.0", "b", "c")]}
    changes = compare(old, new)
    assert [(c.kind, c.detail) for c in changes] == [
        (APPEARED, f"{T} p.c: override 1, base 1"),
        (GONE, f"{T} p.a: was override 1, base 1"),
    ]
    assert failing(changes)


def test_two_cells_of_the_same_versions_stay_two_rows():
    cells = [with_observations("5.24.0", "a", requested="5.x"), with_observations("5.24.0", "a", requested="5.24.0")]
    old = {"schema": 1, "matrix": "demo", "cells": cells}
    new = copy.deepcopy(old)
    new["cells"][1]["subjects"][0]["observations"][0]["base"] = 2
    (change,) = compare(old, new)
    assert change.kind == CHANGED and change.row == "transformers 5.24.0 (requested transformers 5.24.0)"
    # one of them gone: the other is still matched, not reported as new or vanished
    (gone,) = compare(old, {**old, "cells": cells[:1]})
    assert (gone.kind, gone.row) == (VANISHED, "transformers 5.24.0 (requested transformers 5.24.0)")
    # a request that changed its form but installed the same versions is the same row
    assert compare({**old, "cells": cells[:1]}, {**old, "cells": cells[1:]}) == []


def with_overrides(by_name: dict[str, dict[str, str]], schema: int = 2) -> dict:
    """A report of one subject whose overrides have these conclusions per release."""
    overrides = [{"target": T, "name": name, "by_release": by_release} for name, by_release in by_name.items()]
    return {"schema": schema, "matrix": "demo", "cells": [cell("5.24.0")], "overrides": overrides}


def test_conclusions_per_override_come_first_and_an_override_gone_only_informs():
    old = with_overrides(
        {
            "_init_weights": {"transformers 5.0.0": "redundant", "transformers 5.24.0": "redundant"},
            "tie_weights": {"transformers 5.0.0": "harmful", "transformers 5.24.0": "harmful"},
        }
    )
    new = with_overrides(
        {"_init_weights": {"transformers 5.0.0": "redundant", "transformers 5.24.0": "behaves differently"}}
    )
    new["cells"] = [cell("5.24.0", "differs", override=False)]  # the verdict flips too, and an observation changes
    changes = compare(old, new)
    assert [str(c) for c in changes[:2]] == [
        f"conclusion changed: transformers 5.24.0: {T} _init_weights: redundant → behaves differently",
        f"override gone: {T} tie_weights: harmful on transformers 5.0.0, transformers 5.24.0 → gone",
    ]
    assert [c.kind for c in changes] == [CONCLUDED, GONE_OVERRIDE, CHANGED]  # no flip: the conclusions say it
    assert failing(changes) and not failing([changes[1]])


def test_reached_warnings_and_what_only_informs_never_fail_on_their_own():
    old = {"schema": 1, "matrix": "demo", "cells": [with_observations("5.24.0", "a")]}
    new = copy.deepcopy(old)
    observed = new["cells"][0]["subjects"][0]["observations"]
    observed += [
        {"probe": "p", "name": "reached", "override": ["m"], "base": [], "carries": False},
        {"probe": "p", "name": "warnings", "override": ["FutureWarning: x"], "base": [], "carries": True},
        {"probe": "p", "name": "present", "override": True, "base": False, "carries": False},
    ]
    assert compare(old, new) == []
    with_overrides_too = {**with_overrides({"m": {"transformers 5.24.0": "redundant"}}), "schema": 1}
    assert compare(with_overrides_too, copy.deepcopy(with_overrides_too)) == []  # schema 1 reports are baselines


def test_a_report_of_schema_2_is_a_baseline(tmp_path, capsys):
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps(with_overrides({"m": {"transformers 5.24.0": "redundant"}})))
    new.write_text(json.dumps(with_overrides({"m": {"transformers 5.24.0": "harmful"}})))
    assert cli.main(["diff", str(old), str(new)]) == cli.EXIT_UNMET
    assert f"conclusion changed: transformers 5.24.0: {T} m: redundant → harmful" in capsys.readouterr().out
    (tmp_path / "other.json").write_text(json.dumps({"schema": 4, "matrix": "demo", "cells": []}))
    assert cli.main(["diff", str(old), str(tmp_path / "other.json")]) == cli.EXIT_BAD_MATRIX
    assert "not a compat-matrix report of schema 1 or 2" in capsys.readouterr().err
