"""Limits the host sets and the cell applies, defined once."""

DEFAULT_TIMEOUT = 300.0  # seconds per probe call, where the matrix file does not say
# The oldest transformers release the probes run on: they build tiny LlamaForCausalLM models (the cell's factory and
# rehearsal), which transformers has from 4.28.0. `init` sweeps a declared range from here.
OLDEST_TRANSFORMERS = "4.28.0"
