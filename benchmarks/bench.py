"""How long the default matrix takes, against the floor it cannot beat: importing torch + transformers per cell; and
since when: a sweep of every 5.x minor from 5.14 against its floor, and how many releases bisect tests.

    python benchmarks/bench.py                 # from the repository root; needs uv and nox (the README's first command)
    python benchmarks/bench.py --quick         # skip the pip peer and the scaling series
    python benchmarks/bench.py --since-when    # only the sweep and the bisections

Prints figures and ratios; asserts nothing. Every figure is one wall-clock measurement with Python's own timer.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from compat_matrix import cells, envs, resolve, spec  # noqa: E402
from compat_matrix.probes import PREWARM  # noqa: E402

MATRIX = ROOT / "matrix" / "char-causal-lm-checkpointing.toml"
LANES = os.cpu_count() or 1
SCALING = ["5.14.1", "4.57.x", "5.x", "5.20.x", "5.10.x"]
SWEEP = '[{ each = "minor", range = ">=5.14" }]'  # every 5.x minor from 5.14
BISECT = ">=5.14,<=5.24"
OBSERVATION = "entry_points.activation_checkpointing_enable"


def timed(command: list[str], **env: str) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, env={**os.environ, **env}, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1, 3):
        sys.exit(f"failed ({done.returncode}): {' '.join(command)}\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return seconds


def nox_matrix(matrix: Path, reports: Path, *options: str) -> float:
    command = [sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "-s", "matrix", *options]
    return timed(command, COMPAT_MATRIX=str(matrix), COMPAT_MATRIX_REPORTS=str(reports))


def cell_pythons(matrix: spec.MatrixSpec, reports: Path) -> list[Path]:
    """The interpreters of the matrix's cell environments: those in .nox/ installed with exactly the cells' pins."""
    releases_of = resolve.lookup(os.environ, matrix.exclude_newer)
    matrix = resolve.expand(matrix, releases_of)
    found = [
        envs.find_environment(ROOT / ".nox", matrix, cell, reports, resolve.pins(cell, releases_of))
        for cell in cells.cells(matrix)
    ]
    if None in found:
        sys.exit("a cell's environment is missing from .nox/ after the warm-up run")
    return found


def floor(pythons: list[Path], module: str) -> float:
    """`import torch, transformers`, the subject's module and the parts of transformers the probes use (`Trainer`,
    generation, the model classes the factory builds: compat_matrix.probes.PREWARM), once per cell, in LANES
    parallel lanes: what any run of the probe suite has to import."""
    code = f"import torch, transformers, {module}, " + ", ".join(PREWARM)
    start = time.perf_counter()
    with ThreadPoolExecutor(LANES) as lanes:
        list(lanes.map(lambda python: subprocess.run([str(python), "-c", code], check=True), pythons))
    return time.perf_counter() - start


def variant_of(matrix: Path, folder: Path, name: str, transformers: list[str] | str) -> Path:
    """The matrix under another name with another transformers axis (a list of values, or TOML as written)."""
    text = matrix.read_text()
    text = text.replace('name = "char-causal-lm-checkpointing"', f'name = "{name}"')
    axis = transformers if isinstance(transformers, str) else json.dumps(transformers)
    text = text.replace('transformers = ["4.57.x", "5.14.1", "5.x"]', f"transformers = {axis}")
    path = folder / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def bisection(matrix: Path, reports: Path, *options: str) -> tuple[float, dict, str]:
    """`nox -s bisect -- --range BISECT …`: seconds, the answer file, and the answer's line."""
    command = [sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "-s", "bisect", "--", "--range", BISECT]
    start = time.perf_counter()
    done = subprocess.run(
        [*command, *options],
        env={**os.environ, "COMPAT_MATRIX": str(matrix), "COMPAT_MATRIX_REPORTS": str(reports)},
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"bisect failed ({done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
    line = next(line for line in done.stdout.splitlines() if line.startswith("first differing release:"))
    return seconds, json.loads((reports / f"{spec.load(matrix).name}.bisect.json").read_text()), line


def resolution(folder: Path, show) -> None:
    """What a warm run adds to see today's releases: resolving the default matrix's cells against the index, once
    with the index asked and once from the answer kept in the cache."""
    matrix = spec.load(MATRIX)
    environ = {**os.environ, resolve.CACHE_VARIABLE: str(folder / "index-cache")}
    for label in ("index asked", "index answer kept"):
        start = time.perf_counter()
        for cell in cells.cells(matrix):
            resolve.pins(cell, resolve.lookup(environ, matrix.exclude_newer))
        seconds = time.perf_counter() - start
        show(f"resolving the default matrix's cells, {label}", f"{seconds * 1000:6.1f} ms")


def since_when(folder: Path, module: str, show) -> None:
    """A sweep of every 5.x minor from 5.14 (warm, against one import per cell) and bisect over >=5.14,<=5.24 on the
    verdict and on one observation. The matrices keep the default name: their cells' environments are the default
    matrix's, and each other's."""
    resolution(folder, show)
    sweep = variant_of(MATRIX, folder / "sweep", "char-causal-lm-checkpointing", SWEEP)
    nox_matrix(sweep, folder / "sweep-warmup")  # environments exist and are installed
    pythons = cell_pythons(spec.load(sweep), folder / "sweep-warmup")
    base = floor(pythons, module)
    show(f"floor: one import per cell of the sweep ({len(pythons)} cells), {LANES} lanes", f"{base:6.1f} s")
    warm = nox_matrix(sweep, folder / "sweep-warm")
    show(
        f"warm sweep of every 5.x minor from 5.14 ({len(pythons)} cells)",
        f"{warm:6.1f} s   ratio to floor {warm / base:.2f}",
    )
    glance = json.loads((folder / "sweep-warm" / "char-causal-lm-checkpointing.json").read_text())["subjects"][0]
    show("sweep: at a glance", glance["glance"])
    for what, options in (("verdict", ()), (OBSERVATION, ("--observation", OBSERVATION))):
        seconds, answer, line = bisection(MATRIX, folder / f"bisect-{len(options)}", *options)
        tested = f"{len(answer['tested'])} releases tested in {len(answer['rounds'])} rounds"
        show(f"bisect {BISECT} on the {what}", f"{seconds:6.1f} s   {tested}; {line}")


def setup_seconds(tool: str, folder: Path, requirements: list[str]) -> float:
    """A fresh environment with one cell's pins: uv, or the virtualenv + pip that nox uses by default."""
    target = folder / tool
    start = time.perf_counter()
    if tool == "uv":
        subprocess.run(["uv", "venv", "-q", str(target)], check=True)
        command = ["uv", "pip", "install", "-q", "--python", str(target / "bin" / "python"), *requirements]
        subprocess.run(command, check=True, env={**os.environ, **envs.uv_environment(os.environ)})
    else:
        subprocess.run([sys.executable, "-m", "virtualenv", "-q", str(target)], check=True)
        subprocess.run([str(target / "bin" / "python"), "-m", "pip", "install", "-q", *requirements], check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the pip peer and the scaling series")
    parser.add_argument("--since-when", action="store_true", help="only the sweep and the bisections")
    args = parser.parse_args()
    default = spec.load(MATRIX)
    module = default.subjects[0].target.split(":")[0]
    rows: list[tuple[str, str]] = []

    def show(label: str, value: str) -> None:
        rows.append((label, value))
        print(f"{label:<58} {value}", flush=True)

    show("machine", f"{os.cpu_count()} cores, {LANES} lanes, {len(cells.cells(default))} cells in the default matrix")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if args.since_when:
            since_when(folder, module, show)
            table(rows)
            return
        nox_matrix(MATRIX, folder / "warmup")  # environments exist and are installed
        pythons = cell_pythons(default, folder / "warmup")
        single = floor(pythons[:1], module)
        base = floor(pythons, module)
        show("floor: one import of torch + transformers + subject", f"{single:6.1f} s")
        show(f"floor: one import per cell, {LANES} lanes", f"{base:6.1f} s")
        warm = nox_matrix(MATRIX, folder / "warm")
        show("warm `nox -s matrix`", f"{warm:6.1f} s   ratio to floor {warm / base:.2f} (target <= 1.3)")
        probe_costs(pythons[-1], default.subjects[0], show)
        cached = nox_matrix(MATRIX, folder / "warm", "--", "--cached")
        show(
            "warm `nox -s matrix -- --cached` (results reused)", f"{cached:6.1f} s   ratio to floor {cached / base:.2f}"
        )

        cold_name = f"bench-cold-{os.getpid()}"
        cold = nox_matrix(variant_of(MATRIX, folder, cold_name, ["5.14.1"]), folder / "cold")
        show(
            "cold cell: new environment (warm uv cache), install, probes",
            f"{cold:6.1f} s   beyond the floor {cold - single:.1f} s (target <= 6)",
        )
        for venv in ROOT.glob(f".nox/cell-{cold_name}-*"):
            shutil.rmtree(venv)

        if not args.quick:
            (cell,) = cells.cells(spec.load(variant_of(MATRIX, folder, "peer", ["5.14.1"])))
            requirements = cells.install_args(default, cell)
            uv = setup_seconds("uv", folder, requirements)
            pip = setup_seconds("pip", folder, requirements)
            show("one cell's environment with uv", f"{uv:6.1f} s")
            show("the same with virtualenv + pip (nox's default backend)", f"{pip:6.1f} s   {pip / uv:.1f}x uv")

            nox_matrix(variant_of(MATRIX, folder, "bench-scale", SCALING), folder / "scale-warmup")
            for count in (1, 2, 3, 5):
                seconds = nox_matrix(
                    variant_of(MATRIX, folder, "bench-scale", SCALING[:count]), folder / f"scale-{count}"
                )
                show(f"warm matrix with {count} cell(s)", f"{seconds:6.1f} s   {seconds / count:.1f} s per cell")
        since_when(folder, module, show)
    table(rows)


def probe_costs(python: Path, subject: spec.Subject, show) -> None:
    """What the probes of any method cost the default subject in one cell (issue: under 2 s), beside the
    checkpointing probes, from benchmarks/probe_cost.py run in the cell's environment."""
    environ = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    command = [str(python), str(ROOT / "benchmarks" / "probe_cost.py"), subject.target, ",".join(subject.methods)]
    done = subprocess.run(command, env=environ, capture_output=True, text=True, check=True)
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    generic = sum(v for k, v in figures.items() if k.startswith(("probes of any method", "parse")))
    checkpointing = sum(v for k, v in figures.items() if k.startswith("checkpointing"))
    parts = ", ".join(f"{k} {v:.2f} s" for k, v in figures.items() if not k.startswith("checkpointing"))
    show("probes of any method, per cell (default subject, both variants)", f"{generic:6.2f} s   ({parts}; target < 2)")
    show("checkpointing probes, per cell (both variants), for comparison", f"{checkpointing:6.2f} s")


def table(rows: list[tuple[str, str]]) -> None:
    print("\n| measurement | figure |\n|---|---|")
    for label, value in rows:
        print(f"| {label} | {value.strip()} |")


if __name__ == "__main__":
    main()
