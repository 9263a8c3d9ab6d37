"""The probe suite: small experiments that observe what a subject's audited methods really do.

Runs inside a cell's environment; torch and transformers are imported inside the probes so that the registry
itself can be read (documentation, tests) without them.

A probe is a plain function registered with `@probe`. It receives `build`, which returns a fresh tiny instance
of the variant under test, and returns named observations: JSON values that compare with `==` and print
legibly. The runner calls every probe once per variant and pairs the observations by name. Each probe ships
with a deliberately broken override (in tests/) that it must report as differing from the base implementation.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from compat_matrix.results import describe_exception

Values = dict[str, Any]
Build = Callable[[], Any]

ENABLE = "gradient_checkpointing_enable"
DISABLE = "gradient_checkpointing_disable"

# Differ from every transformers version's defaults ({"use_reentrant": True} up to 4.x, {"use_reentrant": False}
# in 5.x) and from torch's own (preserve_rng_state=True, determinism_check="default"), so an override that drops
# or rewrites them is seen on every version.
PROBE_KWARGS: dict[str, Any] = {
    "use_reentrant": False,
    "preserve_rng_state": False,
    "determinism_check": "none",
}


@dataclass(frozen=True)
class Probe:
    name: str
    func: Callable[[Build], Values]
    exercises: tuple[str, ...]
    # (label, observation): the observation shown as "label→value" in the report's main table.
    summary: tuple[str, str] | None = None

    @property
    def doc(self) -> str:
        return (self.func.__doc__ or "").strip()


_REGISTRY: dict[str, Probe] = {}


def probe(*, exercises: tuple[str, ...], summary: tuple[str, str] | None = None):
    """Register a probe under its function's name."""

    def register(func: Callable[[Build], Values]) -> Callable[[Build], Values]:
        _REGISTRY[func.__name__] = Probe(func.__name__, func, exercises, summary)
        return func

    return register


def registry() -> dict[str, Probe]:
    """A copy of the registered probes, in registration order."""
    return dict(_REGISTRY)


def probes_for(methods: tuple[str, ...]) -> list[Probe]:
    """The probes that exercise at least one of `methods`."""
    return [p for p in _REGISTRY.values() if set(p.exercises) & set(methods)]


# --- what the probes look at ----------------------------------------------------------------------------------


def checkpointable_layers(instance: Any) -> list[Any]:
    """The repeated blocks inside the subject that checkpointing wraps; never the subject's own flag."""
    try:
        from transformers.modeling_layers import GradientCheckpointingLayer
    except ImportError:  # transformers older than the layer class: any submodule that carries the flag
        GradientCheckpointingLayer = None
    return [
        module
        for module in instance.modules()
        if module is not instance
        and hasattr(module, "gradient_checkpointing")
        and (GradientCheckpointingLayer is None or isinstance(module, GradientCheckpointingLayer))
    ]


def layers_on(instance: Any) -> bool | str:
    """True when every checkpointable layer has checkpointing on, False when none has, else "k/n"."""
    layers = checkpointable_layers(instance)
    on = sum(bool(layer.gradient_checkpointing) for layer in layers)
    if not layers:
        return "no checkpointable layers"
    if on in (0, len(layers)):
        return on == len(layers)
    return f"{on}/{len(layers)}"


def batch() -> Any:
    """A fixed batch of token ids valid for a character wrapper and a tiny vocabulary alike."""
    import torch

    generator = torch.Generator().manual_seed(1)
    return torch.randint(1, 60, (2, 8), generator=generator)


def training_loss(instance: Any) -> Any:
    """The loss of a forward pass in training mode, with the graph for backward."""
    instance.train()
    ids = batch()
    return instance(input_ids=ids, labels=ids).loss


def train_step(instance: Any) -> None:
    training_loss(instance).backward()


def fraction(count: int, total: int) -> str:
    return f"{count}/{total}"


