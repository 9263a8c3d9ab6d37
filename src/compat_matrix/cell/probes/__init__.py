"""Probes: small experiments that observe what a subject's audited methods really do.

torch and transformers are imported inside the probes, so the registry can be read on the host too
(compat_matrix.probes: titles, observations, documentation).

A probe is a plain function registered with `@probe`. It receives `build`, which returns a fresh tiny instance
of the variant under test, and returns named observations: JSON values that compare with `==` and print
legibly. The runner calls every probe once per variant, each variant in its own process forked after the
imports, and pairs the observations by name. A probe says which audited methods it exercises and which of its
observations carry its verdict; it may say that it observed nothing meaningful (`raise Inconclusive(why)`, or an
`inconclusive` observation), and then it cannot make a subject `same`. Each built-in probe ships with a
deliberately broken override (in tests/broken_overrides/) that it must tell apart from the base implementation.

The families live in their own modules: `checkpointing` (the switches of gradient checkpointing), `generic`
(probes for any method: signatures, transformers' own calls, the paths users take), `outputs` (the values those paths
give), `training` and `trainer_hooks` (Trainer subclasses: training, evaluation, prediction, saving; checkpoints and
resuming, the best model, logging, `model_init`, the model card).
"""

from __future__ import annotations

import contextlib
import importlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from compat_matrix.shared.vocabulary import ObservationName

Values = dict[str, Any]
ANY = ("*",)  # `exercises=ANY`: a probe for every audited method, whatever it is
# What a subject is; each kind has its family of probes (a kind without one reads `no probe`).
MODEL, TRAINER, CONFIG, OTHER = "model", "trainer", "config", "other class"


@dataclass(frozen=True)
class Build:
    """What a probe receives. `build()` returns a fresh tiny instance of the variant under test (same seed every
    time); `cls` is that variant's class and `methods` the audited method names, for probes of any method."""

    factory: Callable[[type], Any]
    cls: type
    methods: tuple[str, ...] = ()
    # The subject's example inputs, where its matrix file names them: the keyword arguments of a forward pass of an
    # instance (`inputs(instance) -> dict`); without them, probes pass a fixed batch of token ids.
    inputs: Callable[[Any], dict[str, Any]] | None = None

    def __call__(self) -> Any:
        return self.factory(self.cls)


# The observations every probe call may make besides its own values (the vocabulary's words, named here too).
ERROR, WARNINGS, REACHED = ObservationName.ERROR, ObservationName.WARNINGS, ObservationName.REACHED
INCONCLUSIVE, LINES = ObservationName.INCONCLUSIVE, ObservationName.LINES
NEVER_CARRY = frozenset({REACHED, LINES, INCONCLUSIVE})
CONTRACT: tuple[str, ...] = ("*",)  # `contract=CONTRACT`: every observation that carries holds the contract


class Inconclusive(Exception):
    """Raised by a probe that observed nothing meaningful, saying why (e.g. no checkpointable layers)."""


@dataclass(frozen=True)
class Probe:
    name: str
    func: Callable[[Build], Values]
    exercises: tuple[str, ...]
    # (label, observation): the observation shown as "label→value" in the report's main table.
    summary: tuple[str, str] | None = None
    # The observations that carry the verdict (None: all it returns), and those that only inform. Errors and
    # warnings always carry; `reached` and `inconclusive` never do.
    carries: tuple[str, ...] | None = None
    informs: tuple[str, ...] = ()
    title: str = ""  # what the report calls it, e.g. "Trainer step"; default: the name in words
    kinds: tuple[str, ...] = (MODEL,)  # the kinds of subject it applies to
    # Whether it reads the class rather than runs it (signatures, call sites): what it sees differ is what some call
    # would do, which the probes that run the code observe themselves.
    inspects: bool = False
    # Whether it reads what an instance gives for a name rather than running the class (a property's value against
    # a bound method): a difference there is behaviour (every reader gets something else), never an error of the
    # class's own (no harmful, no needed), and it cannot show that the class runs.
    reads: bool = False
    # The observations that hold the audited API's contract: what any correct override gives as the base does (the
    # layers a checkpointing switch turns on, a reload that keeps every tensor, a resume that ends where an
    # uninterrupted run does). Where one differs, the override breaks it; elsewhere a difference may be what the
    # override is for (other logits, another loss). CONTRACT: every observation that carries.
    contract: tuple[str, ...] = ()
    # What the first screen of the report calls it: what a user does that it checks ("calling it with no arguments"),
    # for readers who do not know the probes; the title stays in the evidence. Default: the title.
    plain: str = ""

    @property
    def doc(self) -> str:
        return (self.func.__doc__ or "").strip()

    def binding(self, observation: str) -> bool:
        """Whether `observation` holds the contract (see `contract`)."""
        if observation in (ERROR, WARNINGS) or not self.carrying(observation):
            return False
        return self.contract == CONTRACT or observation in self.contract

    def carrying(self, observation: str) -> bool:
        if observation in NEVER_CARRY or observation in self.informs:
            return False
        if observation in (ERROR, WARNINGS) or self.carries is None:
            return True
        return observation in self.carries


