"""`compat-matrix init` looks into the package at both ends of the axis, adds what the package itself cannot be
imported without, and says which two installed distributions clash where its import fails inside a third's code."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from compat_matrix.host import distributions, starter
from compat_matrix.host.cells import cells
from compat_matrix.host.spec import Axis, MatrixSpec, load
from compat_matrix.host.starter import looking
from compat_matrix.host.starter.needs import skipped_line
from compat_matrix.shared.blame import Clash, clash, innermost
from compat_matrix.shared.results import Discovery

OLMO = distributions.Metadata("ai2-olmo", "0.6.0", ("numpy<2", "transformers", 'datasets; extra == "train"'))
OWNERS = {"datasets": ["datasets"], "pyarrow": ["pyarrow"], "numpy": ["numpy"], "hf_olmo": ["ai2-olmo"]}
VERSIONS = {"datasets": "2.14.4", "pyarrow": "26.0.1", "numpy": "1.26.4", "ai2-olmo": "0.6.0"}


def found(*skipped: tuple[str, str], clashes: dict[str, Clash] | None = None) -> starter.Found:
    discoveries = tuple(Discovery(module, skipped=((module, why),)) for module, why in skipped)
    return starter.Found({"ai2-olmo": "0.6.0"}, discoveries, {}, clashes or {})


def test_a_clash_is_the_distribution_whose_code_raised_and_those_its_message_names():
    raised = ["hf_olmo", "hf_olmo.modeling", "importlib._bootstrap", "datasets", "datasets.features.features"]
    said = clash(raised, "module 'pyarrow' has no attribute 'PyExtensionType'", OWNERS, VERSIONS, own=("ai2-olmo",))
    assert said == Clash(("datasets", "2.14.4"), (("pyarrow", "26.0.1"),))
    numpy = clash(["hf_olmo", "pyarrow"], "pyarrow requires NumPy 2.0 or newer, found 1.26.4", OWNERS, VERSIONS)
    assert numpy == Clash(("pyarrow", "26.0.1"), (("numpy", "1.26.4"),))  # its own name is not "beside" it
    assert Clash.from_json(numpy.to_json()) == numpy


def test_the_packages_own_code_failing_or_a_message_naming_nothing_installed_is_no_clash():
    own = clash(["hf_olmo"], "cannot import name 'X' from 'datasets'", OWNERS, VERSIONS, own=("ai2-olmo",))
    assert own is None  # the package's own import of a release that lacks X: the declared range's story
    assert clash(["datasets"], "something broke", OWNERS, VERSIONS) is None
    assert clash(["importlib._bootstrap"], "pyarrow", OWNERS, VERSIONS) is None  # no distribution's frame


def test_neither_the_package_nor_a_path_in_the_message_is_named_beside():
    """ImportError's "from 'huggingface_hub' (/…/init-llm2vec-…/site-packages/huggingface_hub/__init__.py)"."""
    owners = {**OWNERS, "huggingface_hub": ["huggingface-hub"], "llm2vec": ["llm2vec"], "sentence_transformers": ["st"]}
    versions = {**VERSIONS, "huggingface-hub": "0.26.0", "llm2vec": "0.2.3", "st": "2.2.2"}
    message = (
        "cannot import name 'cached_download' from 'huggingface_hub' "
        "(/work/x/.nox/init-llm2vec-transformers_4.44.2/lib/python3.11/site-packages/huggingface_hub/__init__.py)"
    )
    said = clash(["llm2vec", "sentence_transformers"], message, owners, versions, own=("llm2vec",))
    assert said == Clash(("st", "2.2.2"), (("huggingface-hub", "0.26.0"),))


def test_a_clash_is_read_off_the_exception_at_the_bottom_of_a_chain():
    """transformers' lazy modules re-raise a failed import as a RuntimeError `from` it: the clash is the inner one's,
    not transformers' own."""
    try:
        try:
            raise AttributeError("inner")
        except AttributeError as inner:
            raise RuntimeError("Failed to import transformers.trainer") from inner
    except RuntimeError as outer:
        assert str(innermost(outer)) == "inner"
    try:
        try:
            raise KeyError("first")
        except KeyError:
            raise ValueError("while handling it") from None  # suppressed: the outer one is the bottom
    except ValueError as plain:
        assert innermost(plain) is plain


