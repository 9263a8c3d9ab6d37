"""The nox sessions that `compat-matrix run` starts, from whatever folder it runs in: one per cell of the plan the
run hands down (COMPAT_MATRIX_PLAN), and `matrix`. See compat_matrix.host.nox_sessions."""

from __future__ import annotations

import os
from pathlib import Path

import nox

from compat_matrix.host import nox_sessions

nox.needs_version = ">=2026.8.10"  # allow_parallel; the same bound as in pyproject.toml

nox_sessions.register(nox_sessions.planned_run(Path.cwd(), Path(__file__), os.environ))
