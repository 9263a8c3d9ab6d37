"""Every registered probe is documented, listed in the README, and has a broken override that it catches."""

from __future__ import annotations

import functools
import json
import re

from compat_matrix.cell.probes import ANY, CONFIG, MODEL, OTHER, TRAINER, probes_for, registry
from compat_matrix.cell.probes.generic import calls_near, function_of, hook_looked_up, kind_of, signature_gap, takes
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


def test_probes_for_selects_by_kind_and_audited_method_and_probes_of_any_method_come_last():
    models = {name: p for name, p in registry().items() if MODEL in p.kinds}
    generic = [p.name for p in models.values() if p.exercises == ANY]
    assert len(generic) == 10
    names = [p.name for p in probes_for(("gradient_checkpointing_disable",))]
    assert names == ["disable_round_trip", "enable_sequence", "entry_points", *generic]
    attention = [p.name for p in probes_for(("_supports_sdpa",))]
    assert attention == ["attention_implementations", *generic]  # the one probe of attributes alone
    assert len(probes_for(("gradient_checkpointing_enable",))) == len(models) - 1
    assert [p.name for p in probes_for(("forward",))] == generic
    assert probes_for(()) == []
    trainers = [p.name for p in probes_for(("compute_loss",), TRAINER)]
    reading = ["transformers_calls", "signature", "reading"]  # they read the class or an instance's attribute
    running = ["trainer_train", "trainer_accumulation", "trainer_evaluate", "trainer_evaluate_each", "trainer_predict"]
    running += ["trainer_save_model"]
    running.append("trainer_unused_columns")
    hooks = ["trainer_checkpoint_resume", "trainer_load_best_model", "trainer_log", "trainer_model_init"]
    assert trainers == [*reading, *running, *hooks, "trainer_model_card"]
    assert probes_for(("anything",), CONFIG) == probes_for(("anything",), OTHER) == []


MODULE = '''
import os

def helper():
    """Mentions model.tie_weights(recompute_mapping=False) in a docstring only."""

class Model:
    def init_weights(
        self,
        strict: bool = True,
    ):
        def nested(x):
            return x
        self.tie_weights(recompute_mapping=False)

    def load(self, missing):
        self.tie_weights(
            missing_keys=missing, recompute_mapping=False
        )
        other.tie_weights(*args, **kwargs)
'''


def test_call_sites_are_read_from_the_functions_that_mention_the_name_and_not_from_docstrings():
    found = {call for call in calls_near(MODULE, "tie_weights") if call[0] == "tie_weights"}
    assert found == {
        ("tie_weights", 0, ("missing_keys", "recompute_mapping"), False, False, 17),
        ("tie_weights", 0, ("recompute_mapping",), False, False, 14),
        ("tie_weights", 0, (), True, True, 20),
    }
    at_module_level = calls_near("model.tie_weights()\n", "tie_weights")
    assert at_module_level == (("tie_weights", 0, (), False, False, 1),)


def test_a_signature_gap_names_what_the_override_cannot_take():
    def base(self, missing_keys=None, recompute_mapping=True, *, strict=False):
        pass

    def override(self, strict=True):
        pass

    gap = signature_gap(override, base)
    assert gap["cannot_take"] == ["missing_keys (positional or keyword)", "recompute_mapping (positional or keyword)"]
    assert gap["other_defaults"] == {"strict": {"override": True, "base": False}}
    assert takes(override, 0, ("recompute_mapping",), False, False) is False
    assert takes(base, 0, ("recompute_mapping",), False, False) is True


def test_call_sites_are_kept_only_in_an_environment_compat_matrix_installed_merged_per_parser(monkeypatch, tmp_path):
    import sys
    import types

    from compat_matrix.cell.probes import generic

    monkeypatch.setitem(sys.modules, "transformers", types.SimpleNamespace(__version__="9.9.9"))
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    generic._kept.cache_clear()
    generic._keep("forward", [("a.py:1", 1, (), False, False)])
    assert not (tmp_path / generic.KEPT).exists()  # a user's own virtualenv gets nothing written into it
    (tmp_path / generic.STAMP).write_text("key")
    generic._keep("generate", [])
    kept = generic._kept_file()
    assert kept.name.startswith("call-sites-9.9.9-") and len(kept.name) > len("call-sites-9.9.9-.json")
    kept.write_text('{"written_meanwhile": []}')  # another cell sharing the environment
    generic._keep("tie_weights", [])
    assert set(json.loads(kept.read_text())) == {"forward", "generate", "tie_weights", "written_meanwhile"}
    generic._kept.cache_clear()


