"""Progress lines: k/N and the time left from earlier runs' durations, and a word while a cold install goes on."""

from __future__ import annotations

import os

import pytest

from compat_matrix.host.progress import INSTALLING, PROBING, Watcher, duration, time_left, tracked, write_state
from compat_matrix.shared.results import CellResult, write_json_atomic


@pytest.mark.parametrize(
    ("running", "queued", "lanes", "expected"),
    [
        ([], [], 2, 0),
        ([], [10, 10, 10], 2, 20),
        ([5], [10, 10], 2, 15),  # the running cell frees its lane at 5, the second queued cell takes it
        ([30, 1], [10], 2, 30),
        ([], [10, 10, 10], 1, 30),
    ],
)
def test_time_left_fills_the_lanes(running, queued, lanes, expected):
    assert time_left(running, queued, lanes) == expected


@pytest.mark.parametrize(("seconds", "text"), [(4.6, "5 s"), (60, "1 min"), (185, "3 min 5 s"), (3720, "1 h 2 min")])
def test_duration(seconds, text):
    assert duration(seconds) == text


class Clock:
    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def result(cell: str, seconds: float, status: str = "ok") -> CellResult:
    return CellResult("m", cell, {}, status=status, seconds=seconds)


def finish(path, cell: str, seconds: float, at: float) -> None:
    write_json_atomic(path, result(cell, seconds).to_json())
    os.utime(path, (at, at))


def test_one_line_per_finished_cell_with_the_time_left_from_earlier_durations(tmp_path):
    paths = {name: tmp_path / f"{name}.json" for name in "abc"}
    for name, seconds in (("a", 20.0), ("b", 40.0)):  # an earlier run: c never ran
        finish(paths[name], name, seconds, at=1.0)
    clock = Clock(1000.0)
    lines: list[str] = []
    watcher = Watcher(tracked(list(paths.items())), 2, lines.append, lambda r: f"{r.cell} ok", clock)
    assert [c.expected for c in watcher.cells] == [20.0, 40.0, None]
    watcher.tick()
    assert lines == []  # the earlier results are not this run's
    write_state(paths["b"], PROBING, started=1000.0)
    clock.now = 1021.0
    finish(paths["a"], "a", 21.0, at=1021.0)
    watcher.tick()
    # b has 40 - 21 s left in its lane; c (no history: the median, 21 s) takes the lane a freed
    assert lines == ["[1/3] a ok · about 21 s left"]
    write_state(paths["c"], PROBING, started=1022.5)
    finish(paths["b"], "b", 41.0, at=1041.0)
    finish(paths["c"], "c", 19.0, at=1041.0)
    clock.now = 1041.0
    watcher.tick()
    # c started at 1022.5 and is typical (the median of 20, 40, 21 and 41 s: 30.5 s), so 12 s are left
    assert lines[1:] == ["[2/3] b ok · about 12 s left", "[3/3] c ok · done"]


def test_a_long_install_says_so_every_half_minute(tmp_path):
    path = tmp_path / "a.json"
    clock = Clock(1000.0)
    lines: list[str] = []
    watcher = Watcher(tracked([("cell:a", path)]), 1, lines.append, str, clock)
    write_state(path, INSTALLING, started=1000.0)
    clock.now = os.path.getmtime(path.with_suffix(".state")) + 10
    watcher.tick()
    assert lines == []
    clock.now += 25
    watcher.tick()
    clock.now += 5
    watcher.tick()
    clock.now += 30
    watcher.tick()
    assert [line.split(",")[0] for line in lines] == ["cell:a: installing", "cell:a: installing"]
    assert lines[0].endswith("35 s so far") and lines[1].endswith("1 min 10 s so far")


def test_a_cell_none_of_whose_subjects_could_be_built_reads_nothing_ran_not_ok():
    from compat_matrix.host.progress import line
    from compat_matrix.shared.results import SubjectResult
    from compat_matrix.shared.vocabulary import Status

    unbuilt = SubjectResult("m:A", (), status="could-not-build", reason="AttributeError: x; write a factory")
    ran = SubjectResult("m:B", ())
    cell = CellResult("m", "cell:m:transformers=5.x", {"transformers": "5.x"}, subjects=(unbuilt,))
    assert cell.outcome == Status.NOTHING_RAN and cell.status == "ok"  # the result keeps each subject's own reason
    assert " | nothing ran | " in line(cell)
    assert CellResult("m", "c", {}, subjects=(unbuilt, ran)).outcome == "ok"  # one ran: the cell did
    assert CellResult("m", "c", {}).outcome == "ok"
    assert CellResult("m", "c", {}, status="install-failed", subjects=(unbuilt,)).outcome == "install-failed"
