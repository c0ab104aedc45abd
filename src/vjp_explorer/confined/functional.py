"""torch.autograd.functional and torch.func calls of a snippet: one event each, checked by finite differences.

`install(observer)` wraps torch.autograd.functional.{jacobian, vjp, jvp, hessian}, torch.func.{grad, jacrev,
jacfwd, hessian, jvp}, the vjp_fn torch.func.vjp returns, the jvp_fn of torch.func.linearize, vmap of a
transform, and forward_ad. The call runs once, as written (torch's autograd calls inside it are not
events); here the snippet's function is called again, quietly, under no_grad, in float64, at perturbed
inputs, for the view's reference. Each call of a form
the judge has a record for (a first derivative, Ju, ∂²f/∂x² of one input, vmap of a first derivative) also
gets one (functional_judged.py): its checks are the judge's, out of the snippet's reach; the ones made here
stay only for the other forms (a mixed or third derivative, vmap of those), said to be the snippet's word.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import weakref
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils import _pytree as pytree

from ..engine.tolerance import FD_BUDGETS, ROUNDOFF_UNITS, allowed, eps, tolerance, with_error
from ..events import Event, TensorInfo
from ..verdicts import Check
from .functional_judged import batch_record, joined_hessian, judged, tangent_record, vmap_record
from .functional_refs import (
    Batched,
    batched_reference,
    contract,
    dual_reference,
    hessian_reference,
    reference,
    second_block,
)
from .functional_state import default_v, flat_args, untouched, widened, without_aux
from .observe_parts import in_functorch_transform

MAX_EVALS, MAX_EVALS_2 = FD_BUDGETS["functional"].evals, FD_BUDGETS["second"].evals  # calls per reference
MAX_VALUES = 10_000  # a result's or reference's values travel up to this many elements
WHAT = {
    "jacobian": "builds J: one backward per output element (one-hot v), or batched with vectorize=True",
    "vjp": "one backward(v): Jᵀv without building J",
    "jvp": "Jv, the derivative along v (PyTorch computes it with the double-backward trick)",
    "hessian": "the Jacobian of the gradient: backward through a backward (create_graph=True)",
    "grad": "the gradient of a function with one output number, by reverse mode",
    "jacrev": "J by reverse mode: one vjp per output element, batched with vmap",
    "jacfwd": "J by forward mode: one jvp per input element, batched with vmap",
    "vmap": "the transform below, once per sample of the batch (vmap batches the calls)",
}
_COMPARES = "{kind}() vs central differences of the snippet's function (float64, no autograd)"
_COMPARES_2 = "{kind}() vs central second differences of the snippet's function (float64, no autograd)"
_SPECS: weakref.WeakKeyDictionary[Any, _Spec] = weakref.WeakKeyDictionary()  # the transforms' results
_SKIP = [""]  # why the event being made gets no reference (a loop's call past the checked ones)
_CHEAP = [False]  # the event being made is past the calls explained in full: the judge's cheap checks
_RECORD: list[dict[str, Any] | None] = [None]  # the record of the event being made, for the judge (_judged)
_REF = {"active": 0, "used": 0}  # while a reference is computed: derivative calls the function makes itself


@dataclass(frozen=True)
class _Spec:
    """What a torch.func transform differentiates: kind, the function, argnums, has_aux."""

    kind: str
    func: Any
    argnums: Any
    has_aux: bool


def install(observer: Any) -> None:
    """Wrap the functional entry points; the names a snippet imports afterwards are the wrapped ones."""
    import torch.autograd.functional as functional
    import torch.func as func

    for name in ("jacobian", "vjp", "jvp", "hessian"):
        setattr(functional, name, _functional(observer, name, getattr(functional, name)))
    for name in ("grad", "jacrev", "jacfwd", "hessian"):
        setattr(func, name, _transform(observer, name, getattr(func, name)))
    func.vjp = _func_vjp(observer, func.vjp)
    func.jvp = _func_jvp(observer, func.jvp)
    func.linearize = _func_linearize(observer, func.linearize)
    torch.vmap = func.vmap = _vmap(observer, func.vmap)  # the same function under two names
    _forward_ad(observer)
    quiet = [(torch.autograd, n) for n in ("gradcheck", "gradgradcheck")] + [(functional, n) for n in ("hvp", "vhp")]
    for module, name in quiet:  # gradcheck's hundreds of autograd calls, hvp's and vhp's few: theirs, not events
        setattr(module, name, _quiet(observer, getattr(module, name)))


def _quiet(observer: Any, real: Any) -> Any:
    @functools.wraps(real)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return observer._run(real, args, kwargs)

    return wrapper


def _passing(observer: Any) -> bool:
    """Whether a call is torch's or the tool's own, not the snippet's: inside one of our wrappers or a
    reference (observer.depth), or inside a torch.func transform (batched or wrapped tensors)."""
    if observer.depth or in_functorch_transform():
        _REF["used"] += bool(_REF["active"])
        return True
    return False


def _emit(observer: Any, line: int, make: Any) -> None:
    """Build an event and send it (the tool's failure is never the snippet's); checked as observer._plan says."""
    explain, checked, every = observer._plan(line)
    _SKIP[0] = "" if checked else f"past the first calls of a line, every {every}th is checked"
    _CHEAP[0], _RECORD[0] = not explain, None
    try:
        event = make()
    except Exception:  # noqa: BLE001
        event = None
    record, _RECORD[0] = _RECORD[0], None
    if event is not None:  # a result too large to show is named in a note, not shown as None
        event.results = [r for r in event.results if r.values is not None]
        event.reference = [r for r in event.reference if r.values is not None]
        observer.emit(event, record)


def _functional(observer: Any, name: str, real: Any) -> Any:
    sig = inspect.signature(real)

    @functools.wraps(real)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _passing(observer):
            return real(*args, **kwargs)
        line, source = observer._where()
        value = observer._run(real, args, kwargs)

        def make() -> Event | None:
            p = sig.bind(*args, **kwargs).arguments
            inputs, v = p.get("inputs"), p.get("v")
            vs = [] if v is None else [v] if isinstance(v, torch.Tensor) else list(v)  # None: torch's 1, below
            vs = default_v(value[0] if name == "vjp" else inputs) if v is None and name in ("vjp", "jvp") else vs
            event = _event(f"torch.autograd.functional.{name}", line, source, p.get("func"), inputs, vs)
            if event is not None:
                event.v_origin = "ones (default)" if v is None and vs else event.v_origin
                event.create_graph = bool(p.get("create_graph"))
                _check(observer, event, name, p.get("func"), inputs, vs, value)
            return event

        _emit(observer, line, make)
        return value

    return wrapper


def _transform(observer: Any, name: str, real: Any) -> Any:
    sig = inspect.signature(real)

    @functools.wraps(real)
    def wrapper(func: Any, *targs: Any, **tkw: Any) -> Any:
        transformed = real(func, *targs, **tkw)
        try:
            p = sig.bind(func, *targs, **tkw)
        except TypeError:
            return transformed
        p.apply_defaults()
        if not callable(transformed):
            return transformed
        spec = _Spec(name, func, p.arguments.get("argnums", 0), bool(p.arguments.get("has_aux", False)))

        @functools.wraps(transformed)
        def called(*xs: Any, **kw: Any) -> Any:
            if _passing(observer) or not xs:
                return transformed(*xs, **kw)
            line, source = observer._where()
            value = observer._run(transformed, xs, kw)
            _emit(observer, line, lambda: _transform_event(observer, spec, line, source, xs, kw, value))
            return value

        _SPECS[called] = spec
        return called

    return wrapper


def _each_call(observer: Any, fn: Any, rng: Any, make: Any) -> Any:
    """fn, a function a torch.func call returned (vjp's vjp_fn, linearize's jvp_fn): each call of it is one
    event, make(line, source, args, value), its re-runs drawing what the returning call drew (`rng`)."""

    @functools.wraps(fn)
    def called(*args: Any, **kw: Any) -> Any:
        if _passing(observer):
            return fn(*args, **kw)
        line, source = observer._where()
        value = observer._run(fn, args, kw)
        observer.rng_before = rng
        _emit(observer, line, lambda: make(line, source, args, value))
        return value

    return called


def _func_vjp(observer: Any, real: Any) -> Any:
    """torch.func.vjp(f, *primals): the event is the call of the vjp_fn it returns (Jᵀv, at the primals)."""

    @functools.wraps(real)
    def wrapper(func: Any, *primals: Any, **kw: Any) -> Any:
        rng = torch.get_rng_state()  # the forward's draws are made here, at vjp(), not at vjp_fn()
        out = real(func, *primals, **kw)
        kept = [p.detach().clone() if isinstance(p, torch.Tensor) else p for p in primals]

        def make(line: int, source: str, cts: tuple[Any, ...], value: Any) -> Event | None:
            vs = list(cts[0]) if cts and isinstance(cts[0], (tuple, list)) else list(cts[:1])
            event = _event("torch.func.vjp", line, source, func, kept, vs)
            if event is not None:
                f = without_aux(func) if kw.get("has_aux") else func
                _check(observer, event, "vjp", f, kept, vs, (None, value))
            return event

        return (out[0], _each_call(observer, out[1], rng, make), *out[2:])

    return wrapper


def _func_jvp(observer: Any, real: Any) -> Any:
    """torch.func.jvp(f, primals, tangents): (f(primals), Jv), one event."""

    @functools.wraps(real)
    def wrapper(func: Any, primals: Any, tangents: Any, *args: Any, **kw: Any) -> Any:
        if _passing(observer):
            return real(func, primals, tangents, *args, **kw)
        line, source = observer._where()
        value = observer._run(real, (func, primals, tangents, *args), kw)

        def make() -> Event | None:
            xs, vs = pytree.tree_leaves(primals), pytree.tree_leaves(tangents)  # dicts of parameters too
            event = _event("torch.func.jvp", line, source, func, xs, vs, "Jv by forward mode (dual numbers)")
            f = without_aux(func) if kw.get("has_aux") else func
            f = f if all(isinstance(p, torch.Tensor) for p in primals) else flat_args(f, primals)
            if event is not None:
                _check(observer, event, "jvp", f, xs, vs, value)
            return event

        _emit(observer, line, make)
        return value

    return wrapper


def _func_linearize(observer: Any, real: Any) -> Any:
    """torch.func.linearize(f, *primals): the event is each call of the jvp_fn it returns (Ju, at the primals)."""

    @functools.wraps(real)
    def wrapper(func: Any, *primals: Any, **kw: Any) -> Any:
        rng = torch.get_rng_state()  # the forward's draws are made here, at linearize(), not at jvp_fn()
        out, jvp_fn = real(func, *primals, **kw)
        kept = pytree.tree_map(lambda p: p.detach().clone() if isinstance(p, torch.Tensor) else p, primals)

        def make(line: int, source: str, tangents: tuple[Any, ...], value: Any) -> Event | None:
            xs, vs = pytree.tree_leaves(kept), pytree.tree_leaves(tangents)
            event = _event("torch.func.linearize", line, source, func, xs, vs, "Ju by the linearized forward")
            f = func if all(isinstance(p, torch.Tensor) for p in kept) else flat_args(func, kept)
            if event is not None:
                _check(observer, event, "jvp", f, xs, vs, (None, value))
            return event

        return out, _each_call(observer, jvp_fn, rng, make)

    return wrapper


def _vmap(observer: Any, real: Any) -> Any:
    """vmap of one of the transforms above: the batched call is one event, checked sample by sample."""

    @functools.wraps(real)
    def wrapper(func: Any, *args: Any, **kw: Any) -> Any:
        batched = real(func, *args, **kw)
        spec = _spec_of(func)
        in_dims = args[0] if args else kw.get("in_dims", 0)
        out_dims = args[1] if len(args) > 1 else kw.get("out_dims", 0)
        if spec is None and callable(batched):
            return _grads_in(observer, batched)
        if spec is None or out_dims != 0 or not callable(batched):
            return batched

        @functools.wraps(batched)
        def called(*xs: Any, **ckw: Any) -> Any:
            if _passing(observer) or not xs:
                return batched(*xs, **ckw)
            line, source = observer._where()
            value = observer._run(batched, xs, ckw)
            _emit(observer, line, lambda: _vmap_event(observer, spec, in_dims, line, source, xs, ckw, value))
            return value

        return called

    return wrapper


def _grads_in(observer: Any, batched: Any) -> Any:
    """vmap of a plain function: the autograd.grad calls it makes (with a batch of v, the Jacobian by
    vmap of a vjp from PyTorch's docs) are each one event with the batch shape, checked sample by sample."""

    @functools.wraps(batched)
    def called(*xs: Any, **kw: Any) -> Any:
        if _passing(observer) or observer.batched is not None:
            return batched(*xs, **kw)
        line, source = observer._where()
        observer.batched = []
        try:
            value = batched(*xs, **kw)
        finally:
            seen, observer.batched = observer.batched, None
        for call in seen:
            _emit(observer, line, lambda call=call: _batched_event(observer, line, source, call))
        return value

    return called


def _batched_event(observer: Any, line: int, source: str, call: Batched | None) -> Event | None:
    """The event of an autograd.grad call inside vmap: per sample b, grads[b] against Jᵀ v[b], J by
    central differences of the replayed forward (float64, no autograd)."""
    event = Event(0, line, source, "torch.autograd.grad in torch.vmap", [], [], "grad_outputs", False, False, [])
    event.notes.append("grad() inside vmap: one call with a batch of v (vmap batches the backward), each sample's Jᵀv.")
    compares = "each sample's grads vs Jᵀv[b], J from central differences of the replayed forward (float64)"
    if call is None or not call.inputs or not all(isinstance(v, torch.Tensor) for v in call.vs):
        why = "the call inside vmap could not be read back" if call is None else "grad_outputs not given as tensors"
        event.checks.append(Check("finite_difference", "skipped", compares, reason=why))
        return event
    size = call.vs[0].shape[0]
    event.v = [_info("v", v) for v in call.vs]
    event.notes.append(f"batch of {size}: v has shape {list(call.vs[0].shape)}, one Jᵀv per sample")
    got = [
        torch.zeros(size, *x.shape) if g is None else g.reshape(size, *x.shape)
        for g, x in zip(call.grads, call.inputs, strict=True)
    ]
    refs = _quietly(observer, lambda: batched_reference(observer, call, size, MAX_EVALS))[0]
    _compare(event, "grad", refs, got, call.inputs[0].dtype, compares, True)
    _RECORD[0] = batch_record(observer, event, call.outs, call.inputs, call.vs, got, _SKIP[0], _CHEAP[0])
    return event


def _forward_ad(observer: Any) -> None:
    """torch.autograd.forward_ad: make_dual marks its dual tensor as a root of the log (it requires no
    grad, yet the forward from it is the function), and unpack_dual of a result is one JVP event: its
    tangent Ju against the derivative along u of the replayed forward, by central differences."""
    import torch.autograd.forward_ad as fwad

    real_make, real_unpack = fwad.make_dual, fwad.unpack_dual
    duals: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}  # serial -> (dual, tangent, primal)

    @functools.wraps(real_make)
    def make_dual(tensor: Any, tangent: Any, *args: Any, **kw: Any) -> Any:
        dual = real_make(tensor, tangent, *args, **kw)
        if not _passing(observer) and isinstance(tangent, torch.Tensor):
            from .record import serial

            with contextlib.suppress(Exception):  # the tool's own failure: the dual is simply not followed
                duals[serial(dual)] = (dual, tangent.detach().clone(), tensor.detach().clone())
                observer.recorder.roots.add(serial(dual))
        return dual

    @functools.wraps(real_unpack)
    def unpack_dual(tensor: Any, *args: Any, **kw: Any) -> Any:
        value = real_unpack(tensor, *args, **kw)
        if _passing(observer) or not duals or getattr(value, "tangent", None) is None:
            return value
        from .record import serial

        if serial(tensor) in duals:  # a dual input read back: its own tangent, nothing computed
            return value
        line, source = observer._where()
        inputs = list(duals.values())
        _emit(observer, line, lambda: _dual_event(observer, line, source, tensor, value.tangent, inputs))
        return value

    real_exit = fwad.exit_dual_level  # dual_level's __exit__ calls it by this module-level name

    @functools.wraps(real_exit)
    def exit_level(*args: Any, **kw: Any) -> Any:  # the level's duals lose their tangents: forget them
        duals.clear()
        observer.recorder.roots.clear()
        return real_exit(*args, **kw)

    fwad.make_dual, fwad.unpack_dual, fwad.exit_dual_level = make_dual, unpack_dual, exit_level


