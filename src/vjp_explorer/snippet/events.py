"""Explain one backward or grad call of a snippet: v, the inputs' grads before and after, J, Jᵀv, the checks.

The real call runs exactly as the snippet wrote it. Before it, while the graph is still alive, the explicit
Jacobian is built by one `autograd.grad` per output element (one-hot v, graph retained), unless the snippet
registered hooks (they would run again) or the output is too large; after it, what the call added to each
`.grad` is compared with Jᵀv from that Jacobian, and with central differences of the replayed forward.
"""

from __future__ import annotations

import ast
import inspect
from typing import TYPE_CHECKING, Any

from ..engine.tolerance import tolerance
from ..errors import LimitError
from .result import Check, Event, LeafGrad, TensorInfo, element_index
from .runtime import SnippetRaised

if TYPE_CHECKING:
    import torch

    from .interp import Interpreter


class Explainer:
    """Holds the events of one snippet run; `__call__` is the interpreter's hook for autograd calls."""

    def __init__(self, graph: bool = False) -> None:
        self.events: list[Event] = []
        self.it: Interpreter | None = None
        self.graph = graph

    def __call__(
        self, qualname: str, real: Any, receiver: Any, args: list[Any], kwargs: dict[str, Any], node: ast.AST
    ) -> Any:
        import torch

        it = self.it
        assert it is not None
        self._count_call(it)
        p, outs, vs, inputs = _arguments(qualname, real, receiver, args, kwargs, node)
        odd_v = any(v is not None and not isinstance(v, torch.Tensor) for v in vs)  # torch decides what it does
        if not outs or not all(isinstance(o, torch.Tensor) for o in outs) or odd_v:
            return it.real(self._caller(receiver, real), *args, node=node, **kwargs)
        if not vs or vs == [None]:
            vs = [None] * len(outs)
        given = any(v is not None for v in vs)
        default = [torch.ones_like(o) if v is None and o.numel() == 1 else v for o, v in zip(outs, vs, strict=False)]
        from ..confined.observe import graph_leaves  # the one walk to the leaves, shared with the confined door

        leaves = _seq(inputs) if inputs is not None else in_snippet_order(it, graph_leaves(outs))
        leaves = [x for x in leaves if isinstance(x, torch.Tensor)]
        is_grad = qualname == "torch.autograd.grad"
        before = [None if is_grad or x.grad is None else x.grad.detach().clone() for x in leaves]
        explain = len(self.events) < it.limits.snippet_explained_calls
        jac, why_not, customs, diagnosis = self._probe(it, outs, default, leaves, explain)
        probe = None
        if self.graph and explain:
            from .graph import graph_probe

            probe = graph_probe(it, outs, lambda t: name_of(it, t, None))
            probe.start()
        try:
            value = it.traced(
                "grad" if qualname == "torch.autograd.grad" and p.get("create_graph") else "call",
                real,
                args,
                kwargs,
                lambda: it.real(self._caller(receiver, real), *args, node=node, **kwargs),
            )
        except SnippetRaised as raised:
            raised.context = _freed(outs, self.events) if "a second time" in str(raised.exc) else None
            raise
        finally:
            graph = probe.finish() if probe is not None else None
        returned = list(value) if is_grad else None
        after = [None if is_grad or x.grad is None else x.grad.detach().clone() for x in leaves]
        event = Event(
            index=len(self.events) + 1,
            line=it.where(node),
            source=ast.unparse(node) if isinstance(node, ast.expr) else "",
            call=qualname,
            outputs=[info(name_of(it, o, node), o) for o in outs],
            v=[info("v", v) for v in default if isinstance(v, torch.Tensor)],
            v_origin="grad_outputs" if is_grad and given else "given" if given else "scalar default 1",
            retain_graph=bool(p.get("retain_graph") if p.get("retain_graph") is not None else p.get("create_graph")),
            create_graph=bool(p.get("create_graph")),
            inputs=_leaf_grads(it, leaves, before, after, returned),
            diagnosis=diagnosis,
            graph=graph,
        )
        if jac is not None:
            self._check_jtv(event, jac, default, leaves, before, after, returned)
        else:
            event.checks.append(
                Check("jtv", "skipped", "the call's grads vs Jᵀv from the explicit Jacobian", reason=why_not)
            )
        if explain and it.replay is not None:
            from .replay import finite_difference_check

            trace, it.replay, it.quiet = it.replay, None, True  # the replay may run snippet functions again
            try:
                finite_difference_check(it, event, outs, default, leaves, before, after, returned, trace)
            finally:
                it.replay, it.quiet = trace, False
        _diagnose(event, customs)
        event.notes.extend(_notes(event, before))
        self.events.append(event)
        return value

    def functional(
        self, qualname: str, real: Any, args: list[Any], kwargs: dict[str, Any], node: ast.AST, value: Any
    ) -> None:
        """Record a torch.autograd.functional call that ran, checked against finite differences."""
        from .functional import explain

        it = self.it
        assert it is not None
        self._count_call(it)
        if len(self.events) >= it.limits.snippet_explained_calls:
            return
        event = explain(it, qualname, real, args, kwargs, node, value, len(self.events) + 1)
        if event is not None:
            self.events.append(event)

    def transformed(self, fn: Any, args: list[Any], kwargs: dict[str, Any], node: ast.AST, value: Any) -> None:
        """Record a call of torch.func.grad(f) / jacrev(f) / jacfwd(f) / hessian(f), checked like functional."""
        from .functional import explain_transform

        it = self.it
        assert it is not None
        if len(self.events) >= it.limits.snippet_explained_calls:
            return
        made_from: tuple[str, Any, dict[str, Any]] = fn.made_from or ("jvp", None, {})  # torch.func.jvp(...) itself
        event = explain_transform(it, fn.qualname, made_from, args, kwargs, node, value, len(self.events) + 1)
        if event is not None:
            self.events.append(event)

    def _count_call(self, it: Interpreter) -> None:
        """Refuse a backward, grad or functional call beyond the limit, before it runs."""
        if len(self.events) >= it.limits.snippet_backward_calls:
            raise LimitError(
                f"The snippet calls backward or grad more than {it.limits.snippet_backward_calls:,} times.",
                hint="Raise the limit with --limit snippet_backward_calls=N.",
            )

    def _probe(
        self, it: Interpreter, outs: list[Any], vs: list[Any], leaves: list[Any], explain: bool
    ) -> tuple[list[Any] | None, str | None, list[str], str | None]:
        """Before the real call: J (or why not), the custom Functions on the graph, where a nan or inf entered."""
        kept = [(t, None if t.grad is None else t.grad.detach().clone()) for t in it.retained]
        it.quiet = True  # the probes below may run the snippet's own backward code: no output, no steps
        jac, why_not = self._jacobian(outs, vs, leaves) if explain else (None, "only the first calls are explained")
        customs = _custom_nodes(outs)
        diagnosis = None
        if jac is not None and _nonfinite_jtv(jac, vs):
            from .nonfinite import locate

            diagnosis = locate(it, outs, vs, leaves)
        for t, g in kept:  # the probes above must leave no trace in a retain_grad() tensor's .grad
            t.grad = g
        it.quiet = False
        return jac, why_not, customs, diagnosis

    @staticmethod
    def _caller(receiver: Any, real: Any) -> Any:
        return receiver.backward if receiver is not None else real

    def _jacobian(self, outs: list[Any], vs: list[Any], leaves: list[Any]) -> tuple[list[Any] | None, str | None]:
        """J for each leaf (rows: the outputs' elements), from one-hot v before the real call (graph retained)."""
        import torch

        it = self.it
        assert it is not None
        if it.hooks:
            return None, "the snippet registered hooks, which building J would run again"
        if not leaves:
            return None, "the output depends on no tensor that requires grad"
        m = sum(o.numel() for o in outs)
        if m > it.limits.snippet_jacobian_rows:
            return (
                None,
                f"J would take {m:,} backward calls (limit snippet_jacobian_rows={it.limits.snippet_jacobian_rows:,})",
            )
        if any(not o.requires_grad for o in outs) or any(
            v is None or v.shape != o.shape for o, v in zip(outs, vs, strict=False)
        ):
            return None, "the call itself fails (see below)"
        rows: list[list[Any]] = [[] for _ in leaves]
        try:
            for o in outs:
                for count, block in _rows(o, leaves):
                    for j, g in enumerate(block):
                        rows[j].append(
                            torch.zeros(count, leaves[j].numel(), dtype=torch.float64)
                            if g is None
                            else g.detach().reshape(count, -1).to(torch.float64)
                        )
        except RuntimeError as e:
            return None, f"building J failed: {str(e).splitlines()[0]}"
        rows = [[torch.cat(r)] if r else [] for r in rows]
        return [
            r[0] if r else torch.zeros(0, x.numel(), dtype=torch.float64) for r, x in zip(rows, leaves, strict=True)
        ], None

    def _check_jtv(
        self,
        event: Event,
        jac: list[Any],
        vs: list[Any],
        leaves: list[Any],
        before: list[Any],
        after: list[Any],
        returned: list[Any] | None,
    ) -> None:
        import torch

        v = torch.cat([x.detach().reshape(-1).to(torch.float64) for x in vs])
        worst = 0.0
        bad: list[str] = []
        undefined: list[str] = []
        tol_text = ""
        for k, (x, J) in enumerate(zip(leaves, jac, strict=True)):
            ref = J.T @ v
            scale = J.abs().T @ v.abs()
            event.inputs[k].jtv = _values(ref.reshape(x.shape))
            event.inputs[k].jacobian = J.tolist()
            got_t = returned[k] if returned is not None else _delta(before[k], after[k])
            if got_t is None:
                got = torch.zeros_like(ref)
            else:
                got = got_t.detach().reshape(-1).to(torch.float64)
            if before[k] is not None:
                scale = scale + before[k].detach().reshape(-1).abs().to(torch.float64)
            tol = tolerance(x.dtype)
            atol, rtol = tol.atol, tol.rtol
            tol_text = f"|Δ| <= {atol:g} + {rtol:g}·(Σ|v·J| + |.grad before|) ({str(x.dtype).removeprefix('torch.')})"
            finite = torch.isfinite(got) & torch.isfinite(ref)
            for i in torch.nonzero(~finite).reshape(-1).tolist():
                g, r = got[i].item(), ref[i].item()
                label = f"{event.inputs[k].name}{element_index(x.shape, i)}"
                if (g != g and r != r) or g == r:
                    undefined.append(label)
                else:
                    bad.append(label)
            diff = (got - ref).abs()
            diff[~finite] = 0
            over = diff > atol + rtol * scale
            for i in torch.nonzero(over).reshape(-1).tolist()[:20]:
                bad.append(f"{event.inputs[k].name}{element_index(x.shape, i)}")
            if diff.numel():
                worst = max(worst, float(diff.max()))
        compares = ("the returned grads" if returned is not None else "what the call added to .grad") + (
            " vs Jᵀv from the explicit Jacobian (autodiff, one-hot rows)"
        )
        event.checks.append(
            Check(
                "jtv",
                "disagree" if bad else "agree",
                compares,
                max_abs_diff=worst,
                tolerance=tol_text,
                reason=("differs at " + ", ".join(bad[:10])) if bad else None,
                undefined=tuple(undefined),
            )
        )


