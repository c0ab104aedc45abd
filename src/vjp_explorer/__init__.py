"""vjp-explorer: see what `y.backward(v)` computes: Jᵀv, term by term, checked three ways."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .api import Request, explore
    from .errors import ExitCode, VjpError
    from .result import Result

__all__ = ["ExitCode", "Request", "Result", "VjpError", "__version__", "explore"]

_WHERE = {"Request": "api", "explore": "api", "ExitCode": "errors", "VjpError": "errors", "Result": "result"}


def __getattr__(name: str) -> Any:
    # imported on first use, so that `vjp --help` loads none of the library
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
