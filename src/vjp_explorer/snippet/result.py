"""The snippet mode's result: plain data (numbers, lists, strings), shown by render/snippet_view.py."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

# the one Check type of every door; the tolerances are engine/tolerance.py's table
from ..verdicts import Check

SNIPPET_SCHEMA_VERSION = 2  # 2: each check has "independent", max_rel_diff and the lists of result.Check


@dataclass
class TensorInfo:
    """A tensor as the snippet held it: shape, dtype and values (nested lists, float64)."""

    name: str
    shape: list[int]
    dtype: str
    values: Any


@dataclass
class LeafGrad:
    """What one backward/grad call did to one input: its .grad before and after, and Jᵀv from the Jacobian."""

    name: str
    shape: list[int]
    dtype: str
    value: Any
    grad_before: Any  # None where .grad was None
    grad_after: Any
    grad: Any  # what this call contributed: after - before for backward, the returned tensor for grad
    jtv: Any = None  # Jᵀv from the explicit Jacobian (float64), None where it was not built
    jacobian: Any = None  # rows: output elements (flattened), columns: this input's elements (flattened)
    finite_difference: Any = None  # Jᵀv from central differences of the replayed forward (float64)
    grad_norm: float | None = None  # the 2-norm of `grad`, kept where the tensors are not (a folded loop)
    omitted: list[str] = field(default_factory=list)  # arrays above left out (None) for size (confined/payload.py)


@dataclass
class Event:
    """One backward or grad call of the snippet, explained."""

    index: int
    line: int
    source: str
    call: str  # Tensor.backward, torch.autograd.backward, torch.autograd.grad
    outputs: list[TensorInfo]
    v: list[TensorInfo]
    v_origin: str  # given | scalar default 1 | grad_outputs
    retain_graph: bool
    create_graph: bool
    inputs: list[LeafGrad]
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    diagnosis: str | None = None  # where a nan/inf entered the backward pass, and the fix
    graph: list[dict[str, Any]] | None = None  # with --graph: the nodes backward ran (see snippet/graph.py)
    results: list[TensorInfo] = field(default_factory=list)  # a functional call's derivative (J, Jᵀv, Jv, H)
    reference: list[TensorInfo] = field(default_factory=list)  # the same from finite differences
    # with --code: the script of this call's backward (backward_code/files.py: file, nodes, reproduces, ...)
    backward_code: dict[str, Any] | None = None
    # inputs its forward met on a kink or tie: {"op", "line", "elements", "count", "convention"} (docs/why.md)
    kinks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def status(self) -> str:
        states = {c.status for c in self.checks}
        for verdict in ("disagree", "agree", "inconclusive"):
            if verdict in states:
                return verdict
        return "skipped"


@dataclass
class Claim:
    """What the pasted source says a statement printed, against what it printed now."""

    text: list[str]
    origin: str  # transcript | comment
    matches: bool | None  # None: not compared (a pre-0.4 print, a comment on a statement that printed nothing)


@dataclass
class Step:
    """One top-level statement of the transcript and what it printed."""

    line: int
    end_line: int
    source: str
    stdout: str
    events: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    claim: Claim | None = None


@dataclass
class AtExit:
    """What the functions the snippet registered with atexit printed: they run after its last statement (or
    its traceback, or its sys.exit), as at the end of `python FILE.py`."""

    stdout: str
    warnings: list[str] = field(default_factory=list)


@dataclass
class RaisedError:
    """Where the snippet raised, as plain Python with torch would, and what it means here."""

    line: int
    source: str
    type: str
    message: str
    explanation: str | None


@dataclass
class Diagnosis:
    """Why the snippet failed, in its own names and lines (docs/why.md): one of the six KINDS of snippet/why.py."""

    kind: str
    tensor: str  # the snippet's own name for it: `h`, `model.fc1.weight`
    line: int  # where the failure surfaced: the backward call, or the line that read .grad
    cause: dict[str, Any]  # {"line": N or None, "op": "..."}: what caused it (see docs/why.md per kind)
    fix: str
    text: str  # the diagnosis in words
    saved: dict[str, Any] | None = None  # inplace_modified: {"line": N, "op": "..."} that saved the tensor
    spurious: bool | None = None  # nonfinite_grad: the exact derivative is finite there (None: not known)
    # nonfinite_grad: its op's input on a kink (sqrt at 0), as Event.kinks has them
    kinks: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object: `saved` only for inplace_modified, `spurious` and `kinks` only for nonfinite_grad."""
        d = asdict(self)
        if self.kind != "inplace_modified":
            del d["saved"]
        if self.kind != "nonfinite_grad":
            del d["spurious"], d["kinks"]
        return d


