"""Snippet mode: run pasted PyTorch autograd code through the whitelist interpreter and explain each backward.

`run_snippet(text, label, ...)` is the whole pipeline: read the text (REPL prompts, claimed output), parse,
interpret statement by statement with real torch, explain every backward/grad call as it happens, and return
a plain `SnippetResult`.
"""

from __future__ import annotations

from .pipeline import run_snippet
from .result import SnippetResult

__all__ = ["run_snippet", "SnippetResult"]
