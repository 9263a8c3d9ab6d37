"""The cell's interpreter: `python -m compat_matrix.cell REQUEST.json RESULT.json` (or `--discover DISTRIBUTION
OUT.json`, for `compat-matrix init`). See compat_matrix.cell.runner.

It leaves with os._exit once its result is written: leaving normally, Python's last collections and finalizers
over torch's and transformers' heap cost 0.2-0.3 s, and nothing is left to do."""

import os
import sys

from compat_matrix.cell.runner import main

code = main(sys.argv[1:])
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
