"""torch.autograd.functional calls in snippets: jacobian, vjp, jvp and hessian, checked by finite differences.

The snippet's own function is called again by the interpreter (quietly, under no_grad, in float64) with
perturbed inputs, so the reference never goes through autograd: a Jacobian column, Jᵀv, Jv or a Hessian
entry from central differences, each with an error estimate from a second step size.
"""

from __future__ import annotations

import ast
import inspect
from typing import TYPE_CHECKING, Any

from .result import Check, Event, TensorInfo

if TYPE_CHECKING:
    from .interp import Interpreter

CHECKED = frozenset(f"torch.autograd.functional.{n}" for n in ("jacobian", "vjp", "jvp", "hessian"))
MAX_EVALS = 4_000  # calls of the snippet's function for one reference
WHAT = {
    "jacobian": "calls backward once per output element (one-hot v), or batches them with vectorize=True",
    "vjp": "one backward(v): Jᵀv without building J",
    "jvp": "Jv: the derivative along v (PyTorch computes it with the double-backward trick)",
    "hessian": "the Jacobian of the gradient: backward through a backward (create_graph=True)",
}


def explain(
    it: Interpreter,
    qualname: str,
    real: Any,
    args: list[Any],
    kwargs: dict[str, Any],
    node: ast.AST,
    value: Any,
    index: int,
) -> Event | None:
    """The event for a functional call that already ran (`value` is what it returned)."""
    import torch

    try:
        bound = inspect.signature(real).bind(*args, **kwargs)
    except TypeError:
        return None
    p = bound.arguments
    func, single = p.get("func"), isinstance(p.get("inputs"), torch.Tensor)
    if isinstance(value, torch.Tensor) and qualname.endswith(("jacobian", "hessian")) and not single:
        return None
    inputs = [p["inputs"]] if single else list(p.get("inputs") or ())
    if not callable(func) or not inputs or not all(isinstance(x, torch.Tensor) for x in inputs):
        return None
    kind = qualname.rsplit(".", 1)[-1]
    v = p.get("v")
    vs = [] if v is None else [v] if isinstance(v, torch.Tensor) else list(v)
    event = Event(
        index,
        it.where(node),
        ast.unparse(node) if isinstance(node, ast.expr) else "",
        qualname,
        [],
        [TensorInfo("v", list(t.shape), str(t.dtype).removeprefix("torch."), _values(t)) for t in vs],
        "given" if vs else "none",
        False,
        bool(p.get("create_graph")),
        [],
    )
    event.notes.append(f"{kind}() {WHAT[kind]}.")
    got = _results(kind, value, single)
    event.results = [
        TensorInfo(f"{kind}[{k}]", list(t.shape), str(t.dtype).removeprefix("torch."), _values(t))
        for k, t in enumerate(got)
    ]
    compares = f"{kind}() vs central differences of the snippet's function (float64, no autograd)"
    trace, it.replay, it.quiet = it.replay, None, True
    try:
        refs, err = _reference(it, func, kind, inputs, vs)
    except _TooBig as e:
        event.checks.append(Check("finite_difference", "skipped", compares, reason=str(e)))
        return event
    except Exception as e:  # noqa: BLE001 - the function raised on a perturbed input: no reference there
        event.checks.append(
            Check(
                "finite_difference",
                "skipped",
                compares,
                reason=f"the function raised {type(e).__name__} on a perturbed input",
            )
        )
        return event
    finally:
        it.replay, it.quiet = trace, False
    event.reference = [TensorInfo(r.name, r.shape, "float64", r.values) for r in refs]
    worst, bad = 0.0, []
    atol, rtol = (1e-12, 1e-8) if all(x.dtype == torch.float64 for x in inputs) else (1e-6, 1e-4)
    if len(refs) != len(got):
        event.checks.append(
            Check(
                "finite_difference",
                "skipped",
                compares,
                reason=f"{kind}() returned {len(got)} blocks, the reference has {len(refs)}",
            )
        )
        return event
    for r, g, error in zip(refs, got, err, strict=True):
        ref = torch.tensor(r.values, dtype=torch.float64).reshape(-1)
        out = g.detach().to(torch.float64).reshape(-1)
        if out.numel() != ref.numel():
            bad.append(f"{r.name}: {out.numel()} numbers where {ref.numel()} were expected")
            continue
        diff = (out - ref).abs()
        worst = max(worst, float(diff.nan_to_num(0).max()) if diff.numel() else 0.0)
        over = ~(diff <= atol + rtol * ref.abs() + 3 * error.reshape(-1))
        if bool(over.any()):
            bad.append(f"{r.name} at {int(over.sum())} of {over.numel()} entries")
    event.checks.append(
        Check(
            "finite_difference",
            "disagree" if bad else "agree",
            compares,
            max_abs_diff=worst,
            tolerance=f"|Δ| <= {atol:g} + {rtol:g}·|ref| + 3·(error estimate)",
            reason=("differs: " + "; ".join(bad)) if bad else None,
        )
    )
    return event


