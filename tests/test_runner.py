"""The in-environment runner's own logic, on plain Python classes: no torch needed."""

from __future__ import annotations

import time

from compat_matrix.probes import Probe
from compat_matrix.runner import call_probe, discover_overrides


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


def test_a_probe_call_past_the_timeout_becomes_an_error_observation():
    def hangs(build):
        time.sleep(5)
        return {"never": True}

    values = call_probe(Probe("hangs", hangs, ("m",)), build=lambda: None, timeout=0.2)
    assert values == {"error": "ProbeTimeout: probe call exceeded the timeout of 0.2s"}
