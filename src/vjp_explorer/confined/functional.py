"""torch.autograd.functional and torch.func calls of a snippet: one event each, checked by finite differences.

`install(observer)` wraps torch.autograd.functional.{jacobian, vjp, jvp, hessian} and the transforms
torch.func.{grad, jacrev, jacfwd, hessian}. The call runs once, as written (the autograd calls torch makes
inside it are not events of their own); then the snippet's function is called again, quietly (its output
muted), under no_grad and in float64, at perturbed inputs: every column of J by central differences
(engine/finite_diff.jacobian_of), never through autograd. From J the reference of each kind follows: J itself,
Jᵀv, Jv. A Hessian has no finite-difference reference here yet: its check says so.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import io
from typing import Any

import torch

from ..engine.tolerance import tolerance
from ..snippet.result import Check, Event, TensorInfo

MAX_EVALS = 4_000  # calls of the snippet's function for one reference
WHAT = {
    "jacobian": "builds J: one backward per output element (one-hot v), or batched with vectorize=True",
    "vjp": "one backward(v): Jᵀv without building J",
    "jvp": "Jv, the derivative along v (PyTorch computes it with the double-backward trick)",
    "hessian": "the Jacobian of the gradient: backward through a backward (create_graph=True)",
    "grad": "the gradient of a function with one output number, by reverse mode",
    "jacrev": "J by reverse mode: one vjp per output element, batched with vmap",
    "jacfwd": "J by forward mode: one jvp per input element, batched with vmap",
}
_COMPARES = "{kind}() vs central differences of the snippet's function (float64, no autograd)"


def install(observer: Any) -> None:
    """Wrap the functional entry points; the names a snippet imports afterwards are the wrapped ones."""
    import torch.autograd.functional as functional
    import torch.func as func

    for name in ("jacobian", "vjp", "jvp", "hessian"):
        setattr(functional, name, _functional(observer, name, getattr(functional, name)))
    for name in ("grad", "jacrev", "jacfwd", "hessian"):
        setattr(func, name, _transform(observer, name, getattr(func, name)))
    # gradcheck makes hundreds of autograd calls of its own: they are its business, not events
    for name in ("gradcheck", "gradgradcheck"):
        setattr(torch.autograd, name, _quiet(observer, getattr(torch.autograd, name)))


def _quiet(observer: Any, real: Any) -> Any:
    @functools.wraps(real)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return observer._run(real, args, kwargs)

    return wrapper


def _functional(observer: Any, name: str, real: Any) -> Any:
    @functools.wraps(real)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if observer.depth:
            return real(*args, **kwargs)
        line, source = observer._where()
        value = observer._run(real, args, kwargs)
        try:
            p = inspect.signature(real).bind(*args, **kwargs).arguments
            inputs = p.get("inputs")
            v = p.get("v")
            vs = [] if v is None else [v] if isinstance(v, torch.Tensor) else list(v)
            event = _event(observer, f"torch.autograd.functional.{name}", line, source, p.get("func"), inputs, vs)
            if event is not None:
                _check(event, name, p.get("func"), inputs, vs, value, bool(p.get("create_graph")))
                observer.emit(event)
        except Exception:  # noqa: BLE001 - the tool's own failure is never the snippet's exception
            pass
        return value

    return wrapper


def _transform(observer: Any, name: str, real: Any) -> Any:
    @functools.wraps(real)
    def wrapper(func: Any, *targs: Any, **tkw: Any) -> Any:
        transformed = real(func, *targs, **tkw)
        if targs or tkw or not callable(transformed):  # argnums, has_aux, ...: run, not explained
            return transformed

        @functools.wraps(transformed)
        def called(*xs: Any, **kw: Any) -> Any:
            if observer.depth or kw or not xs or not isinstance(xs[0], torch.Tensor):
                return transformed(*xs, **kw)
            line, source = observer._where()
            value = observer._run(transformed, xs, {})
            try:
                event = _event(observer, f"torch.func.{name}", line, source, func, xs[0], [])
                if event is not None:
                    # with respect to the first argument (argnums=0); the others are held fixed
                    fixed = [t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in xs[1:]]
                    _check(event, name, lambda x: func(x, *fixed), xs[0], [], value, False)
                    observer.emit(event)
            except Exception:  # noqa: BLE001
                pass
            return value

        return called

    return wrapper


def _event(observer: Any, qualname: str, line: int, source: str, func: Any, inputs: Any, vs: list[Any]) -> Event | None:
    xs = [inputs] if isinstance(inputs, torch.Tensor) else list(inputs or ())
    if not callable(func) or not xs or not all(isinstance(x, torch.Tensor) for x in xs):
        return None
    kind = qualname.rsplit(".", 1)[-1]
    event = Event(
        index=0,
        line=line,
        source=source,
        call=qualname,
        outputs=[],
        v=[_info("v", t) for t in vs if isinstance(t, torch.Tensor)],
        v_origin="given" if vs else "none",
        retain_graph=False,
        create_graph=False,
        inputs=[],
    )
    event.notes.append(f"{kind}() {WHAT[kind]}.")
    return event


def _check(event: Event, kind: str, func: Any, inputs: Any, vs: list[Any], value: Any, create_graph: bool) -> None:
    """Fill the event's results and the finite-difference reference, and compare them."""
    single = isinstance(inputs, torch.Tensor)
    xs = [inputs] if single else list(inputs)
    got = _results(kind, value, single)
    event.create_graph = create_graph
    event.results = [_info(f"{kind}[{k}]" if len(got) > 1 else kind, t) for k, t in enumerate(got)]
    compares = _COMPARES.format(kind=kind)
    if kind == "hessian":
        why = "no finite-difference reference for second derivatives yet"
        event.checks.append(Check("finite_difference", "skipped", compares, reason=why))
        return
    refs = _reference(kind, func, xs, vs)
    if isinstance(refs, str):
        event.checks.append(Check("finite_difference", "skipped", compares, reason=refs))
        return
    event.reference = [_info(r.name, t) for r, t in zip(event.results, [r for r, _ in refs], strict=False)]
    if len(refs) != len(got):
        why = f"{kind}() returned {len(got)} blocks where the reference has {len(refs)}"
        event.checks.append(Check("finite_difference", "skipped", compares, reason=why))
        return
    table = tolerance(xs[0].dtype)
    worst, bad = 0.0, []
    for (ref, err), g, info in zip(refs, got, event.results, strict=True):
        out = g.detach().to(torch.float64).reshape(-1)
        r, e = ref.reshape(-1), err.reshape(-1)
        if out.numel() != r.numel():
            bad.append(f"{info.name}: {out.numel()} numbers where {r.numel()} were expected")
            continue
        diff = (out - r).abs()
        worst = max(worst, float(diff.nan_to_num(0.0).max()) if diff.numel() else 0.0)
        over = ~(diff <= table.atol + table.rtol * r.abs() + 3 * e)
        if bool(over.any()):
            bad.append(f"{info.name} at {int(over.sum())} of {over.numel()} entries")
    event.checks.append(
        Check(
            "finite_difference",
            "disagree" if bad else "agree",
            compares,
            max_abs_diff=worst,
            tolerance=f"|Δ| <= {table.atol:g} + {table.rtol:g}·|ref| + 3·(the differences' error)",
            reason=("differs: " + "; ".join(bad)) if bad else None,
        )
    )