def jsonable(value: Any) -> Any:
    """`value` as plain JSON: containers kept, anything else that JSON cannot hold becomes its repr."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return repr(value)


@contextlib.contextmanager
def checkpoint_spy() -> Iterator[list[dict[str, Any]]]:
    """Record the keyword arguments of every call to torch's checkpoint function, then call it.

    transformers binds `checkpoint` into a partial when checkpointing is enabled, from the module globals that
    imported it; every such global is replaced for the duration, so the spy sees the calls the layers make.
    """
    import torch.utils.checkpoint

    real = torch.utils.checkpoint.checkpoint
    calls: list[dict[str, Any]] = []

    def spy(function: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(dict(kwargs))
        return real(function, *args, **kwargs)

    patched = [
        (module, name)
        for module in list(sys.modules.values())
        if module is not None and getattr(module, "__name__", "").startswith("transformers")
        for name, value in list(vars(module).items())
        if value is real
    ]
    patched.append((torch.utils.checkpoint, "checkpoint"))
    for module, name in patched:
        setattr(module, name, spy)
    try:
        yield calls
    finally:
        for module, name in patched:
            setattr(module, name, real)


@contextlib.contextmanager
def forward_counter(layers: list[Any]) -> Iterator[list[int]]:
    """Count, per layer, forward calls of the layer's inner modules.

    Inner modules, not the layer itself: some versions checkpoint the layer's `forward` and keep its hooks
    outside the checkpoint, so only what runs inside the layer is recomputed.
    """
    counts = [0] * len(layers)
    handles = []
    for index, layer in enumerate(layers):

        def hook(*_: Any, index: int = index) -> None:
            counts[index] += 1

        handles += [m.register_forward_hook(hook) for m in layer.modules() if m is not layer]
    try:
        yield counts
    finally:
        for handle in handles:
            handle.remove()


def layer_grads(layers: list[Any]) -> list[dict[str, Any]]:
    return [{name: p.grad for name, p in layer.named_parameters()} for layer in layers]


def clear_grads(instance: Any) -> None:
    for p in instance.parameters():
        p.grad = None


# --- the probes -------------------------------------------------------------------------------------------------


@probe(exercises=(ENABLE,), summary=("enable", "layers_on"))
def enable_reaches_wrapped_model(build: Build) -> Values:
    """Calls `gradient_checkpointing_enable()` and reads the `gradient_checkpointing` flag of every decoder
    layer inside the subject (never the subject's own flag, which an override that only flags the wrapper
    would set). `layers_on`: True when all layers are on, False when none is, else "k/n"."""
    instance = build()
    instance.gradient_checkpointing_enable()
    return {"layers_on": layers_on(instance)}


@probe(exercises=(ENABLE, DISABLE), summary=("disable", "layers_on"))
def disable_round_trip(build: Build) -> Values:
    """Enables, then calls `gradient_checkpointing_disable()` and reads the same per-layer flags.
    `layers_on` after the round trip: False when every layer is back off."""
    instance = build()
    instance.gradient_checkpointing_enable()
    instance.gradient_checkpointing_disable()
    return {"layers_on": layers_on(instance)}


@probe(exercises=(ENABLE,))
def kwargs_forwarded(build: Build) -> Values:
    """Enables with `gradient_checkpointing_kwargs` that differ from every version's defaults, runs one training
    step and records the keyword arguments that reached torch's checkpoint function from the layers
    (`checkpoint_kwargs`, distinct sets), how often it was called (`checkpoint_calls`), and whether every call
    carried the requested kwargs (`forwarded`)."""
    with checkpoint_spy() as calls:
        instance = build()
        instance.gradient_checkpointing_enable(gradient_checkpointing_kwargs=dict(PROBE_KWARGS))
        train_step(instance)
    distinct = sorted({repr(jsonable(c)): jsonable(c) for c in calls}.items())
    return {
        "checkpoint_calls": len(calls),
        "checkpoint_kwargs": [kwargs for _, kwargs in distinct],
        "forwarded": bool(calls) and all(c.items() >= PROBE_KWARGS.items() for c in calls),
    }


@probe(exercises=(ENABLE,))
def backward_through_checkpointed_model(build: Build) -> Values:
    """Runs the same batch through the same model twice, without and then with checkpointing enabled, and
    compares the gradients of the parameters inside the checkpointed layers. `layers_with_grads`: layers whose
    every parameter got a gradient; `grads_match_plain`: every gradient of the model equals the one without
    checkpointing; `recomputed_layers`: layers whose inner modules ran again during backward."""
    import torch

    instance = build()
    layers = checkpointable_layers(instance)
    train_step(instance)
    plain = {name: p.grad.clone() for name, p in instance.named_parameters() if p.grad is not None}
    clear_grads(instance)

    instance.gradient_checkpointing_enable()
    with forward_counter(layers) as counts:
        loss = training_loss(instance)
        after_forward = list(counts)
        loss.backward()
    recomputed = [after - before for after, before in zip(counts, after_forward, strict=True)]
    grads = {name: p.grad for name, p in instance.named_parameters()}
    inside = layer_grads(layers)
    return {
        "layers_with_grads": fraction(
            sum(all(g is not None and bool(g.abs().sum() > 0) for g in layer.values()) for layer in inside),
            len(layers),
        ),
        "grads_match_plain": all(
            grads[name] is not None and torch.allclose(grads[name], grad, rtol=1e-4, atol=1e-6)
            for name, grad in plain.items()
        ),
        "recomputed_layers": fraction(sum(count > 0 for count in recomputed), len(layers)),
    }


def entry_point_names(cls: type) -> tuple[list[str], list[str]]:
    """The public checkpointing switches (`*_enable` with a matching `*_disable`) and state properties that the
    installed transformers offers on `cls`, found by inspecting the class, not by version number."""
    import inspect

    names = sorted(n for n in dir(cls) if "checkpointing" in n and not n.startswith("_"))
    switches = [n for n in names if n.endswith("_enable") and n.removesuffix("_enable") + "_disable" in names]
    states = [n for n in names if isinstance(inspect.getattr_static(cls, n), property)]
    return switches, states


def _attempt(call: Callable[..., Any], *args: Any) -> Any:
    try:
        return call(*args)
    except Exception as exc:
        return f"error: {describe_exception(exc)}"


@probe(exercises=(ENABLE, DISABLE))
def entry_points(build: Build) -> Values:
    """Finds every public way the installed transformers offers to switch checkpointing on and off (old names,
    new names, deprecated aliases) and to read its state, by inspecting the subject class. `present` lists them;
    then, per `*_enable` switch on a fresh instance: the per-layer flags and every state property after enabling
    through it, and the per-layer flags after its `*_disable`. An exception is recorded as that entry's value."""
    instance = build()
    switches, states = entry_point_names(type(instance))
    disables = [enable.removesuffix("_enable") + "_disable" for enable in switches]
    values: Values = {"present": sorted(switches + disables + states)}
    for enable, disable in zip(switches, disables, strict=True):
        instance = build()
        on = _attempt(getattr(instance, enable))
        values[enable] = (
            on
            if isinstance(on, str)
            else {
                "layers_on": layers_on(instance),
                **{state: _attempt(getattr, instance, state) for state in states},
            }
        )
        off = _attempt(getattr(instance, disable))
        values[disable] = off if isinstance(off, str) else {"layers_on": layers_on(instance)}
    return values


