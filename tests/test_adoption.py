"""From a package to a report: module and package targets, the declared range, a library's real dependencies
(extra requirements, caps lifted, conflicts, builds against torch), `compat-matrix init`'s file, and the papercuts
a new user meets (the command that reproduces a run, housekeeping files in `git status`, misspelt names)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.version import Version

from compat_matrix.host import (
    collect,
    distributions,
    envs,
    fingerprints,
    range_check,
    render,
    resolve,
    starter,
    uv,
    wording,
)
from compat_matrix.host.cells import cells, install_args
from compat_matrix.host.folders import IGNORED, ignore_housekeeping
from compat_matrix.host.report import in_checkout, make_report, reproduce
from compat_matrix.host.spec import Axis, Declared, MatrixError, MatrixSpec, Subject, Sweep, load
from compat_matrix.shared.results import CellResult, Code, Discovery, Observation, SubjectResult

ROOT = Path(__file__).resolve().parent.parent
GOOD = """
[matrix]
name = "mylib"
requirements = ["mylib==1.0"]

[axes]
transformers = ["4.57.x", "5.x"]
torch = ["2.13.0"]

[[subjects]]
target = "mylib.models"
exclude = ["mylib.models.legacy", "OldModel"]
extra_requirements = ["einops"]
"""


def write(folder: Path, text: str) -> Path:
    path = folder / "m.toml"
    path.write_text(textwrap.dedent(text))
    return path


def test_a_module_target_with_exclude_and_extra_requirements_loads(tmp_path):
    spec = load(write(tmp_path, GOOD))
    (subject,) = spec.subjects
    assert subject.package and subject.exclude == ("mylib.models.legacy", "OldModel")
    assert spec.installs == ("mylib==1.0", "einops")
    assert "einops" in spec.packages  # its version is recorded too


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        (
            'target = "mylib.models"',
            'target = "mylib.models:Model"',
            "exclude = ['mylib.models.legacy', 'OldModel']: only for a module or package",
        ),
        ('requirements = ["mylib==1.0"]', 'requirements = ["mylib==1.0"]\noverrides = ["transformers<5"]', "overrides"),
        ('requirements = ["mylib==1.0"]', 'requirements = ["mylib==1.0"]\noverrides = ["./x"]', "not a path"),
        ('requirements = ["mylib==1.0"]\n', "", 'range = "declared" needs matrix.requirements'),
        ('exclude = ["mylib.models.legacy", "OldModel"]', 'exclude = ["a:b:c"]', "a class ('Class'"),
    ],
)
def test_problems_of_the_new_keys_name_the_key(tmp_path, old, new, problem):
    text = GOOD.replace(old, new)
    if "declared" in problem:
        text = text.replace('["4.57.x", "5.x"]', '[{ each = "minor", range = "declared" }]')
    with pytest.raises(MatrixError) as info:
        load(write(tmp_path, text))
    assert any(problem in p for p in info.value.problems), info.value.problems


def test_an_axis_override_is_the_cells_pin_and_a_requirement_passes_as_is(tmp_path):
    text = GOOD.replace(
        'requirements = ["mylib==1.0"]', 'requirements = ["mylib==1.0"]\noverrides = ["Transformers", "numpy<2"]'
    )
    spec = load(write(tmp_path, text))
    assert spec.overrides == ("transformers", "numpy<2")
    cell = next(c for c in cells(spec) if c.requested["transformers"] == "5.x")
    args = install_args(spec, cell, {"transformers": "5.24.0"})
    assert args[:4] == ["mylib==1.0", "einops", "transformers==5.24.0", "torch==2.13.0"]
    assert "--override=transformers==5.24.0" in args and "--override=numpy<2" in args
    assert envs.asked(args) == envs.asked(
        install_args(spec, cell, {"transformers": "5.25.0"})
    )  # a new release: in place


def test_overrides_reach_uv_in_a_file_of_the_environment(tmp_path):
    args = uv.uv_args(["transformers==5.24.0", "--override=transformers==5.24.0", "mylib"], tmp_path)
    assert args == ["transformers==5.24.0", "mylib", "--override", str(tmp_path / uv.OVERRIDES)]
    assert (tmp_path / uv.OVERRIDES).read_text() == "transformers==5.24.0\n"


UV_CONFLICT = """Using Python 3.11.7 environment at: .nox/x
  × No solution found when resolving dependencies:
  ╰─▶ Because gliner>=0.2.29 depends on transformers>=4.51.3,<5.17.0 and you require transformers==5.24.0, we can
      conclude that your requirements and gliner>=0.2.29 are incompatible.
      And because you require gliner==0.2.29, we can conclude that your requirements are unsatisfiable.
