"""Probes of the gradient checkpointing switches: where the flags land, which kwargs reach torch's checkpoint
function, what backward computes, and what every entry point, new parameter and the `Trainer` path do."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import tempfile
from collections.abc import Iterator
from typing import Any

from compat_matrix.cell import tracing
from compat_matrix.cell.factory import QUIET_TRAINING
from compat_matrix.cell.probes import CONTRACT, INCONCLUSIVE, Build, Values, preparation, probe
from compat_matrix.cell.probes.common import attempt, batch, distinct, failed, fraction, train_step, training_loss

ENABLE = "gradient_checkpointing_enable"
DISABLE = "gradient_checkpointing_disable"
SUBJECT = "(subject)"  # the path of the subject itself among its modules

# Two kwargs sets that differ from each other in every key, so an override that forces or rewrites a value is
# seen on every version, whatever that version's default is ({"use_reentrant": True} up to 4.x, False in 5.x).
KWARGS_A: dict[str, Any] = {"use_reentrant": False, "preserve_rng_state": False, "determinism_check": "none"}
KWARGS_B: dict[str, Any] = {"use_reentrant": True, "preserve_rng_state": True, "determinism_check": "default"}


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
    return fraction(on, len(layers))


def other_flags(instance: Any) -> dict[str, bool]:
    """The `gradient_checkpointing` flag of every other module that carries one (the subject itself included),
    by its path inside the subject: what `is_gradient_checkpointing`, and so `Trainer`, reads besides the layers."""
    layers = {id(layer) for layer in checkpointable_layers(instance)}
    return {
        path or SUBJECT: bool(module.gradient_checkpointing)
        for path, module in instance.named_modules()
        if hasattr(module, "gradient_checkpointing") and id(module) not in layers
    }


def state(instance: Any, properties: list[str]) -> Values:
    """Per-layer flags, every other module's flag, and every state property (`is_gradient_checkpointing`, …)."""
    return {
        "layers_on": layers_on(instance),
        "other_flags": other_flags(instance),
        **{name: attempt(getattr, instance, name) for name in properties},
    }


def effective_kwargs(frame: Any) -> dict[str, Any]:
    """The keyword arguments a call of torch's checkpoint function runs with, defaults included."""
    code = frame.f_code
    local = frame.f_locals
    named = code.co_varnames[1 : code.co_argcount + code.co_kwonlyargcount]  # after `function`
    extra = dict(local.get("kwargs") or {})
    extra.setdefault("preserve_rng_state", True)  # read from **kwargs with this default inside torch
    return {**{name: local[name] for name in named if name in local}, **extra}


@contextlib.contextmanager
def checkpoint_calls() -> Iterator[list[dict[str, Any]]]:
    """The effective keyword arguments of every call of torch's checkpoint function while the block runs.

    Watches the function's code rather than replacing a name, so every caller is seen: transformers' partial,
    a `checkpoint` imported into the subject's own module, a partial the override built before the block."""
    import torch.utils.checkpoint

    calls: list[dict[str, Any]] = []
    tracing.install(torch.utils.checkpoint.checkpoint)  # an instrumented copy: no trace function while it is watched
    code = inspect.unwrap(torch.utils.checkpoint.checkpoint).__code__
    with tracing.on_call((code,), lambda frame: calls.append(effective_kwargs(frame))):
        yield calls


@preparation
def instrument_checkpoint(methods: tuple[str, ...]) -> None:
    """The instrumented copy of torch's checkpoint function that `checkpoint_calls` watches, made once per cell
    before the variants fork: parsing its source would cost each variant's child 10-20 ms."""
    import torch.utils.checkpoint

    tracing.install(torch.utils.checkpoint.checkpoint)


def step_kwargs(instance: Any) -> list[dict[str, Any]]:
    """The distinct effective kwargs that reach torch's checkpoint function during one training step."""
    with checkpoint_calls() as calls:
        train_step(instance)
    return distinct(calls)


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


def entry_point_names(cls: type) -> tuple[list[str], list[str]]:
    """The public checkpointing switches (`*_enable` with a matching `*_disable`) and state properties that the
    installed transformers offers on `cls`, found by inspecting the class, not by version number."""
    names = sorted(n for n in dir(cls) if "checkpointing" in n and not n.startswith("_"))
    switches = [n for n in names if n.endswith("_enable") and n.removesuffix("_enable") + "_disable" in names]
    states = [n for n in names if isinstance(inspect.getattr_static(cls, n), property)]
    return switches, states


