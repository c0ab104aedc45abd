"""What an explained backward call tells a reader in words: notes on v and accumulation, the diagnosis of a
disagreement, and the autograd story behind PyTorch's own error messages. Plain data in, text out: the
confined child writes the notes and diagnosis into each event, the parent explains the snippet's exception.
"""

from __future__ import annotations

from typing import Any

from ..events import Event


def event_notes(event: Event, before: list[Any]) -> list[str]:
    """What a reader should know about this call: accumulation, the default v, a one-hot or all-ones v."""
    out = []
    y = event.outputs[0] if event.outputs else None
    if event.call != "torch.autograd.grad" and any(b is not None and bool(b.abs().sum() > 0) for b in before):
        out.append(
            "Some .grad already held values before this call: backward adds Jᵀv to them (gradients accumulate). "
            "Zero them (x.grad.zero_() or x.grad = None) between calls if that is not what you want."
        )
    if event.v_origin == "scalar default 1" and y is not None:
        out.append("The output is a single number, so backward() uses v = 1: the grads are the plain derivatives.")
    if event.v and y is not None and event.v_origin != "scalar default 1":
        flat = _flatten(event.v[0].values)
        if flat and all(x in (0.0, 1.0) for x in flat) and sum(flat) == 1:
            out.append(f"v is one-hot (element {flat.index(1.0)}): the grads are row {flat.index(1.0)} of J.")
        elif flat and len(flat) > 1 and all(x == 1.0 for x in flat):
            out.append("v is all ones: the grads are the column sums of J, the same as backward of y.sum().")
    if event.retain_graph and event.call != "torch.autograd.grad":
        out.append("retain_graph=True keeps the saved tensors, so another backward through this graph works.")
    if event.create_graph:
        out.append("create_graph=True records the backward pass itself, so these grads can be differentiated again.")
    return out


NO_GRADIENT = "got no gradient from this call"  # the note's words; snippet/why.py looks for them