"""


def test_a_conflict_names_the_package_both_constraints_and_the_remedy():
    assert uv.installer_reason(UV_CONFLICT) == (
        "pins conflict: gliner>=0.2.29 requires transformers>=4.51.3,<5.17.0, the cell pins transformers==5.24.0 "
        '(to test it anyway, lift the cap: overrides = ["transformers"] in [matrix])'
    )
    between = "Because a==1 depends on numpy<2 and b==2 depends on numpy>=2, we can conclude"
    assert uv.conflict(between) == "pins conflict: a==1 requires numpy<2, b==2 requires numpy>=2"
    assert uv.conflict("error: no such file") is None


SPAN_MARKER = """error: No solution found when resolving dependencies
  cause: Because tokenizers==0.14.1 depends on huggingface-hub>=0.16.4,<0.18 and tokenizers==0.14.0 depends on \
huggingface-hub>=0.16.4,<0.17, we can conclude that \
tokenizers>=0.14.0,<=0.14.1 depends on huggingface-hub>=0.16.4,<0.18.
         And because transformers==4.34.1 depends on tokenizers>=0.14,<0.15 and span-marker>=1.8.1 depends on \
huggingface-hub>=0.24.0, we can conclude that span-marker>=1.8.1 and transformers==4.34.1 are incompatible.
         And because you require span-marker==1.8.1 and transformers==4.34.1, we can conclude that your requirements \
