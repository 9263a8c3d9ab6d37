"""One subject in a cell: its class imported and built, its variants scheduled in batches (each in a child forked
after the imports), and their observations paired into the subject's result."""

from __future__ import annotations

import contextlib
import gc
import inspect
import json
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from compat_matrix.cell import tiny, tracing, trial, user_tests, variants
from compat_matrix.cell.discovery import discover, discover_overrides, misspelt
from compat_matrix.cell.factory import Factory, TrainerWith, default_factory, load_callable, stock_plain
from compat_matrix.cell.forks import STOPPED, WATCHDOG_GRACE, Forked, forked, forked_each
from compat_matrix.cell.observe import DEFAULT_TIMEOUT, ProbeTimeout, call_probe
from compat_matrix.cell.probes import (
    ANY,
    ERROR,
    LINES,
    MODEL,
    REACHED,
    TRAINER,
    Build,
    Probe,
    Values,
    prepare,
    probes_for,
    subject_kind,
)
from compat_matrix.cell.probes.generic import orphaned
from compat_matrix.shared import evidence
from compat_matrix.shared.blame import clash_of, owners, said
from compat_matrix.shared.results import (
    OK,
    TIMED_OUT,
    Code,
    Discovery,
    Observation,
    Override,
    SubjectResult,
    describe_exception,
    equal,
)

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
    columns = columns_it_builds_with(cls, timeout, progress) if failed.kind == TRAINER and ask.factory is None else ()
    if columns:  # a trainer whose dataset needs columns (`chosen`, `rejected`, `prompt`): built as `init` learnt to
        factory = TrainerWith(columns)
        why, parameters = unbuildable(cls, factory, methods, timeout, progress)
    if why is not None:
        return replace(failed, status=COULD_NOT_BUILD, reason=why)
    failed = replace(failed, caveat=caveat(failed.kind, ask.factory, parameters, columns))
    gc.freeze()  # the subject's imports too, before its variants are forked
    prepare(methods)
    if failed.kind in (MODEL, TRAINER):  # after the subject's imports, which may change what a build makes
        with contextlib.suppress(Exception):  # a plain model that cannot be built here is the probes' to say
            stock_plain()
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
    read_by = readers(cls, methods)

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
        todo = [(variant, ran) for variant in batch if (ran := _to_run(variant, probes, runs, read_by))]
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


def columns_it_builds_with(cls: type, timeout: float, progress: Path) -> tuple[str, ...]:
    """The dataset columns a trainer asked for, one by one, in its build or its first training steps with the
    default factory, where with them it builds (as `init` learns them: compat_matrix.cell.trial); () otherwise.
    Learnt in a forked child."""
    from transformers import Trainer

    if not issubclass(cls, Trainer):
        return ()

    def learn() -> list[str]:
        found = trial.attempt(cls)
        return list(found.columns) if found is not None and found.columns and found.then is None else []

    run = forked(learn, progress, trial.TRIES * timeout + WATCHDOG_GRACE, "building it with the columns it asks for")
    return tuple(run.answer) if run.status == OK and run.answer else ()


ABSTRACT = "built with no parameters, an abstract base class: audit the subclasses users build"


def caveat(kind: str | None, factory: str | None, parameters: int | None, columns: tuple[str, ...] = ()) -> str | None:
    """Why the probes cannot establish that deleting an override changes nothing users see, even where they observed
    no difference: a Trainer trained on stand-ins (rows with a few words in the `columns` it asked for, if any), a
    model with nothing in it."""
    if kind == TRAINER and factory is None:
        words = ", ".join(f"`{c}`" for c in columns)
        return STAND_IN.replace("token ids,", f"token ids with a few words in {words},") if columns else STAND_IN
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


def readers(cls: type, methods: tuple[str, ...]) -> dict[str, frozenset[str] | None]:
    """Per audited name, the other audited names whose code reads it without calling it (`type(self).x is Own.x`,
    `getattr(self, "x", None)`, `"x" in vars(...)`), found in the source of the subject's own classes; None where
    code that is not audited (so not watched) reads it so."""
    classes = {cls, *(variants.owner(cls, name) or cls for name in methods)}
    sources = {}
    for klass in classes:
        for attribute, value in vars(klass).items():
            with contextlib.suppress(Exception):  # no source, or one inspect cannot read: not searched
                sources[attribute] = sources.get(attribute, "") + "".join(
                    inspect.getsource(f) for f in tracing.functions(value)
                )
    found: dict[str, frozenset[str] | None] = {}
    for name in methods:
        read = re.compile(rf"\.{re.escape(name)}\b(?!\s*\()|['\"]{re.escape(name)}['\"]")
        by = {attribute for attribute, source in sources.items() if attribute != name and read.search(source)}
        found[name] = frozenset(by) if by <= set(methods) else None
    return found


def _to_run(
    variant: str,
    probes: list[Probe],
    runs: dict[str, dict[str, Values]],
    read_by: dict[str, frozenset[str] | None] | None = None,
) -> list[Probe]:
    """The probes a variant runs: every one as shipped and with all audited names deleted. A per-name variant runs
    the same code as the variant it is compared with up to the first call of that name, so it runs the probes in
    which that name ran there (`base without X`: X as shipped; `only X`: X's base implementation with all
    deleted), and those that differed between the first two (probes that inspect the class without calling it).
    `only X` runs none where `base without X` already differs from the class as shipped. Code that reads X without
    calling it (an identity check, `getattr` with a default: `read_by`) may change with X alone: where that code is
    audited, the probes in which it ran count as X's; where it is not, every probe runs."""
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
    readers = [(read_by or {}).get(name, frozenset()) for name in chosen.names]
    if None in readers:
        return probes
    names = set(chosen.names).union(*readers)
    seen = (runs[variants.OVERRIDE], runs[variants.BASE])
    ran = {p.name for p in probes if any(names & set(r.get(p.name, {}).get(REACHED, ())) for r in seen)}
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