def test_the_other_ends_clash_is_kept_only_for_what_failed_there_alone():
    clash_there = Clash(("datasets", "2.14.4"), (("pyarrow", "26.0.1"),))
    here = found(("lib_train", "ImportError: cannot import name 'X' from 'transformers'"))
    missing = "AttributeError: module 'pyarrow' has no attribute 'PyExtensionType'"
    there = found(("lib_train", missing), ("lib_data", missing))
    there = replace(there, clashes={"lib_train": clash_there, "lib_data": clash_there})
    merged = starter.also(here, there, "transformers 4.57.6")
    assert merged.clashes == {"lib_data": clash_there}  # lib_train fails here for a reason of its own


def test_an_undeclared_module_the_package_itself_needs_is_added_an_optional_submodules_is_not():
    seen = starter.Found(
        {},
        (
            Discovery("hf_olmo", skipped=(("hf_olmo", "ModuleNotFoundError: No module named 'datasets'"),)),
            Discovery("olmo", skipped=(("olmo.train", "ModuleNotFoundError: No module named 'wandb'"),)),
        ),
        {},
    )
    ((dist, why),) = starter.undeclared(seen, OLMO, ("ai2-olmo==0.6.0",))
    assert dist == "datasets"
    assert why == (
        "hf_olmo imports datasets (ModuleNotFoundError: No module named 'datasets'), which ai2-olmo 0.6.0 declares "
        "only for its extra train"
    )
    assert starter.undeclared(seen, OLMO, ("ai2-olmo==0.6.0", "datasets")) == []  # asked for already: not again
    sklearn = found(("lib", "ModuleNotFoundError: No module named 'sklearn'"))
    assert [d for d, _ in starter.undeclared(sklearn, distributions.Metadata("lib", "1", ()), ())] == ["scikit-learn"]
    # Python names the first part that is missing: a missing submodule's package is installed, nothing to add
    submodule = found(("lib", "ModuleNotFoundError: No module named 'transformers.models.mistral.modeling_foo'"))
    assert starter.undeclared(submodule, distributions.Metadata("lib", "1", ()), ()) == []
    protobuf = found(("lib", "ModuleNotFoundError: No module named 'google.protobuf'"))  # a namespace package's
    assert [d for d, _ in starter.undeclared(protobuf, distributions.Metadata("lib", "1", ()), ())] == ["protobuf"]
    declared = distributions.Metadata("lib", "1", ("scikit-learn",))  # declared and still missing: not ours to add
    assert starter.undeclared(sklearn, declared, ()) == []


def test_a_submodule_that_fails_for_what_an_extra_declares_names_the_requirement_that_installs_it():
    """colpali-engine 0.3.18: `colpali_engine.trainer` (its ContrastiveTrainer) needs `datasets`, of its extra
    `all`; init adds nothing for a submodule, but the starter file says what to require to audit it."""
    requires = ("datasets>=2.19.1; extra == 'all'", "peft; extra == 'all'", "datasets>=2.19.1; extra == 'train'")
    colpali = distributions.Metadata("colpali-engine", "0.3.18", requires)
    missing = "ModuleNotFoundError: No module named 'datasets'"
    assert skipped_line("colpali_engine.trainer", missing, colpali) == (
        "colpali_engine.trainer: ModuleNotFoundError: No module named 'datasets' (colpali-engine declares datasets"
        " for its extras all, train: require colpali-engine[train] to audit it)"  # the extra that installs least
    )
    wandb = "ModuleNotFoundError: No module named 'wandb'"  # declared nowhere: said as it is
    assert skipped_line("colpali_engine.log", wandb, colpali) == f"colpali_engine.log: {wandb}"
    other = "ImportError: cannot import name 'X' from 'datasets'"  # installed, and another failure
    assert skipped_line("colpali_engine.data", other, colpali) == f"colpali_engine.data: {other}"


def test_with_extra_adds_to_the_matrix_and_says_why(tmp_path):
    spec = MatrixSpec(tmp_path / "m.toml", "ai2-olmo", ("ai2-olmo==0.6.0",), (Axis("transformers", ("5.x",)),), ())
    start = starter.Start(starter.Asked("ai2-olmo"), spec.path, "ai2-olmo==0.6.0", OLMO, spec, spec.axes, (), None)
    added = starter.with_extra(start, [("datasets", "hf_olmo imports datasets")])
    assert added.spec.extra_requirements == ("datasets",) and added.added == (("datasets", "hf_olmo imports datasets"),)
    assert "datasets" in added.spec.installs and start.spec.extra_requirements == ()


