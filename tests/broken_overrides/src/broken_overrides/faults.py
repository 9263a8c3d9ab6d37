"""Factories that fail the way real subjects do, for the fault-injection tests. Each receives the class to build."""

from __future__ import annotations

import os
import signal
import time

HOSTILE = "bad | value\n`code` <script>alert(1)</script> & more"


def aborts(cls):
    """The interpreter aborts (SIGABRT), as a native extension might."""
    os.abort()


def hangs(cls):
    """Never returns; the per-call alarm interrupts it."""
    while True:
        time.sleep(1)


def hangs_hard(cls):
    """Never returns and blocks the alarm, like a hang inside native code: only the watchdog can stop it."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    while True:
        time.sleep(1)


def raises_hostile(cls):
    """An exception whose message would break a markdown table."""
    raise ValueError(HOSTILE)


def hangs_on_4_57(cls):
    """Hangs on transformers 4.57.x only, so one cell of a matrix finishes and the other does not."""
    import transformers

    from compat_matrix.cell.factory import default_factory

    if transformers.__version__.startswith("4.57."):
        hangs(cls)
    return default_factory(cls)


def _subject(name: str) -> type:
    """A distinct subject class that overrides `gradient_checkpointing_disable` without changing it."""
    from utf8_tokenizer.char_causal_lm import CharacterCausalLMWrapper

    def gradient_checkpointing_disable(self):
        CharacterCausalLMWrapper.gradient_checkpointing_disable(self)

    return type(name, (CharacterCausalLMWrapper,), {"gradient_checkpointing_disable": gradient_checkpointing_disable})


Aborting, Hanging, HangingHard, Hostile = (_subject(n) for n in ("Aborting", "Hanging", "HangingHard", "Hostile"))
