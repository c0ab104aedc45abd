"""A snippet's diagnoses (snippet/why.py) -> Rich: why it failed, after PyTorch's own error, in one screen."""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text

from ..snippet.result import Diagnosis
from ..snippet.source import visible

TITLES = {
    "inplace_modified": "a saved tensor was changed in place",
    "backward_twice": "backward through a freed graph",
    "grad_none": "no gradient",
    "nonscalar_output": "backward() of a non-scalar output",
    "no_grad_fn": "an output without a graph",
    "nonfinite_grad": "a nan or inf gradient",
}


def render(diagnoses: list[Diagnosis]) -> list[RenderableType]:
    """One block per diagnosis: its kind and line, what happened, and the fix; nothing where there are none."""
    parts: list[RenderableType] = []
    for d in diagnoses:
        head = Text(f"\nwhy ({d.kind}), line {d.line}: ", style="bold magenta")
        head.append(TITLES.get(d.kind, d.kind), style="magenta")
        parts.append(head)
        parts.append(Text(visible(d.text)))
        parts.append(Text("fix: " + visible(d.fix), style="green"))
    return parts
