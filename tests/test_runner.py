"""The in-environment runner's own logic, on plain Python classes: no torch needed."""

from __future__ import annotations

import abc
import functools
import logging
import os
import resource
import time
import warnings
from collections.abc import Callable

import pytest

from compat_matrix.cell import forks, tracing
from compat_matrix.cell.discovery import covering, discover_overrides
from compat_matrix.cell.forks import forked, forked_each
from compat_matrix.cell.observe import ProbeTimeout, call_probe
from compat_matrix.cell.probes import Inconclusive, Probe
from compat_matrix.cell.runner import load_probe_modules
from compat_matrix.cell.subject import Ask, _to_run, pair, readers, run_isolated


class Root:
    base_model_prefix = "root"

    def greet(self):
        return "root"


def test_discover_overrides_lists_methods_and_attributes_over_the_base_package():
    class Wrapper(Root):
        config_class = object  # an attribute nothing in the package defines
        base_model_prefix = "wrapper"  # an attribute of the package's class

        def greet(self):  # overrides Root.greet
            return "w"

        def gradient_checkpointing_enable(self):  # nothing to override in this package
            pass

        def __init__(self):
            super().__init__()

    Root.gradient_checkpointing_disable = lambda self: None
    Wrapper.gradient_checkpointing_disable = lambda self: None
    Root.config_class = Wrapper.config_class  # what transformers' __init_subclass__ writes: the inherited value
    try:
        found = discover_overrides(Wrapper, package=__name__.split(".")[0])
    finally:
        del Root.gradient_checkpointing_disable, Root.config_class
    assert found == [
        ("base_model_prefix", f"{__name__}.Root", "attribute", None),
        ("greet", f"{__name__}.Root", "method", None),
        ("gradient_checkpointing_disable", f"{__name__}.Root", "method", None),
    ]


class Hub:
    __module__ = "hub.trainer"  # transformers' stand-in

    def compute_loss(self): ...

    def log(self): ...

    def evaluate(self): ...


def library(name: str, bases: tuple[type, ...], module: str, *names: str, abstract: bool = False) -> type:
    """A class of `module` defining `names` (and an abstract method, if `abstract`)."""
    body = {"__module__": module, **{n: lambda self: None for n in names}}
    if abstract:
        body["get_default_loss"] = abc.abstractmethod(lambda self: None)
    return abc.ABCMeta(name, bases, body)


BASE = library("BaseTrainer", (Hub,), "mylib.base", "compute_loss", "log", abstract=True)
FIRST = library("FirstTrainer", (BASE,), "mylib.first", "get_default_loss")
SECOND = library("SecondTrainer", (BASE,), "mylib.second", "get_default_loss", "log")  # its own log
MIDDLE = library("MiddleTrainer", (BASE,), "mylib.middle", "get_default_loss")
LEAF = library("LeafTrainer", (MIDDLE,), "mylib.leaf", "evaluate")  # MiddleTrainer is audited with BaseTrainer's
ADAPTERS = library("AdaptersMixin", (), "mylib.mixin", "log", abstract=True)  # adapters' ModelAdaptersMixin
HEADS = library("HeadsMixin", (ADAPTERS,), "mylib.heads", "get_default_loss")  # concrete, but audited nowhere
MODEL = library("AdapterModel", (HEADS, Hub), "mylib.model", "evaluate")


@pytest.mark.parametrize(
    ("cls", "expected"),
    [
        (BASE, [("compute_loss", None), ("log", None)]),
        (FIRST, [("compute_loss", "mylib.base.BaseTrainer"), ("log", "mylib.base.BaseTrainer")]),
        (SECOND, [("log", None), ("compute_loss", "mylib.base.BaseTrainer")]),
        (LEAF, [("evaluate", None)]),
        (MODEL, [("evaluate", None), ("log", "mylib.mixin.AdaptersMixin")]),
    ],
)
def test_an_abstract_base_of_the_librarys_overrides_are_audited_on_the_concrete_classes_that_inherit_them(
    cls, expected
):
    found = discover_overrides(cls, package="hub")
    assert [(name, via) for name, _, _, via in found] == expected
    assert {origin for _, origin, _, _ in found} == {"hub.trainer.Hub"}


