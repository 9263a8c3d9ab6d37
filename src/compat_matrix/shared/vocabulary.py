"""The words of a run, defined once: what a cell or subject came to, what a verdict says, what deleting an override
does, what to do about it, and what changed since a baseline.

Each kind is a `StrEnum` member, so it is its
own word: `Status.OK == "ok"`, JSON writes it as that string, and a result read back from a file compares equal to
the member. Adding a kind is one line; the order of the members is the order they are listed in.
"""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """What a cell or a subject came to: any status but OK means it could not run. The cell side may add kinds of
    its own, which travel as plain strings; those the host reads are members here."""

    OK = "ok"
    INSTALL_FAILED = "install-failed"
    CRASHED = "crashed"  # a cell's runner or a subject's child died: a signal or an exit code
    TIMED_OUT = "timed-out"  # a probe call past the matrix's timeout, or a cell past its limit
    NO_INTERPRETER = "interpreter not found"
    NOT_RUN = "not run"  # no result for it: the cell never ran, or the subject is missing from its result
    DAMAGED = "damaged result"  # a result file that cannot be read
    NOTHING_RAN = "nothing ran"  # a cell that ran, none of whose subjects could be imported or built
    FAILS_AS_SHIPPED = "fails as shipped"  # every probe that runs the class fails, with its overrides and without
    SKIPPED = "skipped"  # nothing to install: the value `pre` where the index has no pre-release to stand for
    IMPORT_FAILED = "import-failed"  # a subject's class (or a transformers module the probes need) cannot be imported
    COULD_NOT_BUILD = "could-not-build"  # the default factory cannot make the subject tiny: it needs a factory
    FACTORY_FAILED = "factory-failed"  # the matrix file's factory raised


class VerdictKind(StrEnum):
    """What the observations of one cell and subject say, when it ran. A cell or subject that could not run has its
    Status as its verdict instead."""

    SAME = "same"
    DIFFERS = "differs"
    INCONCLUSIVE = "inconclusive"
    NO_PROBE = "no probe"


RAN = frozenset(VerdictKind)  # the verdicts of a cell and subject that ran
EXPECTABLE = (VerdictKind.SAME, VerdictKind.DIFFERS)  # what a matrix file may expect


class ConclusionKind(StrEnum):
    """What deleting an override does on one release, and its symbol in a grid; listed in this order."""

    symbol: str

    def __new__(cls, word: str, symbol: str) -> ConclusionKind:
        member = str.__new__(cls, word)
        member._value_ = word
        member.symbol = symbol
        return member

    @property
    def option(self) -> str:
        """As an option spells it (`--fail-on could-not-run`)."""
        return self.value.replace(" ", "-")

    HARMFUL = "harmful", "✗"  # something errors with the override and runs without it
    NEEDED = "needed", "+"  # something runs with the override and errors without it
    DIFFERENTLY = "behaves differently", "≠"  # values differ, or errors on both sides
    ORPHANED = "orphaned", "∅"  # the release no longer defines, calls or reads what it overrode
    UNKNOWN = "inconclusive", "?"  # the verdict is inconclusive or no probe
    COULD_NOT_RUN = "could not run", "!"  # the cell or subject failed
    REDUNDANT = "redundant", "="  # deleting changes nothing


class AdviceKind(StrEnum):
    """What to do with one override, from its conclusions on every tested release."""

    DELETE = "Delete"
    KEEP = "Keep"
    REVIEW = "Review"
    PORT = "Port"  # a release stopped using it: what it provided is gone there
    FIX = "Fix"  # it breaks a release that calls it with what it cannot take, and does something elsewhere


class ObservationName(StrEnum):
    """The observations every probe call may make besides its own values (as compat_matrix.cell.probes names them)."""

    ERROR = "error"  # an exception the probe raised: type and first line of the message
    WARNINGS = "warnings"  # Python warnings and transformers' logger warnings raised while it ran
    REACHED = "reached"  # the audited methods whose code ran (the runner records it)
    LINES = "lines"  # as shipped: which statements of the audited methods' code ran (the runner records it)
    INCONCLUSIVE = "inconclusive"  # why the probe observed nothing meaningful


class ChangeKind(StrEnum):
    """What changed between two reports, listed in this order. New and vanished versions, and overrides that are
    new or gone (a deleted override, say), only inform; the others fail a baseline check."""

    NEW = "new version"
    VANISHED = "vanished version"
    CONCLUDED = "conclusion changed"  # of one override on one release
    NEW_OVERRIDE = "new override"
    GONE_OVERRIDE = "override gone"
    FLIPPED = "verdict flipped"  # of a subject whose reports hold no conclusion per override
    CHANGED = "observation changed"
    APPEARED = "observation appeared"
    GONE = "observation vanished"


FAILING_CHANGES = frozenset(
    {ChangeKind.CONCLUDED, ChangeKind.FLIPPED, ChangeKind.CHANGED, ChangeKind.APPEARED, ChangeKind.GONE}
)
