"""Bisect a range of releases: the first release whose outcome for one subject differs from the outcome at the
range's oldest release. The outcome is the subject's verdict, whether one observation differs, or the conclusion
for one audited override (`--method`: redundant, harmful, needed, …, by the evidence about that name alone, so that
another override that is needed throughout does not hide when this one changed). Pure: which releases to test
each round, what a round's outcomes leave, when to stop; the cells themselves are run by whoever calls `bisect`
(compat_matrix.host.nox_sessions). Host side, no nox, no torch.

The assumption, as git bisect's: the outcome changes once in the range. Every release before the first one that
differs has the oldest release's outcome, and every release from it on differs. The candidates are then the
releases after the oldest, and "nothing in the range differs" as one more candidate, N in all for N releases.

The rule:
- Round 1 tests the oldest release (its outcome is what the others are compared with), together with up to
  `lanes - 1` releases that split the candidates.
- No bisection of N candidates can promise fewer than ceil(log2 N) tests, one test a round; with the oldest release,
  1 + ceil(log2 N) tests is the budget, and it is never exceeded.
- Within that budget each round tests between 1 and `lanes` releases, chosen to end in the fewest rounds in the
  worst case (a small dynamic programme over the number of candidates, `rounds`), and, where two choices end as
  soon, the one that tests more releases at once: a second lane is used whenever it costs no test beyond the
  budget (it may end the bisection a round sooner). The releases tested split the candidates into parts as equal
  as they can be.

With 19 releases and 2 lanes: 6 tests in 4 rounds, at most.
"""

from __future__ import annotations

import argparse
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from packaging.version import Version

from compat_matrix.host.verdict import DIFFERS, SAME, decide
from compat_matrix.shared.results import CellResult

SCHEMA = 1
ABSENT = "absent"  # the observation was not made on that release


class CouldNotRun(Exception):
    """Cells of a round that gave no outcome: `failed` names each, and why."""

    def __init__(self, failed: list[str]):
        super().__init__("; ".join(failed))
        self.failed = failed


