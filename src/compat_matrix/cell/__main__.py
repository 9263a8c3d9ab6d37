"""The cell's interpreter: `python -m compat_matrix.cell REQUEST.json RESULT.json` (or `--discover DISTRIBUTION
OUT.json`, for `compat-matrix init`). See compat_matrix.cell.runner."""

import sys

from compat_matrix.cell.runner import main

sys.exit(main(sys.argv[1:]))