def test_a_clash_line_names_both_distributions_and_the_pin_to_write():
    datasets = Clash(("datasets", "2.14.4"), (("pyarrow", "26.0.1"),))
    why = "AttributeError: module 'pyarrow' has no attribute 'PyExtensionType'"
    assert starter.clash_line("tsfm_public", why, datasets, distributions.Metadata("granite-tsfm", "0.3.11", ())) == (
        "could not import tsfm_public: datasets 2.14.4 fails beside pyarrow 26.0.1 (AttributeError: module 'pyarrow' "
        "has no attribute 'PyExtensionType'): pin one in extra_requirements: \"datasets>2.14.4\" (a newer datasets) "
        'or "pyarrow<26.0.1" (an older pyarrow)'
    )
    numpy = Clash(("pyarrow", "26.0.1"), (("numpy", "1.26.4"),))
    line = starter.clash_line("hf_olmo", "ImportError: pyarrow requires NumPy 2.0 or newer", numpy, OLMO)
    assert line == (
        "could not import hf_olmo: pyarrow 26.0.1 fails beside numpy 1.26.4 (ImportError: pyarrow requires NumPy 2.0 "
        'or newer); ai2-olmo 0.6.0 requires numpy<2: pin an older pyarrow in extra_requirements ("pyarrow<26.0.1", '
        "lower until it imports)"
    )
    seen = found(("hf_olmo", "ImportError: pyarrow requires NumPy 2.0 or newer"), clashes={"hf_olmo": numpy})
    assert starter.clash_lines(seen, OLMO) == [line]


def write(tmp_path: Path, values: str) -> MatrixSpec:
    path = tmp_path / "m.toml"
    path.write_text(f'[matrix]\nname = "m"\nrequirements = ["m"]\n[axes]\ntransformers = [{values}]\n')
    path.write_text(path.read_text() + '[[subjects]]\ntarget = "m:M"\n')
    return load(path)


def test_the_other_end_is_the_oldest_after_the_newest_and_the_newest_after_any_other(tmp_path):
    spec = write(tmp_path, '"4.57.x", "5.0.x", "5.x"')
    pins = [{"transformers": "4.57.6"}, {"transformers": "5.0.0"}, {"transformers": "5.24.0"}]
    looks = list(zip(cells(spec), pins, strict=True))
    newest, oldest = looks[2], looks[0]
    assert starter.other_end(looks, 2) == oldest
    assert starter.other_end(looks, 0) == newest and starter.other_end(looks, 1) == newest
    assert starter.other_end(looks[:1], 0) is None
    same = [(looks[0][0], {"transformers": "5.24.0"}), (looks[2][0], {"transformers": "5.24.0"})]
    assert starter.other_end(same, 0) is None  # both values resolve to one release: nothing more to look at


def test_where_the_newest_cannot_be_installed_init_looks_at_the_next_and_then_the_oldest(tmp_path, monkeypatch):
    """colpali's and chronos' init installed the uninstallable 5.25.0 twice and never looked at the oldest."""
    spec = write(tmp_path, '"4.57.x", "5.0.x", "5.x"')
    pins = [{"transformers": "4.57.6"}, {"transformers": "5.0.0"}, {"transformers": "5.24.0"}]
    newest_first = tuple(reversed(list(zip(cells(spec), pins, strict=True))))
    start = starter.Start(starter.Asked("m"), spec.path, "m==1", OLMO, spec, spec.axes, newest_first, None)
    looked: list[str] = []
    classes = starter.Found({"m": "1"}, (Discovery("m", ("m:A",)),), {}, {})

    def look_into(start, cell, pins, *rest):
        looked.append(pins["transformers"])
        return (start, None, "cannot be installed") if pins["transformers"] == "5.24.0" else (start, classes, None)

    monkeypatch.setattr(looking, "_look_into", look_into)
    looking._look(start, tmp_path, tmp_path, print, {})
    assert looked == ["5.24.0", "5.0.0", "4.57.6"]


