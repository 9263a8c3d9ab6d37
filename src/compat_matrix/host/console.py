"""The lines a run prints: whole lines from several threads, and a nox running cells watched to its end."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping

_OUTPUT = threading.Lock()


def say(line: str) -> None:
    """Print one whole line; lines of several threads never mix."""
    with _OUTPUT:
        sys.stdout.write(line if line.endswith("\n") else line + "\n")
        sys.stdout.flush()


def run_watched(
    command: list[str],
    env: Mapping[str, str],
    tick: Callable[[], None] = lambda: None,
    shown: Callable[[str], bool] = lambda line: True,
    grace: float = 60.0,
) -> tuple[int, bool]:
    """Run `command` (a nox running cells) to its end, passing on the lines of its output that are `shown` and
    calling `tick` about every second; return its exit code and whether it was interrupted.

    Ctrl-C reaches the whole foreground process group, the nox included, which then stops its cells. SIGTERM (a
    CI runner) reaches only this process: it is passed on to the nox as the SIGINT that nox understands, since a
    nox killed by SIGTERM leaves its cells running. Either way this waits for the cells to be stopped, `grace`
    seconds at most. The output goes through a pipe, so nox prints plain lines that `tick`'s lines can join."""
    terminated = False

    def on_sigterm(signum: int, frame: object) -> None:
        nonlocal terminated
        terminated = True
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    process = subprocess.Popen(
        command, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    )
    forward = threading.Thread(target=lambda: [say(line) for line in process.stdout if shown(line)], daemon=True)
    forward.start()
    interrupted = False
    try:
        while process.poll() is None:
            try:
                process.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                tick()
    except KeyboardInterrupt:
        interrupted = True
        if terminated:
            process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
        forward.join(timeout=10)
    tick()
    return process.returncode, interrupted
