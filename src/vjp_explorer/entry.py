"""The console script's entry point: Ctrl-C means exit 130, from our first line on.

Python's own handler raises KeyboardInterrupt, which start-up code can turn into a traceback, and which
an import (torch's among them) can catch and swallow, so that the run goes on and exits 0. Ours ends
the process at once instead, the exit code the documented 130 whatever was running. One thing of a run
needs cleaning up first: a snippet's confined child and its scratch folder (confined/launch.abandon, when
that module is loaded at all); nothing else is written.

A process started with SIGINT ignored (a background job of a script: `vjp ... &` in sh) keeps it ignored
under Python's rules; our handler replaces the ignore too, so `kill -INT` means 130 there as well. In the
first tens of milliseconds, before our first line, the kernel discards such an ignored signal and the run
goes on to exit 0: no code of any process can see a signal discarded before it runs (measured: a
signal 10 ms after the start is lost, 20 ms after it ends the run with 130).

What comes before our first line is Python's: a Ctrl-C in the first few tens of milliseconds, while the
interpreter starts and runs `site` (an editable install's import hook included), ends the process by
SIGINT (a shell shows 130) or with Python's own "Fatal Python error ... KeyboardInterrupt".
"""

from __future__ import annotations

import os
import signal
import sys


def _interrupted(signum: int, frame: object) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the cleanup short
    launch = sys.modules.get("vjp_explorer.confined.launch")
    if launch is not None:
        try:
            launch.abandon()
        except BaseException:  # noqa: S110 - leaving anyway; the exit code says why
            pass
    try:
        os.write(2, b"interrupted\n")
    except OSError:  # stderr closed or full: the exit code still says it
        pass
    os._exit(130)


# at import, not in main(): the console script imports this module first, so no code of ours runs
# before the handler (only the console script and `python -m vjp_explorer` import it: the library
# itself leaves signals alone)
signal.signal(signal.SIGINT, _interrupted)


def main() -> None:
    """Run the command (the SIGINT handler is already in place)."""
    try:
        from .cli import main as cli_main
    except Exception as e:  # the command itself cannot load (a broken install): still one paragraph, exit 1
        if "--debug" in sys.argv[1:] or os.environ.get("VJP_DEBUG", "").strip().lower() in ("1", "true", "yes", "on"):
            raise
        text = "".join(c if c.isprintable() else "?" for c in f"{type(e).__name__}: {e}")
        sys.stderr.write(
            f"internal error: {text}\nThis is a bug in vjp-explorer (or a broken install: reinstall it); please "
            "report it with the command you ran. Run again with --debug (or VJP_DEBUG=1) for the traceback.\n"
        )
        sys.exit(1)
    cli_main()
