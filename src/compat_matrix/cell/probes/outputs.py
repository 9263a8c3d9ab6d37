"""Probes of the paths users take with a model, for any audited name: build and `init_weights()`, a call with no
arguments, setters, forward and backward, save and load, a `Trainer` step, `generate`; with the values that come
out (every tensor a forward pass returns, every parameter group, tied parameters, what loading reports), not only
ok or error. And one probe whose weights depend only on each parameter's name and shape, so that the report can
compare the class as shipped across releases."""

from __future__ import annotations

import copy
import hashlib
import inspect
import math
import re
import tempfile
from typing import Any

from compat_matrix.cell import variants
from compat_matrix.cell.probes import ANY, CONTRACT, MODEL, TRAINER, Build, Inconclusive, Values, probe
from compat_matrix.cell.probes.common import attempt, batch, failed, images, jsonable
from compat_matrix.cell.probes.generic import accepts, base_attribute, base_function, kind_of, parameters
from compat_matrix.shared.results import failure

DIGITS = 4  # significant digits of a float in a summary: the tolerance of value comparisons
_INDEX = re.compile(r"\.\d+(?=\.)")
ACROSS_RELEASES = "across_releases"  # an observation that the report compares across cells, not variants
CALLS = ("forward", "__call__")  # called with inputs by the probes that run the model, not with nothing
GENERATION = ("generate", "prepare_inputs_for_generation", "can_generate", "_reorder_cache")


# --- summaries -------------------------------------------------------------------------------------------------


def rounded(x: float) -> float | str:
    if math.isnan(x) or math.isinf(x):
        return str(x)
    return float(f"{x:.{DIGITS}g}")


CANCELS = 1e-6  # a sum this small beside the sum of absolute values is rounding noise: it reads 0


def tensor_summary(tensor: Any) -> Values:
    """A tensor in a few numbers that equal when the tensors agree to about DIGITS significant digits: its shape,
    sum and sum of absolute values, and a sum weighted by position (fixed weights, drawn once from a fixed seed), so
    that values in another order (logits of flipped classes, a sequence reversed) read otherwise."""
    import torch

    values = tensor.detach().double().reshape(-1)
    weights = torch.rand(values.numel(), generator=torch.Generator().manual_seed(0), dtype=torch.float64) + 0.5
    scale = values.abs().sum().item()

    def quiet(total: float) -> float | str:
        return rounded(0.0 if abs(total) <= scale * CANCELS else total)

    return {
        "shape": list(tensor.shape),
        "sum": quiet(values.sum().item()),
        "abs_sum": rounded(scale),
        "weighted": quiet((values * weights).sum().item()),
    }


def group(name: str) -> str:
    """A parameter's group: its name with layer indices folded (`model.layers.*.mlp.up_proj.weight`)."""
    return _INDEX.sub(".*", name)


def grouped_summary(named: list[tuple[str, Any]]) -> Values:
    """Tensors by group: how many, and their values summarized together."""
    import torch

    by_group: dict[str, list[Any]] = {}
    for name, tensor in named:
        by_group.setdefault(group(name), []).append(tensor.detach().reshape(-1))
    return {key: {"tensors": len(tensors), **tensor_summary(torch.cat(tensors))} for key, tensors in by_group.items()}


def tied(instance: Any) -> list[list[str]]:
    """The parameters that share one tensor, by their names (each group of two or more)."""
    by_tensor: dict[int, list[str]] = {}
    for name, parameter in instance.named_parameters(remove_duplicate=False):
        by_tensor.setdefault(id(parameter), []).append(name)
    return sorted(sorted(names) for names in by_tensor.values() if len(names) > 1)


def parameter_summary(instance: Any) -> Values:
    """Every parameter group summarized, the parameters that are tied, and how many keys the state dict has."""
    named = list(instance.named_parameters())
    if not named:
        return {"parameters": 0}
    return {
        "parameters": len(named),
        "groups": grouped_summary(named),
        "tied": tied(instance),
        "state_dict_keys": len(instance.state_dict()),
    }