TRANSFORMS = {"grad": "jacobian", "jacrev": "jacobian", "jacfwd": "jacobian", "hessian": "hessian"}


def explain_transform(
    it: Interpreter,
    qualname: str,
    made_from: Any,
    args: list[Any],
    kwargs: dict[str, Any],
    node: ast.AST,
    value: Any,
    index: int,
) -> Event | None:
    """torch.func.grad(f)(x) and friends: the same check as the functional API, on input 0 (argnums=0)."""
    import torch

    name, func, options = made_from
    if name in ("vjp_fn", "jvp"):
        return _explain_func_vjp_jvp(it, name, func, options, args, kwargs, node, value, index)
    kind = TRANSFORMS.get(name)
    if kind is None or options or kwargs or not args or not isinstance(args[0], torch.Tensor):
        return None  # argnums, has_aux, other inputs: run, not checked
    fake = {"func": func, "inputs": args[0]}
    real = getattr(torch.autograd.functional, kind)
    event = explain(it, f"torch.autograd.functional.{kind}", real, [], fake, node, value, index)
    if event is not None:
        event.call = f"torch.func.{name}"
        event.notes = [
            f"torch.func.{name}(f)(x) computes {WHAT_FUNC[name]}, here checked against finite differences of f."
        ]
    return event


def _explain_func_vjp_jvp(
    it: Interpreter,
    name: str,
    func: Any,
    options: dict[str, Any],
    args: list[Any],
    kwargs: dict[str, Any],
    node: ast.AST,
    value: Any,
    index: int,
) -> Event | None:
    """`vjp_fn(v)` from `out, vjp_fn = torch.func.vjp(f, *primals)`, and `torch.func.jvp(f, primals, tangents)`:
    checked as the functional API's vjp and jvp are, against finite differences of f."""
    import torch

    if name == "vjp_fn":
        if kwargs or len(args) != 1 or set(options) != {"primals"}:
            return None  # has_aux, several cotangents: run, not checked
        fake = {"func": func, "inputs": options["primals"], "v": args[0]}
        real, qual, got = torch.autograd.functional.vjp, "torch.autograd.functional.vjp", (None, value)
        note = (
            "vjp_fn(v), from out, vjp_fn = torch.func.vjp(f, *primals), returns Jᵀv for each primal: one "
            "reverse-mode pass with v, J never built (what y.backward(v) leaves in .grad)."
        )
    else:
        if kwargs or len(args) != 3 or not isinstance(args[1], tuple) or not isinstance(args[2], tuple):
            return None
        fake = {"func": args[0], "inputs": args[1], "v": args[2]}
        real, qual, got = torch.autograd.functional.jvp, "torch.autograd.functional.jvp", value
        note = (
            "torch.func.jvp(f, primals, tangents) returns (f(primals), Jv): the derivative along the tangents, "
            "by forward mode (dual numbers), J never built."
        )
    event = explain(it, qual, real, [], fake, node, got, index)
    if event is not None:
        event.call = "torch.func.vjp" if name == "vjp_fn" else "torch.func.jvp"
        event.notes = [note]
    return event


WHAT_FUNC = {
    "grad": "the gradient of a scalar f by reverse mode (one vjp with v = 1)",
    "jacrev": "the Jacobian row by row, by reverse mode (vmap over one-hot v)",
    "jacfwd": "the Jacobian column by column, by forward mode",
    "hessian": "the Jacobian of the gradient (jacfwd of jacrev)",
}


class _TooBig(Exception):
    pass


def _results(kind: str, value: Any, single: bool) -> list[Any]:
    """The derivative part of what the call returned, one tensor per input (or per output for jvp)."""
    import torch

    if kind in ("vjp", "jvp"):
        value = value[1]
    if isinstance(value, torch.Tensor):
        return [value]
    flat: list[Any] = []
    for item in value:
        flat.extend(_results("jacobian", item, True))
    return flat


