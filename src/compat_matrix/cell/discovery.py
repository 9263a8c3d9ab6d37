"""What a cell finds: the classes a module or package target stands for, and the names each overrides of
transformers (its own, and those it inherits from an abstract base of its library)."""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import importlib.util
import inspect
import types

from compat_matrix.cell import variants
from compat_matrix.cell.observe import BUILDS_ON
from compat_matrix.cell.probes import (
    MODEL,
    TRAINER,
    subject_kind,
)
from compat_matrix.shared.results import (
    ATTRIBUTE,
    METHOD,
    THROUGH,
    Discovery,
    describe_exception,
)

METHOD_TYPES = (types.FunctionType, classmethod, staticmethod, property)


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
