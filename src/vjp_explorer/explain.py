"""`vjp explain`: the answer a learner came for, as plain data.

From a Result and the exact sympy Jacobian it builds: the cast (leaves,
intermediates, output, v), the symbolic Jacobian of each leaf with its
structure, and the per-term ledger x[j].grad = Σᵢ v[i]·∂y[i]/∂x[j].
Strings only leave here; the renderers never see sympy.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from .result import Result
from .result import element_label as _label

MAX_FORMULA_ENTRIES = 400  # formulas kept per leaf (the ledger keeps every term)


@dataclass
class Term:
    """One term v[i]·∂y[i]/∂x[j] of a grad element."""

    i: int
    y: str  # label of the output element, e.g. y[1]
    v_i: float
    dy_dx: float
    formula: str | None
    value: float
    share: float  # |term| / Σ|terms|


@dataclass
class LedgerEntry:
    """x[j].grad as a sum of terms; zero terms are counted, not listed."""

    leaf: str
    element: str
    j: int
    grad: float  # from backward(v)
    sum: float  # Σ of the terms (exact derivatives, in float64)
    terms: list[Term]
    zero_terms: int
    dominant: int | None  # i of the largest term


@dataclass
class LeafJacobianFormula:
    """The symbolic Jacobian block of one leaf."""

    leaf: str
    structure: str  # diagonal | block | dense | zero, from the exact formulas
    description: str
    generic: str | None  # one formula for all k, when the block is diagonal and uniform
    entries: list[dict[str, Any]] = field(default_factory=list)  # {i, j, y, x, formula}
    # entries that are 0 at these inputs only (the formula, or the program's structure, is not 0 there)
    numerical_zeros: int = 0
    numerical_cause: str | None = None


@dataclass
class Explanation:
    """Everything `vjp explain` shows."""

    cast: list[dict[str, Any]]
    summary: str
    formulas: dict[str, LeafJacobianFormula]
    ledger: dict[str, list[LedgerEntry]]
    ledger_source: str  # "sympy" (exact derivatives) or "autodiff" (numeric J) or "unavailable: ..."
    latex: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (non-finite numbers are cleaned by the JSON renderer's caller)."""
        from .result_json import clean as _clean

        def clean(obj: Any) -> Any:
            if isinstance(obj, dict):
                return {k: clean(v) for k, v in obj.items()}
            if isinstance(obj, list):
                return [clean(v) for v in obj]
            return _clean(obj) if isinstance(obj, float) else obj

        return clean(
            {
                "cast": self.cast,
                "summary": self.summary,
                "jacobian_formulas": {k: asdict(v) for k, v in self.formulas.items()},
                "ledger": {k: [asdict(e) for e in v] for k, v in self.ledger.items()},
                "ledger_source": self.ledger_source,
            }
        )


