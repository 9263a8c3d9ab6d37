"""The plan of a run as values, as its file holds them: every matrix with its cells and reports folder (`Matrix`), the
sweeps it expanded (`Expansion`), a bisection checked (`Bisection`), the releases each cell installs, the options."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from packaging.version import Version

from compat_matrix.host.cells import Cell
from compat_matrix.host.spec import Declared, MatrixSpec
from compat_matrix.shared.vocabulary import ConclusionKind

SCHEMA = 1


class Expansion(NamedTuple):
    """What one sweep of a matrix file stood for when the run was planned."""

    package: str
    sweep: str  # as said: "every minor in >=5.14"
    releases: tuple[str, ...]


@dataclass(frozen=True)
class Matrix:
    """One matrix file as the run uses it."""

    spec: MatrixSpec  # sweeps expanded into releases; the run's exclude_newer and mutants applied
    cells: tuple[Cell, ...]  # what its report covers, in file order
    reports: Path
    baseline: Path | None = None  # an earlier report of this matrix, checked
    sweeps: tuple[Expansion, ...] = ()
    declared: tuple[Declared, ...] = ()  # the ranges the requirements declare for axes swept over them


@dataclass(frozen=True)
class Bisection:
    """A bisection, checked: its matrix, subject and axis exist, and its range's releases, oldest first, each with
    the cell that tests it (the other axes at their first value)."""

    matrix: str
    target: str
    axis: str
    range: str
    observation: str | None
    releases: tuple[str, ...]
    cells: tuple[Cell, ...]
    method: str | None = None

    def cell(self, release: Version) -> Cell:
        return self.cells[self.releases.index(str(release))]


@dataclass(frozen=True)
class Plan:
    home: Path
    noxfile: Path
    files: tuple[Path, ...]
    matrices: tuple[Matrix, ...]
    lanes: int = 1
    cached: bool = False
    selected: tuple[str, ...] | None = None  # the cells to run; None: every cell of the matrices
    report: bool = True
    # The release each ranged axis value of a cell installs (`{"transformers": "5.24.0"}` for `5.x`), by cell id,
    # and why a cell installs its values as requested instead (the index could not be read). None: not planned
    # (the plan lists cells; a cell run on its own resolves them when it starts).
    pins: Mapping[str, Mapping[str, str]] | None = None
    unpinned: Mapping[str, str] = field(default_factory=dict)
    bisection: Bisection | None = None
    handed_down: bool = False  # read from its file: the process that wrote it tells each finished cell
    fail_on: tuple[ConclusionKind, ...] = ()  # an override with one of these conclusions on any release fails the run

    def matrix(self, name: str) -> Matrix:
        return next(m for m in self.matrices if m.spec.name == name)

    def cells(self) -> list[tuple[Matrix, Cell]]:
        """Every cell the run may run, each once: the matrices' cells, then those only a bisection tests."""
        listed = [(m, c) for m in self.matrices for c in m.cells]
        if self.bisection:
            known = {c.id for _, c in listed}
            matrix = self.matrix(self.bisection.matrix)
            listed += [(matrix, c) for c in self.bisection.cells if c.id not in known]
        return listed

    def to_run(self) -> list[tuple[Matrix, Cell]]:
        return [(m, c) for m, c in self.cells() if self.selected is None or c.id in self.selected]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "home": str(self.home),
            "noxfile": str(self.noxfile),
            "files": list(map(str, self.files)),
            "matrices": [
                {
                    "spec": m.spec.to_json(),
                    "cells": [_cell_json(c) for c in m.cells],
                    "reports": str(m.reports),
                    "baseline": str(m.baseline) if m.baseline else None,
                    "sweeps": [[package, sweep, list(releases)] for package, sweep, releases in m.sweeps],
                    "declared": [d.to_json() for d in m.declared],
                }
                for m in self.matrices
            ],
            "lanes": self.lanes,
            "cached": self.cached,
            "selected": None if self.selected is None else list(self.selected),
            "report": self.report,
            "pins": None if self.pins is None else {cell: dict(p) for cell, p in self.pins.items()},
            "unpinned": dict(self.unpinned),
            "bisection": None if self.bisection is None else _bisection_json(self.bisection),
            "fail_on": [str(kind) for kind in self.fail_on],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Plan:
        matrices = tuple(
            Matrix(
                MatrixSpec.from_json(m["spec"]),
                tuple(map(_cell, m["cells"])),
                Path(m["reports"]),
                Path(m["baseline"]) if m["baseline"] else None,
                tuple(Expansion(package, sweep, tuple(releases)) for package, sweep, releases in m["sweeps"]),
                tuple(Declared.from_json(d) for d in m.get("declared", ())),
            )
            for m in data["matrices"]
        )
        bisection = data["bisection"]
        return cls(
            Path(data["home"]),
            Path(data["noxfile"]),
            tuple(map(Path, data["files"])),
            matrices,
            int(data["lanes"]),
            bool(data["cached"]),
            None if data["selected"] is None else tuple(data["selected"]),
            bool(data["report"]),
            data["pins"],
            dict(data["unpinned"]),
            None if bisection is None else _bisection(bisection),
            fail_on=tuple(ConclusionKind(kind) for kind in data.get("fail_on", ())),
        )


def _cell_json(cell: Cell) -> list[Any]:
    return [cell.matrix, [list(pair) for pair in cell.axes]]


def _cell(data: list[Any]) -> Cell:
    matrix, axes = data
    return Cell(str(matrix), tuple((str(a), str(v)) for a, v in axes))


def _bisection_json(b: Bisection) -> dict[str, Any]:
    return {
        "matrix": b.matrix,
        "target": b.target,
        "axis": b.axis,
        "range": b.range,
        "observation": b.observation,
        "releases": list(b.releases),
        "cells": [_cell_json(c) for c in b.cells],
        "method": b.method,
    }


def _bisection(data: dict[str, Any]) -> Bisection:
    cells_ = tuple(map(_cell, data["cells"]))
    return Bisection(
        data["matrix"],
        data["target"],
        data["axis"],
        data["range"],
        data["observation"],
        tuple(data["releases"]),
        cells_,
        data.get("method"),
    )