def _arguments(
    qualname: str, real: Any, receiver: Any, args: list[Any], kwargs: dict[str, Any], node: ast.AST
) -> tuple[dict[str, Any], list[Any], list[Any], Any]:
    """The call's arguments bound as torch names them, then its outputs, their v and its inputs= (or None)."""
    import torch

    fn = torch.Tensor.backward if receiver is not None else real
    full = [receiver, *args] if receiver is not None else list(args)
    try:
        bound = inspect.signature(fn).bind(*full, **kwargs)
    except TypeError as e:
        raise SnippetRaised(e, node) from None
    bound.apply_defaults()
    p = bound.arguments
    if qualname == "Tensor.backward":
        return p, [receiver], [p.get("gradient")], p.get("inputs")
    if qualname == "torch.autograd.backward":
        return p, _seq(p.get("tensors")), _seq(p.get("grad_tensors")), p.get("inputs")
    return p, _seq(p.get("outputs")), _seq(p.get("grad_outputs")), p.get("inputs")


def _leaf_grads(
    it: Interpreter, leaves: list[Any], before: list[Any], after: list[Any], returned: list[Any] | None
) -> list[LeafGrad]:
    """Each input with its grad: returned by autograd.grad, or what backward added to .grad."""
    out = []
    for k, x in enumerate(leaves):
        got = returned[k] if returned is not None else _delta(before[k], after[k])
        out.append(
            LeafGrad(
                name=name_of(it, x, None),
                shape=list(x.shape),
                dtype=str(x.dtype).removeprefix("torch."),
                value=_values(x),
                grad_before=_values(before[k]),
                grad_after=_values(after[k]) if returned is None else None,
                grad=_values(got),
            )
        )
    return out


