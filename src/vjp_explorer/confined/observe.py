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
from dataclasses import asdict
from typing import Any

import torch

from ..engine.tolerance import tolerance
from ..snippet.result import Check, Event, LeafGrad, TensorInfo, element_index
from .record import NotReplayable, Recorder, serial

Send = Callable[[dict[str, Any]], None]


class Observer:
    """Turns each autograd call of the snippet into an event dict, sent as it happens."""

    def __init__(self, send: Send, filename: str, namespace: dict[str, Any], explained: int = 50) -> None:
        self.send, self.filename, self.namespace = send, filename, namespace
        self.recorder = Recorder()
        self.count = 0
        self.explained = explained  # events explained in full; later ones get the cheap checks only
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
        value = self._run(real, args, kwargs)
        after = [None if is_grad or x.grad is None else x.grad.detach().clone() for x in leaves]
        got = list(value) if is_grad else [_delta(b, a) for b, a in zip(before, after, strict=True)]
        self.count += 1
        event = Event(
            index=self.count,
            line=line,
            source=source,
            call=qualname,
            outputs=[_info(self.name_of(o, source), o) for o in outs],
            v=[_info("v", v) for v in v_used if isinstance(v, torch.Tensor)],
            v_origin="grad_outputs" if is_grad and given else "given" if given else "scalar default 1",
            retain_graph=bool(p.arguments.get("retain_graph") or p.arguments.get("create_graph")),
            create_graph=bool(p.arguments.get("create_graph")),
            inputs=[
                LeafGrad(
                    self.name_of(x),
                    list(x.shape),
                    _dtype(x),
                    _values(x),
                    _values(b),
                    None if is_grad else _values(a),
                    _values(g),
                )
                for x, b, a, g in zip(leaves, before, after, got, strict=True)
            ],
        )
        if all(isinstance(v, torch.Tensor) for v in v_used) and leaves:
            self._check(event, outs, v_used, leaves, got, before)
        self.send({"type": "event", "event": asdict(event)})
        if not event.retain_graph:
            self.recorder.forget(self.recorder.slice_for(outs, leaves))
        return value

    def _run(self, real: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self.depth += 1
        self.recorder.paused += 1  # backward's own operations are not the forward
        try:
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
    ) -> None:
        self.recorder.paused += 1
        self.depth += 1  # the checks' own autograd calls are not the snippet's
        try:
            replay = self.recorder.replay(outs, leaves)
            x0 = replay.leaf_values()
            if any(x is None for x in x0):
                raise NotReplayable("an input was not read by the recorded forward")
            changed = self._changed(replay, leaves)
            v = torch.cat([x.detach().reshape(-1).to(torch.float64) for x in vs])
            jac = _jacobian(replay, x0) if v.numel() <= 128 else None
            fd = _fd_jacobian(replay, x0) if sum(x.numel() for x in x0) <= 100 else None
        except NotReplayable as e:
            event.checks.append(Check("finite_difference", "skipped", _FD, reason=str(e)))
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
        for name, J, compares in (("jtv", jac, _JTV), ("finite_difference", fd, _FD)):
            if J is None:
                why = "J has more than 128 rows" if name == "jtv" else "more than 100 input elements"
                event.checks.append(Check(name, "skipped", compares, reason=why))
                continue
            refs = [Jk.T @ v for Jk in J]
            scales = [Jk.abs().T @ v.abs() for Jk in J]
            for k, ref in enumerate(refs):
                if name == "jtv":
                    event.inputs[k].jtv = ref.reshape(leaves[k].shape).tolist()
                    event.inputs[k].jacobian = J[k].tolist()
                else:
                    event.inputs[k].finite_difference = ref.reshape(leaves[k].shape).tolist()
            event.checks.append(_compare(name, compares, event, leaves, got, refs, scales, before))


_JTV = "the call's grads vs Jᵀv from the Jacobian of the replayed forward (autograd of the replay, float64)"
_FD = "the call's grads vs Jᵀv from central differences of the replayed forward (float64, no autograd)"


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


def _fd_jacobian(replay: Any, x0: list[torch.Tensor]) -> list[torch.Tensor]:
    """J by central differences, one column per input element: step h = cbrt(eps)·max(1, |x|)."""
    out = []
    for k, x in enumerate(x0):
        cols = []
        flat = x.reshape(-1)
        for j in range(flat.numel()):
            h = 6.055454e-06 * max(1.0, abs(float(flat[j])))
            plus, minus = [t.clone() for t in x0], [t.clone() for t in x0]
            plus[k].reshape(-1)[j] += h
            minus[k].reshape(-1)[j] -= h
            fp = torch.cat([y.reshape(-1).to(torch.float64) for y in replay(*plus)])
            fm = torch.cat([y.reshape(-1).to(torch.float64) for y in replay(*minus)])
            cols.append((fp - fm) / (2 * h))
        out.append(torch.stack(cols, dim=1) if cols else torch.zeros(0, 0, dtype=torch.float64))
    return out


def _compare(
    name: str,
    compares: str,
    event: Event,
    leaves: list[torch.Tensor],
    got: list[Any],
    refs: list[torch.Tensor],
    scales: list[torch.Tensor],
    before: list[Any],
) -> Check:
    worst, bad, tol = 0.0, [], ""
    for k, x in enumerate(leaves):
        g = torch.zeros_like(refs[k]) if got[k] is None else got[k].detach().reshape(-1).to(torch.float64)
        scale = scales[k] + (before[k].detach().reshape(-1).abs().to(torch.float64) if before[k] is not None else 0)
        table = tolerance(x.dtype)  # the one table (engine/tolerance.py)
        atol, rtol = table.atol, table.rtol
        if name == "finite_difference":
            atol = max(atol, 1e-7)  # the differences' own truncation and rounding, at h = cbrt(eps)
            rtol = max(rtol, 1e-6)
        tol = f"|Δ| <= {atol:g} + {rtol:g}·(Σ|v·J| + |.grad before|) ({_dtype(x)})"
        diff = (g - refs[k]).abs()
        both_nan = torch.isnan(g) & torch.isnan(refs[k])
        over = ~both_nan & ~(diff <= atol + rtol * scale)
        for i in torch.nonzero(over).reshape(-1).tolist()[:10]:
            bad.append(f"{event.inputs[k].name}{element_index(list(x.shape), i)}")
        finite = diff[torch.isfinite(diff)]
        if finite.numel():
            worst = max(worst, float(finite.max()))
    reason = ("differs at " + ", ".join(bad)) if bad else None
    return Check(name, "disagree" if bad else "agree", compares, max_abs_diff=worst, tolerance=tol, reason=reason)


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


def _info(name: str, t: torch.Tensor) -> TensorInfo:
    return TensorInfo(name, list(t.shape), _dtype(t), _values(t))


def observer_for(send: Send, filename: str, seed: int | None, explained: int) -> Callable[[dict[str, Any]], Any]:
    """What the runner calls with the snippet's namespace: seeds the generators (with --seed), then observes."""

    def make(namespace: dict[str, Any]) -> Observer:
        if seed is not None:
            import random

            torch.manual_seed(seed)
            random.seed(seed)
            if "numpy" in sys.modules or _has_numpy():
                import numpy

                numpy.random.seed(seed % 2**32)
        observer = Observer(send, filename, namespace, explained)
        observer.install()
        return observer

    return make


def _has_numpy() -> bool:
    import importlib.util

    return importlib.util.find_spec("numpy") is not None
