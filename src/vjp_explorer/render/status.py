"""Feedback on long work: past about a second, one status line on stderr says what the run is doing.

Only on a terminal (stderr a TTY) and never with --json: a pipe or a log gets nothing. The line is a Rich
status (a spinner and a few words) started by a timer thread, so a quick run never shows it; it is
transient, and stop() clears it before the command writes its output, so nothing is left on the screen.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

DELAY = 1.0  # seconds of work before the line shows (VJP_STATUS_AFTER overrides it, for tests)
PLAIN = [False]  # --color never (set by the option's callback): no ANSI style, as NO_COLOR asks


class Status:
    """The status line of one command: say() what is being done; stop() before any output."""

    def __init__(self, enabled: bool, first: str) -> None:
        self.what = first
        self._lock = threading.Lock()
        self._shown: Any = None
        self._stopped = not enabled
        self._timer: threading.Timer | None = None
        if enabled:
            self._timer = threading.Timer(_delay(), self._show)
            self._timer.daemon = True  # never keeps the process alive
            self._timer.start()

    @classmethod
    def for_command(cls, json_: bool, first: str = "starting") -> Status:
        """A status line for a command whose output goes to stdout: on only where stderr is a terminal."""
        term = os.environ.get("TERM", "")
        return cls(not json_ and _is_tty(sys.stderr) and term != "dumb", first)

    def say(self, what: str) -> None:
        """What the run is doing now, in a few words ("importing torch", "checking: finite differences")."""
        with self._lock:
            self.what = what
            if self._shown is not None:
                self._shown.update(what)

    def _show(self) -> None:
        from rich.console import Console

        with self._lock:
            if self._stopped:
                return
            plain = PLAIN[0] or os.environ.get("NO_COLOR", "") != ""
            # no colour and no style at all (the spinner is green by default); the cursor codes stay
            console = Console(
                stderr=True, highlight=False, no_color=plain or None, color_system=None if plain else "auto"
            )
            self._shown = console.status(self.what, spinner="dots")
            self._shown.start()

    def stop(self) -> None:
        """Clear the line (if it showed) and make sure it never shows; safe to call more than once."""
        with self._lock:
            self._stopped = True
            if self._timer is not None:
                self._timer.cancel()
            shown, self._shown = self._shown, None
        if shown is not None:
            shown.stop()


def _delay() -> float:
    try:
        return max(0.0, float(os.environ.get("VJP_STATUS_AFTER", DELAY)))
    except ValueError:
        return DELAY


def _is_tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False
