"""Value objects that cross the boundary between a cell's environment and the host.

The JSON on disk is exactly
`to_json()`; `from_json` is its inverse and rejects what it does not recognise.
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compat_matrix.shared.vocabulary import Status

SCHEMA = 1
OK, NOTHING_RAN, CRASHED, TIMED_OUT = Status.OK, Status.NOTHING_RAN, Status.CRASHED, Status.TIMED_OUT


MESSAGE_LIMIT = 300  # characters of an exception or warning message kept in an observation


# An absolute path (not the tail of a relative one) up to the folder of installed packages.
_INSTALLED = re.compile(r"(?<![\w.~-])(?:[A-Za-z]:)?[/\\][^\s'\"()<>]*?[/\\](site-packages|dist-packages)[/\\]")


def short_paths(text: str) -> str:
    """`text` with every absolute path into an environment's installed packages cut to where it says something
    (`/work/x/.nox/init-mylib-…/lib/python3.11/site-packages/huggingface_hub/__init__.py` →
    `site-packages/huggingface_hub/__init__.py`): the same in every environment and every machine."""
    return _INSTALLED.sub(lambda found: f"{found.group(1)}/", text)


def one_line(text: str) -> str:
    """The first non-empty line of `text`, environment paths shortened (short_paths), cut to a length that fits in a
    table cell."""
    line = next((s.strip() for s in short_paths(str(text)).splitlines() if s.strip()), "")
    return line if len(line) <= MESSAGE_LIMIT else line[: MESSAGE_LIMIT - 1] + "…"


def describe_exception(exc: BaseException) -> str:
    message = one_line(str(exc))
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


FAILED = "error: "  # how a probe records, in place of a value, the exception that stopped it


def failure(exc: BaseException) -> str:
    """The value that stands for `exc` in an observation: `error: Type: message`."""
    return FAILED + describe_exception(exc)


def failure_in(value: Any) -> str | None:
    """The exception a value stands for (`Type: message`), if it is one."""
    return value.removeprefix(FAILED) if isinstance(value, str) and value.startswith(FAILED) else None


FLOAT_TOLERANCE = 1e-3  # relative: summaries of tensors agree when computed in another order


def equal(a: Any, b: Any) -> bool:
    """`a == b` for JSON values, but floats within FLOAT_TOLERANCE of each other (relative) are equal, and a
    boolean never equals a number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    numbers = isinstance(a, (int, float)) and isinstance(b, (int, float))
    if numbers and (isinstance(a, float) or isinstance(b, float)):
        return math.isclose(a, b, rel_tol=FLOAT_TOLERANCE, abs_tol=1e-9)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b, strict=True))
    return a == b


class ResultFileError(ValueError):
    """A cell result file that is missing, truncated, from another schema or not ours."""