@probe(exercises=(ENABLE,))
def trainer_step(build: Build) -> Values:
    """One real `Trainer` training step on the CPU with `gradient_checkpointing=True` in `TrainingArguments`,
    the path users take, writing only to a temporary folder, with no logging integrations. `steps`: training
    steps completed; `layers_on_during_step`: whether every decoder layer had checkpointing on when it ran."""
    import tempfile

    from transformers import Trainer, TrainingArguments

    instance = build()
    layers = checkpointable_layers(instance)
    seen: list[bool] = []
    handles = [
        layer.register_forward_pre_hook(lambda module, args: seen.append(bool(module.gradient_checkpointing)))
        for layer in layers
    ]
    dataset = [{"input_ids": ids, "labels": ids} for ids in batch()]
    with tempfile.TemporaryDirectory() as tmp:
        arguments = TrainingArguments(
            output_dir=tmp,
            gradient_checkpointing=True,
            max_steps=1,
            per_device_train_batch_size=2,
            report_to="none",
            save_strategy="no",
            logging_strategy="no",
            disable_tqdm=True,
            dataloader_num_workers=0,
            dataloader_pin_memory=False,
            remove_unused_columns=False,
        )
        output = Trainer(model=instance, args=arguments, train_dataset=dataset).train()
    for handle in handles:
        handle.remove()
    return {"steps": output.global_step, "layers_on_during_step": bool(seen) and all(seen)}