def _results(kind: str, value: Any, single: bool) -> list[torch.Tensor]:
    """The derivative blocks a call returned: vjp and jvp return (output, derivative)."""
    if kind in ("vjp", "jvp"):
        value = value[1]
    if isinstance(value, torch.Tensor):
        return [value]
    return [t for t in value if isinstance(t, torch.Tensor)]


def _reference(kind: str, func: Any, xs: list[torch.Tensor], vs: list[Any]) -> list[tuple[Any, Any]] | str:
    """(reference, error estimate) per block, from J by central differences; or why there is none."""
    from ..engine.finite_diff import jacobian_of

    shape: list[Any] = []

    def f(*x64: torch.Tensor) -> torch.Tensor:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            with torch.no_grad():
                out = func(*x64)
        if not isinstance(out, torch.Tensor):
            raise TypeError("the function returns more than one tensor")
        shape[:] = [tuple(out.shape)]
        return out.detach().to(torch.float64).reshape(-1)

    try:
        found = jacobian_of(f, [x.detach() for x in xs], MAX_EVALS)
    except TypeError as e:
        return str(e)
    except Exception as e:  # noqa: BLE001 - the function raised at a perturbed input: no reference there
        return f"the function raised {type(e).__name__} at a perturbed input"
    if found is None:
        return f"more than {MAX_EVALS:,} calls of the function would be needed"
    blocks, errors = found
    out_shape = shape[0] if shape else ()
    if kind in ("jacobian", "jacrev", "jacfwd", "grad"):
        return [
            (J.reshape(*out_shape, *x.shape), E.reshape(*out_shape, *x.shape))
            for J, E, x in zip(blocks, errors, xs, strict=True)
        ]
    v = [t.detach().to(torch.float64).reshape(-1) for t in vs]
    if kind == "vjp":
        return [(J.T @ v[0], E.T @ v[0].abs()) for J, E in zip(blocks, errors, strict=True)]
    jv = sum((J @ vk for J, vk in zip(blocks, v, strict=True)), torch.zeros(blocks[0].shape[0], dtype=torch.float64))
    err = sum((E @ vk.abs() for E, vk in zip(errors, v, strict=True)), torch.zeros_like(jv))
    return [(jv.reshape(out_shape), err.reshape(out_shape))]


def _info(name: str, t: torch.Tensor) -> TensorInfo:
    values = t.detach().to(torch.float64).tolist() if t.is_floating_point() else t.detach().tolist()
    return TensorInfo(name, list(t.shape), str(t.dtype).removeprefix("torch."), values)
