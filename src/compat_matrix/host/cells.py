"""Expand a MatrixSpec's axes into cells, and say what each cell installs and what its runner is asked.

Pure functions over value objects; standard library plus `packaging`, imported by the noxfile."""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from compat_matrix.host.spec import PYTHON, MatrixSpec, axis_requirement, is_local, local_name
from compat_matrix.shared.request import CellRequest, SubjectRequest

FILENAME_LIMIT = 150  # characters of a result file's name, well below the file systems' 255 bytes
_UNSAFE = re.compile(r"[^A-Za-z0-9._=-]+")
# Names that survive nox's folder names (punctuation runs become one "-") and our file names without losing anything
_PLAIN_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_PLAIN_VALUE = re.compile(r"[a-z0-9]+(?:\.[a-z0-9]+)*")


@dataclass(frozen=True)
class Cell:
    matrix: str
    axes: tuple[tuple[str, str], ...]  # (package or "python", requested value), in the file's axis order

    @property
    def requested(self) -> dict[str, str]:
        return dict(self.axes)

    @property
    def python(self) -> str | None:
        return self.requested.get(PYTHON)

    @property
    def id(self) -> str:
        """Also the nox session name: `cell:<matrix>:<axis>=<value>:...`.

        nox names the cell's environment after it with punctuation folded (`>=5` and `<=5` both become `5`), so a
        name with anything but lowercase letters, digits and dots in its values (or `-` in the matrix name) ends
        with a short hash of itself: two cells never share an environment or a result file."""
        words = ["cell", self.matrix, *(f"{axis}={value}" for axis, value in self.axes)]
        plain = _PLAIN_NAME.fullmatch(self.matrix) and all(_PLAIN_VALUE.fullmatch(v) for _, v in self.axes)
        return ":".join(words if plain else [*words, _digest(":".join(words))])

    @property
    def filename(self) -> str:
        name = _UNSAFE.sub("_", self.id.removeprefix("cell:"))
        if len(name) > FILENAME_LIMIT:
            name = f"{name[: FILENAME_LIMIT - 9]}_{_digest(self.id)}"
        return name + ".json"

    @property
    def pins(self) -> tuple[str, ...]:
        return tuple(axis_requirement(axis, value) for axis, value in self.axes if axis != PYTHON)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def cells(spec: MatrixSpec) -> list[Cell]:
    """The product of the axes, in file order (first axis slowest), less the combinations `exclude` drops. Sweeps
    must have been expanded (resolve.expand)."""
    if spec.sweeps:
        raise ValueError(f"{spec.path}: sweeps not expanded into releases")
    names = [axis.package for axis in spec.axes]
    product = [
        Cell(spec.name, tuple(zip(names, values, strict=True)))
        for values in itertools.product(*(axis.values for axis in spec.axes))
    ]
    return [cell for cell in product if not any(set(rule) <= set(cell.axes) for rule in spec.exclude)]


OVERRIDE = "--override="  # + a requirement: what envs writes to the overrides file it gives uv (`--override FILE`)


def newest_first(cell: Cell) -> tuple[float, ...]:
    """The key that runs a matrix's cells newest transformers first (`sorted(..., key=newest_first, reverse=True)`,
    the rest in file order): a run cut short, by its user or a job's time limit, has the releases a maintainer must
    hear about. `5.x` is the newest 5 release, so after every 5.y.z named; a value that names none runs last."""
    value = cell.requested.get("transformers", "")
    series = value.removesuffix(".x")
    try:
        release: tuple[float, ...] = Version(series).release
    except InvalidVersion:
        return ()
    return (*release, math.inf) if series != value else release


def install_args(spec: MatrixSpec, cell: Cell, pins: Mapping[str, str] | None = None) -> list[str]:
    """What the installer gets: the matrix's requirements (names or local paths) and extra requirements, then the
    cell's pins (exactly the release `pins` resolved a ranged value to, where it did), `--exclude-newer` when the
    matrix sets it, and its overrides (`OVERRIDE` + a requirement: an axis package named there overridden by the cell's
    pin, so that a library's own cap on it does not stop the cell).

    A local project is rebuilt whenever the environment is installed (its contents are part of the environment's
    fingerprint), so an edit to its code is what the probes see; uv would otherwise keep the copy it installed.
    """
    pins = pins or {}
    local = [name for r in spec.installs if is_local(r) and (name := local_name(r))]
    pytest = ["pytest"] if any(s.tests for s in spec.subjects) else []  # only to run the subjects' own tests
    pinned = {a: f"{a}=={pins[a]}" if a in pins else axis_requirement(a, v) for a, v in cell.axes if a != PYTHON}
    newer = [f"--exclude-newer={spec.exclude_newer}"] if spec.exclude_newer else []
    extra = [*pytest, *probes_need(spec, cell)]
    overrides = [OVERRIDE + pinned.get(o, o) for o in spec.overrides]
    reinstall = [f"--reinstall-package={name}" for name in local]
    return [*spec.installs, *pinned.values(), *extra, *newer, *overrides, *reinstall]


PROBES_NEED = ("accelerate",)  # what transformers' Trainer needs, which the Trainer probes run in every cell


def probes_need(spec: MatrixSpec, cell: Cell) -> list[str]:
    """What the probes need besides the cell's pins and the matrix's requirements, unpinned (whatever release the
    pins allow), unless the matrix names it already."""
    if "transformers" not in cell.requested:
        return []
    named = {*spec.packages, *cell.requested}
    return [package for package in PROBES_NEED if package not in named]


def local_requirements(spec: MatrixSpec) -> list[Path]:
    return [Path(r) for r in spec.installs if is_local(r)]


def runner_request(spec: MatrixSpec, cell: Cell) -> CellRequest:
    """What the in-environment runner is asked (its request file is `.to_json()`)."""
    subjects = tuple(
        SubjectRequest(s.target, tuple(s.methods), s.factory, tuple(s.tests), s.inputs, tuple(s.exclude))
        for s in spec.subjects
    )
    return CellRequest(
        spec.name,
        cell.id,
        dict(cell.requested),
        tuple(spec.packages),
        subjects,
        spec.timeout,
        tuple(spec.probes),
        str(spec.path.parent),
        spec.mutants,
    )
