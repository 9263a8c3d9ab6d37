"""The in-environment side: one interpreter per cell runs every probe on every variant of every subject.

    python -m compat_matrix.cell REQUEST.json RESULT.json

Imports torch, transformers and what the probes use once. Each subject then runs in a child forked from that
process (it imports the subject, finds its overrides, chooses the probes), and each variant of the subject in a
grandchild forked from that child: as shipped and with the audited methods deleted, side by side where cores
allow; then, where those differ and there are several audited methods, with each one deleted alone. Every
variant starts from the same state, so nothing one variant did first (a lazy import, a warning shown once) can
make another look different. An exception or a warning inside a probe is an observation, not a failure of the
cell; a subject that crashes or hangs is labelled and costs only its own result. Writes the cell result atomically.
"""

from __future__ import annotations

import contextlib
import difflib
import gc
import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import os
import platform
import re
import sys
import tempfile
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from compat_matrix.cell import tiny, tracing, trial, user_tests, variants
from compat_matrix.cell.factory import Factory, default_factory, load_callable
from compat_matrix.cell.forks import STOPPED, WATCHDOG_GRACE, Forked, die_with_parent, forked, forked_each
from compat_matrix.cell.observe import BUILDS_ON, DEFAULT_TIMEOUT, ProbeTimeout, call_probe
from compat_matrix.cell.probes import (
    ANY,
    ERROR,
    LINES,
    MODEL,
    PREWARM,
    REACHED,
    TRAINER,
    Build,
    Probe,
    Values,
    prepare,
    prewarm,
    probes_for,
    subject_kind,
)
from compat_matrix.cell.probes.generic import orphaned
from compat_matrix.shared import evidence
from compat_matrix.shared.blame import Clash, clash_of, owners, said
from compat_matrix.shared.results import (
    ATTRIBUTE,
    CRASHED,
    METHOD,
    OK,
    THROUGH,
    TIMED_OUT,
    CellResult,
    Code,
    Discovery,
    Observation,
    Override,
    SubjectResult,
    describe_exception,
    equal,
    write_json_atomic,
)

METHOD_TYPES = (types.FunctionType, classmethod, staticmethod, property)
IMPORTING = "importing it"  # what a child that imports a subject or a probe module is doing


def pair(probes: list[Probe], runs: dict[str, dict[str, Values]]) -> list[Observation]:
    """Observations of every probe that both variants completed, matched by name; a name a variant lacks reads
    None there. The per-name variants (beyond the first two) add their values where they ran the probe."""
    observations = []
    for probe in probes:
        if not all(probe.name in runs.get(v, {}) for v in (variants.OVERRIDE, variants.BASE)):
            continue
        by_variant = {variant: values[probe.name] for variant, values in runs.items() if probe.name in values}
        names = list(dict.fromkeys(name for values in by_variant.values() for name in values))
        if set(names) <= {REACHED}:
            continue  # nothing to look at for this subject (no setter to call, say): no observation at all
        for name in names:
            shipped_only = name == LINES  # watched on the class as shipped alone
            observations.append(
                Observation(
                    probe.name,
                    name,
                    by_variant[variants.OVERRIDE].get(name),
                    by_variant[variants.BASE].get(name),
                    probe.carrying(name),
                    () if shipped_only else _per_name(by_variant, variants.WITHOUT, name),
                    () if shipped_only else _per_name(by_variant, variants.ONLY, name),
                    () if shipped_only else _per_name(by_variant, variants.FIXED, name),
                    probe.binding(name),
                )
            )
    return observations


def _per_name(by_variant: dict[str, Values], prefix: str, name: str) -> tuple[tuple[str, Any], ...]:
    """(audited name, value of observation `name`) from each per-name variant of one kind that ran the probe."""
    return tuple((v.removeprefix(prefix), values.get(name)) for v, values in by_variant.items() if v.startswith(prefix))