@pytest.mark.parametrize(
    ("classes", "through"),
    [
        ((BASE, FIRST, SECOND, LEAF), ["FirstTrainer", "SecondTrainer"]),  # LeafTrainer: through MiddleTrainer
        ((BASE, SECOND), []),  # nothing found runs BaseTrainer.log: the base stays a subject
        ((BASE, FIRST, MIDDLE), ["FirstTrainer", "MiddleTrainer"]),
    ],
)
def test_an_abstract_base_is_covered_where_the_concrete_classes_found_inherit_every_override(classes, through):
    found = {cls: discover_overrides(cls, package="hub") for cls in classes}
    assert [k.__name__ for k in covering(BASE, found[BASE], found)] == through


def test_a_probe_call_past_the_timeout_raises_probe_timeout():
    def hangs(build):
        time.sleep(5)
        return {"never": True}

    with pytest.raises(ProbeTimeout, match=r"exceeded the timeout of 0\.2s"):
        call_probe(Probe("hangs", hangs, ("m",)), build=lambda: None, timeout=0.2)


def test_an_exception_and_a_warning_are_observations():
    def fails(build):
        warnings.warn("old | name", DeprecationWarning, stacklevel=1)
        raise ValueError("bad\nsecond line")

    values = call_probe(Probe("fails", fails, ("m",)), build=lambda: None)
    assert values == {"error": "ValueError: bad", "warnings": ["DeprecationWarning: old | name"]}


def test_a_subject_that_cannot_be_imported_is_labelled_from_the_child():
    result = run_isolated(Ask("no_such_module_here:Thing", ("m",), timeout=5))
    assert result.status == "import-failed" and "No module named 'no_such_module_here'" in result.reason


def test_logged_warnings_are_observations_even_from_a_logger_that_does_not_propagate(monkeypatch):
    library = logging.getLogger("transformers.some.module")  # transformers' own tree: propagate is off at its root
    monkeypatch.setattr(logging.getLogger("transformers"), "propagate", False)

    def logs(build):
        library.warning("old | format")
        logging.getLogger("mylib").warning("a notice")
        logging.getLogger("mylib").info("not a warning")
        return {}

    values = call_probe(Probe("logs", logs, ("m",)), build=lambda: None)
    assert values == {"warnings": ["mylib logger: a notice", "transformers logger: old | format"]}


def test_reached_names_the_audited_methods_whose_code_ran_and_inconclusive_is_an_observation():
    class Thing:
        def used(self):
            return 1

        def unused(self):
            return 2

    def uses(build):
        build().used()
        raise Inconclusive("saw nothing\nat all")

    watched = {name: tracing.bodies(vars(Thing)[name]) for name in ("used", "unused")}
    values = call_probe(Probe("uses", uses, ("used",)), build=Thing, watched=watched)
    assert values == {"inconclusive": "saw nothing", "reached": ["used"]}


def test_a_message_logged_once_is_seen_by_every_probe_that_logs_it():
    logger = logging.getLogger("transformers.once")
    logging.Logger.warning_once = functools.lru_cache(None)(logging.Logger.warning)  # as transformers defines it

    def logs(build):
        logger.warning_once("said once")
        return {}

    try:
        seen = [call_probe(Probe("logs", logs, ("m",)), build=lambda: None) for _ in range(2)]
    finally:
        del logging.Logger.warning_once
    assert seen == [{"warnings": ["transformers logger: said once"]}] * 2


def test_a_probe_module_that_raises_aborts_or_exits_at_import_is_named_and_the_others_load(tmp_path):
    (tmp_path / "good_probes.py").write_text("from compat_matrix import probe\nLOADED = True\n")
    (tmp_path / "raises.py").write_text("raise RuntimeError('cannot import this')\n")
    (tmp_path / "aborts.py").write_text("import os\nos.abort()\n")
    (tmp_path / "exits.py").write_text("import sys\nsys.exit(3)\n")
    refs = [str(tmp_path / name) for name in ("good_probes.py", "raises.py", "aborts.py", "exits.py")]
    progress = tmp_path / "progress"
    # in a child of its own, as a cell would be: nothing that happens here may reach the test process
    failed = forked(lambda: load_probe_modules([*refs, "no.such.module"], str(tmp_path), 10.0), progress, 60).answer
    assert failed == {
        "raises.py": "RuntimeError: cannot import this",
        "aborts.py": "killed by SIGABRT",
        "exits.py": "SystemExit: 3",
        "no.such.module": "ModuleNotFoundError: No module named 'no'",
    }