def test_what_the_other_end_could_not_import_is_said_and_what_only_it_found_is_kept(tmp_path):
    here = starter.Found(
        {"transformers": "5.24.0"},
        (Discovery("lib", ("lib.a:A",)),),
        {"lib.a:A": (("forward", "method"),)},
    )
    there = starter.Found(
        {"transformers": "4.57.6"},
        (Discovery("lib", ("lib.a:A", "lib.b:B"), skipped=(("lib.c", "ImportError: cannot import name 'X'"),)),),
        {"lib.a:A": (("forward", "method"),), "lib.b:B": (("tie_weights", "method"),)},
    )
    both = starter.also(here, there, "transformers 4.57.6")
    assert both.subjects == ["lib.a:A", "lib.b:B"]
    assert both.elsewhere == (("transformers 4.57.6", (("lib.c", "ImportError: cannot import name 'X'"),)),)


def test_the_starter_file_says_why_init_added_a_requirement_and_what_the_other_end_could_not_import(tmp_path):
    output = tmp_path / "matrix" / "ai2-olmo.toml"
    spec = MatrixSpec(output, "ai2-olmo", ("ai2-olmo==0.6.0",), (Axis("transformers", ("4.57.x", "5.x")),), ())
    start = starter.Start(starter.Asked("ai2-olmo"), output, "ai2-olmo==0.6.0", OLMO, spec, spec.axes, (), None)
    start = starter.with_extra(start, [("datasets", "hf_olmo imports datasets")])
    numpy = Clash(("pyarrow", "26.0.1"), (("numpy", "1.26.4"),))
    seen = starter.Found(
        {"ai2-olmo": "0.6.0", "transformers": "5.24.0"},
        (Discovery("hf_olmo", ("hf_olmo.modeling_olmo:OLMoForCausalLM",)),),
        {"hf_olmo.modeling_olmo:OLMoForCausalLM": (("tie_weights", "method"),)},
        {"olmo": numpy},
        (("transformers 4.57.6", (("olmo", "ImportError: pyarrow requires NumPy 2.0 or newer"),)),),
    )
    output.parent.mkdir()
    output.write_text(starter.text(start, seen, "compat-matrix run matrix/ai2-olmo.toml"))
    text = output.read_text()
    assert '# datasets: added by init: hf_olmo imports datasets\nextra_requirements = ["datasets"]' in text
    assert "# Could not be imported with transformers 4.57.6, but could with transformers 5.24.0:" in text
    assert "#   could not import olmo: pyarrow 26.0.1 fails beside numpy 1.26.4" in text
    assert load(output).extra_requirements == ("datasets",)


def test_a_clash_with_a_distribution_the_package_caps_is_fixed_by_a_release_from_before_the_cap():
    import datetime

    def at(day: str) -> datetime.datetime:
        return datetime.datetime.fromisoformat(f"{day}T00:00:00+00:00")

    from packaging.version import Version

    uploads = {
        "numpy": {
            Version("1.26.4"): at("2024-02-05"),
            Version("2.0.0rc1"): at("2024-03-30"),
            Version("2.0.0"): at("2024-06-16"),
        },
        "pyarrow": {
            Version("16.1.0"): at("2024-05-14"),
            Version("17.0.0"): at("2024-07-16"),
            Version("26.0.1"): at("2026-10-01"),
        },
    }
    numpy = Clash(("pyarrow", "26.0.1"), (("numpy", "1.26.4"),))
    pin, why = starter.clash_fix(numpy, OLMO, uploads.__getitem__)
    assert pin == "pyarrow<17.0.0"
    assert why == (
        "pyarrow 26.0.1 fails beside numpy 1.26.4, and ai2-olmo 0.6.0 requires numpy<2: a pyarrow from before "
        "numpy 2.0.0 (2024-06-16)"
    )
    uncapped = distributions.Metadata("lib", "1", ("numpy",))
    assert starter.clash_fix(numpy, uncapped, uploads.__getitem__) is None  # nothing holds numpy back: not ours


def test_init_tries_each_fix_once(tmp_path, monkeypatch):
    spec = MatrixSpec(tmp_path / "m.toml", "ai2-olmo", ("ai2-olmo==0.6.0",), (Axis("transformers", ("5.x",)),), ())
    start = starter.Start(starter.Asked("ai2-olmo"), spec.path, "ai2-olmo==0.6.0", OLMO, spec, spec.axes, (), None)
    numpy = Clash(("pyarrow", "26.0.1"), (("numpy", "1.26.4"),))
    clashes = {"hf_olmo": numpy, "olmo": numpy}
    seen = found(("hf_olmo", "ImportError: NumPy 2"), ("olmo", "ImportError: NumPy 2"), clashes=clashes)
    monkeypatch.setattr(looking, "clash_fix", lambda *args: ("pyarrow<17", "why"))
    assert starter.fixes(seen, start, dict) == [("pyarrow<17", "why")]  # two modules, one fix
    pinned = starter.with_extra(start, [("pyarrow<17", "why")])
    assert starter.fixes(seen, pinned, dict) == []  # it did not fix it: not tried again