def discover_overrides(cls: type, package: str = BUILDS_ON) -> list[tuple[str, str, str, str | None]]:
    """Every name `cls` defines itself, or inherits from an abstract base of its own library that cannot be built
    and audited alone (`BaseTrainer`), that a class of `package` after the one defining it also defines: (name, that
    class, METHOD or ATTRIBUTE, the library's class it is inherited from or None). Dunder names (`__init__`) are
    construction, not behaviour."""
    found = []
    for owner in (cls, *inherited_from(cls, package)):
        for name, value in vars(owner).items():
            if name.startswith("__") or variants.defining_class(cls, name) is not owner:
                continue  # construction, or an abstract base's name that a nearer class defines again
            after = cls.__mro__[cls.__mro__.index(owner) + 1 :]
            origin = next((k for k in after if name in vars(k) and k.__module__.split(".")[0] == package), None)
            if origin is None:
                continue
            kind = METHOD if isinstance(value, METHOD_TYPES) else ATTRIBUTE
            inherited = vars(variants.base_of(cls, name))[name]
            if kind == ATTRIBUTE and value is inherited:
                continue  # the inherited value itself, as transformers' __init_subclass__ writes `config_class`
            via = None if owner is cls else f"{owner.__module__}.{owner.__qualname__}"
            found.append((name, f"{origin.__module__}.{origin.__qualname__}", kind, via))
    return found


def inherited_from(cls: type, package: str = BUILDS_ON) -> list[type]:
    """The abstract bases of `cls`'s own library (inspect.isabstract: they cannot be built, so no probe runs them
    alone) whose overrides `cls` inherits: none that a concrete class of the library between them, itself a
    subclass of `package`'s, already inherits, since that class is audited with them (a concrete mixin is not)."""
    own = [k for k in cls.__mro__[1:] if variants.library(k) == variants.library(cls)]
    audited = [k for k in own if not inspect.isabstract(k) and any(variants.library(b) == package for b in k.__mro__)]
    return [k for k in own if inspect.isabstract(k) and not any(k in c.__mro__ for c in audited)]


def classes_in(target: str, exclude: tuple[str, ...] = ()) -> tuple[list[type], list[str], list[tuple[str, str]]]:
    """The classes defined in module or package `target` (its submodules too, each imported), in module order:
    (classes, what `exclude` left out, (module, why) for each submodule that could not be imported). An entry of
    `exclude` is a class (`Class`, `module:Class`) or a module, with everything below it, which is then not even
    imported. An import error of `target` itself propagates."""
    import pkgutil

    def left_out(module: str) -> bool:
        return any(module == e or module.startswith(f"{e}.") for e in exclude if ":" not in e)

    modules = [importlib.import_module(target)]
    excluded, skipped = [], []
    folders = [(getattr(modules[0], "__path__", None), target)]
    while folders:  # each package's modules, in order; a package left out is never imported, nor what it holds
        path, prefix = folders.pop(0)
        for info in pkgutil.iter_modules(path or [], prefix=f"{prefix}."):
            if left_out(info.name):
                excluded.append(info.name)
                continue
            try:
                module = importlib.import_module(info.name)
            except Exception as exc:  # an optional integration's missing library
                skipped.append((info.name, describe_exception(exc)))
                continue
            except SystemExit as exc:  # a module that exits at import
                skipped.append((info.name, f"SystemExit: {exc}"))
                continue
            modules.append(module)
            if info.ispkg:
                folders.append((getattr(module, "__path__", None), info.name))
    found: dict[str, type] = {}
    for module in modules:
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == module.__name__:
                name = f"{value.__module__}:{value.__qualname__}"
                if value.__qualname__ in exclude or name in exclude:
                    excluded.append(name)
                else:
                    found.setdefault(name, value)
    return list(found.values()), list(dict.fromkeys(excluded)), skipped


def discover(target: str, methods: tuple[str, ...] = (), exclude: tuple[str, ...] = ()) -> Discovery:
    """What a module or package target stands for: every class defined there that subclasses a class of
    transformers and overrides a method or class attribute of it, itself or through an abstract base of its library
    (only the `methods` named, if any). Those of a kind a probe family covers (models, trainers) are subjects; the
    others are listed, not audited; so is an abstract base whose every override a concrete subclass found here
    inherits, since that subclass is where the probes run it (`audited through …`)."""
    classes, excluded, skipped = classes_in(target, exclude)
    found = {cls: discover_overrides(cls) for cls in classes}
    subjects, unaudited = [], []
    for cls, overrides in found.items():
        if not overrides:
            continue
        name, kind = f"{cls.__module__}:{cls.__qualname__}", subject_kind(cls)
        through = covering(cls, overrides, found) if inspect.isabstract(cls) and kind in (MODEL, TRAINER) else []
        if methods and not any(variants.owner(cls, m) for m in methods):
            unaudited.append((name, f"{kind}; defines none of {', '.join(methods)}"))
        elif through:
            unaudited.append((name, THROUGH + ", ".join(k.__qualname__ for k in through)))
        elif kind in (MODEL, TRAINER):
            subjects.append(name)
        else:
            unaudited.append((name, kind))
    return Discovery(target, tuple(subjects), tuple(unaudited), tuple(excluded), tuple(skipped))