def _diagnose(event: Event, customs: list[str]) -> None:
    """Complete the diagnosis once the checks ran: a custom Function to suspect, or a derivative that is not finite."""
    fd = next((c for c in event.checks if c.name == "finite_difference"), None)
    if customs and event.status == "disagree":
        names = ", ".join(customs)
        event.diagnosis = (event.diagnosis + " " if event.diagnosis else "") + (
            f"The gradient passes through the custom Function {names}: finite differences of its forward "
            "are the reference, so look at its backward first (a factor, a sign, a transposed or missing term)."
        )
    if event.diagnosis and fd is not None and fd.status == "agree":
        event.diagnosis = (
            "Finite differences find no finite derivative here either, so a non-finite grad is what the math "
            "gives (the derivative is infinite or undefined at this point). " + event.diagnosis
        )


def in_snippet_order(it: Interpreter, tensors: list[Any]) -> list[Any]:
    """Tensors ordered as the snippet first named them (unnamed ones last, as found)."""
    order = {id(v): k for k, v in enumerate(it.globals.vars.values())}
    return sorted(tensors, key=lambda t: order.get(id(t), len(order)))


def name_of(it: Interpreter, t: Any, node: ast.AST | None) -> str:
    """What the snippet calls a tensor: a global name bound to it, else the expression that produced it."""
    for name, value in it.globals.vars.items():
        if value is t:
            return name
    import torch

    for name, value in it.globals.vars.items():
        if isinstance(value, torch.nn.Module):
            for pname, param in value.named_parameters():
                if param is t:
                    return f"{name}.{pname}"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return ast.unparse(node.func.value)
    return f"tensor{list(t.shape)}"