def test_pair_matches_values_by_name_and_adds_the_per_method_bases_where_they_ran():
    first = Probe("first", lambda build: {}, ("m",), carries=("x",))
    second = Probe("second", lambda build: {}, ("m",))
    runs = {
        "override": {"first": {"x": 1, "y": "a"}, "second": {"z": True}},
        "base": {"first": {"x": 2, "y": "b"}, "second": {"z": True}},
        "base without m": {"first": {"x": 1, "y": "b"}},  # it ran only the probe that differed
        "only m": {"second": {"z": False}},
    }
    observed = pair([first, second], runs)
    assert [(o.probe, o.name, o.override, o.base, o.carries, o.without, o.alone) for o in observed] == [
        ("first", "x", 1, 2, True, (("m", 1),), ()),
        ("first", "y", "a", "b", False, (("m", "b"),), ()),
        ("second", "z", True, True, True, (), (("m", False),)),
    ]
    assert pair([first], {"override": {"first": {"x": 1}}}) == []  # a probe the base did not complete


def test_a_name_deleted_alone_or_kept_alone_reruns_the_probes_that_differed_and_those_where_it_ran():
    """A per-name variant runs what differed and the probes where X ran, as shipped or as its base implementation with
    all deleted: elsewhere it runs the code of its reference."""
    probes = [Probe(name, lambda build: {}, ("m", "n"), carries=("x",)) for name in ("a", "b", "c", "d")]
    runs = {
        "override": {"a": {"x": 1, "y": 1, "reached": []}, "b": {"x": 1, "y": 1, "reached": ["m"]}},
        "base": {"a": {"x": 2, "y": 1, "reached": ["n"]}, "b": {"x": 1, "y": 2, "reached": []}},
    }
    runs["override"] |= {"c": {"x": 1, "reached": ["m", "n"]}, "d": {"x": 1, "y": 1, "reached": ["n"]}}
    runs["base"] |= {"c": {"x": 1, "reached": ["m"]}, "d": {"x": 1, "y": 2, "reached": []}}  # y only informs
    assert _to_run("override", probes, runs) == _to_run("base", probes, runs) == probes
    assert [p.name for p in _to_run("base without m", probes, runs)] == ["a", "b", "c"]
    assert [p.name for p in _to_run("base without n", probes, runs)] == ["a", "c", "d"]
    assert [p.name for p in _to_run("only m", probes, runs)] == ["a", "b", "c"]
    assert [p.name for p in _to_run("only n", probes, runs)] == ["a", "c", "d"]
    agreeing = {"override": runs["override"], "base": runs["override"]}  # the two agree: only where each ran
    assert [p.name for p in _to_run("base without m", probes, agreeing)] == ["b", "c"]
    assert [p.name for p in _to_run("only n", probes, agreeing)] == ["c", "d"]
    deleting_n_changes = {**runs, "base without n": {"d": {"x": 2, "reached": []}}}
    assert _to_run("only n", probes, deleting_n_changes) == []  # deleting it alone decides already
    assert [p.name for p in _to_run("only m", probes, deleting_n_changes)] == ["a", "b", "c"]


class _Own:
    def checked(self):
        return "own"


class _Reads(_Own):
    """`switch` tells whether `checked` is this class's own by identity; `unaudited` reads `switch` by getattr with
    a default; `calls` only calls `checked` (the watcher sees that as `checked` running)."""

    def switch(self):
        return type(self).checked is _Reads.checked

    def checked(self):
        return "own"

    def calls(self):
        return self.checked()

    def unaudited(self):
        return getattr(self, "switch", None)


def test_code_that_reads_a_name_without_calling_it_is_found_in_the_subjects_source():
    assert readers(_Reads, ("switch", "checked", "calls")) == {
        "checked": frozenset({"switch"}),  # read by identity; `calls` calls it, which the watcher sees
        "switch": None,  # read by code that is not audited: nothing tells where
        "calls": frozenset(),
    }


