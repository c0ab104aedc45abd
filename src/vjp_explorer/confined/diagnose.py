"""Why a snippet failed, found with autograd's own instruments in a second confined run (docs/why.md).

The first run of a snippet carries no instrument of this module, so a snippet that does not fail pays
nothing. Where it failed (PyTorch raised one of autograd's famous errors, a gradient came out nan or inf, or
the snippet read a `.grad` autograd never wrote), snippet/door.py runs it again, seeded as before, with
`Diagnoser` installed; the re-run's output is discarded. What it watches:

- a TorchFunctionMode that sees every torch call the snippet makes: the line that made each tensor and each
  backward node (its op, its inputs with their version counters), every call that moved a tensor's version
  counter (`*_`, `out=`, `copy_`, `x[i] = ...`, `inplace=True`: one rule for all), every place where a value
  that required grad came out without a graph (`.detach()`, `.data`, `.item()`, `.numpy()`, `torch.no_grad()`,
  a cast) and every read of `.grad`;
- the backward calls, wrapped: when one raises, the graph behind it is asked which saved tensor was changed or
  freed (reading a node's `_saved_*` raises exactly as backward did); node hooks find the first node that
  sent a nan or inf on.

Each finding goes to the parent as a "diagnosis" frame of plain facts; snippet/why.py words them. Only what
the instruments saw is said: where they cannot tell, nothing is (never a guessed culprit).
"""

from __future__ import annotations

import ast
import itertools
import linecache
import re
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

Send = Callable[[dict[str, Any]], None]

MADE = "vjp_explorer.made"  # the key of a backward node's metadata that holds the Made record of its op
_MAX_NODES = 20_000  # nodes of one graph walked for a diagnosis
_MAX_MUTATIONS = 10_000  # in-place changes remembered (the latest)
_HELD = 8  # backward calls whose graphs' nodes are held, to tell which earlier call freed a node
_MAX_WALK = 100_000  # records walked back from an output
_TO_PYTHON = {"item": ".item()", "tolist": ".tolist()", "numpy": ".numpy()", "__float__": "float()"}
_TO_PYTHON.update({"__int__": "int()", "__bool__": "bool()", "__index__": "int()"})
_FACTORIES = ("tensor", "as_tensor", "from_numpy", "Tensor", "FloatTensor", "DoubleTensor")


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


@dataclass
class Backward:
    """One backward call that ran to its end: its line, the nodes it may have freed, the leaves it reached."""

    line: int
    nodes: dict[int, Any]  # id -> node, held (their saved tensors are freed anyway) so no id is reused
    reached: set[int]
    retained: bool
    mutations_before: int  # len(mutations) when it ran: what changed after it


