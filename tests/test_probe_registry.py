"""Every registered probe is documented, listed in the README, and has a broken override that it catches."""

from __future__ import annotations

import re

from compat_matrix.probes import probes_for, registry
from conftest import ROOT, catches

README_ROW = re.compile(r"^\| `(\w+)` \| (.+?) \| (.+?) \|$", re.MULTILINE)


def readme_probes() -> dict[str, set[str]]:
    text = (ROOT / "README.md").read_text()
    return {m.group(1): set(re.findall(r"`(\w+)`", m.group(3))) for m in README_ROW.finditer(text)}


def test_every_probe_has_a_docstring_and_exercises_something():
    for probe in registry().values():
        assert probe.doc, probe.name
        assert probe.exercises, probe.name


def test_readme_lists_exactly_the_registered_probes():
    assert set(readme_probes()) == set(registry())


def test_every_probe_has_a_broken_override_it_must_catch():
    caught_by = {}
    for broken, pairs in catches().items():
        for probe, _ in pairs:
            caught_by.setdefault(probe, set()).add(broken)
    assert set(caught_by) == set(registry())
    assert readme_probes() == caught_by


def test_probes_for_selects_by_audited_method():
    names = [p.name for p in probes_for(("gradient_checkpointing_disable",))]
    assert names == ["disable_round_trip", "enable_sequence", "entry_points"]
    assert len(probes_for(("gradient_checkpointing_enable",))) == len(registry())
    assert probes_for(("forward",)) == []