def unreached_note(names: list[str]) -> str:
    """The note on a backward call that left parameters of a module it used without a gradient."""
    shown = ", ".join(f"`{n}`" for n in names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    it = "it" if len(names) == 1 else "them"
    return (
        f"{shown} {NO_GRADIENT}: backward never reached {it}, so .grad stays None and an optimizer's step skips {it}."
    )


def _flatten(x: Any) -> list[float]:
    if isinstance(x, list):
        return [v for item in x for v in _flatten(item)]
    return [x] if isinstance(x, (int, float)) else []


_UNIMPORTED = (
    "The snippet uses {name} without importing it (documentation snippets often assume `{imp}`): Python "
    "stops here, as it would. Add `{imp}` at its top."
)

_TRUST = "--trust runs the snippet as `python FILE.py` would, with your own rights, if you trust its code."
# what the confinement refused (confined/refusals.py), and what the user can do about it
REFUSALS = {
    "process": "The snippet runs confined, and a confined run may not start processes, so {attempt} failed."
    " {fix}" + _TRUST,
    "network": "The snippet runs confined, without network, so {attempt} failed. Fetch what it needs beforehand"
    " and let the snippet read that folder with --allow-read DIR; or: " + _TRUST,
    "files": "The snippet runs confined: it may read only Python's and the installed packages' files and the"
    " folders named with --allow-read DIR, read-only, and write only in its scratch folder (its working"
    " directory). --allow-read DIR lets it read a folder of yours; or: " + _TRUST,
    "cwd": "The snippet runs confined, in a scratch folder of its own as its working directory, not in the folder"
    " you ran vjp from, so a relative path is looked up there. --allow-read . lets it read the folder you run"
    " vjp from: its files then show in the snippet's working directory, read-only (what the snippet writes"
    " stays in the scratch folder). Or: " + _TRUST,
    "system": "The snippet runs confined, and the kernel refused what this line asked of it (a signal to another"
    " process, tracing one or changing its limits or priority, a socket, shared memory, a change of a file's mode,"
    " owner, times or attributes, reading a link, a change of the machine's settings: what a confined run may not"
    " do). " + _TRUST,
}
_ATTEMPT = {
    "process": "starting a process",
    "network": "reaching the network",
    "files": "the file access",
    "system": "the system call",
    "cwd": "the file",
}


def explain_refusal(kind: str, via: str = "", what: str = "") -> str:
    """Why a confined snippet's attempt failed (kind: process, network or files) and what to do about it."""
    attempt = f"{_ATTEMPT[kind]} through {via}" if via else f"{_ATTEMPT[kind]} ({what})" if what else _ATTEMPT[kind]
    fix = "num_workers=0 loads the same batches in the snippet's own process. " if "DataLoader" in via else ""
    return REFUSALS[kind].format(attempt=attempt, fix=fix)


ERRORS = [
    *[
        (f"name '{name}' is not defined", _UNIMPORTED.format(name=name, imp=imp))
        for name, imp in (
            ("torch", "import torch"),
            ("nn", "import torch.nn as nn"),
            ("F", "import torch.nn.functional as F"),
            ("np", "import numpy as np"),
        )
    ],
    (
        "Trying to backward through the graph a second time",
        "The first backward through this graph freed the intermediate values it saved (that is what keeps memory "
        "low). Pass retain_graph=True to the earlier call if you really need a second backward through the same "
        "graph (for example two different v), or recompute the forward before calling backward again. In a loop, "
        "the usual cause is a value carried from the step before (an RNN's hidden state, a running total) that "
        "still holds that step's graph: detach it where the new step begins (h = h.detach()).",
    ),
    (
        "No module named",
        "The snippet runs with vjp's own Python and the packages installed beside it, where this module is not "
        "installed; `python FILE.py` in another environment may have it. Install it into vjp's environment (the "
        "same pip that installed vjp-explorer) to run the snippet here.",
    ),
    (
        "grad can be implicitly created only for scalar outputs",
        "backward() without an argument uses v = 1, which only exists when the output is one number. Give v "
        "with the output's shape (y.backward(torch.ones_like(y)) gives the column sums of J, the same as "
        "y.sum().backward()), or reduce the output to a scalar first.",
    ),
    (
        "does not require grad and does not have a grad_fn",
        "Nothing this output was computed from requires grad, so there is no graph to walk back through: create "
        "the inputs with requires_grad=True (or call .requires_grad_()), and do not compute the output under "
        "torch.no_grad() or from .detach()/.data.",
    ),
    (
        "modified by an inplace operation",
        "A tensor that the graph saved for backward was changed in place afterwards (its version counter moved "
        "on). Use the out-of-place form (x = x + 1 instead of x += 1), or .clone() the tensor before changing it.",
    ),
    (
        "pin_memory=True requires a CUDA or other accelerator backend",
        "Pinned memory needs an accelerator; on a machine without one torch raises here. Leave out "
        "pin_memory=True to run the line here (torch.empty then returns uninitialised memory: its numbers are "
        "whatever was in memory, so values the source printed from it cannot be reproduced).",
    ),
    (
        "received an invalid combination of arguments",
        "None of the forms torch lists matches the arguments given (what it got is named first): compare the "
        "call with them, argument by argument and keyword by keyword.",
    ),
    (
        "Mismatch in shape",
        "v lives in the output's space: it needs one entry per output element, the output's shape.",
    ),
    (
        "appears to not have been used in the graph",
        "One of the inputs does not take part in computing the output: pass allow_unused=True to get None for "
        "it, or leave it out of inputs.",
    ),
    (
        "Only Tensors of floating point",
        "Integer tensors cannot require grad: write the values as floats (1.0) or pass dtype=torch.float32.",
    ),
    (
        "a leaf Variable that requires grad is being used in an in-place operation",
        "Changing a leaf that requires grad in place would corrupt the graph: update it inside "
        "`with torch.no_grad():` (as optimizers do), or work on a clone.",
    ),
    (
        "Boolean value of Tensor with more than one value is ambiguous",
        "An if or while condition needs one number: reduce the tensor first (.all(), .any(), .item()).",
    ),
]


def explain_error(message: str) -> str | None:
    for pattern, text in ERRORS:
        if pattern in message:
            return text
    return None