# ------------------------------------------------------------------ errors and budgets


def _freed(outs: list[Any], events: list[Event]) -> str | None:
    """For 'backward through the graph a second time': what the graph saved, and which call freed it."""
    saved: list[str] = []
    seen: set[int] = set()
    stack = [o.grad_fn for o in outs if o.grad_fn is not None]
    while stack and len(saved) < 8:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        names = [a.removeprefix("_saved_") for a in dir(node) if a.startswith("_saved_") and "sym" not in a]
        if names:
            saved.append(f"{type(node).__name__} ({', '.join(names)})")
        stack.extend(n for n, _ in node.next_functions if n is not None)
    if not saved:
        return None
    earlier = [e for e in events if not e.retain_graph]
    by = f"the backward at line {earlier[-1].line}" if earlier else "an earlier backward"
    return f"This graph saved tensors in {', '.join(saved)}; {by} freed them (it ran without retain_graph=True)."


def _custom_nodes(outs: list[Any]) -> list[str]:
    """The snippet's own autograd Functions on the graph behind `outs` (torch names their nodes NameBackward)."""
    found: list[str] = []
    seen: set[int] = set()
    stack = [o.grad_fn for o in outs if o.grad_fn is not None]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        cls = getattr(node, "_forward_cls", None)  # set on the nodes of Python autograd Functions
        if cls is not None and cls.__name__ not in found:
            found.append(cls.__name__)
        stack.extend(n for n, _ in node.next_functions if n is not None)
    return found


def _nonfinite_jtv(jac: list[Any], vs: list[Any]) -> bool:
    import torch

    v = torch.cat([x.detach().reshape(-1).to(torch.float64) for x in vs])
    return any(not bool(torch.isfinite(J.T @ v).all()) for J in jac)


def _rows(o: Any, leaves: list[Any]) -> list[tuple[int, tuple[Any, ...]]]:
    """J's rows for one output, as blocks (rows × leaf elements) per leaf: all one-hot v in one batched call
    (autograd.grad's is_grads_batched, no torch.func), else one call per row (ops vmap cannot batch)."""
    import torch

    m = o.numel()
    if m == 1:  # v = 1: passing it would import torch.fx and sympy (0.8 s), as backward() does not
        return [(1, torch.autograd.grad(o, leaves, retain_graph=True, allow_unused=True))]
    eye = torch.eye(m, dtype=o.dtype).reshape(m, *o.shape)
    try:
        return [(m, torch.autograd.grad(o, leaves, eye, retain_graph=True, allow_unused=True, is_grads_batched=True))]
    except RuntimeError:
        pass
    out: list[tuple[int, tuple[Any, ...]]] = []
    for i in range(m):
        out.append((1, torch.autograd.grad(o, leaves, eye[i], retain_graph=True, allow_unused=True)))
    return out


def info(name: str, t: torch.Tensor) -> TensorInfo:
    return TensorInfo(name, list(t.shape), str(t.dtype).removeprefix("torch."), _values(t))


