"""The snippet mode's result: plain data (numbers, lists, strings), shown by render/snippet_view.py."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# the event (one backward/grad call) and the one Check type of every door live below the doors
from ..events import Event, LeafGrad, TensorInfo, element_index  # noqa: F401
from ..verdicts import Check  # noqa: F401


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
    raised: RaisedError | None = None  # a transcript's statement raised and the REPL went on to the next


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
    manual: Any = None  # snippet/manual.py's Manual: its hand-written gradients judged; None where it has none

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
        """The JSON document (docs/json.md): kind "snippet", or "check" for `vjp check`."""
        from .. import display

        return display.document(self)
