"""`vjp live`: the arguments of `vjp run`, turned into a live session and handed to the Textual app.

The request is built as `vjp run` builds it (cli/request.build_request; a snippet as cli/snippet.py reads it);
the app (render/live_app.py, the only importer of textual) is imported only here, when the command runs.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .paths import is_snippet_path
from .request import build_request

# options of `vjp run` that print or write a run's output: the live view has its own keys for what it saves
_NOT_LIVE = {"json_": "--json", "save": "--save", "dot": "--dot", "html": "--html", "full": "--full"}


def live_session(ctx: Any, expression: str | None, file: Path | None, o: dict[str, Any]) -> Any:
    """The session `vjp live` explores: a program's (live.ProgramSession) or a snippet's events."""
    given = [flag for key, flag in _NOT_LIVE.items() if o.get(key)]
    if given:
        raise UsageError(
            f"{', '.join(given)} {'does' if len(given) == 1 else 'do'} not apply to vjp live, which shows a "
            "full-screen view: s saves it as SVG (--svg FILE names the file), c prints the vjp run command "
            "of the current state.",
            hint="Use vjp run with the same arguments for a printed run.",
        )
    argv = list(ctx.meta.get("vjp_argv", []))
    if expression == "-" and file is None and o.get("snippet") is None:  # read as `vjp run -` reads it
        from .paths import is_snippet_text
        from .request import read_stdin
        from .support import limits_from_options

        text = read_stdin(limits_from_options(o).snippet_chars)
        if is_snippet_text(text):
            o["snippet"], expression = text, None
        else:
            expression = text
    if o.get("snippet") is not None or (file is None and is_snippet_path(expression)):
        from ..live_snippet import SnippetSession
        from .snippet import snippet_result

        return SnippetSession(snippet_result(ctx, expression, o, code=True), argv)  # code: the code view (n)
    for key, flag in (("trust", "--trust"), ("allow_read", "--allow-read")):
        if o.get(key):
            raise UsageError(f"{flag} applies to a snippet (a .py file or --snippet); a program runs no code.")
    o = {k: v for k, v in o.items() if k not in ("snippet", "save", "graph", "dot", "latex", "trust", "allow_read")}
    o["grad"] = list(o["grad"]) if o.get("grad") else None
    if o["digits"] is not None and not 1 <= o["digits"] <= 17:
        raise UsageError(f"--digits must be between 1 and 17, not {o['digits']}.")
    req = build_request(ctx, expression, file, **o)
    from ..live import ProgramSession

    return ProgramSession(req, argv)


def keys_from_the_terminal() -> None:
    """After a snippet or a program was read from a pipe (`cat f.py | vjp live -`), the keys come from the
    terminal itself, as `less` takes them: /dev/tty in place of stdin. Without one, nothing changes (and
    on_terminal says why the view cannot start)."""
    try:
        if sys.stdin is not None and sys.stdin.isatty():
            return
        tty = os.open("/dev/tty", os.O_RDWR)
    except (OSError, ValueError, AttributeError):
        return
    os.dup2(tty, 0)
    os.close(tty)


def on_terminal() -> bool:
    """Whether stdin and stdout are a terminal, which a full-screen view needs."""
    try:
        return sys.stdin.isatty() and sys.stdout.isatty()
    except (AttributeError, ValueError):  # closed, or replaced by an object without a descriptor
        return False


def live_command(ctx: Any, expression: str | None, file: Path | None, o: dict[str, Any]) -> str | None:
    """Run the app on a terminal; return the command line `c` asked for (printed after the screen is gone)."""
    from .support import distinct_files

    distinct_files(o, [file, expression])  # `s` writes --svg: never over the program being explored
    session = live_session(ctx, expression, file, o)
    if expression == "-" or o.get("snippet") == "-":
        keys_from_the_terminal()
    if not on_terminal():
        raise UsageError(
            "vjp live is a full-screen view and needs a terminal (stdin and stdout); this one is a pipe or a file.",
            hint="vjp run with the same arguments prints the same numbers.",
        )
    if o.get("color") == "never":  # Textual's own switch: a monochrome view, as NO_COLOR asks
        os.environ["NO_COLOR"] = "1"
    from ..render.live_app import LiveApp

    app = LiveApp(session, svg=o.get("svg"), seed=o.get("seed") or 0, digits=o.get("digits"))
    return app.run()