def _values(t: Any) -> Any:
    import torch

    if t is None:
        return None
    t = t.detach()
    if t.is_floating_point():
        t = t.to(torch.float64)
    elif t.is_complex():
        return str(t.tolist())
    return t.tolist()


def _delta(before: Any, after: Any) -> Any:
    if after is None:
        return None
    return after if before is None else after - before


def _seq(x: Any) -> list[Any]:
    import torch

    if x is None:
        return []
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return list(x)
    return [x]


def _notes(event: Event, before: list[Any]) -> list[str]:
    out = []
    y = event.outputs[0] if event.outputs else None
    if event.call != "torch.autograd.grad" and any(b is not None and bool(b.abs().sum() > 0) for b in before):
        out.append(
            "Some .grad already held values before this call: backward adds Jᵀv to them (gradients accumulate). "
            "Zero them (x.grad.zero_() or x.grad = None) between calls if that is not what you want."
        )
    if event.v_origin == "scalar default 1" and y is not None:
        out.append("The output is a single number, so backward() uses v = 1: the grads are the plain derivatives.")
    if event.v and y is not None and event.v_origin != "scalar default 1":
        flat = _flatten(event.v[0].values)
        if flat and all(x in (0.0, 1.0) for x in flat) and sum(flat) == 1:
            out.append(f"v is one-hot (element {flat.index(1.0)}): the grads are row {flat.index(1.0)} of J.")
        elif flat and len(flat) > 1 and all(x == 1.0 for x in flat):
            out.append("v is all ones: the grads are the column sums of J, the same as backward of y.sum().")
    if event.retain_graph and event.call != "torch.autograd.grad":
        out.append("retain_graph=True keeps the saved tensors, so another backward through this graph works.")
    if event.create_graph:
        out.append("create_graph=True records the backward pass itself, so these grads can be differentiated again.")
    return out


def _flatten(x: Any) -> list[float]:
    if isinstance(x, list):
        return [v for item in x for v in _flatten(item)]
    return [x] if isinstance(x, (int, float)) else []


ERRORS = [
    (
        "Trying to backward through the graph a second time",
        "The first backward through this graph freed the intermediate values it saved (that is what keeps memory "
        "low). Pass retain_graph=True to the earlier call if you really need a second backward through the same "
        "graph (for example two different v), or recompute the forward before calling backward again.",
    ),
    (
        "grad can be implicitly created only for scalar outputs",
        "backward() without an argument uses v = 1, which only exists when the output is one number. Give v "
        "with the output's shape (y.backward(torch.ones_like(y)) gives the column sums of J, the same as "
        "y.sum().backward()), or reduce the output to a scalar first.",
    ),
    (
        "does not require grad and does not have a grad_fn",
        "Nothing this output was computed from requires grad, so there is no graph to walk back through: create "
        "the inputs with requires_grad=True (or call .requires_grad_()), and do not compute the output under "
        "torch.no_grad() or from .detach()/.data.",
    ),
    (
        "modified by an inplace operation",
        "A tensor that the graph saved for backward was changed in place afterwards (its version counter moved "
        "on). Use the out-of-place form (x = x + 1 instead of x += 1), or .clone() the tensor before changing it.",
    ),
    (
        "pin_memory",
        "Pinned memory needs an accelerator; on a machine without one torch raises here. Without "
        "pin_memory=True, torch.empty would return uninitialised memory: its numbers are whatever was in "
        "memory, so the values the source printed cannot be reproduced.",
    ),
    (
        "Mismatch in shape",
        "v lives in the output's space: it needs one entry per output element, the output's shape.",
    ),
    (
        "appears to not have been used in the graph",
        "One of the inputs does not take part in computing the output: pass allow_unused=True to get None for "
        "it, or leave it out of inputs.",
    ),
    (
        "Only Tensors of floating point",
        "Integer tensors cannot require grad: write the values as floats (1.0) or pass dtype=torch.float32.",
    ),
    (
        "a leaf Variable that requires grad is being used in an in-place operation",
        "Changing a leaf that requires grad in place would corrupt the graph: update it inside "
        "`with torch.no_grad():` (as optimizers do), or work on a clone.",
    ),
    (
        "Boolean value of Tensor with more than one value is ambiguous",
        "An if or while condition needs one number: reduce the tensor first (.all(), .any(), .item()).",
    ),
]


def explain_error(message: str) -> str | None:
    for pattern, text in ERRORS:
        if pattern in message:
            return text
    return None