def outputs_summary(output: Any) -> Values:
    """Every tensor a forward pass returned, by its name (`logits`, `last_hidden_state`, `pooler_output`, `loss`,
    `hidden_states` as a list, …); what is not a tensor (a cache, whose type changes between releases) is left out."""
    import torch

    items = output.items() if hasattr(output, "items") else enumerate(output if isinstance(output, tuple) else [output])
    summary: Values = {}
    for key, value in items:
        if isinstance(value, torch.Tensor):
            summary[str(key)] = tensor_summary(value)
        elif isinstance(value, (tuple, list)) and value and all(isinstance(v, torch.Tensor) for v in value):
            summary[str(key)] = [tensor_summary(v) for v in value]
    if not summary:
        raise Inconclusive(f"the forward pass returned no tensor (a {type(output).__name__})")
    return summary


# --- running it ------------------------------------------------------------------------------------------------


def model_inputs(build: Build, instance: Any) -> dict[str, Any]:
    """What a forward pass gets: the subject's example inputs where its matrix file names them, else a fixed batch
    of images for a model that reads `pixel_values` first (ViT, BEiT), else a fixed batch of token ids."""
    if build.inputs:
        return dict(build.inputs(instance))
    if getattr(instance, "main_input_name", None) == "pixel_values":
        return {"pixel_values": images(getattr(instance, "config", None))}
    return {"input_ids": batch()}


def forward(build: Build, instance: Any) -> Any:
    import torch

    instance.eval()
    with torch.no_grad():
        return instance(**model_inputs(build, instance))


def takes_labels(instance: Any) -> bool:
    accepted = parameters(instance.forward)
    return "labels" in accepted or any(p.kind is p.VAR_KEYWORD for p in accepted.values())


def training_loss(build: Build, instance: Any) -> tuple[Any, str]:
    """A training forward pass and the loss to call backward on: the model's own (with the token ids as labels,
    where it takes labels), else the mean square of the first tensor it returns, named so."""
    import torch

    instance.train()
    inputs = model_inputs(build, instance)
    if "labels" not in inputs and "input_ids" in inputs and takes_labels(instance):
        inputs["labels"] = inputs["input_ids"]
    output = instance(**inputs)
    loss = getattr(output, "loss", None)
    if loss is not None:
        return loss, "loss"
    items = output.items() if hasattr(output, "items") else enumerate(output if isinstance(output, tuple) else [output])
    key, first = next((k, v) for k, v in items if isinstance(v, torch.Tensor) and v.is_floating_point())
    return first.float().pow(2).mean(), f"mean square of {key}"


def set_by_name(instance: Any) -> None:
    """Every parameter and floating buffer from its name and shape alone: the same numbers in every cell and
    variant, whatever the release's initialisation does."""
    import torch

    with torch.no_grad():
        for name, tensor in [*instance.named_parameters(), *instance.named_buffers()]:
            if not tensor.is_floating_point() or name.endswith("inv_freq"):
                continue  # rotary frequencies follow from the config
            seed = int(hashlib.sha256(f"{name}:{list(tensor.shape)}".encode()).hexdigest()[:8], 16)
            generator = torch.Generator().manual_seed(seed)
            tensor.copy_(torch.randn(tensor.shape, generator=generator, dtype=torch.float32) * 0.05)


def module_path(instance: Any, module: Any) -> str | None:
    return next((path or "(subject)" for path, m in instance.named_modules() if m is module), None)


def used(build: Build, instance: Any, module: Any) -> bool | str:
    """Whether a training forward pass of `instance` uses `module`: some parameter of it gets a gradient, or
    (a module without parameters) its forward runs."""
    seen: list[bool] = []
    handle = module.register_forward_hook(lambda *_: seen.append(True))
    try:
        training_loss(build, instance)[0].backward()
    except Exception as exc:
        return failure(exc)
    finally:
        handle.remove()
    grads = [p.grad for p in module.parameters()]
    return any(g is not None and bool(g.abs().sum() > 0) for g in grads) if grads else bool(seen)


