"""The in-environment side: one interpreter per cell runs every probe on every variant of every subject.

    python -m compat_matrix.cell REQUEST.json RESULT.json

Reads the request (shared.request.CellRequest), imports torch, transformers and what the probes use once, and
rehearses the probes on a throwaway model. Each subject then runs in a child forked from that process
(compat_matrix.cell.subject), a subject that crashes or hangs costing only its own result. Writes the cell result
atomically."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from compat_matrix.cell import trial
from compat_matrix.cell.discovery import discover, discover_overrides
from compat_matrix.cell.factory import default_factory, load_callable
from compat_matrix.cell.forks import die_with_parent, forked
from compat_matrix.cell.observe import BUILDS_ON, DEFAULT_TIMEOUT, ProbeTimeout, call_probe
from compat_matrix.cell.probes import (
    PREWARM,
    Build,
    prepare,
    prewarm,
    probes_for,
)
from compat_matrix.cell.subject import IMPORT_FAILED, IMPORTING, Ask, expand, run_isolated
from compat_matrix.shared.blame import Clash, clash_of, said
from compat_matrix.shared.limits import OLDEST_TRANSFORMERS
from compat_matrix.shared.request import IMPORTED_FD, CellRequest
from compat_matrix.shared.results import (
    CRASHED,
    OK,
    CellResult,
    Discovery,
    SubjectResult,
    describe_exception,
    write_json_atomic,
)


def installed_versions(packages: list[str]) -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in packages:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def import_probe_module(ref: str) -> None:
    """Import one of the matrix's own probe modules (a .py file or a module name); its probes register."""
    if ref.endswith(".py"):
        name = f"compat_matrix_probes_{Path(ref).stem}_{hashlib.sha256(ref.encode()).hexdigest()[:8]}"
        spec = importlib.util.spec_from_file_location(name, ref)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    else:
        importlib.import_module(ref)


def load_probe_modules(refs: list[str], rootdir: str, timeout: float) -> dict[str, str]:
    """Import the matrix's own probe modules; the error of each that could not be, by its name as the matrix file
    gives it. Each is tried first in a forked child, so that one that hangs, aborts or exits at import costs only
    itself, never the cell."""
    failed = {}
    with tempfile.TemporaryDirectory(prefix="compat-matrix-") as tmp:
        for ref in refs:
            shown = os.path.relpath(ref, rootdir) if os.path.isabs(ref) else ref
            trial = forked(lambda ref=ref: import_probe_module(ref), Path(tmp, "progress"), timeout, IMPORTING)
            if trial.status != OK:
                why = (trial.reason or "").removeprefix(f"{IMPORTING}: ")
                failed[shown] = why if trial.status == CRASHED else f"{trial.status}: {why}"
                continue
            try:
                import_probe_module(ref)
            except (Exception, SystemExit) as exc:
                failed[shown] = describe_exception(exc)
    return failed


def rehearse(timeout: float) -> None:
    """Every built-in probe of models, once, on a throwaway subclass of a tiny LlamaForCausalLM, its results
    discarded: the first save, load, `Trainer` step or `generate` of a process pays for lazy imports and caches
    (about a second in all), which every variant's child would otherwise pay again. Done before any subject is
    imported, on a class of its own, so nothing about a subject is cached in a state its variants share."""
    from transformers import LlamaForCausalLM

    rehearsal = type("Rehearsal", (LlamaForCausalLM,), {"__module__": __name__})
    build = Build(default_factory, rehearsal, ("forward",))
    for probe in probes_for(("forward",)):
        if probe.func.__module__.startswith(f"{__package__}.probes"):
            with contextlib.suppress(ProbeTimeout):
                call_probe(probe, build, timeout)


def imported() -> None:
    """Tell the process that started this runner, where it asked (IMPORTED_FD), that the imports are done: the next
    cell's runner may begin its own (compat_matrix.host.import_lanes). Nothing forked or started later inherits it."""
    fd = os.environ.pop(IMPORTED_FD, None)
    if fd is not None:
        with contextlib.suppress(OSError, ValueError):
            os.write(int(fd), b".")
            os.close(int(fd))


