"""What `compat-matrix init` learns by building each class it found with the default factory, as shipped: why one
could not be built, the module it needs that is not installed, and for a trainer the dataset columns it asks for.
A trainer that fails for a column (`KeyError: 'chosen'`, or a message naming columns in backticks), in its build or
in its first training steps, is built again with rows that also hold that column, as text of the tiny tokenizer's
words, until it asks for nothing new: the columns it asked for are what its factory's dataset needs (`chosen`,
`rejected`, `prompt`). The run learns them the same way, and builds a trainer with no factory of its own on them
where with them it builds (cell.subject).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from compat_matrix.cell import needs, tiny
from compat_matrix.cell.factory import TrainerWith, default_factory, load_callable
from compat_matrix.cell.forks import WATCHDOG_GRACE, forked
from compat_matrix.cell.probes import subject_kind
from compat_matrix.shared.results import OK, Unbuilt

TRIES = 5  # builds of one trainer, each with the columns it asked for so far
TIMEOUT = 120.0  # seconds per class


def asked_for(exc: BaseException) -> list[str]:
    """The dataset columns an exception (or one in its chain) asks for: a KeyError's string key, or the names in
    backticks of a message about columns ("requires a dataset with `chosen`, `rejected` and `reference` columns")."""
    for inner in needs.chain(exc):
        if isinstance(inner, KeyError) and inner.args and isinstance(inner.args[0], str):
            return [inner.args[0]]
        text = str(inner)
        if "column" in text.lower():
            named = re.findall(r"`([A-Za-z_]\w*)`", text)
            if named:
                return list(dict.fromkeys(named))
    return []


def attempt(cls: type) -> Unbuilt | None:
    """Build `cls` as the run would, and train it where it is a trainer; None where that works or fails for a reason
    the probes observe. A trainer that asks for columns is built again with them, and the result says which it
    asked for and what failed once it had them."""
    from transformers import Trainer

    target = f"{cls.__module__}:{cls.__qualname__}"
    columns: list[str] = []
    first = last = None
    for _ in range(TRIES):
        try:
            made = default_factory(cls) if not columns else TrainerWith(tuple(columns))(cls)
        except tiny.CouldNotBuild as exc:
            last = exc
        except Exception as exc:
            if not columns:
                return None  # an error of another kind: the run's probes observe it (runner.unbuildable)
            last = tiny.unbuilt(cls, exc)
            last.__cause__ = exc
        else:
            last = _asks_in_training(made, columns) if issubclass(cls, Trainer) else None
            _clean(made)
            if last is None:
                break
        first = first or last
        more = [c for c in asked_for(last) if c not in columns] if issubclass(cls, Trainer) else []
        if not more:
            break
        columns += more
    if first is None:
        return None
    then = None if last is None or not columns else last.why  # None: with the columns it asked for, it built
    return Unbuilt(target, str(first), needs.missing_module(first, cls), tuple(columns), then, subject_kind(cls))


def _asks_in_training(trainer: Any, columns: list[str]) -> tiny.CouldNotBuild | None:
    """Why a trainer that builds could not train, where it asks for a column it was not given (trl's GRPOTrainer
    builds on any rows, and reads `prompt` at its first step); None where it trains, or fails for another reason
    (which the probes observe)."""
    try:
        trainer.train()
    except Exception as exc:
        if not [c for c in asked_for(exc) if c not in columns]:
            return None
        failed = tiny.unbuilt(type(trainer), exc, f"its first training steps raise {tiny.describe(exc)}")
        failed.__cause__ = exc
        return failed
    return None


def _clean(made: Any) -> None:
    """A trainer's temporary output folder, made by tiny_trainer: nothing else will remove it."""
    folder = getattr(getattr(made, "args", None), "output_dir", None)
    if isinstance(folder, str) and Path(folder).name.startswith("compat-matrix-trainer-"):
        shutil.rmtree(folder, ignore_errors=True)


def unbuilt(targets: list[str]) -> list[Unbuilt]:
    """Each target that the default factory cannot build, each tried in a forked child of its own (so that what one
    build imports or caches reaches no other), a child that crashes or hangs saying so."""
    out = []
    with tempfile.TemporaryDirectory(prefix="compat-matrix-") as tmp:
        for target in targets:
            run = forked(
                lambda target=target: _answer(target), Path(tmp, "progress"), TIMEOUT + WATCHDOG_GRACE, "building it"
            )
            if run.status != OK:
                name = target.rsplit(":", 1)[-1].rsplit(".", 1)[-1]
                why = f"could not build {name}: {run.status}: {run.reason}; {tiny.WRITE_A_FACTORY}"
                out.append(Unbuilt(target, why, kind=subject_kind(load_callable(target))))
            elif run.answer is not None:
                out.append(Unbuilt.from_json(run.answer))
    return out


def _answer(target: str) -> dict[str, Any] | None:
    found = attempt(load_callable(target))
    return None if found is None else found.to_json()