_REGISTRY: dict[str, Probe] = {}


def probe(
    *,
    exercises: tuple[str, ...],
    summary: tuple[str, str] | None = None,
    carries: tuple[str, ...] | None = None,
    informs: tuple[str, ...] = (),
    title: str = "",
    kinds: tuple[str, ...] = (MODEL,),
    inspects: bool = False,
    contract: tuple[str, ...] = (),
    plain: str = "",
    reads: bool = False,
) -> Callable[[Callable[[Build], Values]], Callable[[Build], Values]]:
    """Register a probe under its function's name: it exercises the named methods; the observations named in
    `carries` (default: all) decide its verdict, those in `informs` are only shown, and those in `contract` (or
    CONTRACT: all that carry) hold what any correct override gives as the base does. `title` names it in the
    evidence; `plain` in the first screen, in words for a reader who does not know the probes (default: the title)."""

    checked = ((exercises, "exercises"), (carries, "carries"), (informs, "informs"), (kinds, "kinds"))
    for given, what in (*checked, (() if contract == CONTRACT else contract, "contract")):
        if isinstance(given, str):
            raise TypeError(f"probe({what}={given!r}): a tuple of names, e.g. ({given!r},)")

    def register(func: Callable[[Build], Values]) -> Callable[[Build], Values]:
        name = func.__name__
        if name in _REGISTRY and _REGISTRY[name].func.__module__ != func.__module__:
            raise ValueError(f"a probe named {name!r} is already registered by {_REGISTRY[name].func.__module__}")
        title_ = title or name.replace("_", " ")
        _REGISTRY[name] = Probe(
            name,
            func,
            tuple(exercises),
            summary,
            carries,
            tuple(informs),
            title_,
            tuple(kinds),
            inspects,
            reads,
            contract,
            plain or title_,
        )
        return func

    return register


def registry() -> dict[str, Probe]:
    """A copy of the registered probes, in registration order."""
    return dict(_REGISTRY)


def titles() -> dict[str, str]:
    return {name: probe.title for name, probe in _REGISTRY.items()}


def plain_words() -> dict[str, str]:
    """Per probe title (what a report's contrasts carry), what the first screen calls it; a probe without plain
    words, or a title no registered probe has (a result from elsewhere), reads as its title."""
    return {probe.title: probe.plain for probe in _REGISTRY.values() if probe.plain != probe.title}


def probes_for(methods: tuple[str, ...], kind: str | None = MODEL) -> list[Probe]:
    """The probes of subjects of `kind` that exercise at least one of `methods`: the specific ones first, then
    those for any method."""
    family = [p for p in _REGISTRY.values() if kind in p.kinds]
    specific = [p for p in family if set(p.exercises) & set(methods)]
    return specific + [p for p in family if p.exercises == ANY and methods]


def subject_kind(cls: type) -> str:
    """What the subject is, which decides the probes that make sense for it: MODEL (a `PreTrainedModel`),
    TRAINER (a `Trainer`), CONFIG (a `PretrainedConfig`), or OTHER."""
    try:
        import transformers
    except ImportError:
        return OTHER
    for kind, name in ((MODEL, "PreTrainedModel"), (TRAINER, "Trainer"), (CONFIG, "PretrainedConfig")):
        base = getattr(transformers, name, None)
        if isinstance(base, type) and issubclass(cls, base):
            return kind
    return OTHER


_PREPARATIONS: list[Callable[[tuple[str, ...]], None]] = []


def preparation(func: Callable[[tuple[str, ...]], None]) -> Callable[[tuple[str, ...]], None]:
    """Register work that depends only on the installed release and the audited method names (parsing
    transformers' source, say): done once, before the variants are forked, which then share its results."""
    _PREPARATIONS.append(func)
    return func


def prepare(methods: tuple[str, ...]) -> None:
    for func in _PREPARATIONS:
        with contextlib.suppress(Exception):  # a probe that needs it reports the error as an observation
            func(methods)


# Imported once in the cell's process before any variant is forked, so that no variant pays for (or warns
# about) a first import that the other variants would not see.
PREWARM = (
    "transformers.trainer",
    "transformers.training_args",
    "transformers.models.llama.modeling_llama",
    "transformers.generation.utils",
    "safetensors.torch",
)


def prewarm(modules: tuple[str, ...] = PREWARM) -> dict[str, Exception]:
    """Import what the probes use, once per cell; what could not be imported, and why (the runner fails the cell
    where a transformers module is among them: every probe would otherwise fail on it, each saying less)."""
    failed = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception as exc:
                failed[name] = exc
    return failed


from compat_matrix.cell.probes import checkpointing, generic, outputs, trainer_hooks, training  # noqa: E402, F401  registers the families
