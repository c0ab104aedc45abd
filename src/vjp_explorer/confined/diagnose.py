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
import os
import re
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from . import conventions
from . import diagnose_records as rec
from . import diagnose_source as src
from .calls import wrap_entry_points
from .diagnose_records import Backward, Made, Mutation, NonfiniteWatch

Send = Callable[[dict[str, Any]], None]

MADE = "vjp_explorer.made"  # the key of a backward node's metadata that holds the Made record of its op
_MAX_MUTATIONS = 10_000  # in-place changes remembered (the latest)
_HELD = 8  # backward calls whose graphs' nodes are held, to tell which earlier call freed a node
_TO_PYTHON = {"item": ".item()", "tolist": ".tolist()", "numpy": ".numpy()", "__float__": "float()"}
_TO_PYTHON.update({"__int__": "int()", "__bool__": "bool()", "__index__": "int()"})
_FACTORIES = ("tensor", "as_tensor", "from_numpy", "Tensor", "FloatTensor", "DoubleTensor")


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
        self.real = wrap_entry_points(self.call)
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
        name = rec.op_name(func)
        if name in ("grad", "data") and args and isinstance(args[0], torch.Tensor):
            return self._attribute(name, func, args[0], sys._getframe(1))
        ins = rec.tensors(args, kwargs)
        before = [rec.version(t) for t in ins]
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
            v1 = rec.version(t)
            if v1 > v0 >= 0:
                self._mutated(t, name, line, frame, v0, v1)
        parents = [self._record(t, frame) for t in ins]
        lost = any(needs)
        if name in _TO_PYTHON and lost and ins:
            self._to_python(name, ins[0], parents, line)
        small = sum(t.numel() for t in ins) <= 1 << 20
        for o in rec.tensors(out if isinstance(out, (tuple, list)) else (out,), {}):
            if any(o is t for t in ins):  # an in-place op: the tensor keeps its story; its new node gets one
                self._node(o, self.made.get(id(o)))
                continue
            m = Made(weakref.ref(o), line, name, parents, before, [weakref.ref(t) for t in ins])
            m.requires_grad = o.requires_grad
            if lost and not o.requires_grad:  # a float without grad, or an index or a comparison's bools
                m.cut = rec.cut_name(name, grad_mode)
                m.cut_leaves = rec.leaves_of(ins)
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
                m = Made(weakref.ref(value), line, "data", [self._record(t, frame)], [rec.version(t)])
                m.cut, m.cut_leaves = ".data", rec.leaves_of([t])
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
            if m.name is None:  # looked up once: "" where the snippet's frame and globals have no name for it
                m.name = rec.bound_name(t, frame, self.namespace, modules=False) or ""
            return m
        m = Made(weakref.ref(t), None, "", requires_grad=t.requires_grad)
        m.name = rec.bound_name(t, frame, self.namespace, modules=False) or ""
        ptr = rec.storage(t)
        for memory, cut in self.numpy:
            if memory == ptr:
                m.parents, m.op = [cut], "from_numpy"
        self._keep(t, m)
        return m

    def _to_python(self, name: str, t: torch.Tensor, parents: list[Made], line: int) -> None:
        """A value that required grad left torch (`.item()`, `.numpy()`, float()): a cut the graph cannot see."""
        m = Made(weakref.ref(t), line, name, parents[:1], cut=_TO_PYTHON[name], cut_leaves=rec.leaves_of([t]))
        self.python.append(m)
        if name == "numpy":
            self.numpy = [*self.numpy, (rec.storage(t), m)][-100:]

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
        name = rec.bound_name(t, frame, self.namespace, modules=False)
        record = self.made.get(id(t))
        made = (record.line, record.op) if record is not None and record.ref() is t else None
        self.mutations.append(Mutation(line, op, rec.storage(t), v0, v1, name, leaf, id(t), made))
        if len(self.mutations) > _MAX_MUTATIONS:
            del self.mutations[: _MAX_MUTATIONS // 10]

    # ------------------------------------------------------------------ backward calls, wrapped

    def call(self, qualname: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        real = self.real[qualname]
        if self.paused:
            return real(*args, **kwargs)
        outs = rec.outputs(qualname, args, kwargs)
        line, _ = self._where()
        roots = [o.grad_fn for o in outs]
        watch = NonfiniteWatch(roots)
        self.paused += 1  # backward's own work, and the instruments' afterwards, are not the forward
        try:
            watch.start()
            try:
                value = real(*args, **kwargs)
            except RuntimeError as e:
                try:
                    watch.finish()
                    self._failed(str(e), outs, line, (qualname, args, kwargs))
                except Exception:  # noqa: BLE001, S110 - only looking: the snippet's own error is what it raised
                    pass
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
        self, qualname: str, args: Any, kwargs: Any, outs: list[Any], line: int, value: Any, watch: NonfiniteWatch
    ) -> None:
        keeps = [rec.argument(qualname, args, kwargs, word) for word in ("retain_graph", "create_graph")]
        retained = any(bool(k) for k in keeps)
        walked = itertools.islice(rec.graph_nodes([o.grad_fn for o in outs]), rec.MAX_NODES)
        nodes = {} if retained else {id(n): n for n in walked}
        reached = {id(x) for x in rec.graph_leaves(outs)}
        for old in self.backwards[:-_HELD]:  # only the latest calls' nodes are held
            old.nodes = {}
        self.backwards.append(Backward(line, nodes, reached, retained, len(self.mutations)))
        made = [self.made.get(id(o)) for o in outs]
        self.outputs = [*self.outputs, *[m for m in made if m is not None]][-4:]
        if qualname != "torch.autograd.grad":
            self._unused_parameters(outs, reached, line)
        if watch.found is not None:
            self._nonfinite(watch, line, self._nonfinite_leaf(qualname, outs, value))
            # the first nan is the story (later ones follow from it): the rest of a long loop is not run again
            os._exit(0)

    def _failed(self, message: str, outs: list[Any], line: int, called: tuple[str, Any, Any]) -> None:
        try:
            if "modified by an inplace operation" in message:
                self._inplace(message, outs, line)
            elif "backward through the graph a second time" in message:
                self._twice(outs, line)
            elif "implicitly created only for scalar outputs" in message:
                self._nonscalar(outs, line)
            elif "does not require grad and does not have a grad_fn" in message:
                self._no_graph(outs, line)
            elif "appears to not have been used in the graph" in message:
                self._unused_inputs(outs, rec.argument(*called, "inputs"), line)
        except Exception:  # noqa: BLE001, S110 - only looking: the snippet's own error is what it raised
            pass

    # ------------------------------------------------------------------ the six kinds

    def _inplace(self, message: str, outs: list[Any], line: int) -> None:
        versions = re.search(r"is at version (\d+); expected version (\d+)", message)
        if versions is None:
            return
        now, expected = int(versions.group(1)), int(versions.group(2))
        for node in itertools.islice(rec.graph_nodes([o.grad_fn for o in outs]), rec.MAX_NODES):
            attr = rec.saved_failing(node, "modified by an inplace operation")
            if attr is None:
                continue
            made = node.metadata.get(MADE)
            if made is None:
                return
            by = re.search(r"which is output \d+ of ([\w:]+), is at version", message)
            saved = self._saved_tensor(made, attr, now, expected, by.group(1).split("::")[-1] if by else "")
            if saved is None:
                return
            ptr = rec.storage(saved)
            changes = [m for m in self.mutations if m.storage == ptr and expected < m.after <= now]
            if not changes:
                return
            first = changes[0]
            own = rec.bound_name(saved, None, self.namespace) or made.name
            if first.key == id(saved):
                # changed as this very object (`relu_` on the module's `h`, returned as the outer `out`): it
                # is named as the code that changed it named it, and nothing else shares its memory
                own = first.name or own
            name = own or first.name or f"the {rec.role(attr)} of {made.op}"
            # changed through another tensor on the same memory (`c = out.detach(); c.zero_()`)
            through = first.name if own and first.name and first.name != own and first.key != id(saved) else None
            alias = {"name": through, "line": first.made[0], "op": first.made[1]} if through and first.made else None
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
                    **({"through": alias} if alias is not None else {}),
                },
            )
            return

    def _saved_tensor(self, made: Made, attr: str, now: int, expected: int, by: str = "") -> torch.Tensor | None:
        """The tensor behind a node's failing `_saved_*`: its op's output or the input whose version moved;
        of several that moved alike (`out = a * b`, then `b.zero_()` and `a.add_(1)`), the one the op torch
        names changed last (`output 0 of Zero`)."""
        candidates = []
        if attr == "_saved_result":
            candidates.append((made.ref(), expected))
        candidates += [(ref(), v) for ref, v in zip(made.inputs, made.versions, strict=False)]
        candidates.append((made.ref(), expected))
        moved = [t for t, v in candidates if isinstance(t, torch.Tensor) and v == expected and rec.version(t) == now]
        for t in moved:
            last = [m for m in self.mutations if m.storage == rec.storage(t) and expected < m.after <= now]
            if by and last and rec.changed_by(last[-1].op, by):
                return t
        return moved[0] if moved else None

    def _twice(self, outs: list[Any], line: int) -> None:
        # the first node an earlier call freed (this call freed the nodes it ran through before it failed)
        freed, earlier = None, None
        for node in itertools.islice(rec.graph_nodes([o.grad_fn for o in outs]), rec.MAX_NODES):
            earlier = next((b for b in reversed(self.backwards) if b.nodes.get(id(node)) is node), None)
            if earlier is not None and rec.saved_failing(node, "already been freed") is not None:
                freed = node
                break
        if freed is None or earlier is None:
            return
        made = self._made_above(freed, outs)
        shared = {"line": None if made is None else made.line, "op": "" if made is None else made.op}
        same = any(earlier.nodes.get(id(o.grad_fn)) is o.grad_fn for o in outs if o.grad_fn is not None)
        tensor = made.ref() if made is not None else None
        name = (rec.bound_name(tensor, None, self.namespace) if isinstance(tensor, torch.Tensor) else None) or (
            made.name if made is not None else None
        )
        below = {id(x) for x in rec.leaves_below(freed)}
        stepped = any(m.leaf and m.key in below for m in self.mutations[earlier.mutations_before :])
        self._say(
            "backward_twice",
            name or "",
            line,
            {"line": earlier.line, "op": "backward"},
            facts={
                "shared": shared,
                "node": type(freed).__name__,
                "stepped": stepped,
                "loop": earlier.line == line,
                "same_output": same,
            },
        )

    def _made_above(self, node: Any, outs: list[Any]) -> Made | None:
        """The record of the op that made `node`, or, for a node inside a library function (cross_entropy's
        own steps), of the nearest node above it that the snippet's own call made."""
        parent: dict[int, Any] = {}
        for n in itertools.islice(rec.graph_nodes([o.grad_fn for o in outs]), rec.MAX_NODES):
            for child, _ in n.next_functions:
                if child is not None:
                    parent.setdefault(id(child), n)
        at: Any = node
        for _ in range(1000):
            if at is None:
                return None
            made = at.metadata.get(MADE)
            if made is not None:
                return made  # type: ignore[no-any-return]
            at = parent.get(id(at))
        return None

    def _nonscalar(self, outs: list[Any], line: int) -> None:
        y = next((o for o in outs if isinstance(o, torch.Tensor) and o.numel() != 1), None)
        if y is None:
            return
        name = rec.bound_name(y, None, self.namespace) or src.written_output(linecache.getline(self.filename, line))
        facts = {"shape": list(y.shape)}
        self._say("nonscalar_output", name or "", line, {"line": line, "op": "backward"}, facts=facts)

    def _no_graph(self, outs: list[Any], line: int) -> None:
        y = next((o for o in outs if isinstance(o, torch.Tensor) and o.grad_fn is None and not o.requires_grad), None)
        if y is None:
            return
        written = src.written_output(linecache.getline(self.filename, line))
        name = rec.bound_name(y, None, self.namespace) or written or ""
        start = self.made.get(id(y))
        if start is None or start.ref() is not y:
            return
        records = list(rec.walk([start]))
        cut = next((m for m in records if m.cut is not None), None)
        if cut is not None:
            self._say("no_grad_fn", name, line, {"line": cut.line, "op": cut.cut}, facts={})
            return
        python = self._python_link(records, None)
        if python is not None:
            self._say("no_grad_fn", name, line, {"line": python.line, "op": python.cut}, facts={})
            return
        made = [m for m in records if not m.parents and m.line is not None and rec.floating(m.ref())]
        if made:
            names = [m.name or src.assigned(self._source(), m.line) or "" for m in made[:4]]
            facts = {"leaves": [n for n in names if n]}
            self._say("no_grad_fn", name, line, {"line": made[0].line, "op": "requires_grad never set"}, facts=facts)

    def _grad_none_read(self, t: torch.Tensor) -> None:
        """The snippet read `t.grad` and got None: why, if the instruments can tell (before any backward: that)."""
        line, frame = self._where()
        read = src.read_grad_of(linecache.getline(self.filename, line))
        name = rec.bound_name(t, frame, self.namespace) or read or ""
        if not self.backwards:
            if t.requires_grad and t.grad_fn is None:  # a leaf read before any backward filled it
                self._say("grad_none", name, line, {"line": None, "op": "before backward"}, facts={})
            return
        if t.grad_fn is not None:
            made = self.made.get(id(t))
            at = made.line if made is not None and made.ref() is t else None
            by = made.op if made is not None and made.ref() is t else ""
            self._say("grad_none", name, line, {"line": at, "op": "non-leaf"}, facts={"made_by": by})
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
        return any(m.ref() is t for out in self.outputs for m in rec.walk([out]))

    def _unused_inputs(self, outs: list[Any], inputs: Any, line: int) -> None:
        """autograd.grad(outputs, inputs) refused an input the outputs do not reach: where its path was cut."""
        seq = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        reached = {id(x) for x in rec.graph_leaves(outs)} | {id(n) for n in rec.graph_nodes([o.grad_fn for o in outs])}
        starts = [m for m in (self.made.get(id(o)) for o in outs) if m is not None]
        for t in seq:
            if isinstance(t, torch.Tensor) and id(t) not in reached and id(t.grad_fn) not in reached:
                name = rec.bound_name(t, None, self.namespace) or ""
                self._cut_or_unused(t, name, line, starts)

    def _cut_or_unused(self, t: torch.Tensor, name: str, line: int, starts: list[Made] | None = None) -> None:
        key = id(t)
        records = [m for out in [*self.outputs, *(starts or [])] for m in rec.walk([out])]
        cut = next((m for m in records if m.cut is not None and key in m.cut_leaves), None)
        if cut is None:
            cut = self._python_link(records, key)
        if cut is not None:
            self._say("grad_none", name, line, {"line": cut.line, "op": cut.cut}, facts={})
            return
        if any(key in m.cut_leaves for m in self.python):
            return  # it left torch somewhere, and the instruments cannot follow it back: no guess
        if any(r() is t for m in [*records, *self.made.values()] for r in m.inputs):
            # an op read it, yet no cut the instruments saw explains the missing path (a list of tensors
            # through torch.tensor, a gradient penalty that does not depend on a last bias): no guess
            return
        self._say("grad_none", name, line, {"line": None, "op": "unused"}, facts={})

    def _unused_parameters(self, outs: list[Any], reached: set[int], line: int) -> None:
        """A module the backward reached in part: each parameter it did not reach that an optimizer of the
        snippet's steps got no gradient (one the snippet reads is diagnosed where it reads its .grad; one
        neither read nor stepped is only named in the call's note)."""
        stepped = {
            id(q)
            for o in list(self.namespace.values())
            if isinstance(o, torch.optim.Optimizer)
            for group in o.param_groups
            for q in group.get("params", [])
        }
        for name, p in rec.unreached_parameters(self.namespace, reached):
            if id(p) in stepped:
                self._cut_or_unused(p, name, line)

    def _python_link(self, records: list[Made], leaf: int | None) -> Made | None:
        """A tensor made from Python numbers (`torch.tensor(q)`) whose numbers came, by the snippet's own
        assignments, from a value that left torch (`q = h.sum().item() * 2`), seen leaving at that line."""
        tree = self._source()
        if tree is None:
            return None
        for m in records:
            if m.parents or m.op not in _FACTORIES or m.line is None:
                continue
            for at in [m.line, *src.python_sources(tree, m.line)]:  # `torch.tensor(x.sum().item())`: the same line
                for cut in [*self.python, *self.cuts]:
                    if cut.line == at and (leaf is None or leaf in cut.cut_leaves):
                        return cut
        return None

    def _nonfinite_leaf(self, qualname: str, outs: list[Any], value: Any) -> str:
        """The name of the first input whose gradient from this call holds a nan or inf."""
        if qualname == "torch.autograd.grad":
            return ""
        for x in rec.graph_leaves(outs):
            if isinstance(x.grad, torch.Tensor) and not rec.finite(x.grad):
                return rec.bound_name(x, None, self.namespace) or ""
        return ""

    def _nonfinite(self, watch: NonfiniteWatch, line: int, name: str) -> None:
        assert watch.found is not None
        node, arriving = watch.found
        made = node.metadata.get(MADE)
        if made is None:
            return
        spurious = rec.spurious(made, arriving)
        facts: dict[str, Any] = {"node": type(node).__name__, "overflow": rec.overflowed(made)}
        if spurious and (dtype := rec.past_range(made, arriving)):  # a right gradient too large for its dtype
            facts["backward_overflow"] = dtype
        named = lambda t: rec.bound_name(t, None, self.namespace)  # noqa: E731
        kinks = conventions.of_call(made.call, made.line, named) if made.call is not None else []
        if kinks:  # its input sits on a kink (sqrt at 0): the convention PyTorch followed there
            facts["kink"] = kinks[0]
        upstream = rec.overflowed_input(made)
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
