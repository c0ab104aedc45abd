"""Snippet mode: pasted PyTorch autograd code run as real Python in a confined child, each backward explained.

`run_snippet(text, label, ...)` is the whole door: read the text (REPL prompts, claimed output), let Python
refuse what it would refuse, run it in the child the operating system confines (confined/), which observes
every backward/grad call, and return a plain `SnippetResult`.
"""

from __future__ import annotations

from .door import run_snippet
from .result import SnippetResult

__all__ = ["run_snippet", "SnippetResult"]
