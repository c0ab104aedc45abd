"""The files a command writes beside its output (--svg, --html, --dot, --save): checked before the run, and
each one said on stderr once written, so that a long run never ends in a path it cannot write."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .errors import UsageError


def check_writable(option: str, path: Path) -> None:
    """Refuse, before any work, a path the file cannot be written to: a folder that does not exist, a
    folder in its place, a file or folder we may not write."""
    shown = str(path)
    parent = path.parent
    if not parent.is_dir():
        raise UsageError(f"{option} {shown}: the folder {str(parent)!r} does not exist.", hint="Create it first.")
    if path.is_dir():
        raise UsageError(f"{option} {shown}: is a folder; give a file name, e.g. {option} {path / 'out'}.")
    if path.exists() and not os.access(path, os.W_OK):
        raise UsageError(f"{option} {shown}: the file exists and may not be written.")
    if not path.exists() and not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {shown}: the folder {str(parent)!r} may not be written.")
    if not path.exists():  # access() says yes to root everywhere (/proc too): make the file once, and remove it
        try:
            with open(path, "x"):
                pass
            path.unlink()
        except OSError as e:
            raise UsageError(f"{option} {shown}: cannot be written ({e.strerror}).") from None


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file (the same file through a link too, or the same path not yet made)."""
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
        return a.resolve() == b.resolve()
    except (OSError, ValueError, RuntimeError):
        return False


def wrote(path: Path, what: str) -> None:
    """Say on stderr what a file holds once it is written: `wrote run.svg (what the terminal shows, SVG)`."""
    try:
        sys.stderr.write(f"wrote {path} ({what})\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr closed or full: the file is written all the same
        pass