def build_explanation(res: Result, prog: Any, fwd: Any, sym: Any, limits: Any) -> Explanation:
    """Assemble the explanation; `sym` is the SymbolicJacobian (with formulas) or None."""
    latex = bool(res.meta.get("latex"))
    out = res.output_name
    out_shape = res.output.shape
    m = res.output.numel
    cast: list[dict[str, Any]] = []
    for n, inp in res.inputs.items():
        role = "leaf (requires_grad=True): gets a .grad" if inp.requires_grad else "constant: no grad, no Jacobian"
        cast.append({"name": n, "role": role, "shape": list(inp.value.shape)})
    for n, it in res.intermediates.items():
        if n == out:
            continue
        cast.append(
            {
                "name": n,
                "role": "intermediate (grad_fn set, not a leaf: .grad is not kept)",
                "shape": list(it.value.shape),
            }
        )
    cast.append({"name": out, "role": "the output (y): backward starts here", "shape": list(out_shape)})
    cast.append(
        {
            "name": "v",
            "role": f"the gradient argument: dL/d{out}, how much a downstream loss cares about "
            "each output (lives in output space)",
            "shape": list(res.grad.shape),
        }
    )
    leaves = res.leaves
    summary = (
        f"{out}.backward(v) computes, for every leaf element x[j], x[j].grad = Σᵢ v[i]·∂{out}[i]/∂x[j] "
        f"(that is Jᵀv): {m} output weight(s) v[i] combine the {m} row(s) of each Jacobian block into one number "
        "per input element. J itself is never built by backward; it is built here only to show it."
    )
    formulas: dict[str, LeafJacobianFormula] = {}
    ledger: dict[str, list[LedgerEntry]] = {}
    vflat = [float(x) for x in res.grad.flat]
    if sym is not None:
        source = "sympy"
    elif all(res.jacobians[n].value is not None for n in leaves):
        source = "autodiff"
    else:
        source = "unavailable: the Jacobian is too large to list term by term"
    for n in leaves:
        shape = res.inputs[n].value.shape
        nn = res.inputs[n].value.numel
        grads = res.grads[n]
        if sym is not None:
            values = sym.values[n]
            f_rows = sym.formulas.get(n)
        elif (jv := res.jacobians[n].value) is not None:
            values = [[float(jv.flat[i * nn + j]) for j in range(nn)] for i in range(m)]
            f_rows = None
        else:
            continue
        structure = res.jacobians[n].structure if n in res.jacobians else "dense"
        formulas[n] = _formula_block(n, out, out_shape, shape, values, f_rows, latex, structure)
        if formulas[n].numerical_zeros:
            formulas[n].numerical_cause = _zero_cause(prog, fwd, res.dtype)
        entries = []
        calls = res.backward_calls
        for j in _ledger_elements(nn, m):
            terms = []
            zero = 0
            for i in range(m):
                d = values[i][j]
                if vflat[i] == 0 or d == 0:
                    zero += 1
                    continue
                f = None
                if f_rows is not None:
                    f = _fmt_expr(f_rows[i][j], latex)
                    if f_rows[i][j].is_Add:  # v[i] × (a + b), not v[i] × a + b
                        f = f"({f})"
                terms.append(Term(i, _label(out, out_shape, i), vflat[i], d, f, vflat[i] * d * calls, 0.0))
            total_abs = math.fsum(abs(t.value) for t in terms if math.isfinite(t.value))
            for t in terms:
                t.share = (
                    abs(t.value) / total_abs
                    if total_abs and math.isfinite(t.value)
                    else (1.0 if not math.isfinite(t.value) else 0.0)
                )
            s = (
                math.fsum(t.value for t in terms)
                if all(math.isfinite(t.value) for t in terms)
                else sum(t.value for t in terms)
            )
            dominant = (
                max(terms, key=lambda t: abs(t.value) if math.isfinite(t.value) else math.inf).i if terms else None
            )
            entries.append(LedgerEntry(n, _label(n, shape, j), j, float(grads.flat[j]), s, terms, zero, dominant))
        ledger[n] = entries
    return Explanation(cast, summary, formulas, ledger, source, latex)


MAX_LEDGER_TERMS = 200_000  # terms kept in all per leaf; past it the ledger holds the first and last elements