def returned(build: Build, instance: Any, value: Any) -> Any:
    """A returned value as an observation: a module by its path inside the instance (and whether a training
    forward pass uses it), a tensor by its summary, a plain value as itself, anything else by its type."""
    import torch

    if isinstance(value, torch.nn.Module):
        where = module_path(instance, value) or f"a {type(value).__name__} outside the subject"
        return {"module": where, "used_in_forward": used(build, instance, value)}
    if isinstance(value, torch.Tensor):
        return tensor_summary(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return f"a {type(value).__name__}"


def state_survived(saved: Any, loaded: Any) -> bool | Values:
    """True when the reloaded model holds every tensor of the saved one's state dict, unchanged; else which
    keys are missing, unexpected or changed."""
    import torch

    before, after = saved.state_dict(), loaded.state_dict()
    changed = sorted(k for k in before.keys() & after.keys() if not torch.equal(before[k], after[k]))
    missing, unexpected = sorted(before.keys() - after.keys()), sorted(after.keys() - before.keys())
    if not (changed or missing or unexpected):
        return True
    return {"missing": missing, "unexpected": unexpected, "changed": changed}


# --- the probes ------------------------------------------------------------------------------------------------


@probe(exercises=ANY, title="called with no arguments", plain="calling it with no arguments", contract=CONTRACT)
def no_arguments(build: Build) -> Values:
    """Per audited method that the base implementation lets be called with no arguments (accessors such as
    `get_input_embeddings`, switches, `tie_weights`; not one shipped as a property, which is read: `reading`):
    what a call on a fresh instance returns (a module by its path inside the instance, and whether the forward pass
    uses it), or the error. Warnings it raises (a deprecation naming a replacement) are recorded like every
    probe's."""
    values: Values = {}
    for name in build.methods:
        base = base_function(build.cls, name)
        if base is None or name in CALLS or isinstance(inspect.getattr_static(build.cls, name, None), staticmethod):
            continue
        if kind_of(variants.shipped(build.cls, name)) == "property":
            continue  # read, not called, as shipped: `reading`
        required = [
            p
            for p in list(parameters(base).values())[1:]
            if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        if required:
            continue
        instance = build()
        result = attempt(getattr(instance, name))
        values[name] = result if failed(result) else returned(build, instance, result)
    return values


def read_value(build: Build, instance: Any, value: Any) -> Any:
    """What reading an attribute gave, as an observation: of a model, a module or tensor as `returned` says it;
    a method by its qualified name (`transformers.integrations.peft.PeftAdapterMixin.active_adapters`), anything
    else by its repr (`Stack[tiny]`)."""
    import torch

    if isinstance(instance, torch.nn.Module) and isinstance(value, (torch.nn.Module, torch.Tensor)):
        return returned(build, instance, value)
    return jsonable(value)


@probe(
    exercises=ANY, title="read on an instance", plain="reading it on an instance", kinds=(MODEL, TRAINER), reads=True
)
def reading(build: Build) -> Values:
    """Per audited name that the subject ships as a property where the base implementation is a method, or the
    reverse (adapters' `active_adapters`, a property over transformers' method): what reading it on a fresh instance
    gives, or the error. With the override deleted every reader of the name gets something else (a bound method
    for a value), which is what the override changes; a getter that raises on a fresh instance is no error of the
    class's (`reads`: never harmful or needed, and the class as shipped does not run here). Names of one kind on both
    sides are not read here: the other probes call them."""
    values: Values = {}
    for name in build.methods:
        ours = kind_of(variants.shipped(build.cls, name))
        theirs = kind_of(base_attribute(build.cls, name))
        if ours is None or theirs is None or ours == theirs:
            continue
        instance = build()
        value = attempt(getattr, instance, name)
        values[name] = value if failed(value) else read_value(build, instance, value)
    return values


@probe(exercises=ANY, title="setters", plain="setting a module through it", contract=CONTRACT)
def setters(build: Build) -> Values:
    """Per audited setter `set_X` with a getter `get_X` (`set_input_embeddings`, `set_output_embeddings`,
    `set_decoder`): called with a copy of what the getter returns, its weights redrawn; then whether the getter
    gives back that copy and whether a training forward pass uses it. Or the error."""
    import torch

    values: Values = {}
    for name in build.methods:
        getter = "get_" + name.removeprefix("set_")
        if not name.startswith("set_") or not callable(getattr(build.cls, getter, None)):
            continue
        instance = build()
        current = attempt(getattr(instance, getter))
        if failed(current) or not isinstance(current, torch.nn.Module):
            values[name] = current if failed(current) else f"{getter} returned {returned(build, instance, current)}"
            continue
        replacement = copy.deepcopy(current)
        set_by_name(replacement)
        done = attempt(getattr(instance, name), replacement)
        if failed(done):
            values[name] = done
            continue
        read_back = attempt(getattr(instance, getter))
        values[name] = {
            "read_back": read_back if failed(read_back) else read_back is replacement,
            "used_in_forward": used(build, instance, replacement),
        }
    return values


@probe(exercises=ANY, title="build and init_weights", plain="building the model")
def build_and_init(build: Build) -> Values:
    """The instance as built (same seed for every variant): every parameter group summarized (count, sum,
    absolute sum, to 4 significant digits), the tied parameters and the state dict's size; the class of its config;
    and again after `init_weights()`; or the error."""
    instance = attempt(build)
    if failed(instance):
        return {"built": instance}

    def initialized() -> Values:
        instance.init_weights()
        return parameter_summary(instance)

    return {"built": parameter_summary(instance), "config": config_kind(instance), "init_weights": attempt(initialized)}


def config_kind(instance: Any) -> str | None:
    """The class of a model's config, by its full name (None: it has none): what `config_class` decides where
    `from_pretrained` makes the config."""
    config = getattr(instance, "config", None)
    return None if config is None else f"{type(config).__module__}.{type(config).__qualname__}"


@probe(exercises=ANY, title="forward and backward", plain="the forward and backward pass", informs=(ACROSS_RELEASES,))
def forward_backward(build: Build) -> Values:
    """One forward pass in eval mode (every tensor it returns summarized), and one training forward and backward:
    the loss (the model's own with the token ids as labels, or the mean square of its first output) and the
    gradients of every parameter group, with the groups that got none. The inputs: a fixed batch of token ids, or
    the subject's example inputs (`inputs` in the matrix file). `across_releases` (it only informs): the forward
    outputs with every parameter set from its name and shape alone, the same numbers in every cell whatever the
    release's initialisation does, for the report to compare the class as shipped across releases."""

    def backward() -> Values:
        instance = build()
        loss, what = training_loss(build, instance)
        loss.backward()
        named = list(instance.named_parameters())
        grads = [(n, p.grad) for n, p in named if p.grad is not None]
        return {
            "loss": rounded(loss.item()),
            "loss_of": what,
            "grads": grouped_summary(grads),
            "no_grad": sorted({group(n) for n, p in named if p.grad is None and p.requires_grad}),
        }

    def seeded() -> Values:
        instance = build()
        set_by_name(instance)
        return outputs_summary(forward(build, instance))

    return {
        "forward": attempt(lambda: outputs_summary(forward(build, build()))),
        "backward": attempt(backward),
        ACROSS_RELEASES: attempt(seeded),
    }


# What a reload must keep, whatever the class: the files load, nothing is missing or unexpected, every tensor and tie
# survives, the outputs are the same. What it gains or lacks besides (attributes, the config class) may be the point.
RELOADED = ("saved", "loaded", "loading_info", "state_survived", "tied", "same_outputs")


@probe(
    exercises=ANY, title="save and load", plain="saving and reloading", informs=(ACROSS_RELEASES,), contract=RELOADED
)
def save_and_load(build: Build) -> Values:
    """`save_pretrained` to a temporary folder and `from_pretrained` back from it (local files only): whether both work;
    what loading reports (missing, unexpected and mismatched keys); whether every tensor of the state dict survived
    unchanged and tied parameters are still tied; attributes the reloaded model has that a fresh one has not (or lacks);
    the class of its config; and the reloaded model's outputs (they should equal the saved model's). `across_releases`
    (it only informs): the parameter groups that a model whose parameters were set from their names and shapes has after
    the round trip, for the report to compare across releases."""
    with tempfile.TemporaryDirectory() as folder:
        instance = build()
        saved = attempt(instance.save_pretrained, folder)
        if failed(saved):
            return {"saved": saved}
        model = attempt(type(instance).from_pretrained, folder)  # as users call it
        if failed(model):
            return {"saved": True, "loaded": model}
        fresh = build()
        before = attempt(lambda: outputs_summary(forward(build, instance)))
        after = attempt(lambda: outputs_summary(forward(build, model)))
        return {
            "saved": True,
            "loaded": True,
            "loading_info": attempt(loading_info, type(instance), folder),
            "state_survived": state_survived(instance, model),
            "tied": tied(model) == tied(instance) or {"saved": tied(instance), "reloaded": tied(model)},
            "attributes": {
                "more": sorted(set(vars(model)) - set(vars(fresh))),
                "fewer": sorted(set(vars(fresh)) - set(vars(model))),
            },
            "same_outputs": before == after if not (failed(before) or failed(after)) else None,
            "config": config_kind(model),
            "reloaded_output": after,
            ACROSS_RELEASES: attempt(_seeded_round_trip, build, folder),
        }


ATTENTION = ("_supports_sdpa", "_supports_flash_attn_2", "_supports_flash_attn", "_supports_flex_attn")


@probe(exercises=ATTENTION, title="attention implementations", plain="loading with each attention implementation")
def attention_implementations(build: Build) -> Values:
    """What the `_supports_*` flags decide: the attention implementation a fresh model's config names, and, for
    `from_pretrained(folder, attn_implementation=…)` as users load it (eager, sdpa), the one the loaded model's
    config names, or the error (a class that says it does not support sdpa refuses it)."""
    with tempfile.TemporaryDirectory() as folder:
        instance = build()
        saved = attempt(instance.save_pretrained, folder)
        if failed(saved):
            return {"saved": saved}

        def loaded(implementation: str) -> Any:
            model = type(instance).from_pretrained(folder, attn_implementation=implementation)
            return model.config._attn_implementation

        values: Values = {"default": getattr(instance.config, "_attn_implementation", None)}
        values.update({name: attempt(loaded, name) for name in ("eager", "sdpa")})
        return values


def loading_info(cls: type, folder: str) -> Values | str:
    """What loading reports (missing, unexpected, mismatched keys, errors), where the class's `from_pretrained`
    takes `output_loading_info`: an override that does not is no error of the probe's making."""
    if not accepts(parameters(cls.from_pretrained), "output_loading_info", inspect.Parameter.KEYWORD_ONLY):
        return "from_pretrained takes no output_loading_info"
    _, info = cls.from_pretrained(folder, output_loading_info=True)
    return {key: sorted(map(str, value)) for key, value in sorted(info.items())}


def _seeded_round_trip(build: Build, folder: str) -> Values:
    instance = build()
    set_by_name(instance)
    instance.save_pretrained(f"{folder}/seeded")
    return grouped_summary(list(type(instance).from_pretrained(f"{folder}/seeded").named_parameters()))


@probe(exercises=ANY, title="Trainer step without checkpointing", plain="a Trainer training step")
def plain_trainer_step(build: Build) -> Values:
    """One real `Trainer` training step on the CPU (no checkpointing): whether it runs, and the training loss."""
    from compat_matrix.cell.probes.checkpointing import training_arguments  # one set of Trainer arguments

    def step() -> Values:
        from transformers import Trainer

        dataset = [{"input_ids": ids, "labels": ids} for ids in batch()]
        with tempfile.TemporaryDirectory() as folder:
            args = training_arguments(folder, None, checkpointing=False)
            output = Trainer(model=build(), args=args, train_dataset=dataset).train()
        return {"steps": output.global_step, "loss": rounded(output.training_loss)}

    return {"trained": attempt(step)}


@probe(exercises=ANY, title="generate", plain="generating two tokens")
def generate(build: Build) -> Values:
    """Greedy `generate` of two new tokens from a fixed prompt (the second from the cache the first left, the branch
    of `prepare_inputs_for_generation` that trims the prompt to its last token), where the instance can generate or
    an audited name is about generation (then also where it cannot: a release that stopped giving the class
    `generate` is seen): the token ids that come out, or the error."""
    import torch

    instance = build()
    can = getattr(instance, "can_generate", None)
    if not (callable(can) and attempt(can) is True) and not set(build.methods) & set(GENERATION):
        raise Inconclusive("the instance cannot generate")

    def step() -> Any:
        from transformers import GenerationConfig

        instance.eval()
        config = GenerationConfig(max_new_tokens=2, do_sample=False)
        with torch.no_grad():
            ids = instance.generate(input_ids=batch()[:1, :4], generation_config=config)
        return ids.tolist()

    return {"generated": attempt(step)}