def installed_parameters(cls: type, switch: str) -> list[inspect.Parameter]:
    """The parameters of `switch` as the installed transformers defines it (not as the subject overrides it)
    that take a plain value with a default: the kwargs dict, `*args` and `**kwargs` left out."""
    origin = next((k for k in cls.__mro__ if switch in vars(k) and k.__module__.startswith("transformers")), None)
    if origin is None:
        return []
    parameters = list(inspect.signature(vars(origin)[switch]).parameters.values())[1:]
    return [
        p
        for p in parameters
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        and p.default is not p.empty
        and not p.name.endswith("_kwargs")
    ]


def non_default(parameter: inspect.Parameter) -> list[Any]:
    """Values other than the default that a CPU can run: the other boolean, the next integer."""
    default = parameter.default
    if isinstance(default, bool):
        return [not default]
    if isinstance(default, int):
        return [default + 1]
    return []


# --- the probes -------------------------------------------------------------------------------------------------


@probe(
    exercises=(ENABLE,),
    summary=("enable", "layers_on"),
    title="layers after enable",
    plain="checkpointing its layers",
    contract=CONTRACT,
)
def enable_reaches_wrapped_model(build: Build) -> Values:
    """Calls `gradient_checkpointing_enable()` and reads the `gradient_checkpointing` flag of every decoder
    layer inside the subject (never the subject's own flag, which an override that only flags the wrapper
    would set). `layers_on`: True when all layers are on, False when none is, else "k/n"."""
    instance = build()
    if not checkpointable_layers(instance):
        return {INCONCLUSIVE: "no checkpointable layers in the subject"}
    instance.gradient_checkpointing_enable()
    return {"layers_on": layers_on(instance)}


@probe(
    exercises=(ENABLE, DISABLE),
    summary=("disable", "layers_on"),
    title="layers after disable",
    plain="switching checkpointing off again",
    contract=CONTRACT,
)
def disable_round_trip(build: Build) -> Values:
    """Enables, then calls `gradient_checkpointing_disable()` and reads the same per-layer flags.
    `layers_on` after the round trip: False when every layer is back off."""
    instance = build()
    if not checkpointable_layers(instance):
        return {INCONCLUSIVE: "no checkpointable layers in the subject"}
    instance.gradient_checkpointing_enable()
    instance.gradient_checkpointing_disable()
    return {"layers_on": layers_on(instance)}


@probe(exercises=(ENABLE,), title="checkpoint kwargs", plain="the kwargs torch's checkpoint gets", contract=CONTRACT)
def kwargs_forwarded(build: Build) -> Values:
    """The keyword arguments that reach torch's checkpoint function (every caller, with their effective values,
    defaults included) during one training step, after `gradient_checkpointing_enable()` with no kwargs
    (`default`), and with two kwargs sets that differ from each other in every key (`set_a`, `set_b`).
    `forwarded`: every call carried the requested values."""
    cases = {"default": None, "set_a": KWARGS_A, "set_b": KWARGS_B}
    values: Values = {}
    for name, kwargs in cases.items():
        instance = build()
        if kwargs is None:
            instance.gradient_checkpointing_enable()
        else:
            instance.gradient_checkpointing_enable(gradient_checkpointing_kwargs=dict(kwargs))
        values[name] = step_kwargs(instance)
    requested = [(values[name], kwargs) for name, kwargs in cases.items() if kwargs]
    values["forwarded"] = all(seen and all(c.items() >= k.items() for c in seen) for seen, k in requested)
    if not any(values[name] for name in cases):
        values[INCONCLUSIVE] = "no call reached torch's checkpoint function"
    return values


