"""`vjp live`'s model: one v at a time and what backward(v) leaves under it, as plain data (no rich, no textual).

A Frame is one state of the live view: v, J, Jᵀv and each leaf's .grad, the checks and the graph. A session
makes Frames. When every leaf's J is materialised a new v is answered at once from J (Jᵀv is a product, no
backward runs); the pipeline then runs again with that v in the background (a real backward(v), every check,
the graph's cotangents), and its Frame replaces the quick one. Without J, only the pipeline answers.
A snippet's events carry J where the snippet door built it; re-weighting one needs that J.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .errors import UsageError
from .explain import LedgerEntry, Term
from .result import Check, Result, element_label, headline


@dataclass(frozen=True)
class LeafFrame:
    """One leaf under the current v: its values, .grad, Jᵀv and its block of J (rows: output elements)."""

    name: str
    shape: tuple[int, ...]
    value: np.ndarray  # flat, float64
    grad: np.ndarray | None  # what backward(v) leaves in .grad (flat)
    jtv: np.ndarray | None  # Jᵀv from J (flat), times the backward calls (as .grad holds it, as vjp run shows it)
    jacobian: np.ndarray | None  # m x n, None where not materialised
    structure: str = "dense"
    formulas: dict[tuple[int, int], str] = field(default_factory=dict)  # sympy's ∂y[i]/∂x[j]
    exact: dict[tuple[int, int], float] = field(default_factory=dict)  # and its value

    @property
    def numel(self) -> int:
        return int(self.value.size)


@dataclass(frozen=True)
class Frame:
    """What the live view shows for one v."""

    title: str
    out_name: str
    out_shape: tuple[int, ...]
    output: np.ndarray  # flat
    v: np.ndarray  # flat, float64
    v_label: str  # where v came from: given, e1, ones, random (seed 3), upstream sum(y**2)
    leaves: tuple[LeafFrame, ...]
    checks: tuple[Check, ...]
    checks_note: str  # for which v the checks ran
    grad_from: str  # "backward" (the pipeline ran with this v) or "J" (Jᵀv from the materialised J)
    graph: list[dict[str, Any]] | None = None
    graph_note: str = ""
    calls: int = 1  # backward calls: .grad accumulates
    dtype: str = "float32"
    ledger_source: str = ""  # "sympy" or "autodiff", as vjp explain says
    readonly: str | None = None  # why v cannot be changed here
    pending: bool = False  # a background run for this v is under way
    code: Any = None  # what the call's backward script is written from (live_code.py steps through it)
    call: int = 1  # the call's number: its script is callN.py

    @property
    def m(self) -> int:
        return int(self.v.size)

    @property
    def one_hot(self) -> int | None:
        """i where v is e_i, else None."""
        nz = np.flatnonzero(self.v)
        return int(nz[0]) if nz.size == 1 and self.v[nz[0]] == 1.0 else None

    @property
    def headline(self) -> str:
        return headline(list(self.checks)) if self.checks else "no checks ran"

    def leaf(self, name: str) -> LeafFrame:
        return next(lf for lf in self.leaves if lf.name == name)


def _flat(data: Any) -> np.ndarray:
    flat = data.flat if hasattr(data, "flat") else data
    if isinstance(flat, memoryview):
        return np.asarray(flat, dtype=np.float64).reshape(-1)
    return np.asarray(list(flat) if not isinstance(flat, list | np.ndarray) else flat, dtype=np.float64).reshape(-1)


def reweigh(frame: Frame, v: np.ndarray, label: str) -> Frame:
    """The frame under a new v, from J alone: Jᵀv is a product with the materialised J, no backward runs.

    Raises ValueError where a leaf's J is not materialised (the caller runs the pipeline instead)."""
    if any(lf.jacobian is None for lf in frame.leaves):
        raise ValueError("J is not materialised")
    leaves = []
    for lf in frame.leaves:
        assert lf.jacobian is not None
        # einsum's own loop, not BLAS: OpenBLAS's threads spin after a product and took ~90 ms of CPU from
        # the view per change at 10^6 entries on 2 cores (bench/live.py); one pass over J is as fast
        jtv = np.einsum("ij,i->j", lf.jacobian, v) * frame.calls  # as many times as backward ran, as vjp run
        leaves.append(replace(lf, jtv=jtv, grad=jtv))
    return replace(frame, v=v, v_label=label, leaves=tuple(leaves), grad_from="J")


