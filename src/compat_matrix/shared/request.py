"""What the host asks of one cell, as the runner reads it: the request file, typed on both sides (the host writes
`CellRequest.to_json()`, the cell reads `CellRequest.from_json`), as `CellResult` is on the way back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from compat_matrix.shared.limits import DEFAULT_TIMEOUT

# The variable naming a descriptor the runner writes one byte to once its imports are done (host.import_lanes).
IMPORTED_FD = "COMPAT_MATRIX_IMPORTED_FD"


@dataclass(frozen=True)
class SubjectRequest:
    """One subject of the matrix file, as the cell runs it."""

    target: str  # `module:Class`, or a module or package whose classes are found in the cell
    methods: tuple[str, ...] = ()  # the audited names; none: every override the class defines
    factory: str | None = None  # `module:callable`
    tests: tuple[str, ...] = ()  # the user's pytest node ids or paths, absolute
    inputs: str | None = None  # `module:callable` giving a forward pass's keyword arguments
    exclude: tuple[str, ...] = ()  # of a module or package target: classes and modules left out

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "methods": list(self.methods),
            "factory": self.factory,
            "tests": list(self.tests),
            "inputs": self.inputs,
            "exclude": list(self.exclude),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SubjectRequest:
        return cls(
            data["target"],
            tuple(data.get("methods", ())),
            data.get("factory"),
            tuple(data.get("tests", ())),
            data.get("inputs"),
            tuple(data.get("exclude", ())),
        )


@dataclass(frozen=True)
class CellRequest:
    """One cell of a matrix: what to report it as, which installed versions to record, and what to run."""

    matrix: str
    cell: str  # the cell's id
    requested: dict[str, str]  # axis → the value the matrix file asks for
    packages: tuple[str, ...]  # whose installed versions the result records
    subjects: tuple[SubjectRequest, ...]
    timeout: float = DEFAULT_TIMEOUT  # seconds per probe call
    probes: tuple[str, ...] = ()  # probe modules of the matrix's own
    rootdir: str = "."  # the matrix file's folder: node ids, probe files and factories beside it are found there
    mutants: bool = False  # also run the subjects' tests against broken versions of the audited methods

    def to_json(self) -> dict[str, Any]:
        return {
            "matrix": self.matrix,
            "cell": self.cell,
            "requested": dict(self.requested),
            "packages": list(self.packages),
            "timeout": self.timeout,
            "probes": list(self.probes),
            "rootdir": self.rootdir,
            "mutants": self.mutants,
            "subjects": [s.to_json() for s in self.subjects],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CellRequest:
        return cls(
            data["matrix"],
            data["cell"],
            dict(data["requested"]),
            tuple(data["packages"]),
            tuple(SubjectRequest.from_json(s) for s in data["subjects"]),
            data.get("timeout", DEFAULT_TIMEOUT),
            tuple(data.get("probes", ())),
            data.get("rootdir", "."),
            bool(data.get("mutants", False)),
        )
