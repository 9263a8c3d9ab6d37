"""How long the default matrix takes, against the floor it cannot beat: importing torch + transformers per cell.

    python benchmarks/bench.py            # from the repository root; needs uv and nox (the README's first command)
    python benchmarks/bench.py --quick    # skip the pip peer and the scaling series

Prints figures and ratios; asserts nothing. Every figure is one wall-clock measurement with Python's own timer.
"""

from __future__ import annotations

import argparse
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

from compat_matrix import cells, envs, spec  # noqa: E402

MATRIX = ROOT / "matrix" / "char-causal-lm-checkpointing.toml"
LANES = os.cpu_count() or 1
SCALING = ["5.14.1", "4.57.x", "5.x", "5.20.x", "5.10.x"]


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
    found = [envs.find_environment(ROOT / ".nox", matrix, cell, reports) for cell in cells.cells(matrix)]
    if None in found:
        sys.exit("a cell's environment is missing from .nox/ after the warm-up run")
    return found


def floor(pythons: list[Path], module: str) -> float:
    """`import torch, transformers` and the subject's module, once per cell, in LANES parallel lanes."""
    code = f"import torch, transformers, {module}"
    start = time.perf_counter()
    with ThreadPoolExecutor(LANES) as lanes:
        list(lanes.map(lambda python: subprocess.run([str(python), "-c", code], check=True), pythons))
    return time.perf_counter() - start


def variant_of(matrix: Path, folder: Path, name: str, transformers: list[str]) -> Path:
    text = matrix.read_text()
    text = text.replace('name = "char-causal-lm-checkpointing"', f'name = "{name}"')
    text = text.replace(
        'transformers = ["4.57.x", "5.14.1", "5.x"]', f"transformers = {transformers!r}".replace("'", '"')
    )
    path = folder / f"{name}.toml"
    path.write_text(text)
    return path


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
        nox_matrix(MATRIX, folder / "warmup")  # environments exist and are installed
        pythons = cell_pythons(default, folder / "warmup")
        single = floor(pythons[:1], module)
        base = floor(pythons, module)
        show("floor: one import of torch + transformers + subject", f"{single:6.1f} s")
        show(f"floor: one import per cell, {LANES} lanes", f"{base:6.1f} s")
        warm = nox_matrix(MATRIX, folder / "warm")
        show("warm `nox -s matrix`", f"{warm:6.1f} s   ratio to floor {warm / base:.2f} (target <= 1.3)")
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

    print("\n| measurement | figure |\n|---|---|")
    for label, value in rows:
        print(f"| {label} | {value.strip()} |")


if __name__ == "__main__":
    main()
