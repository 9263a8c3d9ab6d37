"""The in-environment runner's own logic, on plain Python classes: no torch needed."""

from __future__ import annotations

import logging
import time
import warnings

import pytest

from compat_matrix import tracing
from compat_matrix.probes import Inconclusive, Probe
from compat_matrix.runner import ProbeTimeout, call_probe, discover_overrides, run_isolated


class Root:
    def greet(self):
        return "root"


def test_discover_overrides_lists_methods_over_the_base_package_and_whether_probed():
    class Wrapper(Root):
        config_class = object  # an attribute, not a method

        def greet(self):  # overrides Root.greet
            return "w"

        def gradient_checkpointing_enable(self):  # nothing to override in this package
            pass

        def __init__(self):
            super().__init__()

    Root.gradient_checkpointing_disable = lambda self: None
    Wrapper.gradient_checkpointing_disable = lambda self: None
    try:
        found = discover_overrides(Wrapper, package=__name__.split(".")[0])
    finally:
        del Root.gradient_checkpointing_disable
    assert found == [
        ("greet", f"{__name__}.Root", False),
        ("gradient_checkpointing_disable", f"{__name__}.Root", True),
    ]


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
    result = run_isolated("no_such_module_here:Thing", ("m",), None, timeout=5)
    assert result.status == "import-failed" and "No module named 'no_such_module_here'" in result.reason


def test_logged_warnings_are_observations_even_from_a_logger_that_does_not_propagate():
    library = logging.getLogger("transformers.some.module")  # transformers' own tree: propagate is off at its root
    logging.getLogger("transformers").propagate = False

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
