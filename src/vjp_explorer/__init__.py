"""vjp-explorer: see what `y.backward(v)` computes: Jᵀv, term by term, checked three ways."""

from __future__ import annotations

__version__ = "0.1.0"

from .api import Request, explore
from .errors import ExitCode, VjpError
from .result import Result

__all__ = ["ExitCode", "Request", "Result", "VjpError", "__version__", "explore"]