def test_a_parameter_named_otherwise_counts_only_where_transformers_passes_it_by_that_name():
    """`_get_train_sampler(self, dataset=None)` against the base's `train_dataset`: transformers calls it with the
    dataset by position, which the override takes; a call by keyword would not be."""

    def base(self, train_dataset=None):
        return train_dataset

    def ours(self, dataset=None):
        return dataset

    by_position = (("trainer.py:1", 1, (), False, False),)
    by_name = (("trainer.py:2", 0, ("train_dataset",), False, False),)
    assert signature_gap(ours, base, by_position)["cannot_take"] == []
    assert signature_gap(ours, base, by_name)["cannot_take"] == ["train_dataset (positional or keyword)"]
    assert signature_gap(ours, base)["cannot_take"] == ["train_dataset (positional or keyword)"]  # sites unknown


def test_a_default_counts_only_where_a_call_of_transformers_leaves_the_parameter_out():
    """trl's `training_step(self, model, inputs, num_items_in_batch)` has no default where the base's is None:
    transformers passes all three at every call, so the default never matters. A call that leaves it out, or
    unknown calls, make it count."""

    def base(self, model, inputs, num_items_in_batch=None):
        return num_items_in_batch

    def ours(self, model, inputs, num_items_in_batch):
        return num_items_in_batch

    differs = {"num_items_in_batch": {"override": "inspect._empty", "base": None}}
    every = (("trainer.py:1", 3, (), False, False), ("trainer.py:2", 2, ("num_items_in_batch",), False, False))
    assert signature_gap(ours, base, every)["other_defaults"] == {}
    left_out = (*every, ("trainer.py:3", 2, (), False, False))
    assert signature_gap(ours, base, left_out)["other_defaults"].keys() == differs.keys()
    assert signature_gap(ours, base)["other_defaults"].keys() == differs.keys()  # sites unknown


def test_every_built_in_probe_has_plain_words_for_the_first_screen_and_an_unknown_title_reads_as_it_is():
    from compat_matrix.host.wording.screen import spoken
    from compat_matrix.probes import plain_words

    built_in = [p for p in registry().values() if p.func.__module__.startswith("compat_matrix.cell.probes")]
    assert [p.name for p in built_in if p.plain == p.title] == []  # each says what a user does that it checks
    assert len({p.plain for p in built_in}) == len(built_in)  # and no two alike
    assert plain_words()["called with no arguments"] == "calling it with no arguments"
    # an older result's title, or a probe registered elsewhere: as the cell called it, each once
    assert spoken(["build and init_weights", "my probe", "my probe"]) == ["building the model", "my probe"]


def test_a_hook_no_class_defines_is_looked_up_only_by_hasattr_with_its_exact_name():
    """simpletransformers' `EET5._tie_weights`: no class of transformers defines it, but 4.57's modeling_utils calls
    it on every module that has it (`if hasattr(module, "_tie_weights"): module._tie_weights()`), so it is not
    orphaned there (it read Port from 4.31.0); 5.x looks it up nowhere. A mention alone, or a longer name, is no
    lookup (realcode's `_update_causal_mask` stays orphaned from 4.53)."""
    assert hook_looked_up("_tie_weights", '    if hasattr(module, "_tie_weights"):\n        module._tie_weights()')
    assert hook_looked_up("_tie_weights", "hasattr(self.model.decoder, '_tie_weights')")
    assert not hook_looked_up("_tie_weights", "module._tie_weights()  # a call, no lookup")
    assert not hook_looked_up("_tie_weights", 'hasattr(module, "_tie_weights_keys")')
    assert not hook_looked_up("_update_causal_mask", 'getattr(self, "_update_causal_mask", None)')


def test_what_an_attribute_is_to_its_readers():
    """`reading` compares a property (a cached one too) with a method; values are left to the other probes."""

    class Plain:
        limit = 3

        def method(self):
            return 1

        @property
        def prop(self):
            return 2

        @functools.cached_property
        def cached(self):
            return 3

        @classmethod
        def made(cls):
            return cls

    kinds = {name: kind_of(vars(Plain)[name]) for name in ("limit", "method", "prop", "cached", "made")}
    assert kinds == {"limit": None, "method": "method", "prop": "property", "cached": "property", "made": "method"}
    assert function_of(vars(Plain)["cached"]) is None  # read as a value: no signature to compare