def _values(t: Any) -> Any:
    import torch

    t = t.detach()
    return t.to(torch.float64).tolist() if t.is_floating_point() else t.tolist()


def _reference(it: Interpreter, func: Any, kind: str, inputs: list[Any], vs: list[Any]) -> tuple[list[Any], list[Any]]:
    import torch

    x64 = [x.detach().to(torch.float64) for x in inputs]

    def f(xs: list[Any]) -> Any:
        with torch.no_grad():
            out = func(*xs)
        return out.to(torch.float64) if isinstance(out, torch.Tensor) else out

    n = sum(x.numel() for x in x64)
    evals = {"jacobian": 4 * n, "vjp": 4 * n, "jvp": 4, "hessian": 4 * n * n}[kind]
    if evals > MAX_EVALS:
        raise _TooBig(f"the reference would call the function {evals:,} times (more than {MAX_EVALS:,})")
    if kind == "jvp":
        v64 = [v.detach().to(torch.float64) for v in vs]
        cols = _central(lambda s: f([x + s * v for x, v in zip(x64, v64, strict=True)]), 1e-6)
        return [_info("jvp[0]", cols[0])], [cols[1]]
    refs, errs = [], []
    if kind == "hessian":  # blocks (k, l) in the order torch returns them: ((H00, H01), (H10, H11))
        for k in range(len(x64)):
            for m in range(len(x64)):
                h_ref, h_err = _hessian(f, x64, k, m)
                refs.append(_info(f"hessian[{k}][{m}]" if len(x64) > 1 else "hessian[0]", h_ref))
                errs.append(h_err)
        return refs, errs
    for k, x in enumerate(x64):
        columns, col_err = [], []
        for j in range(x.numel()):
            e = torch.zeros_like(x).reshape(-1)
            e[j] = 1.0
            step = e.reshape(x.shape)

            def shifted(s: float, k: int = k, step: Any = step) -> Any:
                return f([y + s * step if i == k else y for i, y in enumerate(x64)])

            d, err = _central(shifted, 1e-6 * max(abs(float(x.reshape(-1)[j])), 1e-2))
            columns.append(d.reshape(-1))
            col_err.append(err.reshape(-1))
        out_shape = list(f(x64).shape)
        J = torch.stack(columns, dim=1)  # (m, n)
        E = torch.stack(col_err, dim=1)
        if kind == "vjp":
            v = vs[0].detach().to(torch.float64).reshape(-1)
            refs.append(_info(f"vjp[{k}]", (J.T @ v).reshape(x.shape)))
            errs.append((E.T @ v.abs()).reshape(x.shape))
        else:
            refs.append(_info(f"jacobian[{k}]", J.reshape(out_shape + list(x.shape))))
            errs.append(E.reshape(out_shape + list(x.shape)))
    return refs, errs


def _central(g: Any, h: float) -> tuple[Any, Any]:
    d1 = (g(h) - g(-h)) / (2 * h)
    d2 = (g(2 * h) - g(-2 * h)) / (4 * h)
    return d1, (d1 - d2).abs()


def _hessian(f: Any, xs: list[Any], k: int, m: int) -> tuple[Any, Any]:
    """Second central differences of a scalar function: ∂²f/∂x_k∂x_m, shaped x_k.shape + x_m.shape."""
    import torch

    a, b = xs[k], xs[m]
    h = 1e-4 * max(max(float(a.abs().max()) if a.numel() else 0.0, float(b.abs().max()) if b.numel() else 0.0), 1.0)
    out = torch.empty(a.numel(), b.numel(), dtype=torch.float64)

    def at(i: int, j: int, si: float, sj: float) -> float:
        shifted = [y.clone() for y in xs]
        shifted[k].view(-1)[i] += si * h
        shifted[m].view(-1)[j] += sj * h
        return float(f(shifted))

    for i in range(a.numel()):
        for j in range(b.numel()):
            out[i, j] = (at(i, j, 1, 1) - at(i, j, 1, -1) - at(i, j, -1, 1) + at(i, j, -1, -1)) / (4 * h * h)
    err = torch.full_like(out, 1e-6 * (float(out.abs().max()) + 1.0))
    shape = list(a.shape) + list(b.shape)
    return out.reshape(shape), err.reshape(shape)


def _info(name: str, t: Any) -> TensorInfo:
    return TensorInfo(name, list(t.shape), "float64", t.tolist())
