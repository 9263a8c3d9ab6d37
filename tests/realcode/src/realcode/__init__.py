"""Reproductions of overrides that downstream libraries of transformers really wrote, on the releases where they
break or stop mattering; the advice on each must be right (realcode.toml, tests/test_integration.py).

Each module imports on every release from 4.45 to 5.x: nothing here imports a name a release lacks.
"""