are unsatisfiable.
"""


def test_a_conflict_through_releases_of_a_third_package_names_the_two_that_conflict_and_the_link():
    """span-marker 1.8.1 on transformers 4.34.1 (uv's words, from this machine): uv's first step only joins two
    tokenizers releases; the conflict is span-marker's huggingface-hub>=0.24.0 against transformers' tokenizers<0.15,
    which needs huggingface-hub<0.18."""
    assert uv.installer_reason(SPAN_MARKER) == (
        "pins conflict: transformers==4.34.1 requires tokenizers>=0.14,<0.15, span-marker>=1.8.1 requires "
        "huggingface-hub>=0.24.0 (tokenizers>=0.14.0,<=0.14.1 requires huggingface-hub>=0.16.4,<0.18)"
    )


NMS = "RuntimeError: operator torchvision::nms does not exist"


@pytest.mark.parametrize(
    ("versions", "fails", "wrong"),
    [
        (
            {"torch": "2.13.0+cpu", "torchvision": "0.28.0"},
            NMS,
            f"torchvision 0.28.0 cannot load beside torch 2.13.0+cpu ({NMS})",
        ),
        ({"torch": "2.13.0+cpu", "torchvision": "0.28.0"}, None, None),  # another label, but it imports: a CPU build
        ({"torch": "2.13.0+cpu", "torchvision": "0.28.0+cpu", "torchaudio": "2.13.0+cpu"}, NMS, None),  # not even tried
        ({"torch": "2.13.0", "torchaudio": "2.13.0+cpu"}, "OSError: libtorch", "torchaudio 2.13.0+cpu cannot load"),
        ({"transformers": "5.24.0"}, NMS, None),
    ],
)
def test_builds_against_torch_are_refused_only_where_they_fail_to_import(versions, fails, wrong):
    tried = []
    said = envs.mismatched_builds(versions, lambda name: tried.append(name) or fails)
    assert (said is None) if wrong is None else said.startswith(wrong)
    assert set(tried) <= {"torchvision", "torchaudio"}


def test_the_declared_range_is_read_from_requires_dist_extras_aside():
    lines = ["torch", "transformers<5.17.0,>=4.51.3", 'transformers<5; extra == "old"', "numpy"]
    assert distributions.declared_by(lines, "transformers") == "<5.17.0,>=4.51.3"
    assert distributions.declared_by(["transformers"], "transformers") == ""
    assert distributions.declared_by(lines, "accelerate") is None
    metadata = distributions.parse_metadata(
        "Metadata-Version: 2.1\nName: gliner\nVersion: 0.2.29\nRequires-Dist: torch\n"
    )
    assert metadata == distributions.Metadata("gliner", "0.2.29", ("torch",))


def test_a_checkouts_pyproject_says_what_it_declares_unless_dynamic(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "mylib"\ndependencies = ["transformers>=4.57.3"]\n')
    assert distributions.requires(str(tmp_path)) == distributions.Metadata("mylib", None, ("transformers>=4.57.3",))
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "mylib"\ndynamic = ["dependencies"]\n')
    assert distributions.local_metadata(tmp_path) is None


VERSIONS = [Version(v) for v in ("4.56.2", "4.57.1", "4.57.3", "4.57.6", "5.0.0", "5.1.0", "5.1.2", "5.24.0")]


def test_a_minor_sweep_of_the_declared_range_adds_its_lowest_allowed_release(tmp_path):
    text = GOOD.replace('["4.57.x", "5.x"]', '[{ each = "minor", range = "declared" }]')
    spec = load(write(tmp_path, text))
    declared = distributions.declared_ranges(
        spec, lambda r: distributions.Metadata("mylib", "1.0", ("transformers>=4.57.3,<5.1",))
    )
    assert declared == [Declared("transformers", "mylib", "1.0", "<5.1,>=4.57.3")]
    expanded = resolve.expand(spec, lambda package: VERSIONS, declared)
    assert expanded.axes[0].values == ("4.57.3", "4.57.6", "5.0.0")
    with pytest.raises(MatrixError, match="none of the requirements declares transformers"):
        resolve.expand(spec, lambda package: VERSIONS, [])
    assert str(Sweep("minor", "declared")) == "every minor in the declared range"


def subject_result(target, group=None, status="ok", reason=None, methods=("tie_weights",), observations=()):
    return SubjectResult(target, methods, status, reason, observations, probes=("p",), group=group, kind="model")


def cell(version, subjects, discovered=(), status="ok"):
    resolved = {"transformers": version, "mylib": "1.0"}
    requested = {"transformers": version}
    return CellResult(
        "mylib",
        f"cell:mylib:transformers={version}",
        requested,
        resolved,
        status,
        None,
        subjects,
        discovered=discovered,
    )


HARMFUL = (
    Observation("p", "x", "error: TypeError: boom", 1, without=(("tie_weights", 1),)),
    Observation("p", "reached", ["tie_weights"], ["tie_weights"], False),
)
SAME = (Observation("p", "x", 1, 1), Observation("p", "reached", ["tie_weights"], [], False))


def package_results() -> list[CellResult]:
    found = Discovery(
        "mylib",
        ("mylib.a:A", "mylib.b:B"),
        (("mylib.a:AConfig", "config"),),
        ("mylib.old",),
        (("mylib.extra", "ModuleNotFoundError: No module named 'wandb'"),),
    )
    return [
        cell(
            "4.57.3",
            (
                subject_result("mylib.a:A", "mylib", observations=SAME),
                subject_result("mylib.b:B", "mylib", observations=SAME),
            ),
            (found,),
        ),
        cell(
            "5.24.0",
            (
                subject_result("mylib.a:A", "mylib", observations=HARMFUL),
                subject_result("mylib.b:B", "mylib", observations=SAME),
            ),
            (found,),
        ),
        cell("5.25.0", (subject_result("mylib", "mylib", "import-failed", "ImportError: x"),), (Discovery("mylib"),)),
    ]


SPEC = MatrixSpec(
    ROOT / "matrix" / "mylib.toml",
    "mylib",
    ("mylib==1.0",),
    (Axis("transformers", ("4.57.3", "5.24.0", "5.25.0")),),
    (Subject("mylib", ("tie_weights",)),),
)


def test_a_package_target_stands_for_the_classes_found_and_a_cell_that_could_not_look_says_why_for_each():
    results = package_results()
    expanded = collect.expand(SPEC.subjects, results)
    assert [(s.target, s.group) for s in expanded] == [("mylib.a:A", "mylib"), ("mylib.b:B", "mylib")]
    newest = collect.stand_ins(results[2], expanded)
    assert [(s.target, s.status) for s in newest.subjects][1:] == [
        ("mylib.a:A", "import-failed"),
        ("mylib.b:B", "import-failed"),
    ]
    nothing = collect.expand(SPEC.subjects, [results[2]])
    assert [s.target for s in nothing] == ["mylib"]  # its rows say why


def test_the_report_groups_a_packages_subjects_and_checks_the_declared_range():
    declared = (Declared("transformers", "mylib", "1.0", ">=4.57.3"),)
    report = make_report(SPEC, package_results(), declared=declared)
    markdown = render.markdown(report)
    found = (
        "**`mylib`**: 2 classes found, `A`, `B`; not audited (no probe family covers their kind): `AConfig` (config)"
    )
    assert (
        found in markdown and "left out: `mylib.old`" in markdown and "`mylib.extra` (ModuleNotFoundError" in markdown
    )
    (check,) = report.ranges["mylib.a:A"]
    said = wording.range_line(check)
    assert said.startswith("`mylib` 1.0 allows transformers>=4.57.3; `tie_weights` is harmful on 5.24.0; the class")
    assert said.endswith(
        "cannot be imported on 5.25.0: cap it or fix the override (the measurements support "
        "transformers==4.57.3)."  # the one tested release that runs: nothing between it and 5.24.0 was tested
    )
    assert f"**Declared range** (`A`): {render.inline(said)}" in markdown
    first_screen = markdown.split("<details>", 1)[0]  # what a comment cut to its first screen keeps
    assert "cannot be imported with transformers 5.25.0 (ImportError: x)" in first_screen  # the health line says it
    assert (
        markdown.index(found) < markdown.index("**Declared range** (`A`)") < markdown.index("**Declared range** (`B`)")
    )
    data = render.report_json(report)
    assert data["found"]["mylib"].startswith("mylib: 2 classes found, A, B; not audited")
    assert [s["group"] for s in data["subjects"]] == ["mylib", "mylib"]
    assert data["subjects"][0]["declared_range"] == [wording.range_line(check, wording.PLAIN)]


def test_a_range_check_says_honest_and_where_the_measurements_allow_more():
    check = range_check.RangeCheck(
        Declared("transformers", "llm2vec", "0.2.3", "<=4.44.2,>=4.43.1"),
        ("4.43.1", "4.44.2", "5.24.0"),
        (),
        (),
        ">=4.43.1,<=5.24.0",
    )
    assert check.honest and check.beyond == ("5.24.0",)
    assert wording.range_line(check) == (
        "`llm2vec` 0.2.3 allows transformers<=4.44.2,>=4.43.1: honest on 4.43.1, 4.44.2; it also runs on 5.24.0, "
        "outside it (the measurements support transformers>=4.43.1,<=5.24.0)."
    )


def test_the_reproduce_line_works_where_the_reader_is(tmp_path):
    inside = MatrixSpec(ROOT / "matrix" / "x.toml", "x", (), (), ())
    outside = MatrixSpec(tmp_path / "matrix" / "x.toml", "x", (), (), (), exclude_newer="2026-10-01T00:00:00Z")
    assert in_checkout(inside.path) and not in_checkout(outside.path)
    assert reproduce(inside, "matrix/x.toml") == "COMPAT_MATRIX=matrix/x.toml nox -s matrix"
    assert reproduce(outside, "matrix/x.toml") == "compat-matrix run matrix/x.toml --exclude-newer=2026-10-01T00:00:00Z"


def test_housekeeping_stays_out_of_git_status(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    reports = tmp_path / "reports"
    for name in (".cells/m/a.json", ".logs/m.log", ".lock", "m.md"):
        (reports / name).parent.mkdir(parents=True, exist_ok=True)
        (reports / name).write_text("x")
    ignore_housekeeping(reports)
    status = subprocess.run(
        ["git", "-C", str(tmp_path), "status", "--porcelain", "-uall"], capture_output=True, text=True
    ).stdout
    assert sorted(status.split()) == ["??", "??", "reports/.gitignore", "reports/m.md"]
    (reports / ".gitignore").write_text("mine\n")
    ignore_housekeeping(reports)
    assert (reports / ".gitignore").read_text() == "mine\n" and IGNORED.count("\n") == 4


FAKE = {
    "transformers/__init__.py": "class PreTrainedModel:\n    def tie_weights(self): ...\n    config_class = None\n"
    "class PretrainedConfig:\n    model_type = ''\nclass Trainer:\n    def compute_loss(self): ...\n",
    "mylib/__init__.py": "",
    "mylib/models.py": "from transformers import PreTrainedModel, PretrainedConfig, Trainer\n"
    "class MyConfig(PretrainedConfig):\n    model_type = 'my'\n"
    "class MyModel(PreTrainedModel):\n    config_class = MyConfig\n    def tie_weights(self): ...\n"
    "class Plain(PreTrainedModel):\n    pass\n"
    "class OldModel(PreTrainedModel):\n    def tie_weights(self): ...\n",
    "mylib/train.py": "from transformers import Trainer\nclass MyTrainer(Trainer):\n    def compute_loss(self): ...\n",
    "mylib/extra.py": "import wandb_not_here\n",
    "mylib/legacy/__init__.py": "raise SystemExit('never imported')\n",
}
DISCOVER = """
import json, sys
from compat_matrix.cell.discovery import discover, misspelt
from mylib.models import MyModel
found = discover("mylib", (), ("mylib.legacy", "OldModel"))
print(json.dumps([found.to_json(), misspelt(MyModel, ("tie_weight", "config_clas", "tie_weights", "save"))]))
"""


def test_discovery_finds_each_class_that_overrides_and_says_what_it_left_out(tmp_path):
    for name, text in FAKE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    env = {"PYTHONPATH": f"{tmp_path}:{ROOT / 'src'}", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", DISCOVER], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    found, misspelt = json.loads(done.stdout)
    assert found["subjects"] == ["mylib.models:MyModel", "mylib.train:MyTrainer"]
    assert found["unaudited"] == {"mylib.models:MyConfig": "config"}
    assert found["excluded"] == ["mylib.legacy", "mylib.models:OldModel"]
    assert list(found["skipped"]) == ["mylib.extra"]
    assert misspelt == (
        "MyModel does not define 'tie_weight'; did you mean 'tie_weights'?, 'config_clas'; did you mean "
        "'config_class'?, 'save' itself"
    )


def test_init_writes_the_declared_sweep_torch_pinned_a_subject_per_class_and_what_it_did_not_audit(tmp_path):
    output = tmp_path / "matrix" / "mylib.toml"
    metadata = distributions.Metadata("mylib", "1.0", ("transformers>=4.57.3", "torch>=2"))
    axes = (Axis("transformers", (Sweep("minor", "declared"),)), Axis("torch", ("2.13.0",)))
    spec = MatrixSpec(output, "mylib", ("mylib==1.0",), axes, ())
    start = starter.Start(
        starter.Asked("mylib"),
        output,
        "mylib==1.0",
        metadata,
        spec,
        axes,
        (),
        ">=4.57.3",
        {"transformers": "declared", "torch": "local"},
    )
    found = starter.Found(
        {"mylib": "1.0", "transformers": "5.24.0"},
        (Discovery("mylib", ("mylib.models:MyModel",), (("mylib.models:MyConfig", "config"),)),),
        {"mylib.models:MyModel": (("tie_weights", "method"), ("config_class", "attribute"))},
    )
    output.parent.mkdir()
    output.write_text(starter.text(start, found, "compat-matrix run matrix/mylib.toml"))
    written = load(output)
    assert written.requirements == ("mylib==1.0",) and written.axes[0].values == (Sweep("minor", "declared"),)
    assert [s.target for s in written.subjects] == ["mylib.models:MyModel"] and written.subjects[0].methods == ()
    text = output.read_text()
    assert "# overrides: tie_weights, config_class (attribute)" in text and "#   mylib.models:MyConfig (config)" in text


def test_init_sweeps_a_declared_range_from_the_oldest_release_the_probes_run_on():
    """span-marker declares transformers>=4.19: its cells of 4.19 to 4.27 could only fail (the probes build tiny Llama
    models, which transformers has from 4.28.0), so init sweeps from 4.28 and says why; a range that starts later is
    swept as declared, with its lowest allowed release; no lower bound, from FLOOR."""
    from compat_matrix.host.resolve import sweep
    from compat_matrix.host.starter.start import FLOOR, declared_sweep

    old = [Version(v) for v in ("4.19.4", "4.27.4", "4.28.0", "4.28.1", "4.57.6", "5.24.0")]
    releases = {"transformers": old}.__getitem__
    (swept,), why = declared_sweep("span-marker 1.8.1", ">=4.19,<6", releases)
    assert swept == Sweep("minor", ">=4.19,<6,>=4.28.0")
    assert [str(v) for v in sweep(swept, old, None)] == ["4.28.1", "4.57.6", "5.24.0"]
    assert why.startswith("span-marker 1.8.1 declares transformers>=4.19,<6: the newest of every minor from 4.28.0,")
    assert declared_sweep("mylib", ">=4.57.3", releases)[0] == (Sweep("minor", "declared"),)
    assert declared_sweep("mylib", "<6", releases)[0] == (Sweep("minor", FLOOR),)
    assert starter.lowest_allowed(">=4.19", releases) == "4.28.0"


def test_init_lifts_a_cap_that_the_tested_releases_lie_outside():
    releases = {"transformers": VERSIONS, "torch": [Version("2.13.0")]}
    axes = (Axis("transformers", ("4.57.x", "5.x")), Axis("torch", ("2.13.0",)))
    assert starter.lifted(axes, {"transformers": "<5", "torch": None}, releases.__getitem__) == ("transformers",)
    assert starter.lifted(axes, {"transformers": ">=4.51", "torch": ">=2"}, releases.__getitem__) == ()
    from compat_matrix.host.starter.start import _relative

    assert _relative(Path("/a/b"), Path("/a/b/matrix")) == "../"
    assert _relative(Path("/a/b/matrix/lib"), Path("/a/b/matrix")) == "./lib"


def test_a_torch_wheel_on_this_machine_is_what_init_pins(tmp_path):
    (tmp_path / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    metadata = distributions.Metadata("mylib", "1.0", ("torch>=2",))
    pinned, why = starter.torch_pin(metadata, {"UV_FIND_LINKS": str(tmp_path)}, lambda package: [Version("2.14.1")])
    assert pinned == "2.13.0" and "local wheel" in why


def test_a_local_requirement_is_recorded_by_the_name_its_pyproject_gives(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "pyproject.toml").write_text('[project]\nname = "my-lib"\nversion = "0.1"\n')
    spec = load(write(tmp_path, GOOD.replace('requirements = ["mylib==1.0"]', 'requirements = ["./lib"]')))
    assert spec.packages[:3] == ("transformers", "torch", "my-lib")
    assert "--reinstall-package=my-lib" in install_args(spec, cells(spec)[0])


def test_a_matrix_file_inside_its_local_requirement_is_no_part_of_the_environment(tmp_path):
    """`init --from .` writes the file into the checkout after installing it: the run must find that environment."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "pyproject.toml").write_text('[project]\nname = "my-lib"\n')
    (tmp_path / "lib" / "matrix").mkdir()
    path = tmp_path / "lib" / "matrix" / "m.toml"
    path.write_text(textwrap.dedent(GOOD.replace('requirements = ["mylib==1.0"]', 'requirements = ["../"]')))
    spec = load(path)
    before = fingerprints.environment_key(spec, cells(spec)[0])
    path.write_text(path.read_text() + "# a comment\n")
    assert fingerprints.environment_key(load(path), cells(spec)[0]) == before
    (tmp_path / "lib" / "code.py").write_text("x = 1\n")
    assert fingerprints.environment_key(load(path), cells(spec)[0]) != before


@pytest.mark.parametrize(
    ("wanted", "target", "found"),
    [
        ("mylib.models:Model", "mylib", True),
        ("mylib.models:Model", "mylib.models", True),
        ("mylibx.models:Model", "mylib", False),
        ("mylib.models:Model", "mylib.models:Model", False),  # a class target matches by name, not this rule
    ],
)
def test_bisect_takes_a_class_a_package_target_stands_for(wanted, target, found):
    from compat_matrix.host.bisect_request import _found_in

    assert _found_in(wanted, target) is found


def test_init_that_found_nothing_on_the_releases_asked_says_how_to_test_the_declared_range_too():
    from compat_matrix.host.starter import declared_hint

    hint = declared_hint(("4.57.x", "5.x"), "<=4.44.2,>=4.43.1", "llm2vec")
    assert hint == (
        " (llm2vec declares transformers<=4.44.2,>=4.43.1: --transformers declared --transformers 4.57.x"
        " --transformers 5.x tests that range too)"
    )
    assert declared_hint((), "<=4.44.2", "llm2vec") == declared_hint(("declared", "5.x"), "<5", "x") == ""
    assert declared_hint(("5.x",), None, "x") == ""


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "ImportError: cannot import name 'HfFolder' from 'huggingface_hub' (/work/x/.nox/init-adapters-adapters_"
            "transformers=5.x_torch=2.13.0/lib/python3.11/site-packages/huggingface_hub/__init__.py)",
            "ImportError: cannot import name 'HfFolder' from 'huggingface_hub' "
            "(site-packages/huggingface_hub/__init__.py)",
        ),
        ('File "/usr/lib/python3/dist-packages/a.py", line 3', 'File "dist-packages/a.py", line 3'),
        (".nox/x/lib/site-packages/a.py beside /opt/a.py", ".nox/x/lib/site-packages/a.py beside /opt/a.py"),
    ],
)
def test_environment_paths_in_a_reason_are_cut_to_site_packages_on_both_sides(text, said):
    from compat_matrix.shared.results import describe_exception, one_line, short_paths

    assert short_paths(text) == said and one_line(text) == said
    assert uv.installer_reason(text) == said
    assert describe_exception(RuntimeError(text)) == f"RuntimeError: {said}"


