"""Every backward and grad call of a snippet, observed from the inside of the child that runs it.

`Observer.install()` wraps `Tensor.backward`, `torch.autograd.backward` and `torch.autograd.grad` (and
`autograd.Function.apply`, so a custom forward is recorded as the function it computes), and records the
forward's ATen operations (record.py). Each call runs exactly as the snippet wrote it, once; the tool never
calls the snippet's graph again (a custom backward or a hook would run twice). Afterwards the call is
explained from the record: the forward replayed in float64 gives finite differences (independent of
autograd) and, by autograd of the replay, the explicit Jacobian (a consistency check).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any

import torch

from ..engine.tolerance import tolerance
from ..snippet.result import Check, Event, LeafGrad, TensorInfo, element_index
from ..snippet.words import diagnose, event_notes
from .nonfinite import NonfiniteWatch, custom_functions
from .pattern import mistake_pattern
from .record import NotReplayable, Recorder, serial

Send = Callable[[dict[str, Any]], None]


class Observer:
    """Turns each autograd call of the snippet into an event dict, sent as it happens."""

    def __init__(
        self, send: Send, filename: str, namespace: dict[str, Any], explain: dict[str, Any] | None = None
    ) -> None:
        self.send, self.filename, self.namespace = send, filename, namespace
        self.recorder = Recorder()
        self.count = 0
        explain = explain or {}
        self.explained = int(explain.get("calls", 50))  # events explained in full; later ones get cheap checks
        self.jacobian_rows = int(explain.get("jacobian_rows", JACOBIAN_ROWS))
        self.graph = bool(explain.get("graph", False))
        self.depth = 0  # inside one of our wrappers: torch's own nested calls are not events
        self.real: dict[str, Any] = {}

    def install(self) -> None:
        """Wrap torch's entry points and start recording (before the snippet's first line)."""
        self.real = {
            "Tensor.backward": torch.Tensor.backward,
            "torch.autograd.backward": torch.autograd.backward,
            "torch.autograd.grad": torch.autograd.grad,
        }
        observer = self

        def backward(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            return observer.call("Tensor.backward", (self, *args), kwargs)

        def autograd_backward(*args: Any, **kwargs: Any) -> Any:
            return observer.call("torch.autograd.backward", args, kwargs)

        def grad(*args: Any, **kwargs: Any) -> Any:
            return observer.call("torch.autograd.grad", args, kwargs)

        wrappers: list[Any] = [(backward, torch.Tensor.backward), (autograd_backward, torch.autograd.backward)]
        for fn, real in wrappers:
            fn.__doc__, fn.__name__, fn.__signature__ = real.__doc__, real.__name__, inspect.signature(real)
        grad.__doc__, grad.__name__ = torch.autograd.grad.__doc__, "grad"
        torch.Tensor.backward = backward  # type: ignore[method-assign]
        torch.autograd.backward = autograd_backward
        torch.autograd.grad = grad
        apply = torch.autograd.Function.apply.__func__  # type: ignore[attr-defined]
        rec = self.recorder

        def recorded_apply(cls: Any, *args: Any, **kwargs: Any) -> Any:
            rec.custom_depth += 1
            try:
                return apply(cls, *args, **kwargs)
            finally:
                rec.custom_depth -= 1

        torch.autograd.Function.apply = classmethod(recorded_apply)  # type: ignore[assignment]
        self.recorder.__enter__()

    def before_statement(self, stmt: Any) -> None:
        """The runner's hook; events carry their own line, so nothing to do."""

    def after_statement(self, stmt: Any) -> None:
        """The runner's hook; events are sent as they happen."""

    # ------------------------------------------------------------------ one call

    def call(self, qualname: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        real = self.real[qualname]
        if self.depth:  # Tensor.backward calls torch.autograd.backward: one event, not two
            return real(*args, **kwargs)
        if _in_functorch_transform():  # torch.func's own grad calls, on wrappers with no storage to read
            return real(*args, **kwargs)
        try:
            p = inspect.signature(real).bind(*args, **kwargs)
        except TypeError:
            return real(*args, **kwargs)  # torch raises its own TypeError, as Python would
        p.apply_defaults()
        outs, vs, inputs = _arguments(qualname, p.arguments)
        if not outs or not all(isinstance(o, torch.Tensor) for o in outs):
            return self._run(real, args, kwargs)
        if any(v is not None and not isinstance(v, torch.Tensor) for v in vs):
            return self._run(real, args, kwargs)
        vs = (vs + [None] * len(outs))[: len(outs)]
        given = any(v is not None for v in vs)
        v_used = [torch.ones_like(o) if v is None and o.numel() == 1 else v for o, v in zip(outs, vs, strict=True)]
        if inputs is None:
            inputs = self.in_snippet_order(graph_leaves(outs))
        leaves = [x for x in inputs if isinstance(x, torch.Tensor)]
        is_grad = qualname == "torch.autograd.grad"
        before = [None if is_grad or x.grad is None else x.grad.detach().clone() for x in leaves]
        line, source = self._where()
        explain = self.count < self.explained
        watch = NonfiniteWatch(outs) if explain else None
        customs = custom_functions(outs) if explain else []
        hooked = self._hooked(outs, leaves)
        probe = self._graph_probe(outs) if explain and self.graph else None
        for started in (watch, probe):
            if started is not None:
                started.start()
        try:
            value = self._run(real, args, kwargs)
        finally:
            diagnosis = watch.finish() if watch is not None else None
            graph = probe.finish() if probe is not None else None
        after = [None if is_grad or x.grad is None else x.grad.detach().clone() for x in leaves]
        got = list(value) if is_grad else [_delta(b, a) for b, a in zip(before, after, strict=True)]
        self.count += 1

        def keep(t: Any) -> Any:  # past the explained calls, only small tensors' values travel
            return _values(t) if explain or t is None or t.numel() <= FOLDED_VALUES else None

        event = Event(
            index=self.count,
            line=line,
            source=source,
            call=qualname,
            outputs=[_info(self.name_of(o, source), o, explain) for o in outs],
            v=[_info("v", v) for v in v_used if isinstance(v, torch.Tensor)],
            v_origin="grad_outputs" if is_grad and given else "given" if given else "scalar default 1",
            retain_graph=bool(p.arguments.get("retain_graph") or p.arguments.get("create_graph")),
            create_graph=bool(p.arguments.get("create_graph")),
            inputs=[
                LeafGrad(
                    self.name_of(x),
                    list(x.shape),
                    _dtype(x),
                    keep(x),
                    keep(b),
                    None if is_grad else keep(a),
                    keep(g),
                    grad_norm=None if g is None else float(g.detach().to(torch.float64).norm()),
                )
                for x, b, a, g in zip(leaves, before, after, got, strict=True)
            ],
        )
        event.graph = graph
        nonfinite = any(isinstance(g, torch.Tensor) and not bool(torch.isfinite(g).all()) for g in got)
        event.diagnosis = diagnosis if nonfinite else None
        if all(isinstance(v, torch.Tensor) for v in v_used) and leaves:
            try:
                self._check(event, outs, v_used, leaves, got, before, cheap=not explain)
            except Exception as e:  # the tool's own failure is never the snippet's exception
                why = f"the check itself failed ({type(e).__name__}: {str(e)[:200]})"
                event.checks.append(Check("finite_difference", "skipped", _FD, reason=why))
        if hooked:  # .grad differs from Jᵀv by design, not by mistake
            why = f"a hook on {', '.join(hooked)} changes the gradient, so .grad is not Jᵀv by design"
            event.checks = [
                replace(c, status="skipped", reason=f"{why}; {c.reason}") if c.status == "disagree" else c
                for c in event.checks
            ]
        diagnose(event, customs)
        event.notes.extend(event_notes(event, before))
        self.send({"type": "event", "event": asdict(event)})
        if not event.retain_graph:
            self.recorder.forget(self.recorder.slice_for(outs, leaves))
        return value

    def _hooked(self, outs: list[torch.Tensor], leaves: list[torch.Tensor]) -> list[str]:
        """The snippet's named tensors on this call's graph that carry a `register_hook` hook."""
        nodes, stack = set(), [o.grad_fn for o in outs if o.grad_fn is not None]
        while stack:
            node = stack.pop()
            if id(node) not in nodes:
                nodes.add(id(node))
                stack.extend(nxt for nxt, _ in node.next_functions if nxt is not None)
        tensors = [*leaves, *outs, *(v for v in self.namespace.values() if isinstance(v, torch.Tensor))]
        found: list[str] = []
        for t in tensors:
            on_graph = any(t is x for x in leaves) or (t.grad_fn is not None and id(t.grad_fn) in nodes)
            if on_graph and getattr(t, "_backward_hooks", None) and self.name_of(t) not in found:
                found.append(self.name_of(t))
        return found

    def _graph_probe(self, outs: list[torch.Tensor]) -> Any:
        """The backward graph with what each node received (engine/backward_graph.py), named by the snippet."""
        from ..engine.backward_graph import GraphProbe

        made: dict[int, str] = {}
        for name, value in self.namespace.items():
            if isinstance(value, torch.Tensor) and value.grad_fn is not None and not name.startswith("__"):
                made.setdefault(id(value.grad_fn), name)

        def describe(node: Any) -> dict[str, Any]:
            leaf = getattr(node, "variable", None)
            return {"leaf": None if leaf is None else self.name_of(leaf), "value_of": made.get(id(node))}

        return GraphProbe(outs, describe)

    def _routes(self, outs: list[torch.Tensor], vs: list[torch.Tensor], leaves: list[torch.Tensor], cheap: bool) -> Any:
        """The replay and what the checks compare with: J, finite differences, term sizes, rounding."""
        from ..engine.finite_diff import finite_differences_of

        replay = self.recorder.replay(outs, leaves)
        x0 = replay.leaf_values()
        if any(x is None for x in x0):
            raise NotReplayable("an input was not read by the recorded forward")
        changed = self._changed(replay, leaves)
        v = torch.cat([x.detach().reshape(-1).to(torch.float64) for x in vs])
        jac = _jacobian(replay, x0) if v.numel() <= self.jacobian_rows and not cheap else None
        fd = finite_differences_of(_flat(replay), x0, v, 1 if cheap else FD_EVALS)
        terms = None if cheap else _term_sizes(replay, x0, v)
        rounding = None if cheap else _forward_rounding(replay, x0, leaves, v)
        return replay, x0, changed, v, jac, fd, terms, rounding

    def _run(self, real: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self.depth += 1
        self.recorder.paused += 1  # backward's own operations are not the forward
        try:
            with _outside_the_log():  # nor pay the log's Python dispatch
                return real(*args, **kwargs)
        finally:
            self.recorder.paused -= 1
            self.depth -= 1

    def _where(self) -> tuple[int, str]:
        """The snippet's line that made this call (the innermost frame of the snippet's own code)."""
        frame = sys._getframe(2)
        while frame is not None and frame.f_code.co_filename != self.filename:
            frame = frame.f_back  # type: ignore[assignment]
        if frame is None:
            return 0, ""
        import linecache

        return frame.f_lineno, linecache.getline(self.filename, frame.f_lineno).strip()

    def in_snippet_order(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        """Tensors ordered as the snippet first named them (unnamed ones last, as found)."""
        order = {id(v): k for k, v in enumerate(self.namespace.values())}
        return sorted(tensors, key=lambda t: order.get(id(t), len(order)))

    def name_of(self, t: torch.Tensor, source: str = "") -> str:
        """What the snippet calls a tensor: a global bound to it, a module's parameter, else its shape."""
        for name, value in self.namespace.items():
            if value is t and not name.startswith("__"):
                return name
        for name, value in list(self.namespace.items()):
            if isinstance(value, torch.nn.Module):
                for pname, param in value.named_parameters():
                    if param is t:
                        return f"{name}.{pname}"
        return f"tensor{list(t.shape)}"

    def _changed(self, replay: Any, leaves: list[torch.Tensor]) -> list[str]:
        """The tensors the forward read that hold other values now (`c.data.mul_(2.5)` after the forward)."""
        current: dict[int, torch.Tensor] = {serial(t): t for t in leaves}
        for value in list(self.namespace.values()):
            if isinstance(value, torch.Tensor):
                current.setdefault(serial(value), value)
            elif isinstance(value, torch.nn.Module):
                for t in [*value.parameters(), *value.buffers()]:
                    current.setdefault(serial(t), t)
        changed = self.recorder.changed_inputs(replay.entries, current)
        return [self.name_of(current[s]) for s in changed]

    # ------------------------------------------------------------------ the checks

    def _check(
        self,
        event: Event,
        outs: list[torch.Tensor],
        vs: list[torch.Tensor],
        leaves: list[torch.Tensor],
        got: list[Any],
        before: list[Any],
        cheap: bool = False,
    ) -> None:
        """jtv and finite differences on the replay; `cheap` (past the explained calls): finite differences
        along random directions only, a few evaluations of the replay."""
        self.recorder.paused += 1
        self.depth += 1  # the checks' own autograd calls are not the snippet's
        try:
            with _outside_the_log():
                replay, x0, changed, v, jac, fd, terms, rounding = self._routes(outs, vs, leaves, cheap)
        except (NotReplayable, RuntimeError) as e:
            why = str(e) if isinstance(e, NotReplayable) else f"the replay failed ({str(e).splitlines()[0][:200]})"
            event.checks.append(Check("finite_difference", "skipped", _FD, reason=why))
            return
        finally:
            self.recorder.paused -= 1
            self.depth -= 1
        if changed:
            event.notes.append(
                f"{', '.join(changed)} changed after the forward read {'them' if len(changed) > 1 else 'it'} "
                "(through .data or an in-place write autograd cannot see): backward used the values it saved, "
                "the replay the values the forward read."
            )
        g64 = [
            torch.zeros(x.numel(), dtype=torch.float64) if g is None else g.detach().reshape(-1).to(torch.float64)
            for x, g in zip(leaves, got, strict=True)
        ]
        prior = [None if b is None else b.detach().reshape(-1).abs().to(torch.float64) for b in before]
        sizes = [Jk.abs().T @ v.abs() for Jk in jac] if jac is not None else None
        if terms is not None:  # the size of what backward added up: its rounding is at that size
            sizes = terms if sizes is None else [torch.maximum(a, b) for a, b in zip(sizes, terms, strict=True)]
        if jac is None:
            why = f"J has more than {self.jacobian_rows} rows (--limit snippet_jacobian_rows=N)"
            if cheap:
                why = f"past the first {self.explained} calls, only cheap checks (--limit snippet_explained_calls=N)"
            event.checks.append(Check("jtv", "skipped", _JTV, reason=why))
        else:
            refs = [Jk.T @ v for Jk in jac]
            for k, ref in enumerate(refs):
                event.inputs[k].jtv = ref.reshape(leaves[k].shape).tolist()
                event.inputs[k].jacobian = jac[k].tolist()
            errs = list(rounding or [])
            masks = [torch.zeros(r.shape, dtype=torch.bool) for r in refs]
            event.checks.append(_compare("jtv", _JTV, event, leaves, g64, refs, errs, masks, sizes, prior))
        if fd.method == "full":
            refs = [fd.jtv[f"x{k}"].reshape(-1) for k in range(len(leaves))]
            for k, ref in enumerate(refs):
                shown = ref.clone()
                shown[fd.left_out[f"x{k}"].reshape(-1)] = float("nan")
                event.inputs[k].finite_difference = shown.reshape(leaves[k].shape).tolist()
            errs = [fd.error[f"x{k}"].reshape(-1) + (rounding[k] if rounding else 0) for k in range(len(leaves))]
            masks = [fd.left_out[f"x{k}"].reshape(-1) for k in range(len(leaves))]
            check = _left_out(
                event, _compare("finite_difference", _FD, event, leaves, g64, refs, errs, masks, sizes, prior), fd
            )
        else:
            check = _directions(fd, leaves, g64)
        event.checks.append(check)


FOLDED_VALUES = 100  # past the explained calls, a tensor's values travel only up to this many elements
JACOBIAN_ROWS = 128  # J of the replay for outputs up to this many elements (one autograd call per row)
FD_EVALS = 401  # every column of J by finite differences up to 100 input elements, else random directions
_JTV = "the call's grads vs Jᵀv from the Jacobian of the replayed forward (autograd of the replay, float64)"
_FD = "the call's grads vs Jᵀv from central differences of the replayed forward (float64, no autograd)"
_FD_DIR = "<u, the call's grads> vs (f(x + hu) - f(x - hu))/2h · v of the replayed forward, random u (float64)"


def _in_functorch_transform() -> bool:
    """Whether a torch.func transform (grad, jacrev, vmap, ...) is running: its tensors are wrappers."""
    peek = getattr(getattr(torch._C, "_functorch", None), "peek_interpreter_stack", None)
    return peek is not None and peek() is not None


def _outside_the_log() -> Any:
    """The log's dispatch mode off the stack for a while: what runs now is not recorded, and runs at C speed."""
    from torch.utils._python_dispatch import _disable_current_modes

    return _disable_current_modes()


def _flat(replay: Any) -> Callable[..., torch.Tensor]:
    """The replay as one function to one flat tensor: every output's elements in order."""

    def f(*xs: torch.Tensor) -> torch.Tensor:
        ys = [y.reshape(-1) for y in replay(*xs)]
        return torch.cat(ys) if ys else torch.zeros(0, dtype=torch.float64)

    return f


def _forward_rounding(
    replay: Any, x0: list[torch.Tensor], leaves: list[torch.Tensor], v: torch.Tensor
) -> list[torch.Tensor]:
    """Per input element, |Jᵀv of the replay in the forward's own dtypes − Jᵀv of it in float64|: how far the
    forward's rounding alone moves the gradient (a float32 loss whose residuals cancel), allowed on top of
    the tolerance. Both are autograd of the recorded ATen forward, never the snippet's own backward."""

    def vjp(f: Any, xs: list[torch.Tensor]) -> list[torch.Tensor]:
        with torch.enable_grad():
            y = f(*xs)
            if not y.requires_grad:
                return [torch.zeros(x.numel(), dtype=torch.float64) for x in xs]
            gs = torch.autograd.grad(y, xs, v.to(y.dtype), allow_unused=True)
        return [
            torch.zeros(x.numel(), dtype=torch.float64) if g is None else g.detach().reshape(-1).to(torch.float64)
            for g, x in zip(gs, xs, strict=True)
        ]

    try:
        wide = vjp(_flat(replay), [x.clone().requires_grad_() for x in x0])
        own = [x.to(leaf.dtype).clone().requires_grad_() for x, leaf in zip(x0, leaves, strict=True)]
        native = vjp(_flat(replay.in_native_dtypes()), own)
        return [(a - b).abs().nan_to_num(0.0, 0.0, 0.0) for a, b in zip(native, wide, strict=True)]
    except (RuntimeError, ValueError, TypeError, IndexError):
        return [torch.zeros(x.numel(), dtype=torch.float64) for x in x0]


def _term_sizes(replay: Any, x0: list[torch.Tensor], v: torch.Tensor) -> list[torch.Tensor] | None:
    """Σ|terms| backward adds up per input element (engine/term_sizes.py), on the replay; None where the
    replay cannot be run through autograd that way."""
    from ..engine.term_sizes import term_sizes

    try:
        return [t.reshape(-1) for t in term_sizes(_flat(replay), x0, v)]
    except (RuntimeError, ValueError, TypeError, IndexError):
        return None


def _jacobian(replay: Any, x0: list[torch.Tensor]) -> list[torch.Tensor]:
    """J of the replay by autograd of the replay itself (our graph: no snippet code runs again)."""
    xs = [x.clone().requires_grad_() for x in x0]
    with torch.enable_grad():
        ys = [y.reshape(-1) for y in replay(*xs)]
    y = torch.cat(ys) if ys else torch.zeros(0, dtype=torch.float64)
    rows: list[list[torch.Tensor]] = [[] for _ in xs]
    for i in range(y.numel()):
        gs = (
            torch.autograd.grad(y[i], xs, retain_graph=True, allow_unused=True) if y.requires_grad else [None] * len(xs)
        )
        for k, g in enumerate(gs):
            rows[k].append(torch.zeros(xs[k].numel(), dtype=torch.float64) if g is None else g.reshape(-1))
    return [
        torch.stack(r) if r else torch.zeros(0, x.numel(), dtype=torch.float64) for r, x in zip(rows, xs, strict=True)
    ]


def _compare(
    name: str,
    compares: str,
    event: Event,
    leaves: list[torch.Tensor],
    got: list[torch.Tensor],
    refs: list[torch.Tensor],
    errs: list[torch.Tensor],
    masks: list[torch.Tensor],
    sizes: list[torch.Tensor] | None,
    prior: list[Any],
) -> Check:
    """Each grad element against its reference within the dtype's tolerance (engine/tolerance.py), scaled by
    the size of the terms Jᵀv adds up (Σ|v·J| where J is known) and the grad it accumulated onto, plus three
    times the reference's own error estimate; elements in `masks` are no reference and are left out."""
    worst, bad, tol, pairs = 0.0, [], "", []
    for k, x in enumerate(leaves):
        g, ref = got[k], refs[k]
        scale = ref.abs() if sizes is None else torch.maximum(sizes[k], ref.abs())
        if prior[k] is not None:
            scale = scale + prior[k]
        table = tolerance(x.dtype)  # the one table
        tol = f"|Δ| <= {table.atol:g} + {table.rtol:g}·(Σ|v·J| + |.grad before|) + 3·(its error) ({_dtype(x)})"
        diff = (g - ref).abs()
        same = (torch.isnan(g) & torch.isnan(ref)) | (g == ref)  # nan on both routes, or the same infinity
        over = ~masks[k] & ~same & ~(diff <= table.atol + table.rtol * scale + 3 * errs[k])
        for i in torch.nonzero(over).reshape(-1).tolist()[:10]:
            bad.append(f"{event.inputs[k].name}{element_index(list(x.shape), i)}")
        finite = diff[torch.isfinite(diff) & ~masks[k]]
        if finite.numel():
            worst = max(worst, float(finite.max()))
        kept = torch.isfinite(diff) & ~masks[k]
        pairs.append(torch.stack([g[kept].reshape(-1), ref[kept].reshape(-1)]).to(torch.float64))
    reason = ("differs at " + ", ".join(bad)) if bad else None
    if bad and (pattern := mistake_pattern(torch.cat(pairs, 1))):
        reason = f"{reason}; {pattern}"
    return Check(name, "disagree" if bad else "agree", compares, max_abs_diff=worst, tolerance=tol, reason=reason)


def _left_out(event: Event, check: Check, fd: Any) -> Check:
    """Name the elements finite differences are no reference at (a kink, an infinite derivative)."""
    left: dict[str, list[str]] = {}
    for key, causes in fd.causes.items():
        k = int(key[1:])
        for j, cause in causes.items():
            left.setdefault(cause, []).append(f"{event.inputs[k].name}{element_index(event.inputs[k].shape, j)}")
    if not left:
        return check
    parts = [
        ", ".join(at[:6]) + (f" and {len(at) - 6} more" if len(at) > 6 else "") + f" ({c})" for c, at in left.items()
    ]
    text = "not a reference at " + "; at ".join(parts)
    return replace(check, reason=f"{check.reason}; {text}" if check.reason else text)


def _directions(fd: Any, leaves: list[torch.Tensor], got: list[torch.Tensor]) -> Check:
    """<u, grads> against the differences along each random direction u (more than 100 input elements)."""
    if not fd.directions:
        return Check("finite_difference", "skipped", _FD_DIR, reason=f"no usable direction: {fd.kink_reason}")
    table = tolerance(leaves[0].dtype)
    worst, bad = 0.0, []
    for k, ((ref, err, _), u) in enumerate(zip(fd.directions, fd.us, strict=True)):
        products = [u[f"x{i}"].reshape(-1) * g for i, g in enumerate(got)]
        dot = float(sum(float(p.sum()) for p in products))
        size = float(sum(float(p.abs().sum()) for p in products))
        diff = abs(dot - ref)
        worst = max(worst, diff) if diff == diff else worst
        if not diff <= table.atol + table.rtol * size + 3 * err:
            bad.append(f"direction {k + 1}: <u, grads> = {dot:.6g}, finite differences {ref:.6g}")
    return Check(
        "finite_difference",
        "disagree" if bad else "agree",
        f"{_FD_DIR} ({len(fd.directions)} directions, {fd.evals} evaluations)",
        max_abs_diff=worst,
        tolerance=f"|Δ| <= {table.atol:g} + {table.rtol:g}·Σ|u·grad| + 3·(the differences' error)",
        reason="; ".join(bad) or fd.kink_reason or None,
    )


def _arguments(qualname: str, p: dict[str, Any]) -> tuple[list[Any], list[Any], Any]:
    if qualname == "Tensor.backward":
        return [p["self"]], [p.get("gradient")], p.get("inputs")
    if qualname == "torch.autograd.backward":
        return _seq(p.get("tensors")), _seq(p.get("grad_tensors")), p.get("inputs")
    return _seq(p.get("outputs")), _seq(p.get("grad_outputs")), _seq(p.get("inputs"))


def graph_leaves(outs: list[torch.Tensor]) -> list[torch.Tensor]:
    """The leaves backward reaches from `outs`, in the order the graph names them."""
    found: list[torch.Tensor] = [o for o in outs if o.grad_fn is None and o.requires_grad]
    seen: set[int] = set()
    stack = [o.grad_fn for o in outs if o.grad_fn is not None]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if type(node).__name__ == "AccumulateGrad":
            var = node.variable  # type: ignore[attr-defined]
            if all(var is not f for f in found):
                found.append(var)
            continue
        stack.extend(nxt for nxt, _ in node.next_functions if nxt is not None)
    return found


def _seq(x: Any) -> list[Any]:
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _delta(before: Any, after: Any) -> Any:
    if after is None:
        return None
    return after if before is None else after - before


def _dtype(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def _values(t: Any) -> Any:
    if t is None:
        return None
    t = t.detach()
    if t.is_complex():
        return str(t.tolist())
    return t.to(torch.float64).tolist() if t.is_floating_point() else t.tolist()


def _info(name: str, t: torch.Tensor, whole: bool = True) -> TensorInfo:
    return TensorInfo(name, list(t.shape), _dtype(t), _values(t) if whole or t.numel() <= FOLDED_VALUES else None)


def observer_for(
    send: Send, filename: str, seed: int | None, explain: dict[str, Any]
) -> Callable[[dict[str, Any]], Any]:
    """What the runner calls with the snippet's namespace: seeds the generators (with --seed), then observes."""

    def make(namespace: dict[str, Any]) -> Observer:
        if seed is not None:
            import random

            torch.manual_seed(seed)
            random.seed(seed)
            if "numpy" in sys.modules or _has_numpy():
                import numpy

                numpy.random.seed(seed % 2**32)
        observer = Observer(send, filename, namespace, explain)
        observer.install()
        return observer

    return make


def _has_numpy() -> bool:
    import importlib.util

    return importlib.util.find_spec("numpy") is not None
