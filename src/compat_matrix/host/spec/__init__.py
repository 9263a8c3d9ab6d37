"""Matrix files: parse, validate, and turn into a MatrixSpec.

Standard library plus `packaging` only, so the noxfile can import it from nox's own interpreter. Every problem in
a file is collected and reported together, one line each, naming the file, the key and the bad value; whatever a
file holds, this package raises nothing but MatrixError.

    model      the values: MatrixSpec, Axis, Sweep, Subject, Expectation, Declared
    grammar    an axis value as what it allows and as a requirement; a moment as uv's UTC timestamp
    problems   where a problem is (Context), a value quoted in it, MatrixError
    values     one validator per kind of value
    tables     one registry of known keys per table, each key one validator; a file's TOML parsed
    files      a matrix file loaded, the files a run reads, several loaded at once

Each table has one registry of its known keys (`TOP_KEYS`, `MATRIX_KEYS`, `SUBJECT_KEYS`) and each key one
validator, so a new key is one entry and one function. An unknown key is answered with the closest known one, or
with the table it belongs in when TOML put it in another one (a line written below the wrong `[header]`).
"""

from compat_matrix.host.spec.files import load, load_all, matrix_files
from compat_matrix.host.spec.grammar import TIMESTAMP, axis_requirement, axis_specifier, timestamp
from compat_matrix.host.spec.model import (
    DECLARED,
    DEFAULT_CELL_TIMEOUT,
    EACH,
    PYTHON,
    Axis,
    Declared,
    Expectation,
    MatrixSpec,
    Subject,
    Sweep,
    is_local,
    local_name,
)
from compat_matrix.host.spec.problems import Context, MatrixError, display_path, dotted, show
from compat_matrix.host.spec.tables import MATRIX_KEYS, SUBJECT_KEYS, SWEEP_KEYS, TOP_KEYS, Key, parse, section

__all__ = [
    "DECLARED",
    "DEFAULT_CELL_TIMEOUT",
    "EACH",
    "MATRIX_KEYS",
    "PYTHON",
    "SUBJECT_KEYS",
    "SWEEP_KEYS",
    "TIMESTAMP",
    "TOP_KEYS",
    "Axis",
    "Context",
    "Declared",
    "Expectation",
    "Key",
    "MatrixError",
    "MatrixSpec",
    "Subject",
    "Sweep",
    "axis_requirement",
    "axis_specifier",
    "display_path",
    "dotted",
    "is_local",
    "load",
    "load_all",
    "local_name",
    "matrix_files",
    "parse",
    "section",
    "show",
    "timestamp",
]
