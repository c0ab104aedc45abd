"""What backward ran for one call, as plain data a code generator can write out (backward_code/script.py).

`CodeCapture.start()` runs before the real backward call: it walks the graph from the outputs, reads each node's
saved values through its public `_saved_*` attributes (backward frees them) and puts a hook on every node. The
hooks record the order autograd ran the nodes in, the shape of each cotangent a node received and sent, and what
a node the formula table cannot write (a custom Function's own backward) returned. `stop()` removes the hooks;
`record()` gives the plain data, with the tensors apart (`tensors`, keyed by short generated keys).

Programs and snippets share this; each says through `describe(node)` where a node came from (as the graph view's
GraphProbe does) and through `name_of(tensor)` what the source calls a tensor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

CODE_BYTES = 1_500_000  # bytes of tensors one call's script may load (a snippet's event travels in one frame)
STEP_VALUES = 64  # elements of each cotangent kept for `vjp live`'s code view (shape and norm always)
STEP_BUDGET = 100_000  # values of all the steps of one call; past it none travel (a snippet's frame is 8 MB)
_SIGNED = 1 << 63  # autograd hands negative ints (dim=-1, ignore_index=-100) back as unsigned 64-bit values


class CodeCapture:
    """Watches one backward call for `--code`; see the module's docstring."""

    def __init__(
        self,
        outs: list[Any],
        vs: list[Any],
        inputs: list[Any],
        input_names: list[str],
        describe: Callable[[Any], dict[str, Any]],
        name_of: Callable[[Any], str | None],
        keeps_result: Callable[..., bool] = lambda name, *_: name != "AccumulateGrad",
    ) -> None:
        self.outs, self.vs, self.inputs, self.input_names = outs, vs, inputs, input_names
        self.describe, self.name_of, self.keeps_result = describe, name_of, keeps_result
        self.nodes: list[Any] = []
        self.index: dict[int, int] = {}
        self.saved: list[dict[str, Any]] = []
        self.order: list[int] = []
        self.got: dict[int, tuple[list[Any], list[Any], list[str | None], Any]] = {}
        self.steps: dict[int, dict[str, Any]] = {}  # per node: the cotangent it received and what it sent
        self.handles: list[Any] = []
        self.tensors: dict[str, Any] = {}
        self.tensor_names: dict[str, str] = {}
        self._keys: dict[tuple[Any, ...], str] = {}
        self.failed: str | None = None  # why start() could not finish (the call then gets no script)

    def start(self) -> None:
        """Before the call: the graph walked, saved values read, a hook on every node."""
        stack = [o.grad_fn for o in self.outs if o.grad_fn is not None]
        stack += [x.grad_fn for x in self.inputs if getattr(x, "grad_fn", None) is not None]
        while stack:
            node = stack.pop()
            if id(node) in self.index:
                continue
            self.index[id(node)] = len(self.nodes)
            self.nodes.append(node)
            self.saved.append(self._saved_of(node))
            self.handles.append(node.register_hook(self._hook(node)))
            stack.extend(n for n, _ in node.next_functions if n is not None)

    def stop(self) -> None:
        """After the call (also when it raised): the hooks removed."""
        for h in self.handles:
            h.remove()
        self.handles = []

    def _hook(self, node: Any) -> Callable[[Any, Any], None]:
        key = self.index[id(node)]
        name, custom = type(node).__name__, _is_custom(node)

        def hook(grad_inputs: Any, grad_outputs: Any) -> None:
            if key in self.got:  # a second call through a retained graph: the script is of the first
                return
            self.order.append(key)
            sent = [None if t is None else list(t.shape) for t in grad_inputs]
            dtypes = [None if t is None else str(t.dtype).removeprefix("torch.") for t in grad_inputs]
            got = [None if t is None else list(t.shape) for t in grad_outputs]
            try:  # what the script will load: a node the table cannot write
                keep = custom or self.keeps_result(name, self.saved[key], sent, got)
            except Exception:  # noqa: BLE001 - the tool's own failure: keep it rather than fail the backward
                keep = True
            kept = [None if t is None else self._key(t.detach().clone(), None) for t in grad_inputs] if keep else None
            self.got[key] = (sent, got, dtypes, kept)
            try:
                self.steps[key] = _step(grad_outputs, grad_inputs)
            except Exception:  # noqa: BLE001 - the view's values only; never the snippet's backward failing
                pass

        return hook

    def _saved_of(self, node: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for attr in dir(node):
            if not attr.startswith("_saved_"):
                continue
            try:
                value = getattr(node, attr)
            except Exception:  # noqa: BLE001 - freed already (a second call without retain_graph): left out
                continue
            out[attr.removeprefix("_saved_")] = self._plain(value)
        return out

    def _plain(self, value: Any) -> Any:
        """A saved value as plain data: {"tensor": key} for a tensor, lists for tuples, ints signed."""
        import torch

        if isinstance(value, torch.Tensor):
            return {"tensor": self._key(value.detach(), self.name_of(value))}
        if isinstance(value, (list, tuple)):
            return [self._plain(v) for v in value]
        if isinstance(value, bool) or value is None or isinstance(value, (float, str)):
            return value
        if isinstance(value, int) or type(value).__name__ == "SymInt":
            n = int(value)
            return n - (1 << 64) if n >= _SIGNED else n
        if isinstance(value, (torch.dtype, torch.layout, torch.device)):
            return str(value)
        return {"unreadable": type(value).__name__}

    def _key(self, t: Any, name: str | None) -> str:
        """One key per distinct tensor (a tensor saved by two nodes is loaded once); its source name kept."""
        ident = (t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.storage_offset(), t.dtype) if t.numel() else None
        if ident is not None and ident in self._keys:
            return self._keys[ident]
        key = f"t{len(self.tensors)}"
        self.tensors[key] = t.detach().clone()  # as it is now: the snippet may change it in place later
        if ident is not None:
            self._keys[ident] = key
        if name:
            self.tensor_names[key] = name
        return key

    def record(self) -> dict[str, Any]:
        """The call as plain data (tensors apart, in `self.tensors`): the nodes, the order they ran in, where
        v enters and where each input's gradient is read."""
        nodes = []
        for k, node in enumerate(self.nodes):
            sent, got, dtypes, kept = self.got.get(k, ([], [], [], None))
            edges = [
                {
                    "to": None if child is None else self.index.get(id(child)),
                    "input_nr": int(nr),
                    "shape": sent[j] if j < len(sent) else None,
                    "dtype": dtypes[j] if j < len(dtypes) else None,
                }
                for j, (child, nr) in enumerate(node.next_functions)
            ]
            where = {"leaf": None, "value_of": None, "line": None, "source": None, **self.describe(node)}
            nodes.append(
                {
                    "name": type(node).__name__,
                    "custom": _is_custom(node),
                    "saved": self.saved[k],
                    "edges": edges,
                    "received": got,
                    "result": kept,
                    **{f: where[f] for f in ("leaf", "value_of", "line", "source")},
                }
            )
        roots = []
        for o, v in zip(self.outs, self.vs, strict=True):
            if o.grad_fn is not None and v is not None:
                roots.append({"node": self.index[id(o.grad_fn)], "input_nr": int(o.output_nr), "v": self._key(v, None)})
        results = []
        for x, name in zip(self.inputs, self.input_names, strict=True):
            node = x.grad_fn if x.grad_fn is not None else _accumulator(x)
            at = None if node is None else self.index.get(id(node))
            results.append({"name": name, "node": at, "input_nr": int(x.output_nr)})
        return {"nodes": nodes, "order": self.order, "roots": roots, "results": results, "names": self.tensor_names}

    def payload(self, limit: int = CODE_BYTES) -> dict[str, Any]:
        """The record with the tensors its script loads, as plain data (for a channel or a Result); or
        {"skipped": why}."""
        from ..backward_code.script import BadRecord, build, check_record

        if self.failed:
            return {"skipped": f"the graph could not be read ({self.failed})"}
        record = self.record()
        try:
            script = build(check_record(record), "call", "")
        except BadRecord as e:
            return {"skipped": f"the graph could not be read back ({e})"}
        tensors = {k: self.tensors[k] for k in dict.fromkeys(script.keys)}
        size = sum(t.numel() * t.element_size() for t in tensors.values())
        if size > limit:
            return {"skipped": f"its tensors hold {size:,} bytes, more than the {limit:,} a script is given"}
        steps = {str(k): step for k, step in self.steps.items()}  # the view's values, never code
        if sum(len(c["values"]) for st in self.steps.values() for c in [st["in"], *st["out"]] if c) > STEP_BUDGET:
            steps = {}  # the code view then says "not recorded" for each value
        return {"record": record, "tensors": {k: encode(t) for k, t in tensors.items()}, "steps": steps}


def _step(received: Any, sent: Any) -> dict[str, Any]:
    """A node's cotangent in and out as plain data, for `vjp live`'s code view: each one's shape, norm and
    first STEP_VALUES elements (flat), so that a big network's record stays small."""
    return {"in": _glimpse(received[0]) if received else None, "out": [_glimpse(t) for t in sent]}


def _glimpse(t: Any) -> dict[str, Any] | None:
    import torch

    if not isinstance(t, torch.Tensor):
        return None
    t = t.detach()
    if t.layout != torch.strided:  # a sparse cotangent: its shape only
        return {"shape": list(t.shape), "norm": 0.0, "values": [], "numel": t.numel()}
    flat = t.reshape(-1)[:STEP_VALUES]
    return {
        "shape": list(t.shape),
        "norm": float(t.abs().double().norm()) if t.numel() and not t.is_complex() else 0.0,
        "values": [] if t.is_complex() else flat.double().tolist(),
        "numel": t.numel(),
    }


def _is_custom(node: Any) -> bool:
    import torch

    return isinstance(node, torch.autograd.function.BackwardCFunction)


def _accumulator(x: Any) -> Any:
    """A leaf's AccumulateGrad node, without making one where none exists (a leaf backward never reached)."""
    import torch

    if not x.requires_grad:
        return None
    try:
        return torch.autograd.graph.get_gradient_edge(x).node
    except (RuntimeError, AttributeError):
        return None


def encode(t: Any) -> dict[str, Any]:
    """A tensor as plain data: dtype, shape and its bytes in base64 (read back by backward_code/files.py)."""
    import base64

    import torch

    t = t.detach().contiguous()
    raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
    return {
        "dtype": str(t.dtype).removeprefix("torch."),
        "shape": list(t.shape),
        "data": base64.b64encode(raw).decode(),
    }


def id_of(t: Any) -> tuple[Any, ...] | None:
    """What makes two tensor objects one tensor: a saved tensor comes back as a new object on the same memory."""
    if not t.numel():
        return None
    try:
        return (t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.storage_offset(), t.dtype)
    except RuntimeError:  # a tensor with no storage (a sparse or functorch one)
        return None


def names_by_storage(named: dict[str, Any]) -> dict[Any, str]:
    """Names of tensors (and of modules' parameters, as module.param) keyed by `id_of`: the first name wins."""
    import torch

    found: dict[Any, str] = {}
    for name, value in list(named.items()):
        if name.startswith("__"):
            continue
        if isinstance(value, torch.Tensor):
            found.setdefault(id_of(value), name)
        elif isinstance(value, torch.nn.Module):
            for pname, param in value.named_parameters():
                found.setdefault(id_of(param), f"{name}.{pname}")
    found.pop(None, None)
    return found