def _dual_event(
    observer: Any, line: int, source: str, out: torch.Tensor, tangent: torch.Tensor, inputs: list[Any]
) -> Event | None:
    event = Event(0, line, source, "torch.autograd.forward_ad.unpack_dual", [], [], "given", False, False, [])
    event.notes.append("unpack_dual(...).tangent is Ju, the derivative along the tangents u, by forward mode.")
    event.v = [_info("u", u) for _, u, _ in inputs]
    compares = "the tangent Ju vs central differences of the replayed forward along u (float64, no autograd)"
    refs = _quietly(observer, lambda: dual_reference(observer, out, inputs))[0]
    _compare(event, "jvp", refs, [tangent], inputs[0][1].dtype, compares, True)
    duals, us, at = ([t[i] for t in inputs] for i in range(3))  # Ju: the judge's check
    _RECORD[0] = tangent_record(observer, event, [out], duals, at, us, [tangent.detach()], _SKIP[0], _CHEAP[0])
    return event


def _vmap_event(
    observer: Any, spec: _Spec, in_dims: Any, line: int, source: str, xs: tuple[Any, ...], kw: Any, value: Any
) -> Event | None:
    dims = tuple(in_dims) if isinstance(in_dims, (tuple, list)) else (in_dims,) * len(xs)
    if len(dims) != len(xs) or any(d not in (0, None) for d in dims) or 0 not in dims:
        return None
    size = next(x.shape[0] for x, d in zip(xs, dims, strict=True) if d == 0 and isinstance(x, torch.Tensor))
    sample = [[x[b] if d == 0 else x for x, d in zip(xs, dims, strict=True)] for b in range(size)]
    nums = _argnums(spec, xs)
    event = None if nums is None else _event("torch.func.vmap", line, source, spec.func, _leaves(xs, nums), [])
    if event is None or nums is None:
        return None
    event.notes.append(f"{spec.kind}() {WHAT[spec.kind]}.")
    got = _results(spec.kind, value[0] if spec.has_aux else value, False)
    per_sample: list[list[tuple[Any, Any]]] = []
    independent, order, why = True, 1, ""
    for k, xs_b in enumerate(sample):
        found, independent_b, order = _spec_reference(observer, spec, tuple(xs_b), kw, MAX_EVALS // max(size, 1))
        if isinstance(found, str):
            why = found if _SKIP[0] else f"sample {k} of {size}: {found}"
            break
        per_sample.append(found)
        independent = independent and independent_b
    refs: list[tuple[Any, Any]] | str = why or [
        (torch.stack([s[j][0] for s in per_sample]), torch.stack([s[j][1] for s in per_sample]))
        for j in range(len(per_sample[0]) if per_sample else 0)
    ]
    compares = (_COMPARES_2 if order == 2 else _COMPARES).format(kind=f"vmap({spec.kind})")
    _compare(event, f"vmap({spec.kind})", refs, got, _leaves(xs, nums)[0].dtype, compares, independent)
    plain = _spec_of(spec.func) is None  # of a first derivative: the judge's check (functional_judged.py)
    _RECORD[0] = vmap_record(observer, event, plain, spec, dims, xs, kw, nums, got, _SKIP[0], _CHEAP[0])
    return event


def _spec_of(func: Any) -> _Spec | None:  # by identity: functools.wraps copies attributes, not this
    return _SPECS.get(func) if inspect.isfunction(func) else None


def _argnums(spec: _Spec, xs: tuple[Any, ...]) -> tuple[int, ...] | None:
    """The positions spec differentiates, if they are floating tensors among xs."""
    nums = (spec.argnums,) if isinstance(spec.argnums, int) else tuple(spec.argnums)
    if not nums or any(not isinstance(k, int) or not -len(xs) <= k < len(xs) for k in nums):
        return None
    nums = tuple(k % len(xs) for k in nums)
    leaves = pytree.tree_leaves([xs[k] for k in nums])  # a tensor, or a dict of them (functional_call)
    if not leaves or not all(isinstance(t, torch.Tensor) and t.is_floating_point() for t in leaves):
        return None
    return nums


def _leaves(xs: tuple[Any, ...], nums: tuple[int, ...]) -> list[torch.Tensor]:
    return pytree.tree_leaves([xs[k] for k in nums])


def _transform_event(
    observer: Any, spec: _Spec, line: int, source: str, xs: tuple[Any, ...], kw: Any, value: Any
) -> Event | None:
    nums = _argnums(spec, xs)
    event = None if nums is None else _event(f"torch.func.{spec.kind}", line, source, spec.func, _leaves(xs, nums), [])
    if event is None or nums is None:
        return None
    got = _results(spec.kind, value[0] if spec.has_aux else value, False)
    found, independent, order = _spec_reference(observer, spec, xs, kw, MAX_EVALS)
    compares = (_COMPARES_2 if order == 2 else _COMPARES).format(kind=spec.kind)
    _compare(event, spec.kind, found, got, _leaves(xs, nums)[0].dtype, compares, independent)
    if order == 2:  # ∂²f/∂x², where it is that of a one-number f of one input: the judge's check
        _RECORD[0] = _second_record(observer, event, spec, xs, kw, got)
    elif spec.kind in ("grad", "jacrev", "jacfwd"):  # Jᵀ1, or J itself: the judge's check
        plain = _spec_of(spec.func) is None
        f = _fixing(spec.func, xs, kw, nums, spec.has_aux, widen=False) if plain else None
        whole = spec.kind != "grad"
        _RECORD[0] = judged(observer, event, f, _leaves(xs, nums), None, got, whole, _SKIP[0], _CHEAP[0], spec.func)
    elif spec.kind == "hessian":  # a form the judge has no reference for: the check stays the child's
        _RECORD[0] = judged(observer, event, None, _leaves(xs, nums), None, got, False, _SKIP[0], _CHEAP[0], None)
    return event


def _second_record(
    observer: Any, event: Event, spec: _Spec, xs: tuple[Any, ...], kw: Any, got: list[torch.Tensor]
) -> dict[str, Any]:
    """The judge's record of a transform's second derivative: the base function's forward and ∂²f/∂x²,
    where f gives one number and both derivatives are in the same one argument (hessian(f),
    jacrev(jacrev(f)), jacfwd(jacrev(f)), grad(grad(f)) of a one-number x); any other form (two arguments,
    has_aux, a non-scalar f) is checked in the child still (calls.CHECKED_IN_CHILD)."""
    inner = _spec_of(spec.func)
    if inner is None:  # torch.func.hessian(f)
        base, a, b, aux = spec.func, spec.argnums, spec.argnums, spec.has_aux
    else:
        base, a, b, aux = inner.func, inner.argnums, spec.argnums, inner.has_aux or spec.has_aux
    if isinstance(a, tuple) and isinstance(b, tuple) and a == b and not aux:  # argnums=(0, 1): blocks joined
        nums = tuple(k % len(xs) for k in a)
        tensors = len(set(nums)) == len(nums) and all(isinstance(xs[k], torch.Tensor) for k in nums)
        if tensors and (joined := joined_hessian([xs[k] for k in nums], got)) is not None:
            f = _fixing(base, xs, kw, nums, False, widen=False)
            return judged(observer, event, f, [xs[k] for k in nums], None, [], False, _SKIP[0], _CHEAP[0], base, joined)
    x = xs[a % len(xs)] if isinstance(a, int) and isinstance(b, int) and a % len(xs) == b % len(xs) else None
    if aux or x is None or len(got) != 1 or tuple(got[0].shape) != 2 * tuple(x.shape):
        return judged(observer, event, None, [], None, [], False, _SKIP[0], _CHEAP[0], None)
    f = _fixing(base, xs, kw, (a % len(xs),), False, widen=False)
    return judged(observer, event, f, [x], None, [], False, _SKIP[0], _CHEAP[0], base, second=got[0])


def _fixing(func: Any, xs: tuple[Any, ...], kw: Any, nums: tuple[int, ...], aux: bool, widen: bool = True) -> Any:
    """func as a function of the tensors of xs[nums] alone, the other arguments held fixed (in float64,
    unless not `widen`: as the call had them)."""
    wide = widen
    fixed = pytree.tree_map(
        lambda t: t.double() if wide and isinstance(t, torch.Tensor) and t.is_floating_point() else t, xs
    )
    shape = pytree.tree_structure([xs[k] for k in nums])

    def f(*sel: Any) -> Any:
        args = list(fixed)
        for k, t in zip(nums, pytree.tree_unflatten(list(sel), shape), strict=True):
            args[k] = t
        out = func(*args, **kw)
        return out[0] if aux else out

    return f


def _spec_reference(
    observer: Any, spec: _Spec, xs: tuple[Any, ...], kw: Any, budget: int
) -> tuple[list[tuple[Any, Any]] | str, bool, int]:
    """The reference blocks of a transform's call (or why there is none), whether it is independent of
    autograd (the function takes no derivatives itself), and the derivative's order."""
    nums = _argnums(spec, xs)
    if nums is None:
        return "the differentiated arguments are not floating-point tensors", True, 1
    inner: _Spec | None = _spec_of(spec.func)
    if spec.kind != "hessian" and inner is None:
        f = _fixing(spec.func, xs, kw, nums, spec.has_aux)
        found, independent = _quietly(
            observer, lambda: reference("jacrev", f, _leaves(xs, nums), [], budget), spec.func
        )
        return found, independent, 1
    if inner is None:  # torch.func.hessian
        base, a, b = spec.func, spec.argnums, spec.argnums
    elif spec.kind == "hessian" or inner.kind == "hessian" or _spec_of(inner.func) is not None:
        return "a third derivative has no finite-difference reference here", True, 3
    else:
        base, a, b = inner.func, inner.argnums, spec.argnums
        if inner.has_aux or spec.has_aux:
            return "has_aux in a second derivative: no finite-difference reference here", True, 2
    if not isinstance(a, int) or not isinstance(b, int):
        return "a second derivative with a tuple of argnums: no finite-difference reference here", True, 2
    a, b = a % len(xs), b % len(xs)
    if not all(isinstance(xs[k], torch.Tensor) and xs[k].is_floating_point() for k in (a, b)):
        return "the differentiated arguments are not floating-point tensors", True, 2
    f = _fixing(base, xs, kw, (a, b) if a != b else (a,), False)
    pair = [xs[a], xs[b]] if a != b else [xs[a]]
    found, independent = _quietly(
        observer, lambda: second_block(f, pair, 0, len(pair) - 1, min(budget, MAX_EVALS_2)), base
    )
    return found, independent, 2


def _quietly(observer: Any, compute: Any, func: Any = None) -> tuple[Any, bool]:
    """A reference computed with observation suspended (the function's own derivative calls are not
    events), and whether the function took derivatives itself (then the reference is not independent).
    The snippet's state is as the real call left it afterwards (`untouched`), and the function's own
    float constants run in float64 meanwhile (`widened`)."""
    if _SKIP[0]:
        return _SKIP[0], True
    used = _REF["used"]
    _REF["active"] += 1
    observer.depth += 1  # inside the call's event: observer.rng_before stays the call's
    try:
        with untouched(func), widened(func):
            found = observer._run(compute, (), {})
    finally:
        observer.depth -= 1
        _REF["active"] -= 1
    return found, _REF["used"] == used


def _event(
    qualname: str, line: int, source: str, func: Any, inputs: Any, vs: list[Any], what: str | None = None
) -> Event | None:
    xs = [inputs] if isinstance(inputs, torch.Tensor) else list(inputs or ())
    if not callable(func) or not xs or not all(isinstance(x, torch.Tensor) for x in xs):
        return None
    kind = qualname.rsplit(".", 1)[-1]
    v = [_info("v", t) for t in vs if isinstance(t, torch.Tensor)]
    event = Event(0, line, source, qualname, [], v, "given" if vs else "none", False, False, [])
    event.notes.append(f"{kind}() {what or WHAT[kind]}.")
    return event


def _check(observer: Any, event: Event, kind: str, func: Any, inputs: Any, vs: list[Any], value: Any) -> None:
    """Fill the event's results and the finite-difference reference, and compare them."""
    single = isinstance(inputs, torch.Tensor)
    xs = [inputs] if single else list(inputs)
    got = _results(kind, value, single)
    compares = (_COMPARES_2 if kind == "hessian" else _COMPARES).format(kind=kind)
    spec = _spec_of(func)
    if spec is not None and kind in ("vjp", "jvp"):
        compares = _COMPARES_2.format(kind=kind)
        refs, independent = _quietly(observer, lambda: _of_derivative(kind, spec, xs, vs), spec.func)
    elif spec is not None:
        why = "the function is itself a derivative (torch.func): no finite-difference reference here"
        refs, independent = why, True
    elif kind == "hessian":
        refs, independent = _quietly(observer, lambda: hessian_reference(func, xs, MAX_EVALS_2), func)
    else:
        refs, independent = _quietly(observer, lambda: reference(kind, func, xs, vs, MAX_EVALS), func)
    _compare(event, kind, refs, got, xs[0].dtype, compares, independent)
    if kind in ("vjp", "jacobian"):  # Jᵀv, or J itself: the judge's check (of a derivative, this process's own)
        f = func if spec is None else None
        _RECORD[0] = judged(observer, event, f, xs, vs, got, kind == "jacobian", _SKIP[0], _CHEAP[0], func)
    elif kind == "jvp":  # Ju by forward mode: the judge's check (of a derivative, this process's own)
        f, tangent = (func, (vs, got)) if spec is None else (None, None)
        _RECORD[0] = judged(observer, event, f, xs, None, [], False, _SKIP[0], _CHEAP[0], func, tangent=tangent)
    elif kind == "hessian":  # ∂²f/∂x² of one input, or of several joined: the judge's check
        one = single and len(got) == 1 and tuple(got[0].shape) == 2 * tuple(xs[0].shape)
        second = got[0] if one else None if single else joined_hessian(xs, got)
        f = func if second is not None and spec is None else None
        _RECORD[0] = judged(observer, event, f, xs, None, [], False, _SKIP[0], _CHEAP[0], func, second=second)


def _compare(
    event: Event,
    kind: str,
    refs: list[tuple[Any, Any]] | str,
    got: list[torch.Tensor],
    dtype: Any,
    compares: str,
    independent: bool,
) -> None:
    """The results against the reference blocks (or skipped, with why): one check on the event."""
    event.results = [_info(f"{kind}[{k}]" if len(got) > 1 else kind, t) for k, t in enumerate(got)]
    for r in event.results:
        if r.values is None:
            event.notes.append(f"{r.name} has shape {r.shape}: too many numbers to show (over {MAX_VALUES:,}).")
    if not independent:
        compares += "; the function takes derivatives itself, so the differences are of its autograd results"
    if isinstance(refs, str):
        event.checks.append(Check("finite_difference", "skipped", compares, reason=refs, independent=independent))
        return
    event.reference = [_info(r.name, t) for r, t in zip(event.results, [r for r, _ in refs], strict=False)]
    if len(refs) != len(got):
        why = f"{kind}() returned {len(got)} blocks where the reference has {len(refs)}"
        event.checks.append(Check("finite_difference", "skipped", compares, reason=why, independent=independent))
        return
    table = tolerance(dtype)
    worst, bad, unknown = 0.0, [], 0
    for (ref, err), g, info in zip(refs, got, event.results, strict=True):
        out = g.detach().to(torch.float64).reshape(-1)
        r, e = ref.reshape(-1), err.reshape(-1)
        if out.numel() != r.numel():
            bad.append(f"{info.name}: {out.numel()} numbers where {r.numel()} were expected")
            continue
        known = torch.isfinite(r) & torch.isfinite(e)  # a step off the domain: no reference there
        unknown += int((~known).sum())
        diff = (out - r).abs()
        # rounding where terms cancel (1 − tanh² near 1 in float32): that many units of the block's largest entry
        size = ROUNDOFF_UNITS * eps(dtype) * (float(r[known].abs().max()) if bool(known.any()) else 0.0)
        worst = max(worst, float(diff[known].nan_to_num(0.0).max()) if bool(known.any()) else 0.0)
        over = known & ~(diff <= allowed(r, with_error(r.abs(), e, table), table) + size)
        if bool(over.any()):
            bad.append(f"{info.name} at {int(over.sum())} of {over.numel()} entries")
    left = f"{unknown} entries have no reference (a step crosses a kink or leaves the domain)" if unknown else None
    if unknown and unknown == sum(r.numel() for r, _ in refs):
        event.checks.append(Check("finite_difference", "skipped", compares, reason=left, independent=independent))
        return
    event.checks.append(
        Check(
            "finite_difference",
            "disagree" if bad else "agree",
            compares,
            max_abs_diff=worst,
            tolerance=f"|Δ| <= {table.atol:g} + max({table.rtol:g}·|ref|, the differences' error) + "
            f"{ROUNDOFF_UNITS}·eps·max|ref| (rounding where terms cancel)",
            reason="; ".join([*(["differs: " + "; ".join(bad)] if bad else []), *([left] if left else [])]) or None,
            independent=independent,
        )
    )


def _results(kind: str, value: Any, single: bool) -> list[torch.Tensor]:
    """The derivative blocks a call returned, flat: vjp and jvp return (output, derivative); a hessian of
    several inputs a tuple of tuples; a derivative with respect to a dict of parameters, a dict."""
    if kind in ("vjp", "jvp"):
        value = value[1]
    return [t for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]


def _of_derivative(kind: str, spec: _Spec, xs: list[Any], vs: list[Any]) -> list[tuple[Any, Any]] | str:
    """vjp or jvp of a first derivative (torch.func.jvp(grad(f), ...), a Hessian-vector product): J of the
    derivative is a second derivative of f, ∂²f/∂x_a∂x_b per primal b, by second differences."""
    if spec.kind == "hessian" or spec.has_aux or not isinstance(spec.argnums, int):
        return "a derivative of this derivative has no finite-difference reference here"
    if _spec_of(spec.func) is not None:
        return "a third derivative has no finite-difference reference here"
    a = spec.argnums % len(xs)
    blocks, errors, out_shape = [], [], None
    for b in range(len(xs)):
        found = second_block(spec.func, xs, a, b, MAX_EVALS_2 // len(xs))
        if isinstance(found, str):
            return found
        T, E = found[0]
        out_shape = T.shape[: T.dim() - xs[b].dim()]
        blocks.append(T.reshape(-1, xs[b].numel()))
        errors.append(E.reshape(-1, xs[b].numel()))
    return contract(kind, blocks, errors, xs, vs, out_shape)


def _info(name: str, t: torch.Tensor) -> TensorInfo:
    big = t.numel() > MAX_VALUES  # a batch of Hessians: its shape, not its millions of numbers
    values = None if big else (t.detach().to(torch.float64) if t.is_floating_point() else t.detach()).tolist()
    return TensorInfo(name, list(t.shape), str(t.dtype).removeprefix("torch."), values)