def _ledger_elements(n: int, m: int) -> range | list[int]:
    """Which leaf elements get a ledger entry: all, unless that is more than MAX_LEDGER_TERMS terms."""
    if n * m <= MAX_LEDGER_TERMS:
        return range(n)
    keep = max(2, MAX_LEDGER_TERMS // max(m, 1) // 2)
    keep = min(keep, 50)
    return [*range(keep), *range(max(keep, n - keep), n)]


def _fmt_expr(e: Any, latex: bool) -> str:
    import sympy as sp

    if not latex:
        return sp.sstr(e)
    # b[1] -> b_{1}, W[0,1] -> W_{0,1}: subscripts, as a LaTeX reader expects
    names = {s: s.name.replace("[", "_{").replace("]", "}") for s in e.free_symbols if "[" in s.name}
    return sp.latex(e, symbol_names=names)


def _formula_block(
    leaf: str,
    out: str,
    out_shape: tuple[int, ...],
    shape: tuple[int, ...],
    values: list[list[float]],
    f_rows: list[list[Any]] | None,
    latex: bool,
    structure: str = "dense",
) -> LeafJacobianFormula:
    """The block's kind from its structural zeros only: those whose exact formula is identically 0 or, without
    formulas, those the program's structure implies (off the diagonal of an elementwise dependence). A zero
    that holds only at these inputs (a saturated tanh, a relu that is off, a zero factor) is counted apart,
    as numerical."""
    m = len(values)
    n = len(values[0]) if values else 0
    if f_rows is not None:
        nonzero = [(i, j) for i in range(m) for j in range(n) if f_rows[i][j] != 0]
    elif structure == "zero":
        nonzero = []
    elif structure == "diagonal" and m == n:
        nonzero = [(k, k) for k in range(n)]
    else:
        nonzero = [(i, j) for i in range(m) for j in range(n)]
    numerical = sum(1 for i, j in nonzero if values[i][j] == 0)
    block = _kind_of(leaf, out, m, n, nonzero, f_rows, latex, out_shape, shape, values)
    block.numerical_zeros = numerical
    if numerical:
        block.description += (
            f"; {numerical} of {m * n} entries are 0 at these inputs only (numerical zeros, not structural)"
        )
    return block


def _kind_of(
    leaf: str,
    out: str,
    m: int,
    n: int,
    nonzero: list[tuple[int, int]],
    f_rows: list[list[Any]] | None,
    latex: bool,
    out_shape: tuple[int, ...],
    shape: tuple[int, ...],
    values: list[list[float]],
) -> LeafJacobianFormula:
    if not nonzero:
        return LeafJacobianFormula(
            leaf, "zero", f"{leaf} does not influence {out}: every ∂{out}[i]/∂{leaf}[j] is 0.", None
        )
    diagonal = m == n and all(i == j for i, j in nonzero)
    if diagonal:
        kind = "diagonal"
        desc = (
            f"diagonal: each {out}[k] depends only on {leaf}[k], so backward(v) gives "
            f"{leaf}[k].grad = v[k]·∂{out}[k]/∂{leaf}[k]"
        )
    elif len(nonzero) == m * n:
        kind = "dense"
        desc = f"dense: every {out}[i] depends on every {leaf}[j], so each grad element mixes all of v"
    else:
        kind = "block"
        desc = (
            f"block: {m * n - len(nonzero)} of {m * n} entries are structurally zero, so each grad element "
            "mixes only part of v"
        )
    generic = _generic(leaf, out, out_shape, shape, f_rows, latex) if f_rows is not None and diagonal else None
    entries = [
        {
            "i": i,
            "j": j,
            "y": _label(out, out_shape, i),
            "x": _label(leaf, shape, j),
            "formula": _fmt_expr(f_rows[i][j], latex) if f_rows is not None else None,
            "value": values[i][j],
        }
        for i, j in nonzero[:MAX_FORMULA_ENTRIES]
    ]
    return LeafJacobianFormula(leaf, kind, desc, generic, entries)


def _zero_cause(prog: Any, fwd: Any, dtype: str) -> str:
    """Why entries of J are 0 at these inputs: the program's saturated or switched-off functions, found by
    running its trace again and looking at each one's values; else a zero factor."""
    import torch

    from .engine.nonfinite import _Recorder

    leaves = {n: val.v.detach() for n, val in fwd.env.items() if n in prog.free and hasattr(val.v, "detach")}
    rec = _Recorder(torch.float64 if dtype == "float64" else torch.float32)
    env = {n: type(fwd.env[n])(t) for n, t in leaves.items()}
    with torch.no_grad():
        for s in fwd.steps:
            rec.fixed = s.fixed  # the masks and made tensors of the forward
            env[s.target] = rec.value_of(s.expr, env)
    causes = []
    for expr, val in rec.made.values():
        func = getattr(expr, "func", None)
        if not isinstance(val.v, torch.Tensor) or func not in ("tanh", "sigmoid", "relu", "exp"):
            continue
        text = prog.source[expr.span[0] : expr.span[1]]
        r = val.v
        if func == "tanh" and (k := int((r.abs() == 1).sum())):
            causes.append(f"{text} rounds to ±1 at {k} element(s) ({dtype} saturates), where 1 - tanh² is 0")
        elif func == "sigmoid" and (k := int(((r == 0) | (r == 1)).sum())):
            causes.append(f"{text} rounds to 0 or 1 at {k} element(s) ({dtype} saturates), where s·(1 - s) is 0")
        elif func == "relu" and (k := int((r == 0).sum())):
            causes.append(f"{text} is off (its input ≤ 0) at {k} element(s), where its derivative is 0")
        elif func == "exp" and (k := int((r == 0).sum())):
            causes.append(f"{text} underflows to 0 at {k} element(s)")
    if not causes:
        return "a factor of the derivative is 0 at these inputs (a zero weight or input value)"
    return "; ".join(causes)


def _generic(
    leaf: str, out: str, out_shape: tuple[int, ...], shape: tuple[int, ...], f_rows: list[list[Any]], latex: bool
) -> str | None:
    """One formula in k for a uniform diagonal block (checked on every element), else None."""
    import sympy as sp

    m = len(f_rows)
    first = f_rows[0][0]
    idx0 = _label("", shape, 0)
    k_syms: dict[Any, Any] = {}
    for s in first.free_symbols:
        name = str(s)
        if name.endswith(idx0) and idx0:
            k_syms[s] = sp.Symbol(name[: -len(idx0)] + "[k]", real=True)
    if idx0 and not k_syms and first.free_symbols:
        return None
    template = first.xreplace(k_syms)
    for k in range(1, m):
        idx = _label("", shape, k)
        back = {v: sp.Symbol(str(v).replace("[k]", idx), real=True) for v in k_syms.values()}
        if template.xreplace(back) != f_rows[k][k]:
            return None
    if latex:
        lhs = (
            rf"\frac{{\partial {out}_{{k}}}}{{\partial {leaf}_{{k}}}}"
            if shape
            else rf"\frac{{\partial {out}}}{{\partial {leaf}}}"
        )
    else:
        lhs = f"∂{out}[k]/∂{leaf}[k]" if shape else f"∂{out}/∂{leaf}"
    body = _fmt_expr(template if shape else first, latex)
    return f"{lhs} = {body}"