def test_a_name_read_by_identity_reruns_the_probes_where_its_reader_ran_and_unwatched_readers_rerun_all():
    """The masked case: as shipped and with all deleted the probe agrees, and `checked` never runs in it; with
    `checked` alone deleted, `switch`'s identity check turns. The per-name variant must run where `switch` ran."""
    probes = [Probe(name, lambda build: {}, ("switch", "checked"), carries=("x",)) for name in ("a", "b")]
    runs = {
        "override": {"a": {"x": 1, "reached": ["switch"]}, "b": {"x": 1, "reached": []}},
        "base": {"a": {"x": 1, "reached": []}, "b": {"x": 1, "reached": []}},
    }
    assert _to_run("base without checked", probes, runs) == []  # without what reads it: nothing to run
    assert [p.name for p in _to_run("base without checked", probes, runs, {"checked": frozenset({"switch"})})] == ["a"]
    assert [p.name for p in _to_run("only checked", probes, runs, {"checked": frozenset({"switch"})})] == ["a"]
    assert _to_run("base without checked", probes, runs, {"checked": None}) == probes


def test_two_children_at_once_where_two_cores_are_free_for_one_torch_thread_each_and_one_without(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # as in a cell
    assert forks._at_once() == min(2, len(os.sched_getaffinity(0)))
    for unset in ("", "²", "0"):  # torch may then use every core in each child
        monkeypatch.setenv("OMP_NUM_THREADS", unset)
        assert forks._at_once() == 1


def test_a_wait_ends_when_a_child_does_even_with_many_descriptors_open():
    """A batch ends when its last child does, not at the next poll; a process with descriptors from 1024 on open
    (select.select refuses them) waits all the same."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    opened = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        start = time.monotonic()
        forks._wait_any([pid], 30.0)
        assert time.monotonic() - start < 10
        os.waitpid(pid, 0)
    finally:
        for fd in opened:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_forked_each_runs_children_at_once_and_answers_in_order(tmp_path, monkeypatch):
    """Child 0 answers only once child 1 has started (so they overlap); child 1 names where it is, waits until the
    parent has shown it to whoever watches the parent, then aborts."""
    monkeypatch.setattr(forks, "_at_once", lambda: 2)
    marker, watched = tmp_path / "started", tmp_path / "progress"

    def until(done: Callable[[], bool]) -> bool:
        deadline = time.monotonic() + 20
        while not done() and time.monotonic() < deadline:
            time.sleep(0.01)
        return done()

    def aborts() -> None:
        marker.touch()
        (tmp_path / "progress.1").write_text("halfway")
        until(lambda: watched.exists() and watched.read_text() == "halfway")
        os.abort()

    works = [(lambda: until(marker.exists), tmp_path / "progress.0", "waiting"), (aborts, tmp_path / "progress.1", "")]
    first, second = forked_each(works, watched, limit=60)
    assert (first.status, first.answer) == ("ok", True)
    assert second.status == "crashed" and second.reason == "halfway: killed by SIGABRT"
    assert watched.read_text() == "halfway"


def test_a_child_that_fails_stops_the_ones_after_it_and_the_ones_before_it_run_on(tmp_path, monkeypatch):
    monkeypatch.setattr(forks, "_at_once", lambda: 2)
    late = tmp_path / "late"

    def answers_later() -> int:
        time.sleep(1)
        return 1

    def sleeps() -> None:
        time.sleep(60)  # killed long before: its answer would be "ok"

    def aborts_soon() -> None:
        time.sleep(0.2)
        os.abort()

    owns = [tmp_path / f"progress.{i}" for i in range(4)]
    works = [(answers_later, owns[0], ""), (aborts_soon, owns[1], ""), (late.touch, owns[2], ""), (sleeps, owns[3], "")]
    answers = forked_each(works, tmp_path / "progress", limit=120)
    assert [a.status for a in answers] == ["ok", "crashed", "stopped", "stopped"]
    assert answers[0].answer == 1 and not late.exists()  # the third never started: the second failed first
    first, second = forked_each([(aborts_soon, owns[0], ""), (sleeps, owns[1], "")], tmp_path / "progress", 120)
    assert (first.status, second.status) == ("crashed", "stopped")  # the sleeper was killed, not waited for


class Tiny:
    def forward(self):
        return "as shipped"


class Shrinkable(Tiny):
    def forward(self):
        return "override"


def test_a_subject_the_default_factory_cannot_build_is_labelled_unless_only_the_override_breaks_it(tmp_path):
    from compat_matrix.cell import tiny
    from compat_matrix.cell.subject import unbuildable

    def never(cls):
        raise tiny.CouldNotBuild(cls, "ValueError: no tiny size fits")

    def only_as_shipped(cls):
        if "forward" in vars(cls):  # the override is what breaks construction: a finding, not a missing factory
            raise tiny.CouldNotBuild(cls, "TypeError: from the override")
        return cls()

    progress = tmp_path / "progress"
    why, _ = unbuildable(Shrinkable, never, ("forward",), 30, progress)
    assert why == "could not build Shrinkable: ValueError: no tiny size fits; write a factory (see README)"
    assert unbuildable(Shrinkable, only_as_shipped, ("forward",), 30, progress) == (None, None)  # not a model
    assert unbuildable(Shrinkable, lambda cls: cls(), ("forward",), 30, progress) == (None, None)


class Greeter:
    def hello(self):
        return "base hello"

    def bye(self):
        return "base bye"


class AbortsWithoutHello(Greeter):
    def hello(self):
        return "hello"

    def bye(self):
        if "hello" not in vars(AbortsWithoutHello):
            os.abort()  # deleting `hello` alone kills the process: the per-name variant gives no values
        return "bye"


def test_a_per_name_variant_that_crashes_makes_its_name_inconclusive_and_keeps_the_subject(monkeypatch):
    from compat_matrix.cell import probes
    from compat_matrix.cell.probes import OTHER, probe
    from compat_matrix.shared import evidence

    def greets(build):
        greeter = build.cls()
        return {"hello": greeter.hello(), "bye": greeter.bye()}

    monkeypatch.setattr(probes, "_REGISTRY", dict(probes._REGISTRY))  # the test's probe goes with the test
    probe(exercises=("hello", "bye"), kinds=(OTHER,))(greets)
    result = run_isolated(Ask(f"{__name__}:AbortsWithoutHello", ("hello", "bye"), timeout=30))
    assert result.status == "ok", result.reason
    assert [variant for variant, _ in result.unfinished] == ["base without hello"]  # the others ran on
    hello = evidence.judge(result, "hello")
    assert hello.verdict == evidence.INCONCLUSIVE and "base without hello gave no values (crashed" in hello.reason
    bye = evidence.judge(result, "bye")
    assert bye.verdict == evidence.DIFFERS and [(o.override, o.base) for o in bye.differing] == [("bye", "base bye")]


def test_the_subjects_modules_see_no_command_line(monkeypatch, capsys):
    """angle-emb ships `scripts.push_bert_model`, which at import reads a model path and a hub name from four
    arguments: `init`'s `--discover angle-emb OUT.json` made it load a model and try to push it. The runner's own
    arguments are taken, then hidden."""
    from compat_matrix.cell import runner

    monkeypatch.setattr("sys.argv", ["-m", "--discover", "angle-emb", "out.json"])
    assert runner.main(["one argument"]) == 2  # its usage line
    import sys

    assert sys.argv == ["-m"]


def test_a_cells_imports_run_without_the_collector_and_its_probes_with_it(monkeypatch, tmp_path):
    """Collecting while torch and transformers are imported is wasted (what they build lives as long as the
    process): the runner turns the collector off for its imports, and on again, over a frozen heap, before the
    rehearsal and every probe after it (which must run as they would anywhere)."""
    import gc
    import sys
    import types

    from compat_matrix.cell import runner
    from compat_matrix.shared.request import CellRequest

    seen: dict[str, tuple[bool, int]] = {}

    class Rehearsed(Exception):
        pass

    def prewarm(modules):
        seen["imports"] = (gc.isenabled(), gc.get_freeze_count())
        return {}

    def rehearse(timeout):
        seen["rehearsal"] = (gc.isenabled(), gc.get_freeze_count())
        raise Rehearsed

    for name in ("torch", "transformers"):  # the imports themselves need no torch here
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setattr(runner, "die_with_parent", lambda: None)
    monkeypatch.setattr(runner, "prewarm", prewarm)
    monkeypatch.setattr(runner, "rehearse", rehearse)
    monkeypatch.setattr(sys, "path", list(sys.path))
    request = CellRequest("m", "c", {}, (), (), rootdir=str(tmp_path))
    gc.unfreeze()
    try:
        with pytest.raises(Rehearsed):
            runner.run(request)
    finally:
        gc.unfreeze()
        gc.enable()
    assert seen["imports"] == (False, 0)
    enabled, frozen = seen["rehearsal"]
    assert enabled and frozen > 0