def test_a_transformers_module_the_probes_need_that_cannot_be_imported_fails_the_cell_once_with_its_cause():
    from compat_matrix.cell.runner import unimportable

    datasets = Clash(("datasets", "2.14.4"), (("pyarrow", "26.0.1"),))
    why = unimportable(
        {
            "transformers.trainer": ("AttributeError: module 'pyarrow' has no attribute 'PyExtensionType'", datasets),
            "transformers.training_args": ("ImportError: cannot import name 'Trainer'", None),
        }
    )
    assert why == (
        "the probes need transformers.trainer, which cannot be imported here: AttributeError: module 'pyarrow' has "
        "no attribute 'PyExtensionType' (datasets 2.14.4 fails beside pyarrow 26.0.1)"
    )
    llama = {"transformers.models.llama.modeling_llama": ("ModuleNotFoundError: No module named 'x'", None)}
    assert unimportable(llama).endswith("No module named 'x' (transformers has it from 4.28.0)")  # 4.27 and older
    assert unimportable({"pytest": ("ModuleNotFoundError: No module named 'pytest'", None)}) is None
    assert unimportable({}) is None


def test_the_declared_range_is_added_only_where_the_releases_asked_leave_out_a_range_with_a_lower_bound(tmp_path):
    spec = MatrixSpec(tmp_path / "m.toml", "llm2vec", ("llm2vec==0.2.3",), (Axis("transformers", ("5.x",)),), ())

    def start(asked: tuple[str, ...], declared: str | None) -> starter.Start:
        metadata = distributions.Metadata("llm2vec", "0.2.3", ())
        return starter.Start(
            starter.Asked("llm2vec", transformers=asked), spec.path, "", metadata, spec, (), (), declared
        )

    assert starter.widened(start((), "<=4.44.2,>=4.43.1"), {}) is None  # the declared range is what it looked at
    assert starter.widened(start(("declared", "5.x"), "<=4.44.2,>=4.43.1"), {}) is None
    assert starter.widened(start(("5.x",), None), {}) is None
    assert starter.widened(start(("5.x",), "<5"), {}) is None  # no lower bound: no range to sweep


def test_a_clash_as_a_reasons_suffix():
    from compat_matrix.shared.blame import said

    assert (
        said(Clash(("datasets", "2.14.4"), (("pyarrow", "26.0.1"),)))
        == " (datasets 2.14.4 fails beside pyarrow 26.0.1)"
    )
    assert said(None) == ""


def test_what_init_added_that_cannot_be_installed_is_left_out_again(tmp_path, monkeypatch):
    from packaging.version import Version

    spec = write(tmp_path, '"5.x"')
    spec = MatrixSpec(tmp_path / "m.toml", "ai2-olmo", ("ai2-olmo==0.6.0",), spec.axes, ())
    ((cell, pins),) = [(c, {"transformers": "5.24.0"}) for c in cells(spec)]
    start = starter.Start(starter.Asked("ai2-olmo"), spec.path, "ai2-olmo==0.6.0", OLMO, spec, spec.axes, (), None)
    installs = []

    def prepared(home, spec, cell, reports, pins, log):
        installs.append(spec.extra_requirements)
        return home / "bin" / "python", ("pins conflict: datasets" if spec.extra_requirements else None)

    missing = found(("hf_olmo", "ModuleNotFoundError: No module named 'datasets'"))
    monkeypatch.setattr(looking.envs, "prepared", prepared)
    monkeypatch.setattr(looking, "_discovered", lambda start, python, home: missing)
    monkeypatch.setattr(looking.package_index, "lookup", lambda environ: lambda package: (Version("4.0.0"),))
    said: list[str] = []
    after, seen, why = looking._look_into(start, cell, pins, tmp_path, tmp_path, said.append, {})
    assert installs == [(), ("datasets",)] and why is None
    assert after.spec.extra_requirements == () and seen is missing  # as it was before the addition
    assert any("datasets left out" in line for line in said)