class Phases:
    """How long each phase of a cell's run took, in order (the benchmark prints them)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, float]] = []
        self.last = time.monotonic()

    def done(self, phase: str) -> None:
        now = time.monotonic()
        self.seen.append((phase, round(now - self.last, 3)))
        self.last = now


def run(request: CellRequest) -> CellResult:
    die_with_parent()
    phases = Phases()
    # No collections during the imports: what they build lives as long as the process, and collecting it as it
    # grows took 0.6 of a cell's 4 core-s (it holds about 8 MB more of cycles, frozen with the rest below).
    gc.disable()
    import torch  # noqa: F401  paid once per cell, before any subject
    import transformers  # noqa: F401

    phases.done("import torch and transformers")
    timeout, rootdir = request.timeout, request.rootdir
    if rootdir not in sys.path:  # a factory module beside the matrix file imports; what the cell installs comes first
        sys.path.append(rootdir)
    asks = [
        Ask(s.target, s.methods, s.factory, s.tests, s.inputs, timeout, rootdir, request.mutants, exclude=s.exclude)
        for s in request.subjects
    ]
    failed = prewarm(PREWARM + (("pytest",) if any(a.tests for a in asks) else ()))
    phases.done("import what the probes use")
    imported()
    why = unimportable({m: (describe_exception(e), clash_of(e)) for m, e in failed.items()})
    if why:
        return CellResult(
            request.matrix,
            request.cell,
            request.requested,
            installed_versions(list(request.packages)),
            status=IMPORT_FAILED,
            reason=why,
            phases=tuple(phases.seen),
        )
    # Everything imported so far is permanent: the collections that transformers and accelerate run (once per
    # Trainer step: 0.15 s over the heap of the imports, in the rehearsal too), and those parsing sources triggers,
    # then skip it, and forked children share its pages.
    gc.freeze()
    gc.enable()
    rehearse(timeout)
    phases.done("rehearse the probes")
    unloaded = tuple(load_probe_modules(list(request.probes), rootdir, timeout).items())
    gc.freeze()
    prepare(tuple(dict.fromkeys(m for a in asks for m in a.methods)))
    gc.freeze()
    phases.done("probe modules and preparations")
    subjects, discovered = [], []
    named = {a.target for a in asks if not a.package}  # a class named on its own is run once, with its own keys
    with tempfile.TemporaryDirectory(prefix="compat-matrix-") as tmp:
        for asked in asks:
            expanded: list[Ask | SubjectResult] = [asked]
            if asked.package:
                found, expanded = expand(asked, Path(tmp, "progress"))
                discovered.append(found)
                expanded = [a for a in expanded if isinstance(a, SubjectResult) or a.target not in named]
                phases.done(f"find the classes of {asked.target}")
            for ask in expanded:
                if isinstance(ask, SubjectResult):
                    subjects.append(ask)
                    continue
                subjects.append(run_isolated(replace(ask, unloaded=unloaded)))
                phases.done(f"subject {ask.target}")
    return CellResult(
        matrix=request.matrix,
        cell=request.cell,
        requested=request.requested,
        resolved=installed_versions(list(request.packages)),
        subjects=tuple(subjects),
        seconds=round(sum(seconds for _, seconds in phases.seen), 2),
        phases=tuple(phases.seen),
        discovered=tuple(discovered),
    )


def unimportable(failed: dict[str, tuple[str, Clash | None]]) -> str | None:
    """Why the cell cannot run its probes, where a transformers module they need failed to import (the error, and
    the two distributions that clash where it names them: "datasets 2.14.4 fails beside pyarrow 26.0.1"); None
    where every one imported. What else failed (pytest) is left to the probe that needs it."""
    for module, (error, clash) in failed.items():
        if module.split(".")[0] == BUILDS_ON:
            old = module.startswith(LLAMA) and "No module" in error
            older = f" (transformers has it from {OLDEST_TRANSFORMERS})" if old else ""
            return f"the probes need {module}, which cannot be imported here: {error}{older}{said(clash)}"
    return None


LLAMA = "transformers.models.llama"  # of the tiny models the probes build


def top_modules(distribution: str) -> list[str]:
    """The top-level modules and packages an installed distribution holds (its `top_level.txt`, else the files it
    installed), tests, scripts and private ones left out."""
    dist = importlib.metadata.distribution(distribution)
    listed = (dist.read_text("top_level.txt") or "").split()
    if not listed:
        for file in dist.files or ():
            top = file.parts[0]
            if (len(file.parts) > 1 and not top.endswith((".dist-info", ".data"))) or file.suffix == ".py":
                listed.append(top.removesuffix(".py"))
    kept = [m for m in dict.fromkeys(listed) if m.isidentifier() and not m.startswith("_")]
    return [m for m in kept if m not in ("test", "tests", "docs", "examples", "benchmarks", "scripts")]


def discover_distribution(distribution: str, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
    """What `compat-matrix init` writes subjects from: the distribution's version, what the default factory could not
    build of the classes found (compat_matrix.cell.trial), and per top-level module what `discover` finds there,
    with every found class's overrides ((name, kind, the library's class it inherits it from or None), as
    `discover_overrides` says)."""
    import transformers  # noqa: F401  what subject_kind and the overrides are judged against

    found = []
    with tempfile.TemporaryDirectory(prefix="compat-matrix-") as tmp:
        for module in top_modules(distribution):

            def look(module: str = module) -> dict[str, Any]:
                try:
                    discovery = discover(module)
                except Exception as exc:  # the module itself: why, and whose code raised it beside what
                    found = clash_of(exc, own=(distribution,))
                    skipped = Discovery(module, skipped=((module, describe_exception(exc)),))
                    return {"discovery": skipped.to_json(), "overrides": {}, "clash": found and found.to_json()}
                targets = [*discovery.subjects, *(t for t, _ in discovery.unaudited)]
                overrides = {t: [[n, k, via] for n, _, k, via in discover_overrides(load_callable(t))] for t in targets}
                return {"discovery": discovery.to_json(), "overrides": overrides}

            run = forked(look, Path(tmp, "progress"), timeout, IMPORTING)
            if run.status == OK:
                found.append(run.answer)
            else:
                reason = (run.reason or run.status).removeprefix(f"{IMPORTING}: ")
                found.append({"discovery": Discovery(module, skipped=((module, reason),)).to_json(), "overrides": {}})
    versions = installed_versions([distribution, "transformers", "torch"])
    targets = [t for item in found for t in item["discovery"]["subjects"]]
    prewarm(PREWARM)  # here, with the classes, once: every build's child starts with them imported
    for target in targets:
        with contextlib.suppress(Exception):  # it imported in its module's child: this one says nothing new
            load_callable(target)
    unbuilt = [u.to_json() for u in trial.unbuilt(targets)]
    return {"distribution": distribution, "versions": versions, "found": found, "unbuilt": unbuilt}


def main(argv: list[str]) -> int:
    # What the subject's modules see of the command line: nothing. A script shipped in the package (angle-emb's
    # `scripts.push_bert_model`, which reads a model path and a hub name from four arguments) runs at import.
    sys.argv[1:] = []
    if len(argv) == 3 and argv[0] == "--discover":  # compat-matrix init: what a distribution holds
        write_json_atomic(Path(argv[2]), discover_distribution(argv[1]))
        return 0
    if len(argv) != 2:
        print("usage: python -m compat_matrix.cell REQUEST.json RESULT.json", file=sys.stderr)
        return 2
    request = CellRequest.from_json(json.loads(Path(argv[0]).read_text(encoding="utf-8")))
    result = run(request)
    write_json_atomic(Path(argv[1]), result.to_json())
    return 0