def test_an_override_inherited_from_an_abstract_base_is_deleted_only_where_every_class_inheriting_it_agrees():
    from compat_matrix.shared.results import Override

    via = (Override("tie_weights", "transformers.PreTrainedModel", True, via="mylib.base.Base"),)
    first = replace(subject_result("mylib.a:A", observations=SAME), overrides=via)
    second = replace(subject_result("mylib.b:B", "could-not-build", "could not build B: KeyError: 'x'"), overrides=via)
    spec = replace(SPEC, subjects=(Subject("mylib.a:A", ("tie_weights",)), Subject("mylib.b:B", ("tie_weights",))))
    report = make_report(spec, [cell("5.24.0", (first, second))])
    (alone,) = report.subjects["mylib.a:A"].overrides
    assert alone.advice.kind == "Review" and alone.advice.caveat == (
        "it is deleted from Base, which gives it to B (could not run) too"
    )
    both = make_report(spec, [cell("5.24.0", (first, replace(first, target="mylib.b:B")))])
    assert [o.advice.kind for s in both.subjects.values() for o in s.overrides] == ["Delete", "Delete"]
    own = make_report(spec, [cell("5.24.0", (replace(first, overrides=()), second))])  # its own: not shared
    assert own.subjects["mylib.a:A"].overrides[0].advice.kind == "Delete"