@probe(
    exercises=(ENABLE, DISABLE), title="repeated enable", plain="enabling twice with other kwargs", contract=CONTRACT
)
def enable_sequence(build: Build) -> Values:
    """A later enable must win: the effective kwargs that reach torch's checkpoint function in a training step
    after enabling with one kwargs set and then with the other (`enable_twice`), and after enable, disable,
    enable again with the other set (`re_enable_after_disable`), with the per-layer flags then."""
    twice = build()
    twice.gradient_checkpointing_enable(gradient_checkpointing_kwargs=dict(KWARGS_A))
    twice.gradient_checkpointing_enable(gradient_checkpointing_kwargs=dict(KWARGS_B))
    again = build()
    again.gradient_checkpointing_enable(gradient_checkpointing_kwargs=dict(KWARGS_A))
    again.gradient_checkpointing_disable()
    again.gradient_checkpointing_enable(gradient_checkpointing_kwargs=dict(KWARGS_B))
    values: Values = {
        "enable_twice": step_kwargs(twice),
        "re_enable_after_disable": {"layers_on": layers_on(again), "checkpoint_kwargs": step_kwargs(again)},
    }
    if not values["enable_twice"] and not values["re_enable_after_disable"]["checkpoint_kwargs"]:
        values[INCONCLUSIVE] = "no call reached torch's checkpoint function"
    return values


@probe(exercises=(ENABLE,), title="backward pass", plain="gradients with checkpointing on", contract=CONTRACT)
def backward_through_checkpointed_model(build: Build) -> Values:
    """Runs the same batch through the same model twice, without and then with checkpointing enabled, and
    compares the gradients of the parameters inside the checkpointed layers. `layers_with_grads`: layers whose
    every parameter got a gradient; `grads_match_plain`: every gradient of the model equals the one without
    checkpointing; `recomputed_layers`: layers whose inner modules ran again during backward."""
    import torch

    instance = build()
    layers = checkpointable_layers(instance)
    if not layers:
        return {INCONCLUSIVE: "no checkpointable layers in the subject"}
    train_step(instance)
    plain = {name: p.grad.clone() for name, p in instance.named_parameters() if p.grad is not None}
    for p in instance.parameters():
        p.grad = None

    instance.gradient_checkpointing_enable()
    with forward_counter(layers) as counts:
        loss = training_loss(instance)
        after_forward = list(counts)
        loss.backward()
    recomputed = [after - before for after, before in zip(counts, after_forward, strict=True)]
    grads = {name: p.grad for name, p in instance.named_parameters()}
    inside = [[p.grad for p in layer.parameters()] for layer in layers]
    return {
        "layers_with_grads": fraction(
            sum(all(g is not None and bool(g.abs().sum() > 0) for g in layer) for layer in inside), len(layers)
        ),
        "grads_match_plain": all(
            grads[name] is not None and torch.allclose(grads[name], grad, rtol=1e-4, atol=1e-6)
            for name, grad in plain.items()
        ),
        "recomputed_layers": fraction(sum(count > 0 for count in recomputed), len(layers)),
    }


@probe(
    exercises=(ENABLE, DISABLE),
    informs=("present",),
    title="entry points",
    plain="the other switch names",
    contract=CONTRACT,
)
def entry_points(build: Build) -> Values:
    """Finds every public way the installed transformers offers to switch checkpointing on and off (old names,
    new names, deprecated aliases) and to read its state, by inspecting the subject class. `present` lists them;
    then, per `*_enable` switch on a fresh instance, after enabling through it and again after its `*_disable`:
    the per-layer flags, the flag of every other module that carries one, and every state property. An
    exception is recorded as that entry's value."""
    instance = build()
    switches, states = entry_point_names(type(instance))
    disables = [enable.removesuffix("_enable") + "_disable" for enable in switches]
    values: Values = {"present": sorted(switches + disables + states)}
    for enable, disable in zip(switches, disables, strict=True):
        instance = build()
        on = attempt(getattr(instance, enable))
        values[enable] = on if failed(on) else state(instance, states)
        off = attempt(getattr(instance, disable))
        values[disable] = off if failed(off) else state(instance, states)
    return values


