"""How long a run takes against the floor it cannot beat: importing what the probes need, once per cell, from
compiled bytecode, in as many lanes as the run uses. The warm default matrix, a warm sweep of the 11 minors from
5.14 to 5.24 (11 cells) and their ratios, side by side; where a warm cell's time goes; what bytecode costs a cold cell.

    python benchmarks/bench.py                 # from the repository root; needs uv and nox (the README's first command)
    python benchmarks/bench.py --quick         # one measurement of each instead of three (--repeat 1)
    python benchmarks/bench.py --more          # also: a cold cell, uv against pip, the scaling series, bisect

Prints figures and ratios; asserts nothing. Every figure is a wall-clock measurement with Python's own timer; with
--repeat N, the N figures and their ratios, in order. The machine is whatever it is: other work on it counts.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from compat_matrix.cell.probes import PREWARM  # noqa: E402
from compat_matrix.host import cell_run, cells, envs, package_index, resolve, spec, uv  # noqa: E402
from compat_matrix.host.folders import result_path  # noqa: E402
from compat_matrix.shared.results import read_cell_result  # noqa: E402

MATRIX = ROOT / "matrix" / "char-causal-lm-checkpointing.toml"
LANES = os.cpu_count() or 1
SCALING = ["5.14.1", "4.57.x", "5.x", "5.20.x", "5.10.x"]
SWEEP = '[{ each = "minor", range = ">=5.14,<=5.24" }]'  # the 11 minors 5.14 … 5.24
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


def planned(matrix: spec.MatrixSpec) -> tuple[spec.MatrixSpec, list[cells.Cell], dict[str, dict[str, str]]]:
    """The matrix with its sweeps expanded, its cells, and the release each ranged value resolves to today."""
    releases_of = package_index.lookup(os.environ, matrix.exclude_newer)
    matrix = resolve.expand(matrix, releases_of)
    listed = cells.cells(matrix)
    return matrix, listed, {cell.id: resolve.pins(cell, releases_of) for cell in listed}


def cell_pythons(matrix: spec.MatrixSpec, reports: Path) -> list[Path]:
    """The interpreters of the matrix's cell environments: those in .nox/ installed with exactly the cells' pins (a
    ranged value's newest release that installs here: cell_run.installed_pins)."""
    matrix, listed, pins = planned(matrix)
    installed = {cell.id: cell_run.installed_pins(matrix, cell, pins[cell.id], reports)[0] for cell in listed}
    found = [envs.find_environment(ROOT / ".nox", matrix, cell, reports, installed[cell.id]) for cell in listed]
    if None in found:
        sys.exit("a cell's environment is missing from .nox/ after the warm-up run")
    return found


def import_code(module: str, collector: bool = False) -> str:
    """What any run of the probes has to import: torch, transformers, the subject's module and the parts of
    transformers the probes use (`Trainer`, generation, the model classes the factory builds: PREWARM); then out
    at once. The garbage collector is off, as in a cell's imports: collecting while they grow takes 0.5 to 0.7 s,
    and leaving normally Python's last collections over that heap take 1 to 3 s more, neither of which a cell pays
    (its runner freezes the heap after the imports): the floor is the imports alone. With `collector`, the imports
    as Python does them by default (the floor of the figures before the cells' runners turned it off)."""
    imports = f"import torch, transformers, {module}, " + ", ".join(PREWARM)
    return f"import gc, os; {'' if collector else 'gc.disable(); '}{imports}; os._exit(0)"


def floor(pythons: list[Path], module: str, tries: int = 2, collector: bool = False) -> float:
    """One import of what the probes need per cell, from the bytecode the cell's environment holds (written by its
    own runs), in LANES parallel lanes: the fastest way to do what every run must do. The best of `tries`."""

    def once() -> float:
        start = time.perf_counter()
        with ThreadPoolExecutor(LANES) as lanes:
            list(lanes.map(lambda python: _import(python, module, collector=collector), pythons))
        return time.perf_counter() - start

    return min(once() for _ in range(tries))


def _import(python: Path, module: str, bytecode: bool = True, collector: bool = False) -> None:
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    environ |= cell_run.bytecode_environment(python.parent.parent) if bytecode else {"PYTHONDONTWRITEBYTECODE": "1"}
    subprocess.run([str(python), "-c", import_code(module, collector)], check=True, env=environ)


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


def warm_against_floor(matrix: Path, folder: Path, label: str, repeat: int, show) -> list[Path]:
    """Warm up the matrix's cells, then `repeat` times its floor and its warm run side by side, each run's ratio to
    the floor measured just before it (other work on the machine then weighs on both alike); the runs' folders."""
    module = spec.load(matrix).subjects[0].target.split(":")[0]
    nox_matrix(matrix, folder / "warmup")  # environments exist, are installed and hold their bytecode
    pythons = cell_pythons(spec.load(matrix), folder / "warmup")
    runs = [folder / f"warm-{index}" for index in range(repeat)]
    floors, plain, seconds = [], [], []
    for run in runs:
        floors.append(floor(pythons, module))
        plain.append(floor(pythons, module, tries=1, collector=True))
        seconds.append(nox_matrix(matrix, run))
    show(f"floor: {label} ({len(pythons)} cells), one import each from bytecode, {LANES} lanes", said(floors))
    show("  the same imports with the garbage collector on (Python's default), once", said(plain))
    show(f"warm {label}", f"{said(seconds)}   ratio to the floor beside it {ratios(seconds, floors)} (target <= 1.3)")
    show("  ratio to the imports with the collector on", ratios(seconds, plain))
    return runs


def ratios(seconds: list[float], floors: list[float]) -> str:
    return ", ".join(f"{s / f:.2f}" for s, f in zip(seconds, floors, strict=True))


def said(values: list[float]) -> str:
    return ", ".join(f"{v:.1f}" for v in values) + " s"


def breakdown(matrix: Path, reports: Path, wall: float, cpu: float, show) -> None:
    """Where the time of a warm run's cells went, from the phases each cell's result records; what a run costs
    outside its cells (nox starting, the plan, the report: the same run with every cell's result reused); and the
    CPU the run took (`cpu`, core-seconds of every process it started) against what its cores had in `wall`."""
    _, listed, _ = planned(spec.load(matrix))
    results = [read_cell_result(result_path(reports, cell)) for cell in listed]
    phases: dict[str, list[float]] = {}
    for result in results:
        for name, seconds in result.phases:
            phases.setdefault(name.split(" ")[0] if name.startswith("subject ") else name, []).append(seconds)
    for name, seconds in phases.items():
        show(f"  per cell: {name}", f"{sum(seconds) / len(seconds):6.2f} s (mean of {len(seconds)})")
    for result in results:
        for subject in result.subjects:
            counts = ", ".join(f"{variant} {n}" for variant, n in probes_per_variant(subject).items())
            show(f"  probes per variant, {result.resolved.get('transformers')}", counts)
    fixed = nox_matrix(matrix, reports, "--", "--cached")
    show("  outside the cells: nox, plan, report (every result reused: --cached)", f"{fixed:6.2f} s")
    busy = f"{cpu:6.1f} core-s, {cpu / (wall * LANES):.0%}"
    show("  CPU of the whole run, and the share of its cores it kept busy", busy)


def children_cpu() -> float:
    """Core-seconds of every process this one started and waited for (and theirs), so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def probes_per_variant(subject) -> dict[str, int]:
    """How many probes each variant of a subject ran: every probe as shipped and with all deleted, the per-name
    variants only those they can change (their values are in the observations where they ran one)."""
    ran = {variant: set() for variant in subject.variants}
    for o in subject.observations:
        for variant in ("override", "base"):
            ran.setdefault(variant, set()).add(o.probe)
        for prefix, values in (("base without ", o.without), ("only ", o.alone), ("fixed ", o.fixed)):
            for name, _ in values:
                ran.setdefault(prefix + name, set()).add(o.probe)
    return {variant: len(probes) for variant, probes in ran.items()}


# The probes of the class as shipped, in one forked child of a cell's interpreter as a variant runs them, CPU
# seconds: without watching which audited names run, and watching them (compat_matrix.cell.tracing).
WATCHING = """
import inspect, os, platform, sys, time
from compat_matrix.cell import runner, subject, tracing
from compat_matrix.cell.factory import default_factory, load_callable
from compat_matrix.cell.observe import call_probe
from compat_matrix.cell.probes import PREWARM, Build, prepare, prewarm, probes_for
prewarm(PREWARM)
runner.rehearse(300)
cls, methods = load_callable(sys.argv[1]), tuple(sys.argv[2].split(","))
prepare(methods)
probes, build = probes_for(methods, subject.subject_kind(cls)), Build(default_factory, cls, methods)
def once(names):
    start = time.process_time()
    for probe in probes:
        call_probe(probe, build, 300, names, lines=bool(names))
    return time.process_time() - start
if os.fork() == 0:
    once(None)
    plain = min(once(None) for _ in range(3))  # the code as it ships, nothing watched
    subject.watch(cls, methods)  # as a subject's child does before its variants fork: instrumented copies
    watched = {name: tracing.bodies(inspect.getattr_static(cls, name)) for name in methods}
    once(watched)
    seen = min(once(watched) for _ in range(3))  # as the class as shipped runs: which names and statements ran
    print(platform.python_version(), plain, seen, flush=True)
    os._exit(0)
os.wait()
"""


def watching(python: Path, subject: spec.Subject, show) -> None:
    """What watching which audited names and statements run costs the probes of the variant as shipped, in a warm
    cell: the probes on the code as it ships, against the same probes on its instrumented copies, watched."""
    environ = cell_run.runner_environment(python.parent.parent)
    command = [str(python), "-c", WATCHING, subject.target, ",".join(subject.methods)]
    done = subprocess.run(command, env=environ, capture_output=True, text=True, check=True)
    version, plain, watched = done.stdout.split()[-3:]
    show(
        f"  one variant's probes, CPU: as it ships, instrumented and watched (names, statements; Python {version})",
        f"{float(plain):6.2f} s, {float(watched):6.2f} s   {float(watched) / float(plain):.2f}x",
    )


def cold_bytecode(python: Path, module: str, folder: Path, show) -> None:
    """What writing bytecode costs a cold cell, and saves a warm one: the imports of a cell without bytecode (as
    cells ran before), writing it into an empty folder (a cold cell's first run), and from it (every run after)."""
    saved = python.parent.parent / envs.BYTECODE
    moved = folder / "bytecode-kept"
    if saved.exists():
        shutil.move(saved, moved)
    try:
        for label, bytecode in (("no bytecode (as before)", False), ("writing it (a cold cell)", True)):
            start = time.perf_counter()
            _import(python, module, bytecode)
            show(f"imports of one cell, {label}", f"{time.perf_counter() - start:6.1f} s")
        start = time.perf_counter()
        _import(python, module)
        show("imports of one cell, from bytecode (a warm cell)", f"{time.perf_counter() - start:6.1f} s")
    finally:
        shutil.rmtree(saved, ignore_errors=True)
        if moved.exists():
            shutil.move(moved, saved)


def more(folder: Path, show) -> None:
    """A cold cell end to end, uv against pip, the warm matrix by its number of cells, and bisect."""
    default = spec.load(MATRIX)
    cold_name = f"bench-cold-{os.getpid()}"
    cold = nox_matrix(variant_of(MATRIX, folder, cold_name, ["5.14.1"]), folder / "cold")
    show("cold cell: new environment (warm uv cache), install, probes", f"{cold:6.1f} s")
    for venv in ROOT.glob(f".nox/cell-{cold_name}-*"):
        shutil.rmtree(venv)
    (cell,) = cells.cells(spec.load(variant_of(MATRIX, folder, "peer", ["5.14.1"])))
    requirements = cells.install_args(default, cell)
    uv, pip = setup_seconds("uv", folder, requirements), setup_seconds("pip", folder, requirements)
    show("one cell's environment with uv", f"{uv:6.1f} s")
    show("the same with virtualenv + pip (nox's default backend)", f"{pip:6.1f} s   {pip / uv:.1f}x uv")
    nox_matrix(variant_of(MATRIX, folder, "bench-scale", SCALING), folder / "scale-warmup")
    for count in (1, 2, 3, 5):
        seconds = nox_matrix(variant_of(MATRIX, folder, "bench-scale", SCALING[:count]), folder / f"scale-{count}")
        show(f"warm matrix with {count} cell(s)", f"{seconds:6.1f} s   {seconds / count:.1f} s per cell")
    for what, options in (("verdict", ()), (OBSERVATION, ("--observation", OBSERVATION))):
        seconds, answer, line = bisection(MATRIX, folder / f"bisect-{len(options)}", *options)
        tested = f"{len(answer['tested'])} releases tested in {len(answer['rounds'])} rounds"
        show(f"bisect {BISECT} on the {what}", f"{seconds:6.1f} s   {tested}; {line}")


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


def setup_seconds(tool: str, folder: Path, requirements: list[str]) -> float:
    """A fresh environment with one cell's pins: uv, or the virtualenv + pip that nox uses by default."""
    target = folder / tool
    start = time.perf_counter()
    if tool == "uv":
        subprocess.run(["uv", "venv", "-q", str(target)], check=True)
        command = ["uv", "pip", "install", "-q", "--python", str(target / "bin" / "python"), *requirements]
        subprocess.run(command, check=True, env={**os.environ, **uv.uv_environment(os.environ)})
    else:
        subprocess.run([sys.executable, "-m", "virtualenv", "-q", str(target)], check=True)
        subprocess.run([str(target / "bin" / "python"), "-m", "pip", "install", "-q", *requirements], check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="warm runs of each matrix (default 3)")
    parser.add_argument("--quick", action="store_true", help="one warm run of each matrix (--repeat 1)")
    parser.add_argument("--more", action="store_true", help="also a cold cell, uv against pip, scaling and bisect")
    args = parser.parse_args()
    repeat = 1 if args.quick else args.repeat
    default = spec.load(MATRIX)
    module = default.subjects[0].target.split(":")[0]
    rows: list[tuple[str, str]] = []

    def show(label: str, value: str) -> None:
        rows.append((label, value))
        print(f"{label:<70} {value}", flush=True)

    show("machine", f"{os.cpu_count()} cores, {LANES} lanes, {len(cells.cells(default))} cells in the default matrix")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        runs = warm_against_floor(MATRIX, folder / "default", "the default matrix", repeat, show)
        before = children_cpu()
        wall = nox_matrix(MATRIX, runs[-1])
        show("the last warm run once more, for its breakdown", f"{wall:6.1f} s")
        breakdown(MATRIX, runs[-1], wall, children_cpu() - before, show)
        watching(cell_pythons(default, runs[-1])[-1], default.subjects[0], show)
        cold_bytecode(cell_pythons(default, runs[-1])[-1], module, folder, show)
        sweep = variant_of(MATRIX, folder / "sweep", "char-causal-lm-checkpointing", SWEEP)
        warm_against_floor(sweep, folder / "sweep", "sweep of the 11 minors 5.14 … 5.24", repeat, show)
        if args.more:
            more(folder, show)
    print("\n| measurement | figure |\n|---|---|")
    for label, value in rows:
        print(f"| {label.strip()} | {value.strip()} |")


if __name__ == "__main__":
    main()
