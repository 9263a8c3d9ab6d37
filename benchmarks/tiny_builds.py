"""Which model classes of a transformers release build tiny with no factory, and what the builds cost.

    PYTHONPATH=src <cell python> benchmarks/tiny_builds.py [--json FILE] [--only Class,Class…]

Run inside a cell's environment. Tries `compat_matrix.cell.tiny.build` on every model class the release exports: the
classes its auto mappings name (MODEL_MAPPING_NAMES, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, …) and the names in
`transformers.__all__` that end like a model class (…Model, …ForCausalLM, …ForSequenceClassification, …), that
are `PreTrainedModel` subclasses. Prints how many built, how many failed (grouped by error), and the largest
parameter count and build time; `--json` writes every class's result.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

from compat_matrix.cell import shrink, tiny

MODEL_CLASS = re.compile(r"(Model|LMHeadModel|For[A-Z]\w+)$")
HANG = 60  # seconds; a build still running by then is recorded as hung, and the next one starts


def candidates() -> list[str]:
    import transformers
    from transformers.models.auto import modeling_auto

    names: set[str] = set()
    for attribute in dir(modeling_auto):
        if attribute.startswith("MODEL_") and attribute.endswith("MAPPING_NAMES"):
            for value in getattr(modeling_auto, attribute).values():
                names.update(value if isinstance(value, list | tuple) else [value])
    names.update(n for n in transformers.__all__ if MODEL_CLASS.search(n))
    return sorted(
        n for n in names if not n.startswith("Auto") and not n.endswith(("PreTrainedModel", "PretrainedModel"))
    )


def resolve(name: str) -> type | None:
    import transformers

    try:
        cls = getattr(transformers, name)
    except Exception:  # not exported, or its module needs what this environment lacks
        return None
    return cls if isinstance(cls, type) and issubclass(cls, transformers.PreTrainedModel) else None


def _hung(signum: int, frame: Any) -> None:
    raise TimeoutError(f"still building after {HANG} s")


def try_build(cls: type, forward_too: bool = False) -> dict[str, Any]:
    """Choose the sizes (once per class, on the meta device), then build: each timed on its own, since a cell
    chooses once and builds for every probe."""
    signal.signal(signal.SIGALRM, _hung)
    signal.alarm(HANG)
    start = time.perf_counter()
    try:
        tiny.sizes(cls)
        sizing = time.perf_counter() - start
        wall, cpu = time.perf_counter(), time.process_time()
        model = tiny.build(cls)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    except tiny.CouldNotBuild as exc:
        return {"built": False, "error": str(exc), "default": builds_as_is(cls)}
    except BaseException as exc:  # a build that escapes CouldNotBuild is a bug of tiny.build: say so
        return {"built": False, "error": f"escaped: {type(exc).__name__}: {exc}", "default": None}
    finally:
        signal.alarm(0)
    result = {
        "built": True,
        "parameters": tiny.parameters(model),
        "seconds": wall,
        "cpu_seconds": cpu,
        "sizing": sizing,
    }
    return result | ({"forward": forward(model)} if forward_too else {})


def forward(model: Any) -> str | None:
    """None if a model that reads token ids runs on 8 of them (ids below the special ones; as decoder input too,
    for an encoder-decoder), else why not; "not tried" for a model that reads something else."""
    import torch

    if getattr(model, "main_input_name", None) != "input_ids":
        return "not tried"
    signal.alarm(HANG)
    try:
        with torch.no_grad():
            ids = torch.randint(0, shrink.KEPT_IDS // 2, (1, 8))
            decoder = {"decoder_input_ids": ids} if getattr(model.config, "is_encoder_decoder", False) else {}
            model.eval()(input_ids=ids, **decoder)
    except BaseException as exc:
        return f"{type(exc).__name__}: {exc}"[:200]
    finally:
        signal.alarm(0)
    return None


def builds_as_is(cls: type) -> str | None:
    """None if `cls` builds from its config class's defaults (on the meta device: no memory, no time), else why
    not: a class that cannot is broken in this release, or needs what its defaults lack, tiny or not."""
    import torch

    try:
        with torch.device("meta"):
            cls(cls.config_class())
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"[:200]
    return None


def print_groups(errors: dict[str, str]) -> None:
    """One line per group of alike errors (see `group`), the largest group first."""
    found = collections.defaultdict(list)
    for name, error in errors.items():
        found[group(error)].append(name)
    for error, members in sorted(found.items(), key=lambda item: -len(item[1])):
        print(f"{len(members):4}  {error}  [{', '.join(members[:4])}{', …' if len(members) > 4 else ''}]")


def group(error: str) -> str:
    """An error with what names one class or one size taken out, so that alike failures count together."""
    error = re.sub(r"could not build \w+: ", "", error).removesuffix("; write a factory (see README)")
    error = re.sub(r"\b\w*(Model|Config|For[A-Z]\w*)\b", "<Class>", error)
    error = re.sub(r"\d[\d,.]*", "N", error)
    return error[:150]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write every class's result here")
    parser.add_argument("--only", help="comma-separated class names instead of every model class")
    parser.add_argument("--forward", action="store_true", help="also run each built model that reads token ids")
    args = parser.parse_args(argv)

    import torch  # noqa: F401  imported before anything is timed, as in a cell
    import transformers

    transformers.logging.set_verbosity_error()
    names = args.only.split(",") if args.only else candidates()
    results: dict[str, dict[str, Any]] = {}
    skipped = []
    for name in names:
        cls = resolve(name)
        if cls is None:
            skipped.append(name)
            continue
        results[name] = try_build(cls, args.forward)
        print(f"{name}: {'ok' if results[name]['built'] else results[name]['error']}", file=sys.stderr, flush=True)
    built = {n: r for n, r in results.items() if r["built"]}
    failed = {n: r for n, r in results.items() if not r["built"]}
    print(f"transformers {transformers.__version__}: {len(results)} model classes ({len(skipped)} names skipped:")
    print("not PreTrainedModel subclasses, or not importable here)")
    broken = {n for n, r in failed.items() if r["default"]}
    buildable = len(results) - len(broken)
    print(f"built: {len(built)} ({len(built) / max(len(results), 1):.0%}), could not build: {len(failed)}")
    print(f"  of which {len(broken)} do not build from their own default config either (on the meta device):")
    print(f"  built {len(built)} of the {buildable} that do ({len(built) / max(buildable, 1):.0%})")
    if built:
        biggest = max(built, key=lambda n: built[n]["parameters"])
        slowest = max(built, key=lambda n: built[n]["seconds"])
        hungriest = max(built, key=lambda n: built[n]["cpu_seconds"])
        print(f"max parameters: {built[biggest]['parameters']:,} ({biggest})")
        print(f"max build time: {built[slowest]['seconds']:.2f} s wall ({slowest}),", end=" ")
        print(f"{built[hungriest]['cpu_seconds']:.2f} s CPU ({hungriest})")
        sizing = max(built, key=lambda n: built[n]["sizing"])
        print(f"max time to choose the sizes (once per class): {built[sizing]['sizing']:.2f} s wall ({sizing})")
    if args.forward:
        tried = {n: r["forward"] for n, r in built.items() if r["forward"] != "not tried"}
        ran = [n for n, why in tried.items() if why is None]
        print(f"forward on 8 token ids: {len(ran)} of the {len(tried)} built models that read them ran")
        print_groups({n: f"forward: {why}" for n, why in tried.items() if why})
    print_groups({n: ("default fails too: " if n in broken else "") + r["error"] for n, r in failed.items()})
    if args.json:
        args.json.write_text(json.dumps({"transformers": transformers.__version__, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
