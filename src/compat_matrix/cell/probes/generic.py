"""Probes for any audited method that read the installed release rather than run the subject: its signature
against the base's, how the installed transformers calls it, and whether the release still gives it anything to
override (see compat_matrix.cell.probes.outputs for the paths users take)."""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import inspect
import json
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

from compat_matrix.cell import tracing
from compat_matrix.cell.probes import ANY, MODEL, TRAINER, Build, Values, preparation, probe
from compat_matrix.cell.probes.common import jsonable
from compat_matrix.cell.variants import base_of
from compat_matrix.shared.layout import KEPT, STAMP
from compat_matrix.shared.results import write_json_atomic

DIGITS = 4  # significant digits of a float in a summary: the tolerance of value comparisons
SKIPPED_FOLDER = "models"  # each model's own files call their own methods, not the subject's


# --- signatures and call sites ---------------------------------------------------------------------------------


def function_of(attribute: Any) -> Any:
    """The function behind a class attribute (a classmethod's or staticmethod's), or None for anything else (an
    attribute that is a value, whether or not it is being watched for reads)."""
    if isinstance(attribute, tracing.Read):
        attribute = attribute.value
    if isinstance(attribute, (classmethod, staticmethod)):
        return attribute.__func__
    if isinstance(attribute, functools.cached_property):
        return None  # read as a value, like a property
    return attribute if inspect.isfunction(attribute) or inspect.ismethoddescriptor(attribute) else None


def kind_of(attribute: Any) -> str | None:
    """What a class attribute is to its readers: a `property` (a cached one too), a `method` (a function,
    classmethod or staticmethod), or None for anything else (a value)."""
    if isinstance(attribute, (property, functools.cached_property)):
        return "property"
    return "method" if function_of(attribute) is not None else None


def base_attribute(cls: type, name: str) -> Any:
    """What `name` is with the subject's own deleted: the attribute of the nearest class after the one it is deleted
    from (the subject, or the library's class it inherits it from) in its MRO that defines it; None where none does
    (an orphaned override)."""
    return vars(base_of(cls, name) or object).get(name)


def base_function(cls: type, name: str) -> Any:
    """The function that runs for `name` with the subject's own deleted (base_attribute); None where it is not a
    function."""
    return function_of(base_attribute(cls, name))


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


def signature_gap(ours: Any, theirs: Any, sites: tuple[Site, ...] | None = None) -> Values:
    """The base's parameters that `ours` cannot take, and the defaults that differ. With the `sites` that call it,
    only the parameters they pass by name count (a `**kwargs` or `*args` of the base where a site passes one):
    a parameter named otherwise that transformers passes by position is no difference; and only the defaults of
    parameters some site leaves out (`training_step(self, model, inputs, num_items_in_batch)` without the base's
    `=None`, where every call passes all three, is none)."""
    mine, base = parameters(ours), parameters(theirs)
    cannot = [_describe(p) for name, p in base.items() if not accepts(mine, name, p.kind) and _passed(p, sites)]
    defaults = {
        name: {"override": jsonable(mine[name].default), "base": jsonable(p.default)}
        for position, (name, p) in enumerate(base.items())
        if name in mine
        and p.default is not p.empty
        and repr(mine[name].default) != repr(p.default)
        and not _always_passed(p, position - 1, sites)  # after `self`
    }
    return {"cannot_take": cannot, "other_defaults": defaults}


def _always_passed(parameter: inspect.Parameter, position: int, sites: tuple[Site, ...] | None) -> bool:
    """Whether every call site (there are some) passes `parameter`, by name or at its `position`: its default
    never reaches transformers' calls."""
    by_position = parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD)
    return bool(sites) and all(
        parameter.name in keywords or (by_position and positional > position) for _, positional, keywords, _, _ in sites
    )


def _passed(parameter: inspect.Parameter, sites: tuple[Site, ...] | None) -> bool:
    """Whether a call site passes `parameter` by its name (or, for `*args` and `**kwargs`, passes one); every
    parameter counts where the sites are not known."""
    if sites is None:
        return True
    if parameter.kind is parameter.VAR_POSITIONAL:
        return any(starred for _, _, _, starred, _ in sites)
    if parameter.kind is parameter.VAR_KEYWORD:
        return any(splat or keywords for _, _, keywords, _, splat in sites)
    return any(parameter.name in keywords for _, _, keywords, _, _ in sites)


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


Site = tuple[str, int, tuple[str, ...], bool, bool]  # file:line, positional count, keywords, *args, **kwargs