def test_an_environment_emptied_first_still_gets_its_overrides_file(tmp_path, monkeypatch):
    """`uv venv --clear` empties the environment: the overrides file it had been given before was gone when uv read
    it (`error: File not found: …/compat-matrix-overrides.txt`, so `init` took a release for one that cannot be
    installed)."""
    home = tmp_path / "env"
    (home / "bin").mkdir(parents=True)
    envs.write_json_atomic(home / envs.STAMP, envs.Stamp("old", frozenset({"something-else"})).to_json())
    seen = []

    def run(command, **kwargs):
        if "venv" in command:
            for path in home.iterdir():
                if path.is_file():
                    path.unlink()
        else:
            seen.append((home / uv.OVERRIDES).read_text())
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(envs.subprocess, "run", run)
    monkeypatch.setattr(envs, "installed", lambda python: {})
    spec = load(write(tmp_path, GOOD))
    wanted = ("new", ["mylib==1.0", "--override=transformers==4.57.6"])
    assert envs.install(spec, cells(spec)[0], home / "bin" / "python", wanted, 1e12, print, tmp_path / "s", 0) is None
    assert seen == ["transformers==4.57.6\n"]


def test_an_error_the_override_raises_itself_does_not_narrow_the_declared_range():
    """colpali's forward raising its own KeyError for a mask the probes did not pass read "cap it or fix the
    override (nothing tested runs)": the report does not stand by such a break, so the range line does not either."""
    own = (
        *HARMFUL,
        Observation("p", "lines", {"tie_weights": {"tie_weights@1": [2]}}, None, False),
    )
    code = (Code("tie_weights", "a.py", (("tie_weights@1", ((2, "raise TypeError('boom')"),)),)),)
    declared = (Declared("transformers", "mylib", "1.0", ">=4.57.3"),)
    results = package_results()
    for index in (1, 0):  # its own error on 5.24.0 alone is a break of that release; on both, its inputs' doing
        raising = replace(results[index].subjects[0], observations=own, code=code)
        results[index] = replace(results[index], subjects=(raising, *results[index].subjects[1:]))
        (check,) = make_report(SPEC, results, declared=declared).ranges["mylib.a:A"]
        assert (check.harmful == ()) == (index == 0)
    assert "tie_weights" not in wording.range_line(check)
