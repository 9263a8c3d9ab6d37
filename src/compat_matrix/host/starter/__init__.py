"""`compat-matrix init PACKAGE [--from PATH]`: a starter matrix file, from a package's name to a report in two
commands. Host side: standard library and packaging; the package is looked into in an environment of its own.

    plan_start(asked, environ)       the requirement, what it declares, the axes (the declared range swept, torch
                                     pinned as the machine allows) and the cell to look into the package in
    look(start, envdir, log)         that cell's environment installed (stamped as the cell's own, which the run
                                     then shares), and the classes found there (runner --discover)
    text(start, found)               the matrix file
    init(asked, environ, log)        all of it, the file written and validated; the command that runs it

One module each: `start` (what is asked, the start, what was found), `looking` (the package looked into), `needs`
(what an import that failed needs), `file_text` (the file), `command` (init). What callers read is named here.
"""

from compat_matrix.host.starter.command import Written, init
from compat_matrix.host.starter.file_text import overrides_comment, text, unbuilt_comment
from compat_matrix.host.starter.looking import (
    NothingToAudit,
    also,
    fixes,
    found_from,
    left_out,
    look,
    other_end,
    unsatisfiable,
    widened,
    with_extra,
)
from compat_matrix.host.starter.needs import (
    build_needs,
    capped,
    clash_fix,
    clash_line,
    clash_lines,
    declared_hint,
    distribution_of,
    undeclared,
)
from compat_matrix.host.starter.start import (
    ENDS,
    FLOOR,
    Asked,
    Found,
    Start,
    lifted,
    lowest_allowed,
    plan_start,
    template_path,
    torch_pin,
)

__all__ = [
    "ENDS",
    "FLOOR",
    "Asked",
    "Found",
    "NothingToAudit",
    "Start",
    "Written",
    "also",
    "build_needs",
    "capped",
    "clash_fix",
    "clash_line",
    "clash_lines",
    "declared_hint",
    "distribution_of",
    "fixes",
    "found_from",
    "init",
    "left_out",
    "lifted",
    "look",
    "lowest_allowed",
    "other_end",
    "overrides_comment",
    "plan_start",
    "template_path",
    "text",
    "torch_pin",
    "unbuilt_comment",
    "undeclared",
    "unsatisfiable",
    "widened",
    "with_extra",
]
