"""Files in a cell's environment that the host and the cell both name."""

KEPT = "compat-matrix-cache"  # what depends only on the installed release (call sites): emptied on every install
STAMP = ".compat-matrix-installed"  # in the environments compat-matrix installs: what it installed there
