"""Limits the host sets and the cell applies, defined once."""

DEFAULT_TIMEOUT = 300.0  # seconds per probe call, where the matrix file does not say