def ledger(frame: Frame, leaf: str, j: int) -> LedgerEntry:
    """x[j].grad = Σᵢ v[i]·∂y[i]/∂x[j] under the frame's v, every non-zero term, sympy's formula where it has one.

    The terms and their shares are those of `vjp explain` (explain.Term): the derivative is sympy's exact value
    where it gave one, else J's entry."""
    lf = frame.leaf(leaf)
    if lf.jacobian is None:
        raise ValueError("J is not materialised")
    column = lf.jacobian[:, j]
    rows = np.flatnonzero((frame.v != 0) & (column != 0))
    d = column[rows]
    if lf.exact:  # sympy's values where it gave them
        d = np.array([lf.exact.get((i, j), x) for i, x in zip(rows.tolist(), d.tolist(), strict=True)])
    values = frame.v[rows] * d * frame.calls
    out, shape = frame.out_name, frame.out_shape
    terms = [
        Term(i, element_label(out, shape, i), v_i, d_i, _parenthesised(lf.formulas.get((i, j))), value, 0.0)
        for i, v_i, d_i, value in zip(rows.tolist(), frame.v[rows].tolist(), d.tolist(), values.tolist(), strict=True)
    ]
    zero = frame.m - len(terms)
    total = math.fsum(abs(t.value) for t in terms if math.isfinite(t.value))
    for t in terms:
        t.share = abs(t.value) / total if total and math.isfinite(t.value) else (0.0 if total else 1.0)
    finite = all(math.isfinite(t.value) for t in terms)
    s = math.fsum(t.value for t in terms) if finite else sum(t.value for t in terms)
    dominant = max(terms, key=lambda t: abs(t.value) if math.isfinite(t.value) else math.inf).i if terms else None
    grad = float(lf.grad[j]) if lf.grad is not None else s
    return LedgerEntry(leaf, element_label(leaf, lf.shape, j), j, grad, s, terms, zero, dominant)


def _parenthesised(f: str | None) -> str | None:
    """v[i] × (a + b), not v[i] × a + b."""
    return f"({f})" if f is not None and any(op in f.lstrip("-") for op in "+-") else f


def parse_v(text: str, frame: Frame) -> np.ndarray:
    """A v typed in: numbers of the output's shape (or as many, flat), or `ones`; a one-paragraph error else."""
    from .errors import Origin
    from .language.values import parse_value

    spec = parse_value(text.strip(), Origin("v", "--grad"), allow_ones=True)
    if spec.generator == "ones" or text.strip() == "ones":
        return np.ones(frame.m)
    if spec.data is None:
        raise UsageError(f"v: type the numbers themselves (or ones), not {spec.text!r}.")
    if len(spec.data) != frame.m:
        shape = ", ".join(map(str, frame.out_shape))
        raise UsageError(
            f"v has {len(spec.data)} number(s) but the output {frame.out_name} has {frame.m} (shape [{shape}]): "
            "v lives in output space, one weight per output element."
        )
    return np.asarray(spec.data, dtype=np.float64)


def basis(frame: Frame) -> tuple[np.ndarray, str]:
    """The next basis vector after the current v: e0 first, then e1, ... (one row of J each), round again."""
    now = frame.one_hot
    i = 0 if now is None else (now + 1) % frame.m
    v = np.zeros(frame.m)
    v[i] = 1.0
    return v, f"e{i}: picks row {element_label(frame.out_name, frame.out_shape, i)} of J"


def random_v(frame: Frame, seed: int) -> tuple[np.ndarray, str]:
    """A random v (standard normal), seeded, so that the state can be told and reproduced."""
    return np.random.default_rng(seed).standard_normal(frame.m), f"random (numpy, seed {seed})"


def v_text(v: np.ndarray, shape: tuple[int, ...], dtype: str) -> str:
    """v as --grad takes it: 0.1,1,0.0001, or nested [[1,2],[3,4]]; the shortest digits that give the same dtype."""

    def num(x: float) -> str:
        value = np.float32(x) if dtype == "float32" else np.float64(x)
        return np.format_float_positional(value, unique=True, trim="-")

    if len(shape) <= 1:
        return ",".join(num(x) for x in v)

    def nest(flat: list[float], dims: tuple[int, ...]) -> str:
        if len(dims) == 1:
            return "[" + ",".join(num(x) for x in flat) + "]"
        step = len(flat) // dims[0]
        return "[" + ",".join(nest(flat[k * step : (k + 1) * step], dims[1:]) for k in range(dims[0])) + "]"

    return nest([float(x) for x in v], shape)


# options of the command line a reproduction leaves out: v is given anew, the others only concern the live view
_DROPPED = {"--grad": True, "--upstream": True, "--svg": True, "--color": True, "--graph": False, "--debug": False}


