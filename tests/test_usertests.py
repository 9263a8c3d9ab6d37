"""The user's tests as compat-matrix runs them: outcomes counted as pytest counts them, broken versions, and what
the report says about them. No torch: plain Python subjects and test files made here."""

from __future__ import annotations

import tempfile
import textwrap
from pathlib import Path

from compat_matrix.cell import mutants, variants
from compat_matrix.cell.forks import forked
from compat_matrix.cell.user_tests import _stopped, run_tests
from compat_matrix.host.tests_seen import seen_tests
from compat_matrix.host.wording import needing
from compat_matrix.shared.results import OK, SubjectResult, TestOutcome

TESTS = """
import time
import pytest

@pytest.fixture
def broken_fixture():
    raise RuntimeError("fixture broke")

def test_passes():
    assert True

def test_fails():
    assert 1 == 2, "one is not two"

def test_errors_in_setup(broken_fixture):
    pass

def test_is_skipped():
    pytest.skip("not here")

def test_hangs():
    time.sleep(30)
"""


def outcomes_in_child(tmp_path, nodeids, timeout=2.0):
    progress = tmp_path / "progress"
    progress.write_text("start")
    run = forked(lambda: run_tests(nodeids, str(tmp_path), timeout, progress), progress, limit=60)
    assert run.status == OK, run.reason
    return {k: tuple(v) for k, v in run.answer.items()}


def test_every_outcome_is_counted_as_pytest_counts_it(tmp_path):
    (tmp_path / "test_user.py").write_text(textwrap.dedent(TESTS))
    (tmp_path / "test_broken_import.py").write_text("import no_such_module_anywhere\n")
    found = outcomes_in_child(tmp_path, [str(tmp_path / "test_user.py"), str(tmp_path / "test_broken_import.py")])
    assert found["test_user.py::test_passes"] == ("passed", None), found
    assert found["test_user.py::test_fails"][0] == "failed" and "one is not two" in found["test_user.py::test_fails"][1]
    assert found["test_user.py::test_errors_in_setup"] == ("error", "RuntimeError: fixture broke")
    assert found["test_user.py::test_is_skipped"][0] == "skipped"
    assert (
        found["test_user.py::test_hangs"][0] == "failed"
        and "timed out after 2s" in found["test_user.py::test_hangs"][1]
    )
    assert (
        found["test_broken_import.py"][0] == "error" and "no_such_module_anywhere" in found["test_broken_import.py"][1]
    )


class Base:
    def switch(self, flag=False, **options):
        self.state = (flag, options)
        return "base"


class Subject(Base):
    def switch(self, flag=False, **options):
        return super().switch(flag, **options)


def test_broken_versions_replace_the_method_with_a_broken_one_of_the_base(tmp_path):
    assert mutants.variant_names(("switch",)) == [
        "broken switch: does nothing",
        "broken switch: drops keyword arguments",
    ]

    def after(variant):
        progress = tmp_path / "progress"
        progress.write_text("start")

        def look():
            instance = variants.apply(Subject, variant, ("switch",))()
            returned = instance.switch(True, level=3)
            return [returned, list(getattr(instance, "state", (None, None)))]

        return forked(look, progress, limit=30).answer

    assert after("override") == ["base", [True, {"level": 3}]]
    assert after("broken switch: does nothing") == [None, [None, None]]
    assert after("broken switch: drops keyword arguments") == ["base", [True, {}]]


def outcome(test, override="passed", base="passed", catches=()):
    return TestOutcome(f"tests/test_x.py::{test}", override, base, catches)


def test_the_report_says_which_tests_need_the_override_and_which_catch_nothing_new():
    broken = ("m: a", "m: b", "m: c")
    newest = SubjectResult(
        "x:Y",
        ("m",),
        tests=(
            outcome("test_flag", catches=("m: a", "m: b")),
            outcome("test_kwargs", catches=("m: a",)),
            outcome("test_grads"),
            outcome("test_needs", base="failed", catches=("m: c",)),
            outcome("test_broken", override="failed", base="failed"),
        ),
        mutants=broken,
    )
    older = SubjectResult("x:Y", ("m",), tests=(outcome("test_flag", catches=("m: a",)),), mutants=broken)
    seen = seen_tests([("transformers 5.1.0", newest), ("transformers 5.0.0", older), ("transformers 4.0", None)])
    assert seen.per_version[0] == (
        "transformers 5.1.0",
        (("test_needs",), (), ("test_flag", "test_kwargs", "test_grads"), ("test_broken",), ()),
    )
    assert dict(seen.catches) == {
        "test_flag": "transformers 5.1.0: m: a, m: b; transformers 5.0.0: m: a",
        "test_kwargs": "m: a",
        "test_grads": "none",
        "test_needs": "m: c",
    }
    assert seen.catch_none == ("test_grads",)
    assert seen.adds_nothing == (("test_kwargs", "test_flag"),)
    assert needing(seen) == " But your tests test\\_needs pass only with the override on transformers 5.1.0."
    assert seen_tests([("transformers 5.1.0", SubjectResult("x:Y", ("m",)))]) is None


def test_a_node_id_that_does_not_exist_is_an_error_for_every_requested_test(tmp_path):
    (tmp_path / "test_user.py").write_text("def test_passes():\n    pass\n")
    found = outcomes_in_child(tmp_path, [str(tmp_path / "test_user.py::test_passes"), str(tmp_path / "test_nope.py")])
    assert set(found) == {"test_user.py::test_passes", "test_nope.py"}
    assert all(outcome == "error" and "not found" in message for outcome, message in found.values()), found


def test_a_test_that_kills_its_child_is_an_error_and_the_others_are_not_run(tmp_path):
    (tmp_path / "test_user.py").write_text("import os\n\ndef test_a():\n    pass\n\ndef test_dies():\n    os.abort()\n")
    progress = tmp_path / "progress"
    run = forked(lambda: run_tests([str(tmp_path / "test_user.py")], str(tmp_path), 5.0, progress), progress, 60)
    assert run.status == "crashed" and run.where == "running the test test_user.py::test_dies"
    assert _stopped(run, [str(tmp_path / "test_user.py")], str(tmp_path)) == {
        "test_user.py::test_dies": ("error", "crashed: killed by SIGABRT")
    }


def test_a_variant_that_cannot_be_made_says_why():
    progress = Path(tempfile.mkdtemp()) / "progress"
    run = forked(lambda: variants.apply(Subject, "base", ("nope",)), progress, 30, "making the base variant")
    assert run.status == "crashed" and run.reason.startswith("making the base variant: VariantError: Subject does not")