class Diagnoser(TorchFunctionMode):
    """The instruments of a diagnosis run; `install()` before the snippet's first line."""

    def __init__(self, send: Send, filename: str, namespace: dict[str, Any]) -> None:
        super().__init__()
        self.send, self.filename, self.namespace = send, filename, namespace
        self.made: dict[int, Made] = {}
        self.mutations: list[Mutation] = []
        self.backwards: list[Backward] = []
        self.said: set[tuple[str, str]] = set()
        self.paused = 0
        self.real: dict[str, Any] = {}
        self.python: list[Made] = []  # values that left torch (.item(), .numpy(), float()) while requiring grad
        self.numpy: list[tuple[int, Made]] = []  # (memory, record) of each .numpy(): torch.from_numpy finds it
        self.outputs: list[Made] = []  # the records of the latest backward calls' outputs
        self.cuts: list[Made] = []  # the latest tensor cuts (.detach(), .data, no_grad), kept past their tensors
        self._local = threading.local()
        self._tree: ast.Module | None = None

    # ------------------------------------------------------------------ install

    def install(self) -> None:
        self.real = {
            "Tensor.backward": torch.Tensor.backward,
            "torch.autograd.backward": torch.autograd.backward,
            "torch.autograd.grad": torch.autograd.grad,
        }
        me = self

        def backward(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            return me.call("Tensor.backward", (self, *args), kwargs)

        def autograd_backward(*args: Any, **kwargs: Any) -> Any:
            return me.call("torch.autograd.backward", args, kwargs)

        def grad(*args: Any, **kwargs: Any) -> Any:
            return me.call("torch.autograd.grad", args, kwargs)

        torch.Tensor.backward = backward  # type: ignore[method-assign]
        torch.autograd.backward = autograd_backward
        torch.autograd.grad = grad
        self.__enter__()

    def before_statement(self, stmt: Any) -> None:
        """The runner's hook: nothing to do between statements."""

    def after_statement(self, stmt: Any) -> None:
        """The runner's hook: nothing to do between statements."""

    # ------------------------------------------------------------------ the forward, watched

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if self.paused or getattr(self._local, "inside", False):
            return func(*args, **kwargs)
        name = _op_name(func)
        if name in ("grad", "data") and args and isinstance(args[0], torch.Tensor):
            return self._attribute(name, func, args[0], sys._getframe(1))
        ins = _tensors(args, kwargs)
        before = [_version(t) for t in ins]
        needs = [t.requires_grad for t in ins]
        grad_mode = torch.is_grad_enabled()
        out = func(*args, **kwargs)
        self._local.inside = True
        try:
            self._after(func, name, args, kwargs, ins, before, needs, grad_mode, out)
        except Exception:  # noqa: BLE001, S110 - only looking: a failure here is never the snippet's
            pass
        finally:
            self._local.inside = False
        return out

    def _after(
        self,
        func: Any,
        name: str,
        args: Any,
        kwargs: Any,
        ins: list[torch.Tensor],
        before: list[int],
        needs: list[bool],
        grad_mode: bool,
        out: Any,
    ) -> None:
        line, frame = self._where()
        for t, v0 in zip(ins, before, strict=True):
            v1 = _version(t)
            if v1 > v0 >= 0:
                self._mutated(t, name, line, frame, v0, v1)
        parents = [self._record(t, frame) for t in ins]
        lost = any(needs)
        if name in _TO_PYTHON and lost and ins:
            self._to_python(name, ins[0], parents, line)
        small = sum(t.numel() for t in ins) <= 1 << 20
        for o in _tensors(out if isinstance(out, (tuple, list)) else (out,), {}):
            if any(o is t for t in ins):  # an in-place op: the tensor keeps its story; its new node gets one
                self._node(o, self.made.get(id(o)))
                continue
            m = Made(weakref.ref(o), line, name, parents, before, [weakref.ref(t) for t in ins])
            m.requires_grad = o.requires_grad
            if lost and not o.requires_grad and o.is_floating_point():
                m.cut = _cut_name(name, grad_mode)
                m.cut_leaves = _leaves_of(ins)
                self.cuts = [*self.cuts[-999:], m]
            if small and o.grad_fn is not None:
                m.call = (func, args, kwargs)
            self._keep(o, m)
            self._node(o, m)

    def _attribute(self, name: str, func: Any, t: torch.Tensor, caller: Any) -> Any:
        """`.data` (a value without its graph) and `.grad` (read by the snippet itself: None is a finding)."""
        value = func(t)
        self._local.inside = True
        try:
            if name == "data" and t.requires_grad and isinstance(value, torch.Tensor):
                line, frame = self._where()
                m = Made(weakref.ref(value), line, "data", [self._record(t, frame)], [_version(t)])
                m.cut, m.cut_leaves = ".data", _leaves_of([t])
                self._keep(value, m)
                self.cuts = [*self.cuts[-999:], m]
            elif name == "grad" and value is None and caller.f_code.co_filename == self.filename:
                self._grad_none_read(t)
        except Exception:  # noqa: BLE001, S110 - only looking
            pass
        finally:
            self._local.inside = False
        return value

    def _record(self, t: torch.Tensor, frame: Any) -> Made:
        """The record of a tensor an op reads; one made now for a tensor the mode never saw made (a leaf made
        by nn.Parameter, torch.from_numpy, ...), found where `.numpy()` handed its memory out."""
        m = self.made.get(id(t))
        if m is not None and m.ref() is t:
            if m.name is None:
                m.name = _bound_name(t, frame, self.namespace)
            return m
        m = Made(weakref.ref(t), None, "", requires_grad=t.requires_grad)
        m.name = _bound_name(t, frame, self.namespace)
        ptr = _storage(t)
        for memory, cut in self.numpy:
            if memory == ptr:
                m.parents, m.op = [cut], "from_numpy"
        self._keep(t, m)
        return m

    def _to_python(self, name: str, t: torch.Tensor, parents: list[Made], line: int) -> None:
        """A value that required grad left torch (`.item()`, `.numpy()`, float()): a cut the graph cannot see."""
        m = Made(weakref.ref(t), line, name, parents[:1], cut=_TO_PYTHON[name], cut_leaves=_leaves_of([t]))
        self.python.append(m)
        if name == "numpy":
            self.numpy = [*self.numpy, (_storage(t), m)][-100:]

    def _keep(self, t: torch.Tensor, m: Made) -> None:
        key = id(t)
        self.made[key] = m
        try:
            weakref.finalize(t, self.made.pop, key, None)
        except TypeError:
            pass

    def _node(self, o: torch.Tensor, m: Made | None) -> None:
        node: Any = o.grad_fn
        if node is not None and m is not None and MADE not in node.metadata:
            node.metadata[MADE] = m

    def _mutated(self, t: torch.Tensor, op: str, line: int, frame: Any, v0: int, v1: int) -> None:
        leaf = t.is_leaf and t.requires_grad
        name = _bound_name(t, frame, self.namespace)
        self.mutations.append(Mutation(line, op, _storage(t), v0, v1, name, leaf, id(t)))
        if len(self.mutations) > _MAX_MUTATIONS:
            del self.mutations[: _MAX_MUTATIONS // 10]

    # ------------------------------------------------------------------ backward calls, wrapped

    def call(self, qualname: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        real = self.real[qualname]
        if self.paused:
            return real(*args, **kwargs)
        outs = _outputs(qualname, args, kwargs)
        line, _ = self._where()
        roots = [o.grad_fn for o in outs]
        watch = _NonfiniteWatch(roots)
        self.paused += 1  # backward's own work, and the instruments' afterwards, are not the forward
        try:
            watch.start()
            try:
                value = real(*args, **kwargs)
            except RuntimeError as e:
                watch.finish()
                self._failed(str(e), outs, line)
                raise
            watch.finish()
            try:
                self._ran(qualname, args, kwargs, outs, line, value, watch)
            except Exception:  # noqa: BLE001, S110 - only looking
                pass
        finally:
            self.paused -= 1
        return value

    def _ran(
        self, qualname: str, args: Any, kwargs: Any, outs: list[Any], line: int, value: Any, watch: _NonfiniteWatch
    ) -> None:
        keeps = [_argument(qualname, args, kwargs, word) for word in ("retain_graph", "create_graph")]
        retained = any(bool(k) for k in keeps)
        walked = itertools.islice(graph_nodes([o.grad_fn for o in outs]), _MAX_NODES)
        nodes = {} if retained else {id(n): n for n in walked}
        reached = {id(x) for x in graph_leaves(outs)}
        for old in self.backwards[:-_HELD]:  # only the latest calls' nodes are held
            old.nodes = {}
        self.backwards.append(Backward(line, nodes, reached, retained, len(self.mutations)))
        made = [self.made.get(id(o)) for o in outs]
        self.outputs = [*self.outputs, *[m for m in made if m is not None]][-4:]
        if watch.found is not None:
            self._nonfinite(watch, line, self._nonfinite_leaf(qualname, outs, value))
        if qualname != "torch.autograd.grad":
            self._unused_parameters(outs, reached, line)

    def _failed(self, message: str, outs: list[Any], line: int) -> None:
        try:
            if "modified by an inplace operation" in message:
                self._inplace(message, outs, line)
            elif "backward through the graph a second time" in message:
                self._twice(outs, line)
            elif "implicitly created only for scalar outputs" in message:
                self._nonscalar(outs, line)
            elif "does not require grad and does not have a grad_fn" in message:
                self._no_graph(outs, line)
        except Exception:  # noqa: BLE001, S110 - only looking: the snippet's own error is what it raised
            pass

    # ------------------------------------------------------------------ the six kinds

    def _inplace(self, message: str, outs: list[Any], line: int) -> None:
        versions = re.search(r"is at version (\d+); expected version (\d+)", message)
        if versions is None:
            return
        now, expected = int(versions.group(1)), int(versions.group(2))
        for node in itertools.islice(graph_nodes([o.grad_fn for o in outs]), _MAX_NODES):
            attr = _saved_failing(node, "modified by an inplace operation")
            if attr is None:
                continue
            made = node.metadata.get(MADE)
            if made is None:
                return
            saved = self._saved_tensor(made, attr, now, expected)
            if saved is None:
                return
            ptr = _storage(saved)
            changes = [m for m in self.mutations if m.storage == ptr and expected < m.after <= now]
            if not changes:
                return
            first = changes[0]
            name = first.name or _bound_name(saved, None, self.namespace) or f"the {_role(attr)} of {made.op}"
            self._say(
                "inplace_modified",
                name,
                line,
                {"line": first.line, "op": first.op},
                saved={"line": made.line, "op": made.op},
                facts={
                    "node": type(node).__name__,
                    "version": now,
                    "expected": expected,
                    "changes": len(changes),
                    "stepped": first.leaf,
                },
            )
            return

    def _saved_tensor(self, made: Made, attr: str, now: int, expected: int) -> torch.Tensor | None:
        """The tensor behind a node's failing `_saved_*`: its op's output or the input whose version moved."""
        candidates = []
        if attr == "_saved_result":
            candidates.append((made.ref(), expected))
        candidates += [(ref(), v) for ref, v in zip(made.inputs, made.versions, strict=False)]
        candidates.append((made.ref(), expected))
        for t, v in candidates:
            if isinstance(t, torch.Tensor) and v == expected and _version(t) == now:
                return t
        return None

    def _twice(self, outs: list[Any], line: int) -> None:
        # the first node an earlier call freed (this call freed the nodes it ran through before it failed)
        freed, earlier = None, None
        for node in itertools.islice(graph_nodes([o.grad_fn for o in outs]), _MAX_NODES):
            earlier = next((b for b in reversed(self.backwards) if b.nodes.get(id(node)) is node), None)
            if earlier is not None and _saved_failing(node, "already been freed") is not None:
                freed = node
                break
        if freed is None or earlier is None:
            return
        made = freed.metadata.get(MADE)
        shared = {"line": None if made is None else made.line, "op": "" if made is None else made.op}
        tensor = made.ref() if made is not None else None
        name = (_bound_name(tensor, None, self.namespace) if isinstance(tensor, torch.Tensor) else None) or (
            made.name if made is not None else None
        )
        below = {id(x) for x in _leaves_below(freed)}
        stepped = any(m.leaf and m.key in below for m in self.mutations[earlier.mutations_before :])
        self._say(
            "backward_twice",
            name or "",
            line,
            {"line": earlier.line, "op": "backward"},
            facts={"shared": shared, "node": type(freed).__name__, "stepped": stepped, "loop": earlier.line == line},
        )

    def _nonscalar(self, outs: list[Any], line: int) -> None:
        y = next((o for o in outs if isinstance(o, torch.Tensor) and o.numel() != 1), None)
        if y is None:
            return
        name = _bound_name(y, None, self.namespace) or _written_output(linecache.getline(self.filename, line))
        facts = {"shape": list(y.shape)}
        self._say("nonscalar_output", name or "", line, {"line": line, "op": "backward"}, facts=facts)

    def _no_graph(self, outs: list[Any], line: int) -> None:
        y = next((o for o in outs if isinstance(o, torch.Tensor) and o.grad_fn is None and not o.requires_grad), None)
        if y is None:
            return
        name = _bound_name(y, None, self.namespace) or _written_output(linecache.getline(self.filename, line)) or ""
        start = self.made.get(id(y))
        if start is None or start.ref() is not y:
            return
        records = list(_walk([start]))
        cut = next((m for m in records if m.cut is not None), None)
        if cut is not None:
            self._say("no_grad_fn", name, line, {"line": cut.line, "op": cut.cut}, facts={})
            return
        python = self._python_link(records, None)
        if python is not None:
            self._say("no_grad_fn", name, line, {"line": python.line, "op": python.cut}, facts={})
            return
        made = [m for m in records if not m.parents and m.line is not None and _floating(m.ref())]
        if made:
            names = [m.name or _assigned(self._source(), m.line) or "" for m in made[:4]]
            facts = {"leaves": [n for n in names if n]}
            self._say("no_grad_fn", name, line, {"line": made[0].line, "op": "requires_grad never set"}, facts=facts)

    def _grad_none_read(self, t: torch.Tensor) -> None:
        """The snippet read `t.grad` and got None: why, if a backward ran and the instruments can tell."""
        if not self.backwards:
            return
        line, frame = self._where()
        name = _bound_name(t, frame, self.namespace) or _read_grad_of(linecache.getline(self.filename, line)) or ""
        if t.grad_fn is not None:
            made = self.made.get(id(t))
            at = made.line if made is not None and made.ref() is t else None
            self._say("grad_none", name, line, {"line": at, "op": "non-leaf"}, facts={})
            return
        if any(id(t) in b.reached for b in self.backwards):
            return  # a backward wrote it, and the snippet set it to None since (zero_grad): as meant
        if not t.requires_grad:
            made = self.made.get(id(t))
            at = made.line if made is not None and made.ref() is t else None
            if self._in_a_backward(t):
                self._say("grad_none", name, line, {"line": at, "op": "requires_grad never set"}, facts={})
            return
        self._cut_or_unused(t, name, line)

    def _in_a_backward(self, t: torch.Tensor) -> bool:
        return any(m.ref() is t for out in self.outputs for m in _walk([out]))

    def _cut_or_unused(self, t: torch.Tensor, name: str, line: int) -> None:
        key = id(t)
        records = [m for out in self.outputs for m in _walk([out])]
        cut = next((m for m in records if m.cut is not None and key in m.cut_leaves), None)
        if cut is None:
            cut = self._python_link(records, key)
        if cut is not None:
            self._say("grad_none", name, line, {"line": cut.line, "op": cut.cut}, facts={})
            return
        if any(key in m.cut_leaves for m in self.python):
            return  # it left torch somewhere, and the instruments cannot follow it back: no guess
        self._say("grad_none", name, line, {"line": None, "op": "unused"}, facts={})

    def _unused_parameters(self, outs: list[Any], reached: set[int], line: int) -> None:
        """A module the backward reached in part: each parameter it did not reach got no gradient."""
        for mod_name, module in list(self.namespace.items()):
            if not isinstance(module, torch.nn.Module) or mod_name.startswith("_"):
                continue
            params = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
            if not any(id(p) in reached for _, p in params):
                continue
            for pname, p in params:
                if id(p) not in reached and p.grad is None:
                    self._cut_or_unused(p, f"{mod_name}.{pname}", line)

    def _python_link(self, records: list[Made], leaf: int | None) -> Made | None:
        """A tensor made from Python numbers (`torch.tensor(q)`) whose numbers came, by the snippet's own
        assignments, from a value that left torch (`q = h.sum().item() * 2`), seen leaving at that line."""
        tree = self._source()
        if tree is None:
            return None
        for m in records:
            if m.parents or m.op not in _FACTORIES or m.line is None:
                continue
            for at in _python_sources(tree, m.line):
                for cut in [*self.python, *self.cuts]:
                    if cut.line == at and (leaf is None or leaf in cut.cut_leaves):
                        return cut
        return None

    def _nonfinite_leaf(self, qualname: str, outs: list[Any], value: Any) -> str:
        """The name of the first input whose gradient from this call holds a nan or inf."""
        if qualname == "torch.autograd.grad":
            return ""
        for x in graph_leaves(outs):
            if isinstance(x.grad, torch.Tensor) and not _finite(x.grad):
                return _bound_name(x, None, self.namespace) or ""
        return ""

    def _nonfinite(self, watch: _NonfiniteWatch, line: int, name: str) -> None:
        assert watch.found is not None
        node, arriving = watch.found
        made = node.metadata.get(MADE)
        if made is None:
            return
        spurious = _spurious(made, arriving)
        facts: dict[str, Any] = {"node": type(node).__name__, "overflow": _overflowed(made)}
        upstream = _overflowed_input(made)
        if upstream is not None:  # an input already inf in float32 that float64 holds finite: an overflow
            facts["overflow"] = True
            facts["from"] = {"line": upstream.line, "op": upstream.op}
            spurious = True
        self._say("nonfinite_grad", name, line, {"line": made.line, "op": made.op}, spurious=spurious, facts=facts)

    # ------------------------------------------------------------------ helpers

    def _say(self, kind: str, tensor: str, line: int, cause: dict[str, Any], **extra: Any) -> None:
        key = (kind, tensor)
        if key in self.said:
            return
        self.said.add(key)
        found = {"kind": kind, "tensor": tensor, "line": line, "cause": cause, "saved": None, "spurious": None}
        found.update({"facts": {}, **extra})
        self.send({"type": "diagnosis", "diagnosis": found})

    def _where(self) -> tuple[int, Any]:
        """The innermost line of the snippet's own code on the stack, and its frame."""
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename != self.filename:
            frame = frame.f_back  # type: ignore[assignment]
        return (0, None) if frame is None else (frame.f_lineno, frame)

    def _source(self) -> ast.Module | None:
        if self._tree is None:
            text = "".join(linecache.getlines(self.filename))
            try:
                self._tree = ast.parse(text)
            except SyntaxError:
                return None
        return self._tree


class _NonfiniteWatch:
    """Hooks on every node of a graph for one backward call: the first node that received finite
    cotangents and sent a nan or inf on, with what it received (the call runs once, as written)."""

    def __init__(self, roots: list[Any]) -> None:
        self.roots = roots
        self.found: tuple[Any, tuple[Any, ...]] | None = None
        self.handles: list[Any] = []

    def start(self) -> None:
        for node in itertools.islice(graph_nodes(self.roots), _MAX_NODES):
            self.handles.append(node.register_hook(lambda sent, arriving, node=node: self._hook(node, sent, arriving)))

    def _hook(self, node: Any, sent: Any, arriving: Any) -> None:
        if self.found is not None:
            return
        if all(_finite(g) for g in arriving) and not all(_finite(g) for g in sent):
            self.found = (node, tuple(g.detach().clone() if isinstance(g, torch.Tensor) else g for g in arriving))

    def finish(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []


def _floating(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point()


def _finite(g: Any) -> bool:
    return not isinstance(g, torch.Tensor) or bool(torch.isfinite(g).all())


def _spurious(made: Made, arriving: tuple[Any, ...]) -> bool | None:
    """Whether the exact derivative is finite where backward sent a nan or inf: the node's op recomputed in
    float64 on the values it read, its VJP with the cotangent that arrived, a zero cotangent counting as no
    path at all (0·∞ of a branch `where` did not take is no derivative of the function). None: not known."""
    if made.call is None or not arriving or not isinstance(arriving[0], torch.Tensor):
        return None
    func, args, kwargs = made.call
    if any(_version(ref()) != v for ref, v in zip(made.inputs, made.versions, strict=False) if ref() is not None):
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
    for d in grads:
        if d is None:
            continue
        if d.shape == g.shape:  # elementwise: a zero cotangent is no path through this element
            d = torch.where(g == 0, torch.zeros_like(d), d)
        if not bool(torch.isfinite(d).all()):
            return False
    return True


def _overflowed(made: Made) -> bool:
    """The op's own forward value is inf where float64 holds it finite (exp of a large number in float32): an
    overflow, not a singularity (log at 0 is -inf in float64 too)."""
    t = made.ref()
    if not _floating(t) or not bool(torch.isinf(t).any()) or made.call is None:
        return False
    return _finite_in_float64(made.call)


def _finite_in_float64(call: tuple[Any, Any, Any]) -> bool:
    func, args, kwargs = call
    wide = [a.detach().to(torch.float64) if _floating(a) else a for a in args]
    again = func(*wide, **kwargs)
    return isinstance(again, torch.Tensor) and bool(torch.isfinite(again).all())


def _overflowed_input(made: Made) -> Made | None:
    """The record of an input of `made` that is inf where its own op, recomputed in float64, is finite."""
    for parent in made.parents:
        t = parent.ref()
        if not _floating(t) or not bool(torch.isinf(t).any()) or parent.call is None:
            continue
        if _finite_in_float64(parent.call):
            return parent
    return None


def _saved_failing(node: Any, words: str) -> str | None:
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


def _role(attr: str) -> str:
    return "output" if attr == "_saved_result" else "input"


def _walk(starts: list[Made]) -> Iterator[Made]:
    """Each record behind `starts`, nearest first (breadth first), once."""
    seen: set[int] = set()
    queue = list(starts)
    k = 0
    while k < len(queue) and k < _MAX_WALK:
        m = queue[k]
        k += 1
        if id(m) in seen:
            continue
        seen.add(id(m))
        yield m
        queue.extend(m.parents)


def _python_sources(tree: ast.Module, line: int) -> list[int]:
    """The lines where the names read at `line` got values that left torch (`.item()`, `.numpy()`, float()),
    following the snippet's plain assignments back a few steps."""
    found: list[int] = []
    names = _names_read(tree, line)
    seen: set[str] = set()
    for _ in range(4):
        nxt: set[str] = set()
        for name in names - seen:
            seen.add(name)
            stmt = _last_assignment(tree, name, line)
            if stmt is None:
                continue
            if _leaves_torch(stmt):
                found.append(stmt.lineno)
            nxt |= {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name)} if hasattr(stmt, "value") else set()
        names = nxt
    return found


def _names_read(tree: ast.Module, line: int) -> set[str]:
    for stmt in ast.walk(tree):
        if isinstance(stmt, ast.stmt) and stmt.lineno == line and not isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
            return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return set()


def _last_assignment(tree: ast.Module, name: str, line: int) -> ast.stmt | None:
    best = None
    for stmt in ast.walk(tree):
        if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and stmt.lineno <= line:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if any(isinstance(t, ast.Name) and t.id == name for tt in targets for t in ast.walk(tt)):
                if best is None or stmt.lineno >= best.lineno:
                    best = stmt
    return best


def _leaves_torch(stmt: ast.stmt) -> bool:
    for n in ast.walk(stmt):
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Attribute) and f.attr in ("item", "tolist", "numpy"):
                return True
            if isinstance(f, ast.Name) and f.id in ("float", "int"):
                return True
    return False


def _assigned(tree: ast.Module | None, line: int | None) -> str | None:
    """The one name a statement at `line` assigns (`h = torch.tanh(...)` -> h), if it assigns one."""
    if tree is None or line is None:
        return None
    for stmt in ast.walk(tree):
        if isinstance(stmt, (ast.Assign, ast.AugAssign)) and stmt.lineno == line:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if len(targets) == 1 and isinstance(targets[0], ast.Name):
                return targets[0].id
    return None


def _written_output(source: str) -> str | None:
    """`y.sum()` of `y.sum().backward()` as the line writes it."""
    try:
        tree = ast.parse(source.strip())
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "backward":
            return ast.unparse(node.func.value)
    return None


def _read_grad_of(source: str) -> str | None:
    found = re.search(r"([\w.]+)\.grad\b", source)
    return found.group(1) if found else None


def _bound_name(t: Any, frame: Any, namespace: dict[str, Any]) -> str | None:
    """What the snippet calls `t`: a name in the snippet's frame, a global, or a module's parameter."""
    scopes = [frame.f_locals] if frame is not None and frame.f_locals is not namespace else []
    for scope in [*scopes, namespace]:
        for name, value in list(scope.items()):
            if value is t and not name.startswith("_") and name != "self":
                return str(name)
    for name, value in list(namespace.items()):
        if isinstance(value, torch.nn.Module) and not name.startswith("_"):
            for pname, p in value.named_parameters():
                if p is t:
                    return f"{name}.{pname}"
    return None


def _tensors(args: Any, kwargs: dict[str, Any]) -> list[torch.Tensor]:
    """The tensors among a call's arguments (one level into lists: cat, foreach ops), each once."""
    found: list[torch.Tensor] = []
    for a in [*args, *kwargs.values()]:
        for t in a if isinstance(a, (list, tuple)) else (a,):
            if isinstance(t, torch.Tensor) and not any(t is f for f in found):
                found.append(t)
    return found


def _version(t: Any) -> int:
    try:
        return int(t._version)
    except Exception:  # noqa: BLE001 - inference tensors and wrappers keep no version counter
        return -1


def _storage(t: torch.Tensor) -> int:
    try:
        return int(t.untyped_storage().data_ptr())
    except Exception:  # noqa: BLE001 - a tensor without storage (a wrapper, meta)
        return -1


def _op_name(func: Any) -> str:
    name = getattr(func, "__name__", "") or ""
    if name == "__get__":
        return str(getattr(getattr(func, "__self__", None), "__name__", name))
    return str(name)


def _cut_name(op: str, grad_mode: bool) -> str:
    if not grad_mode:
        return "torch.no_grad()"
    return {"detach": ".detach()", "data": ".data"}.get(op, op)


def _leaves_of(ts: list[torch.Tensor]) -> set[int]:
    found = {id(t) for t in ts if t.is_leaf and t.requires_grad}
    found |= {id(x) for x in graph_leaves([t for t in ts if t.grad_fn is not None])}
    return found


def _outputs(qualname: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    if qualname == "Tensor.backward":
        first: Any = args[0] if args else None
    else:
        first = args[0] if args else kwargs.get("tensors" if qualname.endswith("backward") else "outputs")
    seq = list(first) if isinstance(first, (list, tuple)) else [first]
    return [t for t in seq if isinstance(t, torch.Tensor)]


def _argument(qualname: str, args: tuple[Any, ...], kwargs: dict[str, Any], name: str) -> Any:
    """A keyword of a backward call, or its positional place (Tensor.backward(gradient, retain_graph, ...))."""
    if name in kwargs:
        return kwargs[name]
    order = {
        "Tensor.backward": ["self", "gradient", "retain_graph", "create_graph"],
        "torch.autograd.backward": ["tensors", "grad_tensors", "retain_graph", "create_graph"],
        "torch.autograd.grad": ["outputs", "inputs", "grad_outputs", "retain_graph", "create_graph"],
    }[qualname]
    k = order.index(name)
    return args[k] if k < len(args) else None


def graph_nodes(roots: list[Any]) -> Iterator[Any]:
    """Each node of the backward graph below `roots`, once, nearest first."""
    seen: set[int] = set()
    queue = [r for r in roots if r is not None]
    k = 0
    while k < len(queue):
        node = queue[k]
        k += 1
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        queue.extend(n for n, _ in node.next_functions if n is not None)


def _leaves_below(node: Any) -> list[torch.Tensor]:
    found = []
    for n in itertools.islice(graph_nodes([node]), _MAX_NODES):
        var = getattr(n, "variable", None) if type(n).__name__ == "AccumulateGrad" else None
        if isinstance(var, torch.Tensor):
            found.append(var)
    return found


def graph_leaves(outs: list[Any]) -> list[torch.Tensor]:
    """The leaves backward reaches from `outs`."""
    found = [o for o in outs if isinstance(o, torch.Tensor) and o.grad_fn is None and o.requires_grad]
    for node in itertools.islice(graph_nodes([o.grad_fn for o in outs if isinstance(o, torch.Tensor)]), _MAX_NODES):
        var = getattr(node, "variable", None) if type(node).__name__ == "AccumulateGrad" else None
        if isinstance(var, torch.Tensor):
            found.append(var)
    return found


def diagnoser_for(send: Send, filename: str, seed: int | None) -> Callable[[dict[str, Any]], Diagnoser]:
    """What the runner calls with the snippet's namespace: seeds the generators as the first run did
    (observe.observer_for), then installs the instruments."""

    def make(namespace: dict[str, Any]) -> Diagnoser:
        if seed is not None:
            import random

            torch.manual_seed(seed)
            random.seed(seed)
            try:
                import numpy

                numpy.random.seed(seed % 2**32)
            except ImportError:
                pass
        diagnoser = Diagnoser(send, filename, namespace)
        diagnoser.install()
        return diagnoser

    return make
