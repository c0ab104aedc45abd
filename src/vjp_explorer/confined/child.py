"""The confined child: `python -I -m vjp_explorer.confined.child`, started by launch.run_confined.

Reads its config frame from stdin, confines itself (unless trusted), says "ready" on its message pipe,
and only then reads the snippet's frame from stdin and runs it (runner.py). What it imports is imported
before the confinement, so Landlock need not grant this package's folder for the code that reads it.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from ..limits import DEFAULT_LIMITS, Limits
from . import protocol, runner, sandbox
from .kernel import ConfinementUnavailable

CONFIG_LIMIT = 1 << 20  # bytes of the config frame (paths and limits)
SNIPPET_LIMIT = 64 << 20  # bytes of the snippet frame; the parent checks snippet_chars before


def limits_from(values: dict[str, Any]) -> Limits:
    """The parent's limits: only the names Limits knows, each a number."""
    known = {name: value for name, value in values.items() if hasattr(DEFAULT_LIMITS, name)}
    return DEFAULT_LIMITS.with_overrides({name: str(value) for name, value in known.items()})


def main() -> int:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # held back by the parent while it started us
    config = protocol.read_frame(0, CONFIG_LIMIT)
    if config is None or config.get("type") != "config":
        return 3
    out = int(config["message_fd"])

    lock = threading.Lock()  # a snippet's threads may call backward at once: one frame at a time on the pipe

    def send(message: dict[str, Any]) -> None:
        with lock:
            protocol.write_frame(out, message)

    abi = 0
    if not config["trust"]:
        try:
            abi = sandbox.confine(
                Path(config["scratch"]),
                [Path(p) for p in config["read_dirs"]],
                limits_from(config["limits"]),
                parent_pid=int(config["parent_pid"]),
            )
        except ConfinementUnavailable as e:
            send({"type": "unavailable", "reason": e.reason})
            return 0
    send({"type": "ready", "confined": not config["trust"], "landlock_abi": abi})
    snippet = protocol.read_frame(0, SNIPPET_LIMIT)  # the first byte of the snippet read, after confinement
    if snippet is None or snippet.get("type") != "snippet":
        return 3
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # input() meets end of file, as `python FILE.py < /dev/null` would
    os.close(null)
    observe = None
    if snippet.get("diagnose"):  # the second run of a snippet that failed: the instruments of docs/why.md
        from .diagnose import diagnoser_for

        observe = diagnoser_for(send, snippet["filename"], snippet.get("seed"))
    elif snippet.get("observe"):
        from .observe import observer_for  # imports torch: after the confinement, as a snippet's import would

        manual = None
        if snippet.get("manual"):  # the parent found hand-written gradients in the text (manual_source.py)
            manual = runner.transcript_source(snippet["text"]) if snippet["mode"] == "repl" else snippet["text"]
        explain = dict(snippet.get("explain") or {})
        observe = observer_for(send, snippet["filename"], snippet.get("seed"), explain, manual)
    runner.run(
        snippet["text"],
        send,
        filename=snippet["filename"],
        mode=snippet["mode"],
        observe=observe,
        confined=not config["trust"],
        go_on=not snippet.get("diagnose"),  # the diagnosis is of the first error: its run stops there
    )
    return 0


if __name__ == "__main__":
    code = main()
    import atexit

    atexit._run_exitfuncs()  # what the snippet registered runs, as at `python FILE.py`'s end
    sys.stdout.flush()
    sys.stderr.flush()
    # then no interpreter teardown: with torch loaded it takes 0.3 s, and the scratch folder is deleted anyway
    os._exit(code)
