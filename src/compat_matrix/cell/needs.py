"""What a build that failed needs, read off its exception: a module that is not installed (an ImportError names it;
a NameError names what the raising file imports from it only when it is installed: sentence-transformers'
`from datasets import IterableDataset` under `if is_datasets_available()`), and whether the subject's own
distribution declares it for an extra. Runs in the cell; standard library only.

    missing_module(exc, cls)     the module whose absence made `exc`, where it is not installed here
    declared_for(cls, module)    the subject's distribution, and the extras of it that name the module's
    remedy(cls, exc)             what to do instead of writing a factory, or None
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from compat_matrix.shared.blame import owners


def chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and the exceptions it was raised from or while handling, innermost last."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)


def provider(exc: BaseException) -> str | None:
    """The top-level module that would have given what is missing: the one an ImportError names, or the one the
    file that raised a NameError imports that name from (`from datasets import IterableDataset`)."""
    if isinstance(exc, ImportError) and exc.name:
        return exc.name.split(".")[0]
    if not isinstance(exc, NameError) or not getattr(exc, "name", None):
        return None
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return None
    return imported_from(tb.tb_frame.f_code.co_filename, exc.name)


def imported_from(filename: str, name: str) -> str | None:
    """The top-level module a source file imports `name` from anywhere in it (under an `if`, in a `try`), by an
    absolute import; None where it does not."""
    try:
        tree = ast.parse(Path(filename).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if any((alias.asname or alias.name) == name for alias in node.names):
                return node.module.split(".")[0]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if (alias.asname or alias.name.split(".")[0]) == name:
                    return alias.name.split(".")[0]
    return None


def missing_module(exc: BaseException, cls: type | None = None) -> str | None:
    """The top-level module whose absence made `exc` (or an exception in its chain), where it cannot be imported
    here: a module that is installed failed for another reason, which is not what an extra requirement fixes. Else,
    of the distributions an extra of `cls`'s own distribution requires and that are not installed, the first the
    message names as a word ("you need to install the `accelerate` and `datasets` modules")."""
    for inner in chain(exc):
        module = provider(inner)
        if module and not installed(module):
            return module
    if cls is None:
        return None
    text = " ".join(str(inner) for inner in chain(exc))
    for name in extra_requirements(cls):
        module = name.replace("-", "_")
        if not installed(module) and re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", text, re.IGNORECASE):
            return module
    return None


def installed(module: str) -> bool:
    return module in sys.modules or importlib.util.find_spec(module) is not None


def extra_requirements(cls: type) -> list[str]:
    """The distributions that the extras of the distribution holding `cls` require, as its metadata names them."""
    held = owners(cls.__module__)
    if not held:
        return []
    try:
        requires = importlib.metadata.requires(held[0]) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    names = [re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", line) for line in requires if re.search(r"extra\s*==", line)]
    return list(dict.fromkeys(name.group(0) for name in names if name))


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared_for(cls: type, module: str) -> tuple[str, str, str, tuple[str, ...]] | None:
    """(the distribution that holds `cls`, its version, the distribution that most likely provides `module` (as a
    requirement of it names it, else the module's name with `_` read as `-`), the extras that require that one);
    None where no installed distribution holds `cls`."""
    held = owners(cls.__module__)
    if not held:
        return None
    try:
        requires = importlib.metadata.requires(held[0]) or []
        version = importlib.metadata.version(held[0])
    except importlib.metadata.PackageNotFoundError:
        return None
    provides, extras = module.replace("_", "-"), []
    for line in requires:
        name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", line)
        extra = re.search(r"""extra\s*==\s*['"]([^'"]+)['"]""", line)
        if name and extra and _canonical(name.group(0)) == _canonical(module):
            provides = name.group(0)
            extras.append(extra.group(1))
    return held[0], version, provides, tuple(dict.fromkeys(extras))


def remedy(cls: type, exc: BaseException) -> str | None:
    """Instead of "write a factory", where the build failed for a module that is not installed: install it (saying
    which extra of the subject's distribution declares it); None where nothing is missing."""
    module = missing_module(exc, cls)
    if module is None:
        return None
    held = declared_for(cls, module)
    if held is None:
        return f"it needs {module}, which is not installed here: add it to extra_requirements"
    distribution, version, provides, extras = held
    said = f"declares it for its extra {', '.join(extras)}" if extras else "does not declare it"
    return (
        f"it needs {module}, which is not installed here ({distribution} {version} {said}): add "
        f'"{provides}" to extra_requirements'
    )