@probe(
    exercises=(ENABLE,),
    title="new switch parameters",
    plain="the switches' new arguments",
    contract=CONTRACT,
)
def switch_parameters(build: Build) -> Values:
    """Every parameter that the installed release's switches take besides their kwargs dict (read from the
    signature in this cell, e.g. `every_n_layers`), called with a value other than its default (the other
    boolean, the next integer) where the release's own switch runs it on a plain tiny model on this CPU, each
    on a fresh instance: the flag of each decoder layer afterwards and the number of checkpointed calls in a
    training step. An override that accepts a new argument and drops it differs on the releases that have it;
    a release without such parameters has nothing to observe."""
    from compat_matrix.cell.factory import tiny_causal_lm

    instance = build()
    switches, _ = entry_point_names(type(instance))
    values: Values = {}
    for switch in switches:
        for parameter in installed_parameters(type(instance), switch):
            for value in non_default(parameter):
                if failed(attempt(_switched, tiny_causal_lm, switch, parameter.name, value)):
                    continue  # the release's own switch cannot run it here (e.g. pinned memory without a GPU)
                call = f"{switch}({parameter.name}={value!r})"
                values[call] = attempt(_switched, build, switch, parameter.name, value)
    if not values:
        values[INCONCLUSIVE] = "the installed switches take no parameters besides their kwargs that a CPU can run"
    return values


def _switched(build: Build, switch: str, parameter: str, value: Any) -> Values:
    """A fresh instance switched on through `switch(parameter=value)`: each decoder layer's flag, and how many
    calls of torch's checkpoint function a training step makes."""
    instance = build()
    getattr(instance, switch)(**{parameter: value})
    layers = [bool(layer.gradient_checkpointing) for layer in checkpointable_layers(instance)]
    with checkpoint_calls() as calls:
        train_step(instance)
    return {"layers": layers, "checkpoint_calls": len(calls)}


def training_arguments(folder: str, kwargs: dict[str, Any] | None, checkpointing: bool = True) -> Any:
    """`TrainingArguments` with `gradient_checkpointing=True` (the name users have written for years) and, if
    given, `gradient_checkpointing_kwargs`; one step on the CPU, no logging, nothing saved."""
    from transformers import TrainingArguments

    fields = {f.name for f in dataclasses.fields(TrainingArguments)}
    extra = {"gradient_checkpointing_kwargs": dict(kwargs)} if kwargs else {}
    if extra and "gradient_checkpointing_kwargs" not in fields:
        extra = {"activation_checkpointing_kwargs": dict(kwargs)}
    return TrainingArguments(
        output_dir=folder,
        gradient_checkpointing=checkpointing,
        max_steps=1,
        per_device_train_batch_size=2,
        logging_strategy="no",
        **QUIET_TRAINING,
        **extra,
    )


def _trainer_step(build: Build, kwargs: dict[str, Any] | None, pre_enable: bool) -> Values:
    from transformers import Trainer

    instance = build()
    if pre_enable:
        instance.gradient_checkpointing_enable()
    seen: list[bool] = []
    handles = [
        layer.register_forward_pre_hook(lambda module, args: seen.append(bool(module.gradient_checkpointing)))
        for layer in checkpointable_layers(instance)
    ]
    dataset = [{"input_ids": ids, "labels": ids} for ids in batch()]
    with tempfile.TemporaryDirectory() as tmp, checkpoint_calls() as calls:
        output = Trainer(model=instance, args=training_arguments(tmp, kwargs), train_dataset=dataset).train()
    for handle in handles:
        handle.remove()
    return {
        "steps": output.global_step,
        "layers_on_during_step": bool(seen) and all(seen),
        "checkpoint_kwargs": distinct(calls),
    }


@probe(
    exercises=(ENABLE,),
    title="Trainer step",
    plain="checkpointed Trainer training",
    contract=CONTRACT,
)
def trainer_step(build: Build) -> Values:
    """One real `Trainer` training step on the CPU with `gradient_checkpointing=True` in `TrainingArguments`, the
    path users take: without `gradient_checkpointing_kwargs` (`default`), with a kwargs set (`with_kwargs`), and
    with that set on a model the user had already enabled with no kwargs (`pre_enabled`: the Trainer's kwargs
    must still arrive). Each: training steps completed, whether every decoder layer had checkpointing on when it
    ran, and the effective kwargs that reached torch's checkpoint function; or the error."""
    return {
        "default": attempt(_trainer_step, build, None, False),
        "with_kwargs": attempt(_trainer_step, build, KWARGS_A, False),
        "pre_enabled": attempt(_trainer_step, build, KWARGS_A, True),
    }
