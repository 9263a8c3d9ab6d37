"""The probe API, as probes of your own and the host's report read it: compat_matrix.cell.probes is where the probes
run; this face is what may be read from outside the cell (the registry's names, titles and observations)."""

from compat_matrix.cell.probes import (
    ANY,
    CONFIG,
    CONTRACT,
    MODEL,
    OTHER,
    TRAINER,
    Build,
    Inconclusive,
    Probe,
    plain_words,
    preparation,
    probe,
    registry,
    titles,
)

__all__ = [
    "ANY",
    "CONFIG",
    "CONTRACT",
    "MODEL",
    "OTHER",
    "TRAINER",
    "Build",
    "Inconclusive",
    "Probe",
    "plain_words",
    "preparation",
    "probe",
    "registry",
    "titles",
]
