"""The result of one exploration: plain Python data, fed to every renderer.

Nothing here imports torch or sympy, and nothing here runs either: tensors arrive
as TensorData, a numpy array (a view of the tensor's buffer, so big tensors cost no
copy; a constant as a zero-stride view) with summary statistics worked out by the
engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import ExitCode

# a check and its verdicts live in verdicts.py (no numpy); the names stay importable from here
# the one format of an element's label (`W[0,1]`), shared by every door and view
from .verdicts import INDEPENDENT, ROUTE, VERDICTS, Check, Tolerance, element_label, headline, index_label, unravel  # noqa: F401  # noqa: F401


@dataclass(frozen=True)
class Stats:
    """Summary of a tensor: for big ones, instead of every element."""

    min: float
    max: float
    norm: float
    nan: int
    inf: int


class TensorData(np.ndarray):
    """A tensor's values: a numpy array (so `np.asarray(r.grads["b"])` and `torch.as_tensor(...)` give the
    numbers), carrying the summary statistics the engine worked out once, so that no view computes them.

    Slices and arithmetic give plain numpy arrays (their statistics would differ); a reshape keeps them.
    A constant tensor (3*a's diagonal) is one number seen n times: a zero-stride view, not n copies.
    A tensor of more dimensions than numpy holds (64: a Jacobian of two deep tensors) is held flat;
    `dims` is then its shape, and `tolist()` nests by it."""

    stats: Stats
    _dims: tuple[int, ...] | None

    def __new__(cls, values: Any, stats: Stats, dims: tuple[int, ...] | None = None) -> TensorData:
        obj = np.asarray(values).view(cls)
        obj.stats = stats
        obj._dims = dims if dims is not None and tuple(dims) != obj.shape else None
        return obj

    def __array_finalize__(self, obj: Any) -> None:
        self.stats = getattr(obj, "stats", None)  # type: ignore[assignment]
        self._dims = None

    @property
    def dims(self) -> tuple[int, ...]:
        """The tensor's shape: `shape`, but for a tensor of more than 64 dimensions, held flat."""
        return self.shape if self._dims is None else self._dims

    def tolist(self) -> Any:
        """The values as nested lists (a bare number for a 0-d tensor), nested by `dims`."""
        if self._dims is None:
            return self.view(np.ndarray).tolist()
        out: Any = self.view(np.ndarray).tolist()
        for n in reversed(self._dims[1:]):
            out = [out[i : i + n] for i in range(0, len(out), n)]
        return out

    def __array_wrap__(self, out: Any, context: Any = None, return_scalar: bool = False) -> Any:
        out = np.asarray(out).view(np.ndarray)
        return out[()] if return_scalar else out

    def __getitem__(self, k: Any) -> Any:
        return self.view(np.ndarray)[k]

    def __repr__(self) -> str:
        return repr(self.view(np.ndarray))

    def __reduce__(self) -> Any:  # pickles as the plain array it is
        return self.view(np.ndarray).__reduce__()

    @property
    def numel(self) -> int:
        """Number of elements."""
        return int(self.size)

    @property
    def flat(self) -> np.ndarray:  # type: ignore[override]
        """The values in row-major order, as a 1-d array (a view where the layout allows)."""
        return self.view(np.ndarray).reshape(-1)

    def index(self, k: int) -> tuple[int, ...]:
        """The multi-index of flat position k."""
        return unravel(self.dims, k)


@dataclass(frozen=True)
class Jacobian:
    """The explicit Jacobian of the output with respect to one leaf."""

    leaf: str
    shape: tuple[int, ...]  # out_shape + leaf_shape
    method: str
    structure: str  # diagonal | dense | zero
    value: TensorData | None  # None where not materialised
    diagonal: TensorData | None = None  # for structure == diagonal: dy[k]/dx[k]
    reason: str | None = None
    why: str = ""  # why this method was chosen
    same_pass: bool = False  # Jᵀv from J is .grad itself: J's diagonal came from backward's own pass (v = ones)


@dataclass(frozen=True)
class Input:
    """A free variable of the program: a leaf (requires_grad) or a constant."""

    name: str
    value: TensorData
    requires_grad: bool
    source: str  # the value text it came from


@dataclass(frozen=True)
class Intermediate:
    """An assigned variable: its final value and the upstream gradient reaching it."""

    name: str
    value: TensorData
    grad: TensorData | None


@dataclass(frozen=True)
class Note:
    """An explanation shown only when it applies (code is stable, text is for people)."""

    code: str
    text: str


@dataclass(frozen=True)
class Control:
    """What control flow did at these inputs: the path the graph recorded."""

    kind: str  # while | for | if
    line: int
    count: int  # iterations run, or 1/0 for the branch taken
    text: str


@dataclass(frozen=True)
class ProbeV:
    """One of several --grad values: its text, kind, v and the grads of backward(v) alone."""

    text: str
    source: str  # given | ones | one-hot | random
    value: TensorData
    grads: dict[str, TensorData]


@dataclass
class Probe:
    """v as a probe (docs/probes.md): what kind of v this run used and what it read off J."""

    source: str  # one-hot | basis | random | upstream | several
    texts: list[str]
    note: str
    element: str | None = None  # one-hot: the output element, y[3]
    index: tuple[int, ...] | None = None  # one-hot: its multi-index
    rows: dict[str, TensorData] | None = None  # basis: per leaf, the grads of backward(e_i) stacked
    method: str | None = None  # basis: how the one-hot backwards ran
    vs: list[ProbeV] = field(default_factory=list)  # several --grad
    coefficients: list[float] = field(default_factory=list)
    combined: TensorData | None = None  # Σ c_k v_k
    combined_grads: dict[str, TensorData] | None = None  # backward of it
    formula: str | None = None  # upstream: the loss as written
    loss: float | None = None  # upstream: L at the output's value


@dataclass(repr=False)
class Result:
    """Everything one run computed: inputs, output, v, grads, Jacobians, Jᵀv, checks.

    `print(r)` and `rich.print(r)` show the report `vjp run` shows; `repr(r)` is one line."""

    program: str
    output_name: str
    dtype: str
    device: str
    inputs: dict[str, Input]
    output: TensorData
    grad: TensorData  # the v of backward(v): PyTorch's `gradient` (also r.gradient); not a leaf's .grad
    grad_source: str  # "given", "default (scalar output)", "ones"
    backward_calls: int
    grads: dict[str, TensorData]
    jacobians: dict[str, Jacobian]
    jtv: dict[str, TensorData | None]
    symbolic: dict[str, TensorData] | None
    checks: dict[str, Check]
    notes: list[Note] = field(default_factory=list)
    control: list[Control] = field(default_factory=list)
    intermediates: dict[str, Intermediate] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    explanation: Any = None  # filled by `vjp explain` (see explain.py)
    meta: dict[str, Any] = field(default_factory=dict)
    probe: Probe | None = None  # --grad e3 / basis / random / several, --upstream
    graph: list[dict[str, Any]] | None = None  # --graph: the nodes of the real backward (engine/backward_graph.py)
    # --code: first what the script is written from (engine/backward_capture.py), then what backward_code/files.py
    # says of the script it wrote (file, nodes, reproduces, max_abs_diff, independent)
    backward_code: dict[str, Any] | None = None
    # per leaf, Jᵀv from finite differences of the program (nan where they are no reference); {} where the
    # route took random directions or did not run
    finite_difference: dict[str, TensorData] = field(default_factory=dict)
    retain_graph: bool = False  # calls 1 to N-1 passed retain_graph=True (--no-retain-graph: they did not)

    @property
    def gradient(self) -> TensorData:
        """v, as PyTorch names it (`y.backward(gradient)`): the same array as `grad` (the JSON's key)."""
        return self.grad

    @property
    def leaves(self) -> list[str]:
        """The names of the inputs that require grad, in program order."""
        return [n for n, i in self.inputs.items() if i.requires_grad]

    @property
    def exit_code(self) -> ExitCode:
        """0 if every check agrees (or was skipped), 3 if one disagrees."""
        if any(c.status == "disagree" for c in self.checks.values()):
            return ExitCode.DISAGREE
        return ExitCode.OK

    def _repr_html_(self) -> str | None:
        """In Jupyter, the result shows itself as the terminal would show it (see display.py)."""
        from . import display

        return display.html(self)

    def __rich__(self) -> Any:
        """The report, for `rich.print(r)` and a Rich console."""
        from . import display

        return display.rich(self)

    def __str__(self) -> str:
        """The report as plain text, for `print(r)`."""
        from . import display

        return display.text(self)

    def __repr__(self) -> str:
        shape = "[" + ", ".join(map(str, self.output.dims)) + "]"
        said = headline(list(self.checks.values()))
        return (
            f"<Result {self.program!r}: {self.output_name} shape {shape}, leaves {', '.join(self.leaves) or 'none'}, "
            f"exit {int(self.exit_code)}: {said}>"
        )

    def to_dict(self, full: bool = False) -> dict[str, Any]:
        """The JSON-ready form (see docs/json.md); non-finite numbers become strings; arrays of more than
        result_json.SUMMARY_ABOVE elements are summaries unless full."""
        from . import display

        return display.document(self, full=full)