def covering(base: type, overrides: list[tuple[str, str, str, str | None]], found: dict[type, list]) -> list[type]:
    """The concrete classes found that inherit an abstract base's overrides from it, where together they inherit
    every one of them; none where some override of the base no concrete class found runs."""
    through = {
        cls: {name for name, *_ in names if variants.owner(cls, name) is variants.owner(base, name)}
        for cls, names in found.items()
        if cls is not base and issubclass(cls, base) and not inspect.isabstract(cls)
    }
    through = {cls: names for cls, names in through.items() if names}
    covered = set().union(*through.values()) if through else set()
    return list(through) if covered >= {name for name, *_ in overrides} else []


def expand(ask: Ask, progress: Path) -> tuple[Discovery, list[Ask | SubjectResult]]:
    """A module or package subject as the subjects it stands for, found in a forked child (so that nothing the
    library does at import reaches the variants): an Ask for each class found, or, for a target that cannot be
    imported or holds no class to audit, one result that says so."""

    def found() -> dict[str, Any]:
        discovery = discover(ask.target, ask.methods, ask.exclude)
        named = {t: [m for m in ask.methods if variants.owner(load_callable(t), m)] for t in discovery.subjects}
        return {"discovery": discovery.to_json(), "methods": named}

    run = forked(found, progress, ask.timeout, IMPORTING)
    if run.status != OK:
        why = (run.reason or run.status).removeprefix(f"{IMPORTING}: ")
        return Discovery(ask.target), [SubjectResult(ask.target, ask.methods, IMPORT_FAILED, why, group=ask.target)]
    discovery = Discovery.from_json(run.answer["discovery"])
    if not discovery.subjects:
        why = f"found no class in {ask.target} that subclasses a transformers class and overrides something of it"
        return discovery, [SubjectResult(ask.target, (), reason=why, group=ask.target, kind="package")]
    methods = run.answer["methods"]
    return discovery, [
        replace(ask, target=t, methods=tuple(methods[t]), group=ask.target, exclude=()) for t in discovery.subjects
    ]


def misspelt(cls: type, methods: tuple[str, ...]) -> str | None:
    """Every audited name that neither the class nor a class of its library it inherits from defines, each with the
    closest names it does define ("did you mean"), in one message; None when it defines them all."""
    own = [name for name in vars(cls) if not name.startswith("__")]
    known = list(dict.fromkeys([*own, *(n for n in dir(cls) if not n.startswith("__"))]))
    bad = []
    for name in methods:
        if variants.owner(cls, name) is not None:
            continue
        close = difflib.get_close_matches(name, own, n=2) or difflib.get_close_matches(name, known, n=2)
        inherited = "" if not hasattr(cls, name) else " (it inherits it: nothing to delete)"
        hint = f"; did you mean {' or '.join(map(repr, close))}?" if close and not inherited else ""
        bad.append(f"{name!r}{inherited}{hint}")
    if not bad:
        return None
    return f"{cls.__qualname__} does not define {', '.join(bad)} itself"


