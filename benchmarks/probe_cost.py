"""Run by bench.py inside a cell's environment: what the probes of any method cost one subject in one cell.

    <cell python> benchmarks/probe_cost.py module:Class method[,method…]

Prints JSON: seconds to parse transformers' sources for the audited names (once per cell, before the variants are
forked) and to run every probe of any method on each variant, each variant in its own forked child as in a real
cell; and the same for the checkpointing probes, for comparison.
"""

from __future__ import annotations

import gc
import json
import sys
import tempfile
import time
from pathlib import Path

from compat_matrix import variants
from compat_matrix.factory import default_factory, load_callable
from compat_matrix.forks import forked
from compat_matrix.observe import call_probe
from compat_matrix.probes import ANY, Build, prepare, prewarm, registry


def main(target: str, methods: tuple[str, ...]) -> dict[str, float]:
    import torch  # noqa: F401  as a cell does, before anything is timed
    import transformers  # noqa: F401

    prewarm()
    cls = load_callable(target)
    gc.freeze()
    start = time.perf_counter()
    prepare(methods)
    figures = {"parse transformers' sources": time.perf_counter() - start}
    gc.freeze()
    families = {
        "probes of any method": [p for p in registry().values() if p.exercises == ANY],
        "checkpointing probes": [
            p for p in registry().values() if p.exercises != ANY and set(p.exercises) & set(methods)
        ],
    }
    progress = Path(tempfile.mkdtemp()) / "progress"
    progress.write_text("bench")

    def timed(variant: str, probes: list) -> float:
        variants.apply(cls, variant, methods)
        build = Build(default_factory, cls, methods)
        start = time.perf_counter()
        for probe in probes:
            call_probe(probe, build, 300.0, {})
        return time.perf_counter() - start

    for family, probes in families.items():
        for variant in (variants.OVERRIDE, variants.BASE):
            figures[f"{family}, {variant}"] = forked(lambda v=variant, p=probes: timed(v, p), progress, 600).answer
    return figures


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], tuple(sys.argv[2].split(",")))))
