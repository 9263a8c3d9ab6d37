"""What `bisect` is asked, checked against the planned matrices: the subject, the axis and the releases of the range,
each with the cell that tests it, and the observation or audited name it bisects on."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from packaging.version import Version

from compat_matrix.host import package_index
from compat_matrix.host.cells import Cell
from compat_matrix.host.exits import BadInput
from compat_matrix.host.planned import Bisection, Matrix
from compat_matrix.host.probe_names import probe_names
from compat_matrix.host.spec import PYTHON, MatrixSpec, Subject, axis_specifier, show


@dataclass(frozen=True)
class Bisect:
    """What `bisect` is asked, as typed."""

    range: str
    subject: str | None = None
    axis: str | None = None
    observation: str | None = None
    method: str | None = None  # bisect on this audited override's conclusion


def bisection_of(
    asked: Bisect, matrices: Sequence[Matrix], lookups: Callable[[str | None], Callable[[str], Sequence[Version]]]
) -> Bisection:
    """The matrix, subject, axis and releases a bisection is about; BadInput, one line, for the first problem."""
    subjects = [(m, subject.target) for m in matrices for subject in m.spec.subjects]
    wanted = asked.subject or (subjects[0][1] if len(subjects) == 1 else None)
    if wanted is None:
        raise BadInput([f"--subject: which one? ({', '.join(t for _, t in subjects)})"])
    found = [m for m, target in subjects if target == wanted or _found_in(wanted, target)]
    if len(found) != 1:
        why = "not a subject of the matrix" if not found else "a subject of several matrices: name one file"
        raise BadInput([f"--subject {show(wanted)}: {why} (subjects: {', '.join(t for _, t in subjects)})"])
    matrix = found[0]
    packages = [a.package for a in matrix.spec.axes if a.package != PYTHON]
    axis = asked.axis or ("transformers" if "transformers" in packages else next(iter(packages), ""))
    if axis not in packages:
        raise BadInput([f"--axis {show(axis)}: not a package axis of {matrix.spec.path} ({', '.join(packages)})"])
    if asked.observation is not None and asked.method is not None:
        raise BadInput(["--method and --observation: bisect on one of them"])
    if asked.observation is not None:
        _check_observation(asked.observation, matrix.spec)
    if asked.method is not None:
        _check_method(asked.method, next(s for s in matrix.spec.subjects if s.target == wanted))
    try:
        allowed = axis_specifier(asked.range)
    except ValueError as exc:
        raise BadInput([f"--range {show(asked.range)}: {exc}"]) from None
    try:
        versions = lookups(matrix.spec.exclude_newer)(axis)
    except package_index.ResolveError as exc:
        raise BadInput([f"--range {show(asked.range)}: cannot list the releases of {axis}: {exc}"]) from None
    releases = list(allowed.filter(versions))
    if not releases:
        newest = f"the newest is {versions[-1]}" if versions else "there is none"
        raise BadInput([f"--range {show(asked.range)}: no release of {axis} in it ({newest})"])
    base = {a.package: a.values[0] for a in matrix.spec.axes}
    tested = tuple(
        Cell(matrix.spec.name, tuple((a, str(release) if a == axis else v) for a, v in base.items()))
        for release in releases
    )
    listed = tuple(map(str, releases))
    return Bisection(matrix.spec.name, wanted, axis, asked.range, asked.observation, listed, tested, asked.method)


def _check_method(method: str, subject: Subject) -> None:
    """Refuse a `--method` that is not one of the subject's audited names (where the matrix file lists them; else
    any name a class could define)."""
    if subject.methods and method not in subject.methods:
        close = difflib.get_close_matches(method, list(subject.methods), n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"audited: {', '.join(subject.methods)}"
        raise BadInput([f"--method {show(method)}: not an audited name of {subject.target}; {hint}"])
    if not method.isidentifier():
        raise BadInput([f"--method {show(method)}: not a name a class could define"])


def _found_in(wanted: str, target: str) -> bool:
    """Whether a class (`module:Class`) lies in a module or package target, where the cells find it."""
    module = wanted.partition(":")[0]
    return ":" not in target and ":" in wanted and (module == target or module.startswith(f"{target}."))


_OBSERVATION = re.compile(r"\w+\.\S+")


def _check_observation(observation: str, matrix_spec: MatrixSpec) -> None:
    """Refuse an `--observation` that no probe of the run can make: a probe that does not exist, or a name that
    the probe never returns (where its source says which names it returns)."""
    if not _OBSERVATION.fullmatch(observation):
        raise BadInput([f"--observation {show(observation)}: as probe.name, e.g. trainer_step.default"])
    probe, name = observation.split(".", 1)
    known = probe_names(matrix_spec.probes)
    if known is None or probe not in known:
        if known is not None:
            close = difflib.get_close_matches(probe, list(known), n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"probes: {', '.join(known)}"
            raise BadInput([f"--observation {show(observation)}: no probe {probe!r} in this run; {hint}"])
        return
    names = known[probe]
    if names is not None and name not in names:
        raise BadInput([f"--observation {show(observation)}: {probe} observes {', '.join(sorted(names))}"])