@functools.cache
def call_sites(name: str) -> tuple[Site, ...]:
    """Where the installed transformers calls `.name(...)`. Parsed once per environment and release: kept beside
    the environment (compat-matrix empties it when it installs anything there), and once per cell in memory."""
    kept = _kept().get(name)
    if kept is not None:
        return tuple((at, count, tuple(keywords), starred, splat) for at, count, keywords, starred, splat in kept)
    import transformers

    root = Path(transformers.__file__).parent
    pattern = re.compile(rf"\.{re.escape(name)}\(")
    sites = []
    for path, text in _package_files():
        if pattern.search(text):
            for called, positional, keywords, starred, splat, line in _calls_near(path, name):
                if called == name:
                    sites.append((f"{path.relative_to(root)}:{line}", positional, keywords, starred, splat))
    _keep(name, sites)
    return tuple(sites)


def _kept_file() -> Path:
    """Per release and per version of the parser (this file): a fix to the parsing is not served stale sites."""
    import transformers

    parser = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]
    return Path(sys.prefix) / KEPT / f"call-sites-{transformers.__version__}-{parser}.json"


def _read_kept() -> dict[str, Any]:
    try:
        return json.loads(_kept_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


@functools.cache
def _kept() -> dict[str, Any]:
    return _read_kept()


def _keep(name: str, sites: list[Site]) -> None:
    """Keep `sites` beside the environment, only one compat-matrix installed (never a user's own virtualenv),
    merged with what other cells sharing it wrote meanwhile."""
    _kept()[name] = sites
    if not (Path(sys.prefix) / STAMP).exists():
        return
    with contextlib.suppress(OSError):  # a read-only environment parses again next time
        write_json_atomic(_kept_file(), {**_read_kept(), **_kept()})


ORPHANED_NO_BASE = "no base class defines it"
ORPHANED_UNUSED = "nothing in transformers calls or reads it"


def orphaned(cls: type, name: str) -> str | None:
    """Why the installed release gives an audited name of `cls` nothing to override, or None: no class after the one
    it is deleted from defines it; or, for a private name (a hook only transformers itself uses: `_update_causal_mask`,
    `_checkpoint_conversion_mapping`), no file of transformers mentions `.name` or `"name"`, neither the shared
    code nor the modules of the subject's own base classes. A private name no class defines that the shared code
    looks up on a module (`hasattr(module, "_tie_weights")` on 4.x) is a hook it still calls: not orphaned."""
    private = name.startswith("_") and not name.startswith("__")
    if base_of(cls, name) is None:
        looked_up = private and any(hook_looked_up(name, text) for _, text in _package_files())
        return None if looked_up else ORPHANED_NO_BASE
    if not private:
        return None
    import transformers

    root = Path(transformers.__file__).parent
    pattern = re.compile(rf"\.{re.escape(name)}\b|[\"']{re.escape(name)}[\"']")
    bases = {Path(inspect.getfile(k)).resolve() for k in cls.__mro__[1:] if _file_in(k, root)}
    texts = [text for _, text in _package_files()] + [b.read_text(encoding="utf-8", errors="replace") for b in bases]
    return None if any(pattern.search(text) for text in texts) else ORPHANED_UNUSED


def hook_looked_up(name: str, text: str) -> bool:
    """Whether source `text` looks `name` up on an object by `hasattr(x, "name")`."""
    return re.search(rf"hasattr\([^,()]+,\s*[\"']{re.escape(name)}[\"']\s*\)", text) is not None


def _file_in(klass: type, root: Path) -> bool:
    try:
        return Path(inspect.getfile(klass)).resolve().is_relative_to(root.resolve())
    except (TypeError, OSError):
        return False


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


@probe(
    exercises=ANY,
    title="transformers' calls",
    plain="what transformers passes it",
    informs=("unused",),
    inspects=True,
    kinds=(MODEL, TRAINER),
)
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
        theirs = base_function(build.cls, name)
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


@probe(exercises=ANY, title="signature", plain="its signature", inspects=True, kinds=(MODEL, TRAINER))
def signature(build: Build) -> Values:
    """Per audited method: the parameters of the base implementation on the installed release that what the
    variant calls cannot take (by name and kind) and that transformers' own calls pass by that name, and the
    parameters whose defaults differ. With the override deleted, nothing is missing; an override written against
    an older signature is seen where the base changed and transformers passes what it added."""
    values: Values = {}
    for name in build.methods:
        theirs = base_function(build.cls, name)
        ours = function_of(inspect.getattr_static(build.cls, name, None))
        if theirs is not None and ours is not None:
            values[name] = signature_gap(ours, theirs, call_sites(name))
    return values