def run_variant(
    cls: type,
    variant: str,
    methods: tuple[str, ...],
    probes: list[Probe],
    factory: Factory,
    timeout: float,
    progress: Path,
    inputs: Callable[[Any], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """In a variant's own child: make the subject class that variant, then every probe on fresh instances."""
    variants.apply(cls, variant, methods)
    # A name the variant no longer has (deleted, and no base defines it) never runs.
    present = {name: inspect.getattr_static(cls, name) for name in methods if hasattr(cls, name)}
    watched = {name: tracing.bodies(attribute) for name, attribute in present.items()}
    build = Build(factory, cls, methods, inputs)
    values: dict[str, Values] = {}
    for probe in probes:
        progress.write_text(f"{probe.name} ({variant})")
        try:
            values[probe.name] = call_probe(probe, build, timeout, watched, lines=variant == variants.OVERRIDE)
        except ProbeTimeout as exc:
            return {"values": values, "timed_out": f"{probe.name} ({variant}): {exc}"}
    return {"values": values, "timed_out": None}


@dataclass(frozen=True)
class Ask:
    """One subject as the request asks for it, and what the cell does for every subject."""

    target: str
    methods: tuple[str, ...] = ()
    factory: str | None = None
    tests: tuple[str, ...] = ()  # the user's pytest node ids or paths, absolute
    inputs: str | None = None  # `module:callable` that gives a forward pass's keyword arguments for an instance
    timeout: float = DEFAULT_TIMEOUT
    rootdir: str = "."  # node ids of the user's tests are relative to it (the matrix file's folder)
    mutants: bool = False  # also run the tests against broken versions of the audited methods
    unloaded: tuple[tuple[str, str], ...] = ()  # probe modules that could not be imported, and why
    exclude: tuple[str, ...] = ()  # of a module or package target: the classes and modules left out
    group: str | None = None  # the module or package target it was found in

    @property
    def package(self) -> bool:
        return ":" not in self.target


def run_subject(ask: Ask, progress: Path) -> SubjectResult:
    """Every probe that exercises one of the audited methods, on every variant, each variant in its own forked
    child; then the user's tests, if the subject names any. A probe module that could not be imported is an
    observation (`error`, equal on both sides) of every subject."""
    methods, timeout = ask.methods, ask.timeout
    failed = SubjectResult(target=ask.target, methods=methods, group=ask.group)
    try:
        cls = load_callable(ask.target)
    except Exception as exc:  # where it failed inside another distribution beside a third, the two are named
        reason = describe_exception(exc) + said(clash_of(exc, own=owners(ask.target)))
        return replace(failed, status=IMPORT_FAILED, reason=reason)
    discovered = discover_overrides(cls)
    methods = methods or tuple(name for name, *_ in discovered)  # none in the matrix file: every override
    overrides = tuple(Override(name, origin, name in methods, kind, via) for name, origin, kind, via in discovered)
    failed = replace(failed, methods=methods, overrides=overrides, kind=subject_kind(cls))
    why = misspelt(cls, methods)
    if why is not None:
        return replace(failed, status="bad-subject", reason=why)
    loaded: dict[str, Any] = {}
    for key, ref in (("factory", ask.factory), ("inputs", ask.inputs)):  # after the class: every row says why
        try:
            loaded[key] = load_callable(ref) if ref else None
        except Exception as exc:
            return replace(failed, status=IMPORT_FAILED, reason=unloadable(key, ref, exc))
    factory, inputs = loaded["factory"] or default_factory, loaded["inputs"]
    why, parameters = (
        unbuildable(cls, factory, methods, timeout, progress) if failed.kind in (MODEL, TRAINER) else (None, None)
    )
    if why is not None:
        return replace(failed, status=COULD_NOT_BUILD, reason=why)
    failed = replace(failed, caveat=caveat(failed.kind, ask.factory, parameters))
    gc.freeze()  # the subject's imports too, before its variants are forked
    prepare(methods)
    gc.freeze()
    orphans = tuple((name, why) for name in methods if (why := orphaned(cls, name)))
    failed = replace(failed, orphaned=orphans, code=watch(cls, methods))
    probes = probes_for(methods, failed.kind)
    exercised = {m for p in probes for m in p.exercises}
    unprobed = tuple(m for m in methods if m not in exercised and ANY[0] not in exercised)
    done = replace(
        failed,
        probes=tuple(p.name for p in probes),
        unprobed=unprobed,
        titles=tuple((p.name, p.title) for p in probes),
        summaries=tuple((p.name, *p.summary) for p in probes if p.summary),
    )
    runs: dict[str, dict[str, Values]] = {}

    def work(variant: str, ran: list[Probe], own: Path) -> tuple[Callable[[], Any], Path, str]:
        job = partial(run_variant, cls, variant, methods, ran, factory, timeout, own, inputs)
        return job, own, f"making the {variant} variant"

    everything = variants.names(methods, per_method=True) if probes else []
    # Each batch needs the results of those before it: the per-name variants the first two's, and `only X` whether
    # deleting X alone already changed something.
    batches: list[Callable[[], list[str]]] = [
        lambda: everything[:2],
        lambda: [v for v in everything if v.startswith(variants.WITHOUT)] + fixable(cls, methods, runs),
        lambda: [v for v in everything if v.startswith(variants.ONLY)],
        lambda: together(done, probes, runs),
    ]
    unfinished: dict[str, str] = {}  # a per-name variant that gave no values: its names are judged inconclusive
    for index, batch in enumerate(stage() for stage in batches):
        todo = [(variant, ran) for variant in batch if (ran := _to_run(variant, probes, runs))]
        owns = _progress_files(progress, len(todo))
        works = [work(variant, ran, own) for (variant, ran), own in zip(todo, owns, strict=True)]
        answers = forked_each(works, progress, timeout + WATCHDOG_GRACE, stop=index == 0)
        failures = [failure for run in answers if (failure := _failure(run))]
        for (variant, _), run in zip(todo, answers, strict=True):
            if run.status == OK and not run.answer["timed_out"]:
                runs[variant] = run.answer["values"]
            else:
                unfinished[variant] = ": ".join(_failure(run) or (run.status, run.reason or run.status))
        if failures and index == 0:  # the class as shipped or with every name deleted: nothing to compare
            status, reason = failures[0]
            return replace(done, status=status, reason=reason, observations=tuple(pair(probes, runs)))
    broken = tuple(Observation(ref, ERROR, why, why, carries=False) for ref, why in ask.unloaded)
    observations = broken + tuple(pair(probes, runs))
    done = replace(done, variants=tuple(runs), observations=observations, unfinished=tuple(unfinished.items()))
    if not ask.tests:
        return done
    tests, ran = user_tests.run_user_tests(cls, methods, list(ask.tests), ask.rootdir, timeout, progress, ask.mutants)
    return replace(done, tests=tests, mutants=ran)


def unloadable(key: str, ref: str, exc: BaseException) -> str:
    """Why the subject's factory (or inputs callable) cannot be loaded, naming it, and where a module of your own goes
    when Python cannot find it."""
    top = ref.partition(":")[0].split(".")[0]
    missing = isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] == top
    where = f" (a module of your own goes beside the matrix file: {top}.py)" if missing else ""
    return f"could not import the {key} {ref}: {describe_exception(exc)}{where}"


IMPORT_FAILED = "import-failed"  # a subject's class, or a transformers module the probes need, cannot be imported
COULD_NOT_BUILD = "could-not-build"  # the default factory cannot make the subject tiny: it needs a factory


def watch(cls: type, methods: tuple[str, ...]) -> tuple[Code, ...]:
    """Instrumented copies of each audited name's functions as shipped and of its base implementation, swapped in
    before the variants are forked (compat_matrix.cell.tracing.install); the code as shipped, statement by
    statement, of each audited method whose every function has a copy."""
    code = []
    for name in methods:
        base = variants.base_of(cls, name)
        if base is not None:
            tracing.install(vars(base)[name])
        shipped = vars(variants.owner(cls, name) or cls)[name]  # the subject's, or its abstract base's
        units = tracing.install(shipped)
        if tracing.functions(shipped) and len(units) == len(tracing.functions(shipped)):
            found = [unit for copy in units.values() for unit in copy]
            file = found[0].file if found else ""
            code.append(Code(name, file, tuple((u.key, u.statements) for u in found)))
    return tuple(code)


def unbuildable(
    cls: type, factory: Factory, methods: tuple[str, ...], timeout: float, progress: Path
) -> tuple[str | None, int | None]:
    """Why the default factory cannot build the subject (`could not build …; write a factory`), or None: as
    shipped, and with every audited name deleted too, since an override that breaks construction is a finding of
    the probes, not a missing factory; and the parameters of the model built as shipped (None: not built). Each
    build in a forked child, so that nothing it caches reaches a variant."""

    def attempt(variant: str) -> str | int | None:
        def build() -> str | int | None:
            variants.apply(cls, variant, methods)
            try:
                made = factory(cls)
            except tiny.CouldNotBuild as exc:
                return str(exc)
            except Exception:
                return None  # an error of another kind: the probes observe it
            model = made if hasattr(made, "parameters") else getattr(made, "model", None)  # a Trainer's model
            return tiny.parameters(model) if hasattr(model, "parameters") else None

        run = forked(build, progress, timeout + WATCHDOG_GRACE, f"building the {variant} variant")
        return run.answer if run.status == OK else None

    shipped = attempt(variants.OVERRIDE)
    if isinstance(shipped, str):
        return (shipped if isinstance(attempt(variants.BASE), str) else None), None
    return None, shipped


STAND_IN = (
    "on the default factory's stand-ins, a tiny model and rows of token ids, not the model and data the trainer is "
    "written for: write a factory to confirm"
)
ABSTRACT = "built with no parameters, an abstract base class: audit the subclasses users build"


def caveat(kind: str | None, factory: str | None, parameters: int | None) -> str | None:
    """Why the probes cannot establish that deleting an override changes nothing users see, even where they observed
    no difference: a Trainer trained on stand-ins, a model with nothing in it."""
    if kind == TRAINER and factory is None:
        return STAND_IN
    if kind == MODEL and parameters == 0:
        return ABSTRACT
    return None


def _failure(run: Forked) -> tuple[str, str] | None:
    """(status, reason) of a variant's child that gave no values: it crashed, hung, or a probe timed out. None
    for one that gave them, or that was only stopped because another failed."""
    if run.status == OK:
        return (TIMED_OUT, run.answer["timed_out"]) if run.answer["timed_out"] else None
    return None if run.status == STOPPED else (run.status, run.reason or run.status)


def _progress_files(progress: Path, count: int) -> list[Path]:
    """A progress file for each of `count` children of one batch, beside the one this process is watched by."""
    return [progress.with_name(f"{progress.name}.{index}") for index in range(count)]


def _to_run(variant: str, probes: list[Probe], runs: dict[str, dict[str, Values]]) -> list[Probe]:
    """The probes a variant runs: every one as shipped and with all audited names deleted. A per-name variant runs
    the same code as the variant it is compared with up to the first call of that name, so it runs the probes in
    which that name ran there (`base without X`: X as shipped; `only X`: X's base implementation with all
    deleted), and those that differed between the first two (probes that inspect the class without calling it).
    `only X` runs none where `base without X` already differs from the class as shipped."""
    chosen = variants.Variant(variant)
    if chosen.method is None:
        return probes
    if variant.startswith(variants.FIXED):  # only where the class as shipped could not bind a call of it
        bound = _cannot_bind(chosen.method)
        return [p for p in probes if bound.search(json.dumps(runs[variants.OVERRIDE].get(p.name, {})))]
    observed = pair(probes, runs)
    if chosen.reference == variants.BASE and any(_deleting_changes(o, chosen.method) for o in observed):
        return []  # deleting it from the class as shipped changes something: that context decides (evidence.judge)
    differed = {o.probe for o in observed if o.carries and not o.same}
    # Where the name ran, as shipped or as its base implementation with all deleted (code that calls it only when
    # it is the base's, after an identity check, runs it there), the variant may differ; elsewhere it runs the code
    # of the variant it is compared with.
    seen = (runs[variants.OVERRIDE], runs[variants.BASE])
    ran = {p.name for p in probes if any(set(chosen.names) & set(r.get(p.name, {}).get(REACHED, ())) for r in seen)}
    return [p for p in probes if p.name in differed | ran]


def fixable(cls: type, methods: tuple[str, ...], runs: dict[str, dict[str, Values]]) -> list[str]:
    """`fixed X` for each audited function that transformers calls, on this release, with arguments it cannot
    take: the class as shipped raised the TypeError of a call it cannot bind. The variant verifies the Fix there,
    in those probes."""
    said = json.dumps(runs.get(variants.OVERRIDE, {}))
    return [
        variants.FIXED + name
        for name in methods
        if _cannot_bind(name).search(said) and inspect.isfunction(vars(variants.owner(cls, name) or cls).get(name))
    ]


CANNOT_BIND = "got an unexpected keyword argument|takes \\d+ positional arguments? but|got multiple values for argument"


def _cannot_bind(name: str) -> re.Pattern[str]:
    """The TypeError of a call of `name` that its signature cannot bind."""
    return re.compile(rf"\b{re.escape(name)}\(\) ({CANNOT_BIND})")


def together(subject: SubjectResult, probes: list[Probe], runs: dict[str, dict[str, Values]]) -> list[str]:
    """`base without A, B`: the names judged redundant one by one (evidence.redundant, on what ran so far), deleted
    at once, where they are two or more but not all (the class with all deleted is already compared)."""
    names = evidence.redundant(replace(subject, observations=tuple(pair(probes, runs))))
    return [variants.WITHOUT + variants.TOGETHER.join(names)] if 1 < len(names) < len(subject.methods) else []


def _deleting_changes(observation: Observation, method: str) -> bool:
    """Whether `base without method` observed something else than the class as shipped here."""
    without = dict(observation.without)
    return observation.carries and method in without and not equal(without[method], observation.override)


def run_isolated(ask: Ask) -> SubjectResult:
    """`run_subject` in a forked child: torch and transformers are already imported, so the child starts at once,
    and a subject that aborts, segfaults or hangs costs only its own result. Its variants' children are watched
    by the subject's child; this process steps in only when that child itself stops answering."""
    with tempfile.TemporaryDirectory(prefix="compat-matrix-") as tmp:
        progress = Path(tmp, "progress")
        run = forked(
            lambda: run_subject(ask, progress).to_json(), progress, ask.timeout + 2 * WATCHDOG_GRACE, IMPORTING
        )
    if run.status != OK:
        return SubjectResult(ask.target, ask.methods, status=run.status, reason=run.reason, group=ask.group)
    return SubjectResult.from_json(run.answer)


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


class Phases:
    """How long each phase of a cell's run took, in order (the benchmark prints them)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, float]] = []
        self.last = time.monotonic()

    def done(self, phase: str) -> None:
        now = time.monotonic()
        self.seen.append((phase, round(now - self.last, 3)))
        self.last = now


def run(request: dict[str, Any]) -> CellResult:
    die_with_parent()
    phases = Phases()
    import torch  # noqa: F401  paid once per cell, before any subject
    import transformers  # noqa: F401

    phases.done("import torch and transformers")
    timeout, rootdir = request.get("timeout", DEFAULT_TIMEOUT), request.get("rootdir", ".")
    if rootdir not in sys.path:  # a factory module beside the matrix file imports; what the cell installs comes first
        sys.path.append(rootdir)
    asks = [
        Ask(
            s["target"],
            tuple(s["methods"]),
            s.get("factory"),
            tuple(s.get("tests", ())),
            s.get("inputs"),
            timeout,
            rootdir,
            bool(request.get("mutants")),
            exclude=tuple(s.get("exclude", ())),
        )
        for s in request["subjects"]
    ]
    failed = prewarm(PREWARM + (("pytest",) if any(a.tests for a in asks) else ()))
    phases.done("import what the probes use")
    why = unimportable({m: (describe_exception(e), clash_of(e)) for m, e in failed.items()})
    if why:
        return CellResult(
            request["matrix"],
            request["cell"],
            request["requested"],
            installed_versions(request["packages"]),
            status=IMPORT_FAILED,
            reason=why,
            phases=tuple(phases.seen),
        )
    rehearse(timeout)
    phases.done("rehearse the probes")
    unloaded = tuple(load_probe_modules(request.get("probes", []), rootdir, timeout).items())
    # Everything imported so far is permanent: the collections that transformers and accelerate run (once per
    # Trainer step), and those parsing sources triggers, then skip it, and forked children share its pages.
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
        matrix=request["matrix"],
        cell=request["cell"],
        requested=request["requested"],
        resolved=installed_versions(request["packages"]),
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
            return f"the probes need {module}, which cannot be imported here: {error}{said(clash)}"
    return None


def top_modules(distribution: str) -> list[str]:
    """The top-level modules and packages an installed distribution holds (its `top_level.txt`, else the files it
    installed), tests and private ones left out."""
    dist = importlib.metadata.distribution(distribution)
    listed = (dist.read_text("top_level.txt") or "").split()
    if not listed:
        for file in dist.files or ():
            top = file.parts[0]
            if (len(file.parts) > 1 and not top.endswith((".dist-info", ".data"))) or file.suffix == ".py":
                listed.append(top.removesuffix(".py"))
    kept = [m for m in dict.fromkeys(listed) if m.isidentifier() and not m.startswith("_")]
    return [m for m in kept if m not in ("test", "tests", "docs", "examples", "benchmarks")]


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
    if len(argv) == 3 and argv[0] == "--discover":  # compat-matrix init: what a distribution holds
        write_json_atomic(Path(argv[2]), discover_distribution(argv[1]))
        return 0
    if len(argv) != 2:
        print("usage: python -m compat_matrix.cell REQUEST.json RESULT.json", file=sys.stderr)
        return 2
    request = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    result = run(request)
    write_json_atomic(Path(argv[1]), result.to_json())
    return 0