@functools.cache
def rounds(candidates: int, budget: int, lanes: int) -> float:
    """The fewest rounds that surely find the answer among `candidates` with at most `budget` tests, `lanes` at
    most a round (math.inf when the budget cannot)."""
    if candidates <= 1:
        return 0
    most = min(lanes, budget, candidates - 1)
    return min((1 + rounds(-(-candidates // (t + 1)), budget - t, lanes) for t in range(1, most + 1)), default=math.inf)


def budget(releases: int) -> int:
    """Tests a bisection of `releases` releases needs at most: the oldest, then halving the candidates."""
    return 1 + math.ceil(math.log2(releases)) if releases > 1 else 1


def split(lo: int, hi: int, parts: int) -> tuple[int, ...]:
    """The releases to test to split the candidates lo..hi into `parts` parts as equal as can be: each is the last
    candidate of a part but the last (if it differs, the answer is in its part or before)."""
    count = hi - lo + 1
    sizes = [count // parts + (1 if j < count % parts else 0) for j in range(parts)]
    points, end = [], lo - 1
    for size in sizes[:-1]:
        end += size
        points.append(end)
    return tuple(points)


def choose(lo: int, hi: int, left: int, lanes: int, first: bool) -> tuple[int, ...]:
    """The releases (indices, the oldest being 0) to test in the next round, the candidates being lo..hi and `left`
    tests left in the budget; in the first round the oldest release is one of them."""
    count = hi - lo + 1
    fixed = 1 if first else 0
    best: tuple[float, int] | None = None
    for tests in range(1, min(lanes, left) + 1):
        splits = tests - fixed
        if not (0 if first else 1) <= splits <= count - 1:
            continue
        worst = 1 + rounds(-(-count // (splits + 1)), left - tests, lanes)
        if best is None or worst <= best[0]:  # as few rounds; then the more lanes, which may end sooner
            best = (worst, tests)
    if best is None or best[0] == math.inf:
        raise ValueError(f"no round fits: candidates {lo}..{hi}, {left} tests left, {lanes} lanes")
    points = split(lo, hi, best[1] - fixed + 1)
    return ((0,) if first else ()) + points


def narrow(lo: int, hi: int, outcomes: Mapping[int, str], reference: str) -> tuple[int, int, bool]:
    """The candidates left after a round: (lo, hi, whether the outcomes contradict a single change, i.e. a release
    that differs before one that does not)."""
    differing = [i for i, outcome in outcomes.items() if i > 0 and outcome != reference]
    new_hi = min([hi, *differing])
    same = [i for i, outcome in outcomes.items() if i > 0 and outcome == reference]
    new_lo = max([lo, *(i + 1 for i in same if i < new_hi)])
    return new_lo, new_hi, any(i > new_hi for i in same)


@dataclass(frozen=True)
class Answer:
    releases: tuple[Version, ...]  # the range, oldest first
    first_differing: Version | None  # None: nothing in the range differs
    last_same: Version
    tested: dict[Version, str]  # every release tested, and its outcome
    rounds: tuple[tuple[Version, ...], ...]  # what each round tested
    contradicted: bool = False  # some outcomes said the outcome changes more than once in the range


def bisect(
    releases: Sequence[Version],
    test: Callable[[list[Version]], dict[Version, str]],
    lanes: int,
    log: Callable[[str], None] = print,
    axis: str = "transformers",
) -> Answer:
    """Find the first of `releases` (oldest first) whose outcome differs from the oldest's; `test` runs a round's
    releases side by side and returns each one's outcome (it raises CouldNotRun when a cell gave none)."""
    releases = tuple(releases)
    count = len(releases)
    if not count:
        raise ValueError("no releases to bisect")
    lo, hi, left = 1, count, budget(count)  # candidates: index of the first release that differs; count = none
    tested: dict[Version, str] = {}
    done: list[tuple[Version, ...]] = []
    reference: str | None = None
    contradicted = False
    while reference is None or lo < hi:
        picked = choose(lo, hi, left, max(1, lanes), reference is None)
        versions = [releases[i] for i in picked]
        log(f"round {len(done) + 1}: testing {axis} {', '.join(map(str, versions))} ({_candidates(releases, lo, hi)})")
        found = test(versions)
        outcomes = {i: found[releases[i]] for i in picked}
        tested.update({releases[i]: outcomes[i] for i in picked})
        reference = tested[releases[0]]
        lo, hi, contrary = narrow(lo, hi, outcomes, reference)
        contradicted = contradicted or contrary
        left -= len(picked)
        done.append(tuple(versions))
        said = ", ".join(f"{releases[i]} {outcomes[i]}" for i in picked)
        log(f"round {len(done)}: {said} → {_candidates(releases, lo, hi)}")
    first = releases[lo] if lo < count else None
    return Answer(releases, first, releases[lo - 1], tested, tuple(done), contradicted)


def _candidates(releases: Sequence[Version], lo: int, hi: int) -> str:
    """`first differing in 5.15.0 … 5.19.0 or none`: what is still possible."""
    count = len(releases)
    inside = [str(releases[i]) for i in range(lo, min(hi, count - 1) + 1)]
    text = " … ".join([inside[0], inside[-1]] if len(inside) > 2 else inside) if inside else ""
    if hi >= count:
        return f"first differing in {text} or none" if text else "none differs"
    return f"first differing: {text}" if len(inside) == 1 else f"first differing in {text}"


def outcome(result: CellResult, target: str, observation: str | None = None, method: str | None = None) -> str:
    """What a cell that ran says for the subject: its verdict; for `probe.name` whether that observation is the same
    with and without the override (`same`, `differs`, or `absent` where it was not made); for `method` the
    conclusion for that override (`absent` where the cell did not audit it)."""
    subject = next(s for s in result.subjects if s.target == target)
    if method is not None:
        from compat_matrix.host import conclude  # the conclusions' rules (and their imports) only where asked for

        if method not in subject.methods:
            return ABSENT
        return str(conclude.conclude_method(subject, decide(subject, result), method, dict(subject.titles)).kind)
    if observation is None:
        return decide(subject, result).verdict
    probe, name = observation.split(".", 1)
    found = [o for o in subject.observations if (o.probe, o.name) == (probe, name)]
    if not found:
        return ABSENT
    return SAME if found[0].same else DIFFERS


def answer_line(answer: Answer, axis: str, spec: str) -> str:
    """`first differing release: transformers 5.23.0 (5.22.2 same)`, or that nothing in the range differs."""
    same = answer.tested[answer.last_same]
    if answer.first_differing is None:
        oldest = answer.releases[0]
        tested = f"{oldest} … {answer.last_same}" if answer.last_same != oldest else str(oldest)
        return f"first differing release: none in {spec} ({axis} {tested}: {same} throughout)"
    return f"first differing release: {axis} {answer.first_differing} ({answer.last_same} {same})"


def answer_json(
    answer: Answer,
    matrix: str,
    target: str,
    axis: str,
    spec: str,
    observation: str | None = None,
    exclude_newer: str | None = None,
    method: str | None = None,
) -> dict:
    """The contract of `reports/<matrix>.bisect.json`."""
    return {
        "schema": SCHEMA,
        "matrix": matrix,
        "subject": target,
        "axis": axis,
        "range": spec,
        "observation": observation,
        "method": method,
        "first_differing": str(answer.first_differing) if answer.first_differing else None,
        "last_same": str(answer.last_same),
        "tested": {str(v): o for v, o in sorted(answer.tested.items())},
        "rounds": [[str(v) for v in found] for found in answer.rounds],
        "single_change": not answer.contradicted,
        "exclude_newer": exclude_newer,
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `compat-matrix bisect` and `nox -s bisect -- …`."""
    parser.add_argument("--subject", metavar="MODULE:CLASS", help="the subject (default: the matrix's only one)")
    parser.add_argument("--range", required=True, metavar="SPEC", help='PEP 440 specifier, e.g. ">=5.14,<=5.24"')
    parser.add_argument("--observation", metavar="PROBE.NAME", help="bisect on one observation (same, differs, absent)")
    parser.add_argument("--method", metavar="NAME", help="bisect on one audited override's conclusion (redundant, …)")
    parser.add_argument("--axis", metavar="PACKAGE", help="the axis to bisect (default: transformers)")
    parser.add_argument("--exclude-newer", metavar="DATE", help="list and install releases as of this date")