@dataclass
class SnippetResult:
    """A whole snippet run: its transcript, its backward events, and the error it stopped at, if any."""

    label: str
    seed: int
    seed_given: bool
    repl: bool
    torch_version: str
    steps: list[Step]
    events: list[Event]
    error: RaisedError | None
    notes: list[str]
    stdout: str
    kind: str = "snippet"  # or "check" (vjp check: one call of the user's own function)
    # the tool stopped the snippet (a limit, a crash): what ran until then is above; the error itself
    stopped: Any = None  # an errors.VjpError
    at_exit: AtExit | None = None  # output of the snippet's atexit functions (also the end of `stdout`)
    diagnoses: list[Diagnosis] = field(default_factory=list)  # why it failed (docs/why.md), after its own error

    @property
    def exit_code(self) -> int:
        from ..errors import ExitCode

        if self.stopped is not None:
            return int(self.stopped.exit_code)
        if any(e.status == "disagree" for e in self.events):
            return int(ExitCode.DISAGREE)
        if self.error is not None:
            return int(ExitCode.SNIPPET_RAISED)
        return int(ExitCode.OK)

    def _repr_html_(self) -> str | None:
        """In Jupyter, the result shows itself as the terminal would show it (see display.py)."""
        from .. import display

        return display.html(self)

    def __rich__(self) -> Any:
        """The transcript, for `rich.print(r)` and a Rich console."""
        from .. import display

        return display.rich(self)

    def __str__(self) -> str:
        """The transcript as plain text, for `print(r)`."""
        from .. import display

        return display.text(self)

    def __repr__(self) -> str:
        bad = sum(1 for e in self.events if e.status == "disagree")
        said = f"{bad} disagree" if bad else "none disagrees" if self.events else "no call"
        stop = f", stopped: {self.stopped.message}" if self.stopped is not None else ""
        raised = f", raised {self.error.type} at line {self.error.line}" if self.error is not None else ""
        n = len(self.events)
        return (
            f"<SnippetResult {self.label!r}: {n} backward/grad call{'s' if n != 1 else ''}, {said}{raised}{stop}, "
            f"exit {self.exit_code}>"
        )

    def to_dict(self) -> dict[str, Any]:
        d = {
            "schema": SNIPPET_SCHEMA_VERSION,
            self.kind: {
                "source": self.label,
                "seed": self.seed,
                "seed_given": self.seed_given,
                "repl": self.repl,
                "torch": self.torch_version,
                "stdout": self.stdout,
                "steps": [asdict(s) for s in self.steps],
                "events": [
                    {**asdict(e), "status": e.status, "grads": {x.name: x.grad for x in e.inputs}} for e in self.events
                ],
                "error": None if self.error is None else asdict(self.error),
                "at_exit": None if self.at_exit is None else asdict(self.at_exit),
                "stopped": None
                if self.stopped is None
                else {"message": self.stopped.message, "hint": self.stopped.hint},
                "notes": list(self.notes),
                "diagnoses": [d.to_dict() for d in self.diagnoses],
                "exit_code": self.exit_code,
            },
        }
        return _json_safe(d)


def _json_safe(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x


def element_index(shape: Any, flat: int) -> str:
    """The index of flat position `flat` in a tensor of `shape`, as `[i, j]` (empty for a 0-d tensor)."""
    if len(shape) == 0:
        return ""
    idx = []
    for d in reversed(list(shape)):
        idx.append(flat % d)
        flat //= d
    return "[" + ", ".join(str(i) for i in reversed(idx)) + "]"
