"""Probes for any audited method: its signature against the base's, how the installed transformers calls it,
what it returns when called with no arguments, and the paths users take (build, `init_weights()`, forward and
backward, save and load, a `Trainer` step, `generate`), with the values that come out, not only ok or error."""

from __future__ import annotations

import ast
import functools
import inspect
import math
import re
import tempfile
import textwrap
from pathlib import Path
from typing import Any

from compat_matrix.probes import ANY, Build, Values, preparation, probe
from compat_matrix.probes.common import attempt, batch, failed, jsonable
from compat_matrix.results import failure
from compat_matrix.variants import defining_class

DIGITS = 4  # significant digits of a float in a summary: the tolerance of value comparisons
SKIPPED_FOLDER = "models"  # each model's own files call their own methods, not the subject's


# --- signatures and call sites ---------------------------------------------------------------------------------


def function_of(attribute: Any) -> Any:
    """The function behind a class attribute (a classmethod's or staticmethod's), or None for anything else."""
    if isinstance(attribute, (classmethod, staticmethod)):
        return attribute.__func__
    return attribute if inspect.isfunction(attribute) or inspect.ismethoddescriptor(attribute) else None


def parameters(function: Any) -> dict[str, inspect.Parameter]:
    try:
        return dict(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return {}


def _describe(parameter: inspect.Parameter) -> str:
    kind = {
        parameter.VAR_POSITIONAL: "*args",
        parameter.VAR_KEYWORD: "**kwargs",
        parameter.POSITIONAL_ONLY: "positional",
        parameter.KEYWORD_ONLY: "keyword",
    }.get(parameter.kind, "positional or keyword")
    return f"{parameter.name} ({kind})"


def accepts(ours: dict[str, inspect.Parameter], name: str, kind: Any) -> bool:
    """Whether a function with parameters `ours` takes a parameter of the base called `name`, of `kind`."""
    kinds = {p.kind for p in ours.values()}
    if kind is inspect.Parameter.VAR_POSITIONAL:
        return inspect.Parameter.VAR_POSITIONAL in kinds
    if kind is inspect.Parameter.VAR_KEYWORD:
        return inspect.Parameter.VAR_KEYWORD in kinds
    if name in ours and ours[name].kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
        return True
    return inspect.Parameter.VAR_KEYWORD in kinds and kind is not inspect.Parameter.POSITIONAL_ONLY


def signature_gap(ours: Any, theirs: Any) -> Values:
    """The base's parameters that `ours` cannot take, and the defaults that differ."""
    mine, base = parameters(ours), parameters(theirs)
    cannot = [_describe(p) for name, p in base.items() if not accepts(mine, name, p.kind)]
    defaults = {
        name: {"override": jsonable(mine[name].default), "base": jsonable(p.default)}
        for name, p in base.items()
        if name in mine and p.default is not p.empty and repr(mine[name].default) != repr(p.default)
    }
    return {"cannot_take": cannot, "other_defaults": defaults}


@functools.cache
def _package_files() -> tuple[tuple[Path, str], ...]:
    """Every source file of the installed transformers outside `models/`, with its text."""
    import transformers

    root = Path(transformers.__file__).parent
    files = sorted(p for p in root.rglob("*.py") if p.relative_to(root).parts[0] != SKIPPED_FOLDER)
    return tuple((p, p.read_text(encoding="utf-8", errors="replace")) for p in files)


_DEF = re.compile(r"^(\s*)(?:async\s+)?def\s")


def enclosing_block(lines: list[str], index: int) -> tuple[int, str] | None:
    """The function that line `index` is in, dedented: (its first line's index, its source); None at module level.
    Parsing one function rather than a whole module is what keeps a cell's share of this well under a second."""
    indent = len(lines[index]) - len(lines[index].lstrip())
    for start in range(index, -1, -1):
        found = _DEF.match(lines[start])
        if not found or (len(found.group(1)) >= indent and start != index):
            continue
        end = _block_end(lines, start, len(found.group(1)))
        if end > index:  # not a function that ended before the line
            return start, textwrap.dedent("\n".join(lines[start:end]))
    return None


def _block_end(lines: list[str], start: int, depth: int) -> int:
    end = start + 1
    while end < len(lines) and (
        not lines[end].strip()
        or len(lines[end]) - len(lines[end].lstrip()) > depth
        or lines[end].lstrip().startswith((")", "]", "}"))  # the end of a signature over several lines
    ):
        end += 1
    return end


def _calls_in(source: str, offset: int) -> list[tuple[str, int, tuple[str, ...], bool, bool, int]]:
    """Every `<something>.name(...)` call in `source` (whose first line is line `offset` + 1 of its file):
    (name, positional arguments, keyword names, has *args, has **kwargs, line)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            starred = any(isinstance(a, ast.Starred) for a in node.args)
            positional = sum(not isinstance(a, ast.Starred) for a in node.args)
            keywords = tuple(k.arg for k in node.keywords if k.arg is not None)
            splat = any(k.arg is None for k in node.keywords)
            found.append((node.func.attr, positional, keywords, starred, splat, node.lineno + offset))
    return found


@functools.cache
def _calls_near(path: Path, name: str) -> tuple[tuple[str, int, tuple[str, ...], bool, bool, int], ...]:
    return calls_near(dict(_package_files())[path], name)


def calls_near(text: str, name: str) -> tuple[tuple[str, int, tuple[str, ...], bool, bool, int], ...]:
    """The calls in the functions of a module's source whose text mentions `.name(`; the whole module where a
    function cannot be told apart (a mention at module level, a function that does not parse alone)."""
    lines = text.splitlines()
    pattern = re.compile(rf"\.{re.escape(name)}\(")
    blocks = {}
    for index, line in enumerate(lines):
        if pattern.search(line) or (index and pattern.search(lines[index - 1] + line.lstrip())):
            block = enclosing_block(lines, index)
            if block is None:
                return tuple(_calls_in(text, 0))
            blocks[block[0]] = block[1]
    found = []
    for start, source in blocks.items():
        try:
            found += _calls_in(source, start)
        except SyntaxError:
            return tuple(_calls_in(text, 0))
    return tuple(dict.fromkeys(found))


def call_sites(name: str) -> list[tuple[str, int, tuple[str, ...], bool, bool]]:
    """Where the installed transformers calls `.name(...)`: (file:line, positional count, keywords, *args, **kwargs)."""
    import transformers

    root = Path(transformers.__file__).parent
    pattern = re.compile(rf"\.{re.escape(name)}\(")
    sites = []
    for path, text in _package_files():
        if pattern.search(text):
            for called, positional, keywords, starred, splat, line in _calls_near(path, name):
                if called == name:
                    sites.append((f"{path.relative_to(root)}:{line}", positional, keywords, starred, splat))
    return sites


def takes(function: Any, positional: int, keywords: tuple[str, ...], starred: bool, splat: bool) -> bool:
    """Whether `function` (unbound: its first parameter is `self`) can be called the way a call site calls it.
    What a `*args` or `**kwargs` at the call site holds is unknown, so only what is written is checked."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return True
    arguments = [None] * (positional + 1)  # `self` first
    try:
        signature.bind_partial(*arguments, **dict.fromkeys(keywords))
    except TypeError:
        return False
    return True


def _shape(name: str, positional: int, keywords: tuple[str, ...], starred: bool, splat: bool) -> str:
    parts = ["…"] * positional + (["*…"] if starred else []) + [f"{k}=…" for k in keywords] + (["**…"] if splat else [])
    return f"{name}({', '.join(parts)})"


@preparation
def parse_call_sites(methods: tuple[str, ...]) -> None:
    """Parsed once per cell (before the variants are forked, which then share the answer)."""
    for name in methods:
        call_sites(name)


@probe(exercises=ANY, title="transformers' calls", informs=("unused",))
def transformers_calls(build: Build) -> Values:
    """Per audited method: every call of `.<method>(...)` in the installed transformers (outside each model's own
    files), found by parsing its source, and the calls that the base implementation takes but what the variant
    calls cannot: the keyword arguments a release passes that an override's signature does not accept, before
    anything is run (a call the base cannot take either, say `Class.method(self, …)` on another class, is not
    the override's concern). `unused`: the audited methods nothing in transformers calls."""
    values: Values = {}
    unused = []
    for name in build.methods:
        ours = function_of(inspect.getattr_static(build.cls, name, None))
        theirs = function_of(inspect.getattr_static(defining_class(build.cls, name, after=build.cls) or object, name))
        sites = call_sites(name)
        if not sites:
            unused.append(name)
        if ours is None or theirs is None:
            continue
        rejected = sorted(
            {
                f"{_shape(name, *site[1:])} at {site[0]}"
                for site in sites
                if takes(theirs, *site[1:]) and not takes(ours, *site[1:])
            }
        )
        values[name] = {"calls": len(sites), "cannot_take": rejected}
    values["unused"] = unused
    return values


@probe(exercises=ANY, title="signature")
def signature(build: Build) -> Values:
    """Per audited method: the parameters of the base implementation on the installed release that what the
    variant calls cannot take (by name and kind), and the parameters whose defaults differ. With the override
    deleted, nothing is missing; an override written against an older signature is seen where the base changed."""
    values: Values = {}
    for name in build.methods:
        theirs = function_of(inspect.getattr_static(defining_class(build.cls, name, after=build.cls) or object, name))
        ours = function_of(inspect.getattr_static(build.cls, name, None))
        if theirs is not None and ours is not None:
            values[name] = signature_gap(ours, theirs)
    return values


# --- what comes out ----------------------------------------------------------------------------------------------


def rounded(x: float) -> float | str:
    if math.isnan(x) or math.isinf(x):
        return str(x)
    return float(f"{x:.{DIGITS}g}")


def tensor_summary(tensor: Any) -> Values:
    """A tensor in a few numbers that equal when the tensors agree to about DIGITS significant digits."""
    values = tensor.detach().double()
    return {
        "shape": list(values.shape),
        "sum": rounded(values.sum().item()),
        "abs_sum": rounded(values.abs().sum().item()),
    }


def parameter_summary(instance: Any) -> Values:
    import torch

    tensors = [p.detach().reshape(-1) for p in instance.parameters()]
    if not tensors:
        return {"parameters": 0}
    flat = torch.cat(tensors)
    return {"parameters": len(tensors), **tensor_summary(flat)}


def module_path(instance: Any, module: Any) -> str | None:
    return next((path or "(subject)" for path, m in instance.named_modules() if m is module), None)


def used(instance: Any, module: Any) -> bool | str:
    """Whether a training forward pass of `instance` uses `module`: some parameter of it gets a gradient, or
    (a module without parameters) its forward runs."""
    seen: list[bool] = []
    handle = module.register_forward_hook(lambda *_: seen.append(True))
    try:
        instance.train()
        ids = batch()
        instance(input_ids=ids, labels=ids).loss.backward()
    except Exception as exc:
        return failure(exc)
    finally:
        handle.remove()
    grads = [p.grad for p in module.parameters()]
    return any(g is not None and bool(g.abs().sum() > 0) for g in grads) if grads else bool(seen)


def returned(instance: Any, value: Any) -> Any:
    """A returned value as an observation: a module by its path inside the instance (and whether a training
    forward pass uses it), a tensor by its summary, a plain value as itself, anything else by its type."""
    import torch

    if isinstance(value, torch.nn.Module):
        where = module_path(instance, value) or f"a {type(value).__name__} outside the subject"
        return {"module": where, "used_in_forward": used(instance, value)}
    if isinstance(value, torch.Tensor):
        return tensor_summary(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return f"a {type(value).__name__}"


def forward(instance: Any) -> Any:
    import torch

    instance.eval()
    with torch.no_grad():
        ids = batch()
        return instance(input_ids=ids)


def output_summary(output: Any) -> Values:
    logits = getattr(output, "logits", None)
    return tensor_summary(logits) if logits is not None else {"output": type(output).__name__}


@probe(exercises=ANY, title="called with no arguments")
def no_arguments(build: Build) -> Values:
    """Per audited method that the base implementation lets be called with no arguments (accessors such as
    `get_input_embeddings`, switches, `tie_weights`): what a call on a fresh instance returns (a module by its
    path inside the instance, and whether the forward pass uses it), or the error. Warnings it raises (a
    deprecation naming a replacement) are recorded like every probe's."""
    values: Values = {}
    for name in build.methods:
        base = function_of(inspect.getattr_static(defining_class(build.cls, name, after=build.cls) or object, name))
        if base is None or isinstance(inspect.getattr_static(build.cls, name, None), staticmethod):
            continue
        required = [
            p
            for p in list(parameters(base).values())[1:]
            if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        if required:
            continue
        instance = build()
        result = attempt(getattr(instance, name))
        values[name] = result if failed(result) else returned(instance, result)
    return values


@probe(exercises=ANY, title="build and init_weights")
def build_and_init(build: Build) -> Values:
    """The instance as built (same seed for every variant): its parameters summarized (count, sum, absolute
    sum, to 4 significant digits), and again after `init_weights()`; or the error."""
    instance = attempt(build)
    if failed(instance):
        return {"built": instance}

    def initialized() -> Values:
        instance.init_weights()
        return parameter_summary(instance)

    return {"built": parameter_summary(instance), "init_weights": attempt(initialized)}


@probe(exercises=ANY, title="forward and backward")
def forward_backward(build: Build) -> Values:
    """One forward pass in eval mode on a fixed batch (the logits summarized), and one training forward and
    backward with the batch as labels: the loss and the gradients of all parameters, summarized."""
    import torch

    def backward() -> Values:
        instance = build()
        instance.train()
        ids = batch()
        loss = instance(input_ids=ids, labels=ids).loss
        loss.backward()
        grads = [p.grad.reshape(-1) for p in instance.parameters() if p.grad is not None]
        return {"loss": rounded(loss.item()), "grads": tensor_summary(torch.cat(grads)) if grads else None}

    return {"forward": attempt(lambda: output_summary(forward(build()))), "backward": attempt(backward)}


@probe(exercises=ANY, title="save and load")
def save_and_load(build: Build) -> Values:
    """`save_pretrained` to a temporary folder and `from_pretrained` back from it (local files only): whether
    both work, and the reloaded model's forward output summarized (it should equal the saved model's)."""
    with tempfile.TemporaryDirectory() as folder:
        instance = build()
        saved = attempt(instance.save_pretrained, folder)
        if failed(saved):
            return {"saved": saved}
        loaded = attempt(type(instance).from_pretrained, folder)
        if failed(loaded):
            return {"saved": True, "loaded": loaded}
        before, after = output_summary(forward(instance)), output_summary(forward(loaded))
        return {"saved": True, "loaded": True, "same_outputs": before == after, "reloaded_output": after}


@probe(exercises=ANY, title="Trainer step without checkpointing")
def plain_trainer_step(build: Build) -> Values:
    """One real `Trainer` training step on the CPU (no checkpointing): whether it runs, and the training loss."""
    from compat_matrix.probes.checkpointing import training_arguments  # one set of Trainer arguments

    def step() -> Values:
        from transformers import Trainer

        dataset = [{"input_ids": ids, "labels": ids} for ids in batch()]
        with tempfile.TemporaryDirectory() as folder:
            args = training_arguments(folder, None, checkpointing=False)
            output = Trainer(model=build(), args=args, train_dataset=dataset).train()
        return {"steps": output.global_step, "loss": rounded(output.training_loss)}

    return {"trained": attempt(step)}


@probe(exercises=ANY, title="generate")
def generate(build: Build) -> Values:
    """One greedy `generate` step of one new token from a fixed prompt, where the instance can generate: the
    token ids that come out."""
    import torch

    instance = build()
    can = getattr(instance, "can_generate", None)
    if not callable(can) or attempt(can) is not True:
        return {"generated": "cannot generate"}

    def step() -> Any:
        from transformers import GenerationConfig

        instance.eval()
        config = GenerationConfig(max_new_tokens=1, do_sample=False)
        with torch.no_grad():
            ids = instance.generate(input_ids=batch()[:1, :4], generation_config=config)
        return ids.tolist()

    return {"generated": attempt(step)}
