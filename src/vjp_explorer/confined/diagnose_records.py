"""The records and tensor helpers of a diagnosis run (confined/diagnose.py): how each tensor came to be, each
in-place change, each backward call; the first node that sent a nan or inf on; the float64 recomputation that
says whether a derivative is finite; walks of the backward graph."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

MAX_NODES = 20_000  # nodes of one graph walked for a diagnosis
MAX_WALK = 100_000  # records walked back from an output


@dataclass(eq=False)
class Made:
    """How one tensor came to be: the op and line that made it, the records of its inputs (kept by reference,
    so the story survives tensors the snippet dropped), and whether a value that required grad lost its graph
    there (`cut`)."""

    ref: Any  # weakref to the tensor
    line: int | None
    op: str
    parents: list[Made] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)  # each input's version counter when the op read it
    inputs: list[Any] = field(default_factory=list)  # weakrefs to the inputs
    cut: str | None = None  # ".detach()", "torch.no_grad()", ...: the op that dropped the graph here
    cut_leaves: set[int] = field(default_factory=set)  # ids of the leaves the cut value depended on
    requires_grad: bool = False
    call: Any = None  # (func, args, kwargs) with the inputs held, to recompute the op in float64
    name: str | None = None  # what the snippet called the tensor, where it was bound when an op read it


@dataclass
class Mutation:
    """One call that moved a tensor's version counter (an in-place change), where the snippet made it."""

    line: int
    op: str
    storage: int
    before: int
    after: int
    name: str | None
    leaf: bool  # the tensor changed is a leaf that requires grad (a parameter an optimizer steps)
    key: int  # id of the tensor changed
    made: tuple[int | None, str] | None = None  # the line and op that made the tensor changed (`c = out.detach()`)


@dataclass
class Backward:
    """One backward call that ran to its end: its line, the nodes it may have freed, the leaves it reached."""

    line: int
    nodes: dict[int, Any]  # id -> node, held (their saved tensors are freed anyway) so no id is reused
    reached: set[int]
    retained: bool
    mutations_before: int  # len(mutations) when it ran: what changed after it