def command_line(argv: list[str], frame: Frame) -> str:
    """`vjp run ... --grad <v>`: the command that reproduces the current state (argv: what `vjp live` was given)."""
    kept: list[str] = []
    skip = False
    for a in argv:
        if skip:
            skip = False
            continue
        name, eq, _ = a.partition("=")
        if name in _DROPPED:
            skip = _DROPPED[name] and not eq
            continue
        kept.append(a)
    if frame.readonly is None:
        kept += ["--grad", v_text(frame.v, frame.out_shape, frame.dtype)]
    return shlex.join(["vjp", "run", *kept])


def program_frame(res: Result, label: str) -> Frame:
    """The Frame of a pipeline run: its v, its real .grad and checks, J and sympy's formulas where they exist."""
    m = res.output.numel
    formulas = res.explanation.formulas if res.explanation is not None else {}
    leaves = []
    for name in res.leaves:
        inp = res.inputs[name]
        jac = res.jacobians.get(name)
        jm = _flat(jac.value).reshape(m, inp.value.numel) if jac is not None and jac.value is not None else None
        f, exact = {}, {}
        if name in formulas:
            for e in formulas[name].entries:
                exact[(e["i"], e["j"])] = float(e["value"])
                if e["formula"] is not None:
                    f[(e["i"], e["j"])] = e["formula"]
        jtv = res.jtv.get(name)
        leaves.append(
            LeafFrame(
                name, inp.value.shape, _flat(inp.value), _flat(res.grads[name]),
                _flat(jtv) if jtv is not None else None, jm, jac.structure if jac else "dense", f, exact,
            )
        )  # fmt: skip
    v = _flat(res.grad)
    return Frame(
        title=res.program,
        out_name=res.output_name,
        out_shape=res.output.shape,
        output=_flat(res.output),
        v=v,
        v_label=label,
        leaves=tuple(leaves),
        checks=tuple(res.checks.values()),
        checks_note="ran with this v",
        grad_from="backward",
        graph=res.graph,
        graph_note="the cotangents backward(v) sent under this v",
        code=res.backward_code,
        calls=res.backward_calls,
        dtype=res.dtype,
        ledger_source=res.explanation.ledger_source if res.explanation is not None else "",
    )


class ProgramSession:
    """A program (or an expression file) explored live: the pipeline's Request, run again for each v asked for."""

    kind = "program"

    def __init__(self, req: Any, argv: list[str]) -> None:
        from .api import explore

        self.req = replace(req, explain=True, graph=True, code=True)  # code: the code view (n)
        self.argv = argv
        self.result = explore(self.req)
        self.frame = program_frame(self.result, self.result.grad_source)
        self.frames = [self.frame]  # one per event; a program has one

    def select(self, k: int) -> Frame:
        return self.frame

    def set_v(self, v: np.ndarray, label: str) -> Frame:
        """The frame at once: from J where it is materialised, else the old numbers marked as pending."""
        try:
            frame = reweigh(self.frame, v, label)
            note = "ran with the previous v; running again with this one"
        except ValueError:
            frame = replace(self.frame, v=v, v_label=label)
            note = "running backward(v) with this v (J is not materialised)"
        self.frame = replace(frame, checks_note=note, graph_note="for the previous v; running again", pending=True)
        return self.frame

    def recompute(self, v: np.ndarray, label: str) -> Frame:
        """A real backward(v) through the pipeline, every check and the graph's cotangents (blocking)."""
        from .api import explore

        shaped = v.reshape(self.frame.out_shape).tolist() if self.frame.out_shape else float(v[0])
        req = replace(self.req, grad=shaped, more_grads=(), upstream=None, expected=None, expected_dropped=False)
        return program_frame(explore(req), label)

    def upstream(self, loss: str) -> tuple[np.ndarray, str]:
        """v = dL/dy for a loss written in y (as --upstream), computed by the pipeline (blocking)."""
        from .api import explore

        if not loss.strip():
            raise UsageError("Type a loss written in the output, e.g. sum(y**2).")
        req = replace(self.req, grad=None, more_grads=(), upstream=loss, expected=None, expected_dropped=False)
        res = explore(req)
        return _flat(res.grad), f"upstream {loss.strip()}"

    def accept(self, frame: Frame) -> bool:
        """Take a background run's frame if v has not changed since it was asked for."""
        if frame.v.shape != self.frame.v.shape or not np.array_equal(frame.v, self.frame.v):
            return False
        self.frame = replace(frame, v_label=self.frame.v_label)
        self.frames = [self.frame]
        return True

    def command_line(self) -> str:
        return command_line(self.argv, self.frame)