@dataclass(frozen=True)
class Observation:
    """One named value a probe observed, for both variants of a subject.

    `carries`: whether the value decides the verdict (the probe says which of its observations do; `reached` and
    `inconclusive` never do). `without`: (name, value) with only that audited name deleted, the rest as shipped;
    `alone`: (name, value) with only that name kept, the rest deleted; where those variants ran."""

    probe: str
    name: str
    override: Any
    base: Any
    carries: bool = True
    without: tuple[tuple[str, Any], ...] = ()
    alone: tuple[tuple[str, Any], ...] = ()
    fixed: tuple[tuple[str, Any], ...] = ()  # (name, value) with that override widened as a Fix proposes
    contract: bool = False  # it holds the audited API's contract: a correct override gives what the base gives

    @property
    def same(self) -> bool:
        return equal(self.override, self.base)

    def to_json(self) -> dict[str, Any]:
        return {
            "probe": self.probe,
            "name": self.name,
            "override": self.override,
            "base": self.base,
            "carries": self.carries,
            "base_without": dict(self.without),
            "kept_alone": dict(self.alone),
            **({"fixed": dict(self.fixed)} if self.fixed else {}),
            **({"contract": True} if self.contract else {}),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Observation:
        without = tuple(data.get("base_without", {}).items())
        alone = tuple(data.get("kept_alone", {}).items())
        fixed = tuple(data.get("fixed", {}).items())
        carries = data.get("carries", True)
        contract = bool(data.get("contract", False))
        return cls(
            data["probe"], data["name"], data["override"], data["base"], carries, without, alone, fixed, contract
        )


@dataclass(frozen=True)
class TestOutcome:
    """One of the user's tests: its outcome as shipped and with the audited methods deleted (passed, failed,
    error, skipped or not run), the broken versions it catches, and the first line of each failure by variant."""

    __test__ = False  # not a test class, for pytest's collection of modules that import it

    id: str
    override: str
    base: str
    catches: tuple[str, ...] = ()
    failures: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "override": self.override,
            "base": self.base,
            "catches": list(self.catches),
            "failures": dict(self.failures),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TestOutcome:
        failures = tuple(data.get("failures", {}).items())
        return cls(data["id"], data["override"], data["base"], tuple(data.get("catches", ())), failures)


METHOD, ATTRIBUTE = "method", "attribute"  # what an audited name is


@dataclass(frozen=True)
class Override:
    """A name the subject defines itself (or inherits from an abstract base of its library, `via`) that a class of
    transformers after it in the MRO also defines."""

    name: str
    overrides: str  # `module.Class` of that class
    audited: bool
    kind: str = METHOD  # METHOD (functions, classmethods, staticmethods, properties) or ATTRIBUTE
    via: str | None = None  # `module.Class` of the library's abstract base that defines it; None: the subject

    def to_json(self) -> dict[str, Any]:
        data = {"name": self.name, "overrides": self.overrides, "audited": self.audited, "kind": self.kind}
        return {**data, "via": self.via} if self.via else data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Override:
        return cls(data["name"], data["overrides"], data["audited"], data.get("kind", METHOD), data.get("via"))


@dataclass(frozen=True)
class Code:
    """The code of one audited name as shipped, statement by statement, as the cell watched it: per unit (the
    function, and each function inside it: the hook it registers is its code too), its key (`name@line`) and the
    first line of each statement with its text. The `lines` observation of each probe says which of them ran."""

    name: str
    file: str
    units: tuple[tuple[str, tuple[tuple[int, str], ...]], ...]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "file": self.file, "units": {key: [list(s) for s in st] for key, st in self.units}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Code:
        units = tuple((key, tuple((line, text) for line, text in st)) for key, st in data["units"].items())
        return cls(data["name"], data["file"], units)


@dataclass(frozen=True)
class SubjectResult:
    """What the probes saw for one subject class in one cell.

    `status` is "ok" when the probes ran; otherwise a failure kind such as "import-failed" or "factory-failed",
    with `reason` saying why.
    """

    target: str
    methods: tuple[str, ...]
    status: str = OK
    reason: str | None = None
    observations: tuple[Observation, ...] = ()
    probes: tuple[str, ...] = ()  # the probes that ran
    variants: tuple[str, ...] = ()  # the variants that ran: override, base, base without <method>, ...
    unprobed: tuple[str, ...] = ()  # audited methods that no probe exercises
    tests: tuple[TestOutcome, ...] = ()  # the user's tests named for this subject
    # What the report calls each probe that ran (probe, title), and the observation it shows in the main table
    # (probe, label, observation): known where the probes ran, which is where a matrix's own probes are imported.
    titles: tuple[tuple[str, str], ...] = ()
    summaries: tuple[tuple[str, str, str], ...] = ()
    mutants: tuple[str, ...] = ()  # the broken versions the tests ran against ("broken <method>: <name>")
    overrides: tuple[Override, ...] = ()  # what the subject defines that overrides a name of transformers
    orphaned: tuple[tuple[str, str], ...] = ()  # (audited name, why the release gives it nothing to override)
    unfinished: tuple[tuple[str, str], ...] = ()  # (per-name variant, why it gave no values: crashed, hung, stopped)
    caveat: str | None = None  # why no difference observed is no proof that users would see none (stand-ins, …)
    kind: str | None = None  # what the subject is: a model, a trainer, a config, another class (compat_matrix.kinds)
    group: str | None = None  # the module or package target of the matrix file it was found in, if any
    # The audited methods' statements as shipped, where the cell could watch them; None in a result from before the
    # cells watched statements (a method missing from a tuple could not be watched: it has no source).
    code: tuple[Code, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "group": self.group,
            "methods": list(self.methods),
            "status": self.status,
            "reason": self.reason,
            "probes": list(self.probes),
            "variants": list(self.variants),
            "unprobed": list(self.unprobed),
            "tests": [t.to_json() for t in self.tests],
            "titles": dict(self.titles),
            "summaries": [list(s) for s in self.summaries],
            "mutants": list(self.mutants),
            "overrides": [o.to_json() for o in self.overrides],
            "orphaned": dict(self.orphaned),
            "unfinished": dict(self.unfinished),
            "caveat": self.caveat,
            "kind": self.kind,
            "code": None if self.code is None else [c.to_json() for c in self.code],
            "observations": [o.to_json() for o in self.observations],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SubjectResult:
        return cls(
            target=data["target"],
            methods=tuple(data["methods"]),
            status=data["status"],
            reason=data["reason"],
            probes=tuple(data.get("probes", ())),
            variants=tuple(data.get("variants", ())),
            unprobed=tuple(data.get("unprobed", ())),
            tests=tuple(TestOutcome.from_json(t) for t in data.get("tests", ())),
            titles=tuple(data.get("titles", {}).items()),
            summaries=tuple(tuple(s) for s in data.get("summaries", ())),
            mutants=tuple(data.get("mutants", ())),
            overrides=tuple(Override.from_json(o) for o in data.get("overrides", ())),
            orphaned=tuple(data.get("orphaned", {}).items()),
            unfinished=tuple(data.get("unfinished", {}).items()),
            caveat=data.get("caveat"),
            kind=data.get("kind"),
            group=data.get("group"),
            code=None if data.get("code") is None else tuple(Code.from_json(c) for c in data["code"]),
            observations=tuple(Observation.from_json(o) for o in data["observations"]),
        )


@dataclass(frozen=True)
class Unbuilt:
    """A class found that the default factory could not build (what `compat-matrix init` tries on each): why, the
    module missing here that the build needed (None: nothing is), and for a trainer the dataset columns it asked
    for, given one by one (KeyError: 'chosen', then 'rejected'), with what failed once it had them (None: it built)."""

    target: str  # "module:Class"
    reason: str  # `could not build <Class>: …; <remedy>`
    needs: str | None = None  # a top-level module that is not installed
    columns: tuple[str, ...] = ()
    then: str | None = None
    kind: str | None = None  # what the probes take it for: "model", "trainer"

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "reason": self.reason,
            "needs": self.needs,
            "columns": list(self.columns),
            "then": self.then,
            "kind": self.kind,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Unbuilt:
        columns = tuple(data.get("columns", ()))
        return cls(data["target"], data["reason"], data.get("needs"), columns, data.get("then"), data.get("kind"))


THROUGH = "abstract, audited through "  # + the concrete classes found: the kind of an abstract base not audited alone


@dataclass(frozen=True)
class Discovery:
    """What a module or package target of the matrix file stood for in one cell: the classes found there that
    subclass a transformers class and override something of it (each a subject of its own), those of a kind no
    probe family covers (a config, a processor), what was left out, and the modules that could not be imported."""

    target: str  # as the matrix file names it
    subjects: tuple[str, ...] = ()  # "module:Class"
    unaudited: tuple[tuple[str, str], ...] = ()  # ("module:Class", its kind)
    excluded: tuple[str, ...] = ()  # "module:Class", or modules, as the matrix file's `exclude` matched them
    skipped: tuple[tuple[str, str], ...] = ()  # (module, why it could not be imported)

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "subjects": list(self.subjects),
            "unaudited": dict(self.unaudited),
            "excluded": list(self.excluded),
            "skipped": dict(self.skipped),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Discovery:
        return cls(
            data["target"],
            tuple(data["subjects"]),
            tuple(data["unaudited"].items()),
            tuple(data["excluded"]),
            tuple(data["skipped"].items()),
        )


@dataclass(frozen=True)
class CellResult:
    """Everything one cell produced: what was asked, what got installed, and the subjects' observations."""

    matrix: str
    cell: str
    requested: dict[str, str]
    resolved: dict[str, str] = field(default_factory=dict)
    status: str = OK
    reason: str | None = None
    subjects: tuple[SubjectResult, ...] = ()
    seconds: float | None = None
    # Fingerprint of the installed pins, local requirements' contents, probe suite and subjects (see envs).
    cache_key: str | None = None
    reused: bool = False  # taken from an earlier run with the same cache_key (`--cached`)
    phases: tuple[tuple[str, float], ...] = ()  # (phase, seconds) of the run, in order: where a cell's time goes
    discovered: tuple[Discovery, ...] = ()  # what each module or package target stood for here
    notes: tuple[str, ...] = ()  # what the report must say of how it was installed (compat_matrix.host.fallback)

    @property
    def outcome(self) -> str:
        """What the cell came to, as a report says it: its status, or NOTHING_RAN where it ran and not one of its
        subjects could be imported or built (each says why; the run exits 3)."""
        if self.status == OK and self.subjects and all(s.status != OK for s in self.subjects):
            return NOTHING_RAN
        return self.status

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "matrix": self.matrix,
            "cell": self.cell,
            "requested": dict(self.requested),
            "resolved": dict(self.resolved),
            "status": self.status,
            "reason": self.reason,
            "seconds": self.seconds,
            "cache_key": self.cache_key,
            "reused": self.reused,
            "phases": [list(phase) for phase in self.phases],
            "discovered": [d.to_json() for d in self.discovered],
            "notes": list(self.notes),
            "subjects": [s.to_json() for s in self.subjects],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CellResult:
        return cls(
            matrix=data["matrix"],
            cell=data["cell"],
            requested=dict(data["requested"]),
            resolved=dict(data["resolved"]),
            status=data["status"],
            reason=data["reason"],
            seconds=data.get("seconds"),
            cache_key=data.get("cache_key"),
            reused=data.get("reused", False),
            phases=tuple((str(name), float(seconds)) for name, seconds in data.get("phases", ())),
            subjects=tuple(SubjectResult.from_json(s) for s in data["subjects"]),
            discovered=tuple(Discovery.from_json(d) for d in data.get("discovered", ())),
            notes=tuple(str(n) for n in data.get("notes", ())),
        )


def write_text_atomic(path: Path, text: str) -> None:
    """Write a file so that readers see the old one or the whole new one, never half of it. The temporary file is
    opened like any other (not with mkstemp, whose 0600 would make reports unreadable to the group and others)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        with open(tmp, "x", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2) + "\n")


def read_cell_result(path: Path) -> CellResult:
    """Load one cell result file, or raise ResultFileError naming the file and what is wrong with it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ResultFileError(f"{path}: no such result file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ResultFileError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict) or "schema" not in data:
        raise ResultFileError(f"{path}: not a compat-matrix cell result (no 'schema' key)")
    if data["schema"] != SCHEMA:
        raise ResultFileError(f"{path}: schema {data['schema']!r}, expected {SCHEMA}")
    try:
        return CellResult.from_json(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ResultFileError(f"{path}: malformed cell result ({type(exc).__name__}: {exc})") from None
