"""`python -m compat_matrix`: the `compat-matrix` command."""

import sys

from compat_matrix.host.cli import main

sys.exit(main())
