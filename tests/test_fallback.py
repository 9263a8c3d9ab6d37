"""A ranged axis value whose newest release cannot be installed here runs the newest that can, and says so
(compat_matrix.host.fallback): the pins tried, the note, the memo; and a real install with uv, from a folder of
wheels made here, of a package whose newest release requires what no index has."""

from __future__ import annotations

import json
import subprocess
import time
import types
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

from compat_matrix.host import cell_run, fallback, uv
from compat_matrix.host.cells import Cell
from compat_matrix.host.spec import Axis, MatrixSpec
from compat_matrix.host.starter import looking
from compat_matrix.shared.layout import STAMP

REASON = (
    "error: No solution found when resolving dependencies cause: Because only kernels<=0.17.2 is available and "
    "transformers>=5.25.0 depends on kernels>=0.19.1,<0.20, we can conclude that transformers>=5.25.0 cannot be used."
)
RELEASES = {"transformers": [Version(v) for v in ("5.22.0", "5.23.0", "5.24.0", "5.25.0")]}


def test_older_tries_the_releases_a_ranged_value_allows_below_the_pin_newest_first_never_an_exact_one():
    cell = Cell("m", (("transformers", "5.x"), ("torch", "2.13.0")))
    tried = list(fallback.older(cell, {"transformers": "5.25.0"}, RELEASES.__getitem__))
    assert [t["transformers"] for t in tried] == ["5.24.0", "5.23.0", "5.22.0"][: fallback.TRIES]
    assert list(fallback.older(Cell("m", (("transformers", "5.25.0"),)), {}, RELEASES.__getitem__)) == []


def test_the_note_says_what_could_not_be_installed_why_and_what_ran_instead():
    cell = Cell("m", (("transformers", "5.x"), ("torch", "2.13.0")))
    said = fallback.note(cell, {"transformers": "5.25.0"}, {"transformers": "5.24.0"}, REASON)
    assert said == (
        "transformers 5.x: 5.25.0 cannot be installed here (it needs kernels>=0.19.1,<0.20, and the index has only "
        "kernels<=0.17.2); 5.24.0 ran instead"
    )
    assert fallback.unsatisfiable(REASON) and not fallback.unsatisfiable("error: Failed to fetch: connection reset")


def test_a_fallback_is_remembered_for_a_few_minutes(tmp_path, monkeypatch):
    fallback.remember(tmp_path, "key", {"transformers": "5.24.0"}, "said")
    assert fallback.remembered(tmp_path, "key") == ({"transformers": "5.24.0"}, "said")
    assert fallback.remembered(tmp_path, "other") is None
    monkeypatch.setattr(fallback, "CACHE_SECONDS", -1.0)
    assert fallback.remembered(tmp_path, "key") is None  # the index may have what it lacked by now


def wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> None:
    """A pure-Python wheel of `name` holding one empty module, requiring `requires`."""
    module, info = name.replace("-", "_"), f"{name.replace('-', '_')}-{version}.dist-info"
    metadata = "\n".join(
        ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}", *(f"Requires-Dist: {r}" for r in requires)]
    )
    files = {
        f"{module}/__init__.py": "",
        f"{info}/METADATA": metadata + "\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(folder / f"{module}-{version}-py3-none-any.whl", "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)


@pytest.fixture
def wheels(tmp_path, monkeypatch):
    """A folder of wheels, the only place uv looks: cm-fallback-probe 1.0 and 1.1, and 1.2, which requires
    cm-fallback-missing, which no index has."""
    links = tmp_path / "wheels"
    links.mkdir()
    for version in ("1.0", "1.1"):
        wheel(links, "cm-fallback-probe", version)
    wheel(links, "cm-fallback-probe", "1.2", ("cm-fallback-missing>=9",))
    monkeypatch.setenv("UV_FIND_LINKS", str(links))
    monkeypatch.setenv("UV_NO_INDEX", "1")
    monkeypatch.setenv("UV_INDEX_URL", (tmp_path / "no-index").as_uri())  # package_index reads nothing there
    return links


SPEC_CELL = (
    MatrixSpec(Path("m.toml"), "m", (), (Axis("cm-fallback-probe", ("1.x",)),), ()),
    Cell("m", (("cm-fallback-probe", "1.x"),)),
)


def test_init_looks_into_the_newest_release_that_installs(tmp_path, wheels):
    """What init installs to look into a package, as a run would: `1.x` is 1.1 where 1.2 cannot be installed."""
    spec, cell = SPEC_CELL
    releases = {"cm-fallback-probe": [Version(v) for v in ("1.0", "1.1", "1.2")]}
    why = "No solution found when resolving dependencies: cm-fallback-probe==1.2 depends on cm-fallback-missing>=9"
    said = []
    start = types.SimpleNamespace(spec=spec)
    python, pins, still = looking._older(
        tmp_path / "env", start, cell, {"cm-fallback-probe": "1.2"}, tmp_path, why, said.append, releases.get
    )
    assert still is None and pins == {"cm-fallback-probe": "1.1"} and python.exists()
    assert said == ["with cm-fallback-probe==1.2: cm-fallback-probe 1.x: 1.2 cannot be installed here (it needs "
                    "cm-fallback-missing>=9); 1.1 ran instead"]  # fmt: skip


def test_a_newest_release_that_needs_what_no_index_has_falls_back_to_the_newest_that_installs(tmp_path, wheels):
    """`1.x` installs 1.1, the newest that does, with the note, remembered; asked for exactly, 1.2 is a failure of its
    own."""
    home, reports = tmp_path / "env", tmp_path / "reports"
    assert subprocess.run([uv.uv_binary(), "venv", "--quiet", str(home)]).returncode == 0
    spec, cell = SPEC_CELL
    out = reports / ".cells" / "m" / "cell.json"
    out.parent.mkdir(parents=True)
    how = (time.monotonic() + 120, lambda line: None, out, 0.0, reports)
    python = home / "bin" / "python"
    result, pins, notes = cell_run.install_newest(spec, cell, python, {"cm-fallback-probe": "1.2"}, how)
    assert result is None and pins == {"cm-fallback-probe": "1.1"}
    assert notes == (
        "cm-fallback-probe 1.x: 1.2 cannot be installed here (it needs cm-fallback-missing>=9); 1.1 ran instead",
    )
    listed = subprocess.run(
        [uv.uv_binary(), "pip", "list", "--python", str(python), "--format", "json"], capture_output=True, text=True
    )
    assert {"name": "cm-fallback-probe", "version": "1.1"} in json.loads(listed.stdout)
    assert fallback.remembered(reports, cell_run._environment(spec, cell, {"cm-fallback-probe": "1.2"}, reports))
    exact = Cell("m", (("cm-fallback-probe", "1.2"),))
    stamp = (home / STAMP).read_bytes()
    failed, kept, none = cell_run.install_newest(spec, exact, python, {}, how)
    assert failed is not None and failed.status == "install-failed" and kept == {} and none == ()
    assert (home / STAMP).read_bytes() == stamp  # uv found no solution and changed nothing: the environment stays warm