class NonfiniteWatch:
    """Hooks on every node of a graph for one backward call: the first node that received finite
    cotangents and sent a nan or inf on, with what it received (the call runs once, as written)."""

    def __init__(self, roots: list[Any]) -> None:
        self.roots = roots
        self.found: tuple[Any, tuple[Any, ...]] | None = None
        self.handles: list[Any] = []

    def start(self) -> None:
        for node in itertools.islice(graph_nodes(self.roots), MAX_NODES):
            self.handles.append(node.register_hook(lambda sent, arriving, node=node: self._hook(node, sent, arriving)))

    def _hook(self, node: Any, sent: Any, arriving: Any) -> None:
        if self.found is not None:
            return
        if all(finite(g) for g in arriving) and not all(finite(g) for g in sent):
            self.found = (node, tuple(g.detach().clone() if isinstance(g, torch.Tensor) else g for g in arriving))

    def finish(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []


def floating(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point()


def finite(g: Any) -> bool:
    return not isinstance(g, torch.Tensor) or bool(torch.isfinite(g).all())


def spurious(made: Made, arriving: tuple[Any, ...]) -> bool | None:
    """Whether the exact derivative is finite where backward sent a nan or inf: the node's op recomputed in
    float64 on the values it read, its VJP with the cotangent that arrived, a zero cotangent counting as no
    path at all (0·∞ of a branch `where` did not take is no derivative of the function). None: not known."""
    found = _wide_vjp(made, arriving)
    return None if found is None else all(bool(torch.isfinite(d).all()) for d in found)


def past_range(made: Made, arriving: tuple[Any, ...]) -> str | None:
    """The dtype whose largest number the exact (float64) gradient of the node passes, where it does: the
    backward overflowed (float16 training without a loss scale), a right gradient too large to hold."""
    dtype = arriving[0].dtype if arriving and floating(arriving[0]) else None
    found = _wide_vjp(made, arriving) if dtype is not None and dtype != torch.float64 else None
    if dtype is None or not found or not all(bool(torch.isfinite(d).all()) for d in found):
        return None
    top = torch.finfo(dtype).max
    return str(dtype).removeprefix("torch.") if any(bool((d.abs() > top).any()) for d in found) else None


def _wide_vjp(made: Made, arriving: tuple[Any, ...]) -> list[torch.Tensor] | None:
    """The node's VJP recomputed in float64 with the cotangent that arrived (zero where it is zero, for an
    elementwise op), one per floating input; None where it cannot be recomputed."""
    if made.call is None or not arriving or not isinstance(arriving[0], torch.Tensor):
        return None
    func, args, kwargs = made.call
    if any(version(ref()) != v for ref, v in zip(made.inputs, made.versions, strict=False) if ref() is not None):
        return None
    ins: list[torch.Tensor] = []

    def wide(x: Any) -> Any:
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            y = x.detach().to(torch.float64).requires_grad_(True)
            ins.append(y)
            return y
        if isinstance(x, (list, tuple)):
            return type(x)(wide(v) for v in x)
        return x

    with torch.enable_grad():
        out = func(*wide(args), **{k: wide(v) for k, v in kwargs.items()})
        out = out[0] if isinstance(out, (tuple, list)) else out
        if not isinstance(out, torch.Tensor) or not out.requires_grad:
            return None
        g = arriving[0].detach().to(torch.float64)
        grads = torch.autograd.grad(out, ins, g, allow_unused=True)
    found = []
    for d in grads:
        if d is None:
            continue
        if d.shape == g.shape:  # elementwise: a zero cotangent is no path through this element
            d = torch.where(g == 0, torch.zeros_like(d), d)
        found.append(d)
    return found


def overflowed(made: Made) -> bool:
    """The op's own forward value is inf where float64 holds it finite (exp of a large number in float32): an
    overflow, not a singularity (log at 0 is -inf in float64 too)."""
    t = made.ref()
    if not floating(t) or not bool(torch.isinf(t).any()) or made.call is None:
        return False
    return finite_in_float64(made.call)


def finite_in_float64(call: tuple[Any, Any, Any]) -> bool:
    func, args, kwargs = call
    wide = [a.detach().to(torch.float64) if floating(a) else a for a in args]
    again = func(*wide, **kwargs)
    return isinstance(again, torch.Tensor) and bool(torch.isfinite(again).all())


def overflowed_input(made: Made) -> Made | None:
    """The record of an input of `made` that is inf where its own op, recomputed in float64, is finite."""
    for parent in made.parents:
        t = parent.ref()
        if not floating(t) or not bool(torch.isinf(t).any()) or parent.call is None:
            continue
        if finite_in_float64(parent.call):
            return parent
    return None


def saved_failing(node: Any, words: str) -> str | None:
    """The first `_saved_*` of a node whose reading raises with `words`: the tensor backward could not use."""
    for attr in dir(node):
        if not attr.startswith("_saved_"):
            continue
        try:
            getattr(node, attr)
        except RuntimeError as e:
            if words in str(e):
                return attr
    return None


def role(attr: str) -> str:
    return "output" if attr == "_saved_result" else "input"


def walk(starts: list[Made]) -> Iterator[Made]:
    """Each record behind `starts`, nearest first (breadth first), once."""
    return _breadth_first(starts, lambda m: m.parents, MAX_WALK)


def _breadth_first(starts: list[Any], after: Any, most: int | None = None) -> Iterator[Any]:
    """Each item reachable from `starts` through `after(item)`, nearest first, once (at most `most` looked at)."""
    seen: set[int] = set()
    queue = list(starts)
    k = 0
    while k < len(queue) and (most is None or k < most):
        item = queue[k]
        k += 1
        if id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        queue.extend(after(item))


def bound_name(t: Any, frame: Any, namespace: dict[str, Any], modules: bool = True) -> str | None:
    """What the snippet calls `t`: a name in the snippet's frame, a global, or (with `modules`, the slow part,
    asked only when a finding is said) a module's parameter."""
    scopes = [frame.f_locals] if frame is not None and frame.f_globals is not frame.f_locals else []
    for scope in [*scopes, namespace]:
        for name, value in list(scope.items()):
            if value is t and not name.startswith("_") and name != "self":
                return str(name)
    if not modules:
        return None
    for name, value in list(namespace.items()):
        if isinstance(value, torch.nn.Module) and not name.startswith("_"):
            for pname, p in value.named_parameters():
                if p is t:
                    return f"{name}.{pname}"
    return None


def unreached_parameters(namespace: dict[str, Any], reached: set[int]) -> list[tuple[str, torch.Tensor]]:
    """The parameters a backward left without a gradient: of each module of the snippet that the backward
    reached in part (a module it never touched is another part of the program, a GAN's other half), those it
    did not reach whose `.grad` is still None. By the snippet's own names (`model.fc2.weight`)."""
    found: list[tuple[str, torch.Tensor]] = []
    for mod_name, module in list(namespace.items()):
        if not isinstance(module, torch.nn.Module) or mod_name.startswith("_"):
            continue
        params = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not any(id(p) in reached for _, p in params):
            continue
        found += [(f"{mod_name}.{n}", p) for n, p in params if id(p) not in reached and p.grad is None]
    return found


def tensors(args: Any, kwargs: dict[str, Any]) -> list[torch.Tensor]:
    """The tensors among a call's arguments (one level into lists: cat, foreach ops), each once."""
    found: list[torch.Tensor] = []
    for a in [*args, *kwargs.values()]:
        for t in a if isinstance(a, (list, tuple)) else (a,):
            if isinstance(t, torch.Tensor) and not any(t is f for f in found):
                found.append(t)
    return found


def version(t: Any) -> int:
    try:
        return int(t._version)
    except Exception:  # noqa: BLE001 - inference tensors and wrappers keep no version counter
        return -1


def storage(t: torch.Tensor) -> int:
    try:
        return int(t.untyped_storage().data_ptr())
    except Exception:  # noqa: BLE001 - a tensor without storage (a wrapper, meta)
        return -1


def op_name(func: Any) -> str:
    name = getattr(func, "__name__", "") or ""
    if name == "__get__":
        return str(getattr(getattr(func, "__self__", None), "__name__", name))
    return str(name)


def cut_name(op: str, grad_mode: bool) -> str:
    if not grad_mode:
        return "torch.no_grad()"
    return {"detach": ".detach()", "data": ".data"}.get(op, op)


def leaves_of(ts: list[torch.Tensor]) -> set[int]:
    found = {id(t) for t in ts if t.is_leaf and t.requires_grad}
    found |= {id(x) for x in graph_leaves([t for t in ts if t.grad_fn is not None])}
    return found


def outputs(qualname: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    if qualname == "Tensor.backward":
        first: Any = args[0] if args else None
    else:
        first = args[0] if args else kwargs.get("tensors" if qualname.endswith("backward") else "outputs")
    seq = list(first) if isinstance(first, (list, tuple)) else [first]
    return [t for t in seq if isinstance(t, torch.Tensor)]


def argument(qualname: str, args: tuple[Any, ...], kwargs: dict[str, Any], name: str) -> Any:
    """A keyword of a backward call, or its positional place (Tensor.backward(gradient, retain_graph, ...))."""
    if name in kwargs:
        return kwargs[name]
    order = {
        "Tensor.backward": ["self", "gradient", "retain_graph", "create_graph", "inputs"],
        "torch.autograd.backward": ["tensors", "grad_tensors", "retain_graph", "create_graph", "grad_variables"],
        "torch.autograd.grad": ["outputs", "inputs", "grad_outputs", "retain_graph", "create_graph"],
    }.get(qualname, [])
    k = order.index(name) if name in order else len(args)
    return args[k] if k < len(args) else None


def graph_nodes(roots: list[Any]) -> Iterator[Any]:
    """Each node of the backward graph below `roots`, once, nearest first."""
    return _breadth_first(
        [r for r in roots if r is not None], lambda n: [c for c, _ in n.next_functions if c is not None]
    )


def leaves_below(node: Any) -> list[torch.Tensor]:
    found = []
    for n in itertools.islice(graph_nodes([node]), MAX_NODES):
        var = getattr(n, "variable", None) if type(n).__name__ == "AccumulateGrad" else None
        if isinstance(var, torch.Tensor):
            found.append(var)
    return found


def graph_leaves(outs: list[Any]) -> list[torch.Tensor]:
    """The leaves backward reaches from `outs`."""
    found = [o for o in outs if isinstance(o, torch.Tensor) and o.grad_fn is None and o.requires_grad]
    for node in itertools.islice(graph_nodes([o.grad_fn for o in outs if isinstance(o, torch.Tensor)]), MAX_NODES):
        var = getattr(node, "variable", None) if type(node).__name__ == "AccumulateGrad" else None
        if isinstance(var, torch.Tensor):
            found.append(var)
    return found


# the writes through an index or a view, whose node torch names CopySlices
_INDEX_WRITES = (
    "__setitem__",
    "copy_",
    "fill_",
    "index_put_",
    "masked_fill_",
    "index_fill_",
    "index_copy_",
    "scatter_",
)


def changed_by(op: str, node: str) -> bool:
    """Whether an in-place op is the one torch's message names by its node (`Zero` for zero_, `Add` for add_,
    `CopySlices` for a write through an index)."""
    if node == "CopySlices":
        return op in _INDEX_WRITES or op.startswith("masked_")
    return op.strip("_").replace("_", "").lower() == node.lower()
