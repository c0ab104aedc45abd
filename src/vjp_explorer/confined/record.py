"""The forward as it ran: a log of the ATen operations on tensors that require grad, replayable in float64.

A `TorchDispatchMode` sees every operation below autograd, custom Functions' forwards included. Each
operation that touches a tracked tensor (one that requires grad, or one a logged operation made) is kept
with its arguments; an argument from outside the log (a leaf, a constant, a parameter) is copied the first
time it is used at each version, so the replay sees the values the forward saw even when the snippet
changes them afterwards (`c.data.mul_(2.5)`). What runs without grad (outside a custom Function's forward),
a detach, a mask or an index is not logged: read later, it is copied like any input from outside, so the
replay holds it fixed, as autograd does.

`Recorder.replay(outputs, leaves)` gives a function of float64 leaves that recomputes the outputs along the
recorded path: the forward finite differences perturb, with no autograd of the snippet involved.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from . import conventions, kinks
from . import record_parts as parts

# operations that draw random numbers: replayed from their recorded result, never drawn again
LINE = "vjp_explorer.line"  # the key of a backward node's metadata that holds the snippet's line
_RANDOM = ("bernoulli", "normal", "uniform", "rand", "randn", "randint", "randperm", "multinomial", "exponential")
_FLOATS = (torch.float16, torch.bfloat16, torch.float32)


_serials = iter(range(1, 2**62))


def serial(t: torch.Tensor) -> int:
    """A number for this tensor for as long as it lives (memory addresses are reused once it dies)."""
    n = getattr(t, "_vjp_serial", None)
    if n is None:
        n = next(_serials)
        t._vjp_serial = n  # type: ignore[attr-defined]
    return n


def key(t: torch.Tensor) -> tuple[int, int]:
    """A tensor as the log knows it: which tensor, and its version (in-place writes bump it). A tensor made
    under torch.inference_mode() has no version counter, and cannot be written outside it: always 0."""
    return (serial(t), 0 if t.is_inference() else t._version)


@dataclass
class Entry:
    """One operation as it ran."""

    func: Any
    args: Any  # the arguments, tensors replaced by _Ref
    kwargs: Any
    outs: list[tuple[int, int]]  # each tensor result's key after the call
    results: list[torch.Tensor] = field(default_factory=list)  # kept for random results
    random: bool = False
    kink: dict[str, Any] | None = None  # an input on a kink or tie, and PyTorch's convention (conventions.py)
    number: bool = False  # made in a custom Function's forward after it read a tensor as a Python number


@dataclass(frozen=True)
class _Ref:
    """An argument: a tensor made by an earlier entry (`made`) or a copy from outside the log."""

    key: tuple[int, ...]  # made: (serial, version); a copy: (serial, version, generation)
    serial: int
    made: bool


class NotReplayable(Exception):
    """The forward cannot be replayed (its record is incomplete, or an operation has no float64 kernel)."""


class Recorder(TorchDispatchMode):
    """Logs the operations that touch tracked tensors while active and not paused."""

    def __init__(self, max_entries: int = 200_000, max_copy_bytes: int = 512_000_000) -> None:
        super().__init__()
        self.entries: list[Entry] = []
        self.made: dict[tuple[int, int], tuple[Entry, int]] = {}
        self.copies: dict[tuple[int, ...], torch.Tensor] = {}
        self.generation: dict[int, int] = {}  # per serial: how often its contents changed behind its version
        self.copy_bytes = 0
        self.max_entries, self.max_copy_bytes = max_entries, max_copy_bytes
        self.paused = 0
        self.custom_depth = 0  # inside a custom autograd.Function's forward: grad is off, yet it is the function
        self.read_number = False  # that forward read a tracked tensor as a Python number (.item()) so far
        self.dropped = False  # the log overflowed: older forwards cannot be replayed
        self.failed = ""  # why the log could not record an operation (its own failure, never the snippet's)
        # serial -> version: written into through a view by a logged op (`outs[t] = h`), keyed by the view
        self.through_view: dict[int, int] = {}
        self.roots: set[int] = set()  # serials tracked without requiring grad: forward-mode AD's dual tensors
        # forward mode (a jvp's forward, or while dual tensors live): tangents flow through torch.no_grad(), so
        # what runs there is part of the function, logged too
        self.through_no_grad = 0
        self.on_leaf: Callable[[torch.Tensor], None] | None = None  # told of each leaf as the log first copies it
        self.where: Callable[[], int] | None = None  # the snippet's line running now (asked only at a kink)
        self._on = False  # on the dispatch stack
        # on since a statement began with no call due: past this many entries it idles until switched again
        self.idle_after: int | None = None
        self.idle = False
        # --code without --graph: each backward node made is told the snippet's line (observe.py sets both);
        # here, in the mode the log is anyway, and not in a mode or anomaly mode the snippet could see
        self.lines: Callable[[], int] | None = None
        self._unmarked: list[tuple[Any, int]] = []  # the last logged op's results (weak) and its line

    @property
    def on(self) -> bool:
        """Whether the log is on the dispatch stack (it is taken off while no checked call is due)."""
        return self._on

    def __enter__(self) -> Recorder:
        self._on = True
        return super().__enter__()  # type: ignore[no-any-return]

    def __exit__(self, *args: Any) -> None:
        if self._on:  # already off (switched off between checked calls): nothing to leave
            self._on = False
            super().__exit__(*args)

    def switch(self, on: bool) -> None:
        """Put the log on the dispatch stack or take it off; only while it is the innermost mode (a mode the
        snippet entered after it stays above it, and then the log stays on)."""
        from torch.utils._python_dispatch import _get_current_dispatch_mode

        self.idle, self.idle_after = False, None
        if on and not self._on:
            self.__enter__()
        elif not on and self._on and _get_current_dispatch_mode() is self:
            self.__exit__(None, None, None)

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """Torch would wrap __torch_dispatch__ in dynamo's `disable`, importing torch._dynamo (1.2 s) at the
        snippet's first tensor operation; the log compiles nothing, so it is not wrapped."""
        return False

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if self.idle:
            return func(*args, **kwargs)
        if self._unmarked:
            self.mark_lines()
        # What runs without grad (an optimizer's step, torch.no_grad()), a detach, a mask or an index (x > 0,
        # argmax) is a constant to backward: not logged; a later logged op that reads its result copies it
        # then, as an input from outside, so the replay holds it fixed as autograd does.
        name = func.overloadpacket.__name__
        unlogged = not torch.is_grad_enabled() and self.custom_depth == 0 and not (self.through_no_grad or self.roots)
        if unlogged and not self.paused and parts.in_place(name, args) and key(args[0]) in self.made:
            return self._through(func, name, args, kwargs)
        logged = func
        if self.custom_depth and not self.paused and name in ("detach", "alias", "_local_scalar_dense"):
            # in a custom Function's forward, the forward is the function: a detach is still the same values
            # (logged as the view it is), and a value read as a Python number leaves what the log can follow
            if name == "_local_scalar_dense":
                self.read_number = self.read_number or any(key(t) in self.made or t.requires_grad for t in args[:1])
                return func(*args, **kwargs)
            logged, name = torch.ops.aten.alias.default, "alias_of_detach"
        if self.paused or unlogged or name in ("detach", "alias"):
            return func(*args, **kwargs)
        try:
            tensors = [a for a in parts.leaves(args, kwargs) if isinstance(a, torch.Tensor)]
            roots = self.roots
            tracked = any(t.requires_grad or key(t) in self.made or (roots and serial(t) in roots) for t in tensors)
            refs = parts.map_args(self._ref, args, kwargs) if tracked else None  # before the call: in-place ops
        except Exception as e:  # noqa: BLE001 - the log's own failure: the op runs as Python would, unlogged
            self._fail(name, e)
            return func(*args, **kwargs)
        conv = conventions.convention_for(func) if refs is not None else None
        # an elementwise kink is read before the op runs: relu_ overwrites the input it is read from
        kink = conventions.hit(conv, func, args, kwargs, None) if conv is not None and not conv.after else None
        out = func(*args, **kwargs)
        if refs is None:
            return out
        try:
            if self.lines is not None and self.custom_depth == 0:  # a custom Function's node: mark() after it
                self._await_nodes(out)
            entry = self._log(logged, name, tensors, refs, out)
            if conv is not None and conv.after:
                kink = conventions.hit(conv, func, args, kwargs, out)
            if entry is not None and kink is not None:
                entry.kink = {**kink, "line": self.where() if self.where is not None else None}
        except Exception as e:  # noqa: BLE001
            self._fail(name, e)
        return out

    def tracks(self, t: torch.Tensor) -> bool:
        """Whether the log follows this tensor: it requires grad, or a logged operation made it."""
        return t.requires_grad or key(t) in self.made

    def _through(self, func: Any, name: str, args: Any, kwargs: Any) -> Any:
        """An in-place write without grad to a tensor the log made (`sq.clamp_(min=eps)` under no_grad, as in
        F.cosine_similarity): backward passes through it, later ops read the new values: old + (new - old)."""
        t = args[0]
        before, old = key(t), t.detach().clone()
        out = func(*args, **kwargs)
        try:
            after = (before[0], before[1] + 1)  # autograd bumps the version once the op returns through it
            if not bool(torch.isfinite(old).all()):  # inf - inf is no difference: not carried, said so
                self._fail(
                    name, ValueError("a write without grad over inf or nan values, which the replay cannot carry")
                )
                return out
            diff = self._ref(t.detach() - old)
            entry = Entry(torch.ops.aten.add.Tensor, (_Ref(before, before[0], True), diff), {}, [after])
            self.entries.append(entry)
            self.made[after] = (entry, 0)
        except Exception as e:  # noqa: BLE001 - as in __torch_dispatch__
            self._fail(name, e)
        return out

    def _await_nodes(self, out: Any) -> None:
        """Keep the results (weakly) with the line running now: autograd gives them their node only once the
        op returns up through it, so the next op (or the next backward call) marks them (mark_lines)."""
        import weakref

        line = self.lines() if self.lines is not None else 0
        self._unmarked = [(weakref.ref(o), line) for o in parts.leaves((out,), {}) if isinstance(o, torch.Tensor)]

    def mark(self, out: Any) -> Any:
        """The results of a call that just returned (a custom Function's apply) marked with the line now, where
        lines are asked for; returns them."""
        if self.lines is None:
            return out
        try:
            self._await_nodes(out)
        except Exception:  # noqa: BLE001 - as in mark_lines
            return out
        self.mark_lines()
        return out

    def mark_lines(self) -> None:
        """The node each of the last op's results got is told the line that ran it (a node already told keeps
        its line: an in-place op's later nodes are new ones)."""
        unmarked, self._unmarked = self._unmarked, []
        try:
            for ref, line in unmarked:
                t = ref()
                node = None if t is None else t.grad_fn
                if node is not None and line and LINE not in node.metadata:
                    node.metadata[LINE] = line
        except Exception:  # noqa: BLE001 - a line lost for a script's comment, never the snippet's error
            pass

    def _fail(self, name: str, e: Exception) -> None:
        """The log could not record an operation (a sparse or unusual layout, a tensor it cannot copy): a
        later call whose forward went through it is unrecorded, and says why."""
        self.failed = f"the log could not record {name} ({type(e).__name__}: {str(e).splitlines()[0][:120]})"

    def _log(self, func: Any, name: str, tensors: list[torch.Tensor], refs: Any, out: Any) -> Entry | None:
        outs = [o for o in parts.leaves((out,), {}) if isinstance(o, torch.Tensor)]
        if outs and not any(o.is_floating_point() or o.is_complex() for o in outs):
            return None
        # once the op returns, autograd bumps an in-place op's input (its result) and gives a view its base's
        # version counter: key the results as later operations will read them
        written = {serial(a) for a in tensors} if func._schema.is_mutable else set()
        if written and tensors[0]._is_view() and tensors[0]._base is not None:  # `outs[t] = h`: the base changed
            self.through_view.setdefault(serial(tensors[0]._base), key(tensors[0]._base)[1])
        base = key(tensors[0])[1] if func.is_view and tensors else None
        keys = [
            (serial(o), key(o)[1] + 1) if serial(o) in written else (serial(o), base) if base is not None else key(o)
            for o in outs
        ]
        entry = Entry(func, refs[0], refs[1], keys, number=self.read_number and self.custom_depth > 0)
        entry.random = any(name.startswith(r) for r in _RANDOM) or name == "native_dropout"
        if entry.random:
            entry.results = [o.detach().clone() for o in outs]
        self.entries.append(entry)
        for i, k in enumerate(keys):
            self.made[k] = (entry, i)
        if self.idle_after is not None and len(self.entries) > self.idle_after:
            self.idle = True
        if len(self.entries) > self.max_entries:
            self.forget(self.entries[: len(self.entries) // 2])
            self.dropped = True
        return entry

    def _ref(self, a: Any) -> Any:
        if not isinstance(a, torch.Tensor):
            return a
        k = key(a)
        # a leaf is an input, however made; a view made without grad (inside a custom Function's forward)
        # also has requires_grad and no grad_fn, yet it is the view op's result
        if k in self.made and not (a.requires_grad and a.grad_fn is None and not a._is_view()):
            return _Ref(k, serial(a), True)
        # a copy is keyed by version and generation: writes through `.data` (`w.data = ...`, `w.data.sub_(...)`,
        # a hand-written SGD step) change a leaf without bumping its version, so a leaf's copy is checked
        # against it before it is reused for a later forward
        n = serial(a)
        held = self.copies.get(k + (self.generation.get(n, 0),))
        if held is not None and a.requires_grad and not parts.same(held, a):
            self.generation[n] = self.generation.get(n, 0) + 1
            held = None
        copied = k + (self.generation.get(n, 0),)
        if held is None:
            size = a.numel() * a.element_size()
            if self.copy_bytes + size > self.max_copy_bytes:
                self.forget(self.entries)
                self.dropped = True
            self.copies[copied] = a.detach().clone()
            self.copy_bytes += size
            if self.on_leaf is not None and a.requires_grad and a.grad_fn is None:
                self.on_leaf(a)
        return _Ref(copied, n, False)

    def record_grad(
        self,
        outputs: list[torch.Tensor],
        vs: list[Any],
        inputs: list[torch.Tensor],
        grads: list[Any],
        others: list[torch.Tensor] = (),  # type: ignore[assignment]
    ) -> None:
        """A gradient taken with create_graph=True, as one entry of the log: a later forward that reads it
        (a MAML step `w - lr * g`) is replayed with g recomputed from its inputs, not held as a constant.
        The log pauses during backward, so this is the only way the replay learns how g depends on them."""
        kept = [(x, g) for x, g in zip(inputs, grads, strict=True) if isinstance(g, torch.Tensor)]
        if not kept or not all(isinstance(v, torch.Tensor) for v in vs):
            return
        read = [*inputs, *others]  # the inputs g is taken for first (GradOf's `which`), then what else it reads
        try:
            inner = self.replay(outputs, read)
        except NotReplayable:
            return  # its forward is not in the log: g stays a constant, and a check that needs it says so
        grad = GradOf(
            inner,
            [v.detach().clone() for v in vs],
            [k for k, g in enumerate(grads) if isinstance(g, torch.Tensor)],
        )
        refs = tuple(self._ref(x) for x in read)
        keys = [key(g) for _, g in kept]
        entry = Entry(grad, refs, {}, keys)
        self.entries.append(entry)
        for i, k in enumerate(keys):
            self.made[k] = (entry, i)
        if self.idle_after is not None and len(self.entries) > self.idle_after:
            self.idle = True

    def forget(self, entries: list[Entry]) -> None:
        """Drop these entries (a backward consumed their graph) and the copies only they used; a gradient's
        entry takes its inner forward with it (the backward through it consumed that graph too)."""
        entries = [*entries, *(i for e in entries if isinstance(e.func, GradOf) for i in e.func.inner.entries)]
        gone = {id(e) for e in entries}
        self.entries = [e for e in self.entries if id(e) not in gone]
        self.made = {k: v for k, v in self.made.items() if id(v[0]) not in gone}
        used = {r.key for e in self.entries for r in parts.leaves(e.args, e.kwargs) if isinstance(r, _Ref)}
        for k in [k for k in self.copies if k not in used]:
            t = self.copies.pop(k)
            self.copy_bytes -= t.numel() * t.element_size()

    def slice_for(self, outputs: list[torch.Tensor], leaves: list[torch.Tensor]) -> list[Entry]:
        """The entries that lead from the leaves to the outputs, in the order they ran."""
        leaf = {serial(t) for t in leaves}
        need: set[int] = set()
        stack = [key(o) for o in outputs]
        seen: set[tuple[int, int]] = set()
        while stack:
            k = stack.pop()
            if k in seen or k[0] in leaf:
                continue
            seen.add(k)
            if k not in self.made:
                continue
            entry = self.made[k][0]
            if id(entry) in need:
                continue
            need.add(id(entry))
            if entry.random and entry.func.overloadpacket.__name__ != "native_dropout":
                continue
            stack.extend((r.key[0], r.key[1]) for r in parts.leaves(entry.args, entry.kwargs) if isinstance(r, _Ref))
        return [e for e in self.entries if id(e) in need]

    def changed_inputs(self, entries: list[Entry], current: dict[int, torch.Tensor]) -> list[int]:
        """The serial of each outside input whose value now differs from what the forward read."""
        changed = []
        for e in entries:
            for r in parts.leaves(e.args, e.kwargs):
                if isinstance(r, _Ref) and not r.made and r.serial in current:
                    now, then = current[r.serial], self.copies.get(r.key)
                    if then is not None and now.shape == then.shape and not parts.same(then, now):
                        changed.append(r.serial)
        return sorted(set(changed))

    def replay(self, outputs: list[torch.Tensor], leaves: list[torch.Tensor], unseen: str = "") -> Replay:
        """The replay from `leaves` to `outputs`; NotReplayable where an output's forward is not in the log
        (`unseen`: the caller's word on where it may have run instead)."""
        entries = self.slice_for(outputs, leaves)
        if any(e.number for e in entries):
            raise NotReplayable(
                "a custom Function's forward reads a tensor as a Python number (.item(), float()) and computes on "
                "with it: the value leaves torch there, so the recorded forward cannot follow how the output "
                "depends on it"
            )
        if parts.read_after_view_write([r for e in entries for r in parts.leaves(e.args, e.kwargs)], self.through_view):
            raise NotReplayable(parts.VIEW_WRITE)
        missing = [o for o in outputs if key(o) not in self.made and serial(o) not in {serial(t) for t in leaves}]
        if missing:
            why = "older operations were dropped to bound memory" if self.dropped else self.failed or unseen
            why = why or "it ran unseen"
            raise NotReplayable(f"the forward of this output was not recorded ({why})")
        return Replay(self, entries, [key(o) for o in outputs], [serial(t) for t in leaves])


class _Packet:
    __name__ = "grad"


class _Schema:
    is_mutable = False
    arguments: list[Any] = []


class GradOf:
    """An entry's function that is a gradient (create_graph=True): the inner forward replayed at the
    entry's inputs and differentiated there by autograd of the replay, with the call's v. Its own event
    checked that gradient against finite differences; a later check differences through it."""

    overloadpacket, _overloadname, _schema, is_view = _Packet(), "create_graph", _Schema(), False

    def __init__(self, inner: Replay, vs: list[torch.Tensor], which: list[int]) -> None:
        self.inner, self.vs, self.which = inner, vs, which

    def run(self, xs: list[torch.Tensor], native: bool, hold: bool) -> list[torch.Tensor]:
        inner = self.inner.in_native_dtypes() if native else self.inner
        if hold:
            self.inner.hold([x.detach().to(torch.float64) for x in xs], [x.dtype for x in xs])
            inner.points = self.inner.points
        deep = any(x.requires_grad for x in xs)  # a Jacobian of the replay: differentiable through g
        with torch.enable_grad():
            ins = [x if x.requires_grad else x.detach().requires_grad_() for x in xs]
            ys = inner(*ins)
            root = sum(((y * v.to(y.dtype)).sum() for y, v in zip(ys, self.vs, strict=True)), torch.zeros(()))
            gs = torch.autograd.grad(root, [ins[k] for k in self.which], create_graph=deep, allow_unused=True)
        out = [torch.zeros_like(ins[k]) if g is None else g for k, g in zip(self.which, gs, strict=True)]
        return out if deep else [g.detach() for g in out]


class Replay:
    """The recorded forward as a function of float64 leaves (same shapes as the real leaves)."""

    def __init__(self, rec: Recorder, entries: list[Entry], outs: list[tuple[int, int]], leaves: list[int]) -> None:
        self.rec, self.entries, self.outs, self.leaves = rec, entries, outs, leaves
        self.native = False  # True: in the dtypes the forward ran in (its rounding), not float64
        self.narrowed: list[str] = []  # ops run in float32 for want of a float64 kernel
        self.points: dict[int, kinks.Point] | None = None  # per piecewise entry: how it ran at the point
        self._holding: dict[int, kinks.Point] | None = None
        self.smooth: set[int] | None = None  # the norms (2-norms) whose input is nonzero at the point: no kink there

    def in_native_dtypes(self) -> Replay:
        """The same replay in the forward's own dtypes: the size of its rounding, against the float64 one."""
        other = Replay(self.rec, self.entries, self.outs, self.leaves)
        other.native, other.points = True, self.points
        return other

    def hold(self, x0: list[torch.Tensor], dtypes: list[torch.dtype]) -> None:
        """Run once at the point and hold each piecewise operation on the branch it took there (kinks.py):
        from now on the replay is smooth near the point, and differentiated there as autograd did. The
        branches are read in the forward's own dtypes (a float32 pre-activation of 1e-9 that is -1e-9 in
        float64 took float32's branch), in float64 where an op has no kernel in them."""
        if not any(kinks.rule_for(e.func) or e.func.overloadpacket.__name__ in parts.NORMS for e in self.entries):
            return
        for native in (True, False):
            self._holding = {}
            try:
                runner = self.in_native_dtypes() if native else self
                runner._holding, runner.smooth = self._holding, set()
                with torch.no_grad():
                    runner(*[x.to(d) if native else x for x, d in zip(x0, dtypes, strict=True)])
                self.points = {i: parts.as_wide(at) for i, at in self._holding.items()}
                self.smooth = runner.smooth
                return
            except (NotReplayable, RuntimeError):
                if not native:
                    raise
            finally:
                self._holding = None

    def unheld(self) -> list[str]:
        """The operations with a kink the replay does not hold (kinks.UNHELD) it runs through."""
        smooth = self.smooth or set()
        names = [e.func.overloadpacket.__name__ for i, e in enumerate(self.entries) if i not in smooth]
        return sorted({n for n in names if n in kinks.UNHELD})

    def _cast(self, t: torch.Tensor) -> torch.Tensor:
        return t if self.native else parts.wide(t)

    def leaf_values(self) -> list[torch.Tensor]:
        """The leaves as the forward read them, in float64."""
        values: dict[int, torch.Tensor] = {}
        for e in self.entries:
            for r in parts.leaves(e.args, e.kwargs):
                if isinstance(r, _Ref) and not r.made and r.serial in self.leaves and r.serial not in values:
                    values[r.serial] = self.rec.copies[r.key]
        return [parts.wide(values[c]) if c in values else None for c in self.leaves]  # type: ignore[misc]

    def _narrow(self, e: Entry, args: Any, kwargs: Any, err: Exception) -> Any:
        """An op with no float64 kernel (LSTM's mkldnn_rnn_layer on CPU) runs in float32, its results widened
        again: the replay stays a function of its inputs, only coarser there (`narrowed` names it)."""
        name = e.func.overloadpacket.__name__
        if self.native:
            raise NotReplayable(f"{name} could not run: {str(err).splitlines()[0]}") from None
        try:
            narrow = tree_map(parts.narrow_float, (args, kwargs))
            res = e.func(*narrow[0], **narrow[1])
        except (RuntimeError, NotImplementedError):
            raise NotReplayable(f"{name} could not run in float64: {str(err).splitlines()[0]}") from None
        if name not in self.narrowed:
            self.narrowed.append(name)
        return tree_map(lambda t: parts.wide(t) if isinstance(t, torch.Tensor) else t, res)

    def reads(self) -> set[int]:
        """The serials of every tensor the replayed forward reads (made by an entry, or copied in)."""
        return {r.serial for e in self.entries for r in parts.leaves(e.args, e.kwargs) if isinstance(r, _Ref)}

    def __call__(self, *xs: torch.Tensor) -> list[torch.Tensor]:
        by_leaf = dict(zip(self.leaves, xs, strict=True))
        env: dict[tuple[int, int], torch.Tensor] = {}
        self.rec.paused += 1
        try:
            for i, e in enumerate(self.entries):
                self._run(e, env, by_leaf, i)
        finally:
            self.rec.paused -= 1
        out = []
        for k in self.outs:
            if k[0] in by_leaf:
                out.append(by_leaf[k[0]])
            elif k in env:
                out.append(env[k])
            else:
                raise NotReplayable("an output was not produced by the recorded operations")
        return out

    def _arg(
        self, a: Any, env: dict[tuple[int, int], torch.Tensor], by_leaf: dict[int, torch.Tensor], name: str
    ) -> Any:
        """One argument of an entry as the replay reads it: a leaf, an earlier result, or a copy."""
        if isinstance(a, _Ref):
            if a.serial in by_leaf:
                return by_leaf[a.serial]
            if a.made:
                if a.key not in env:
                    raise NotReplayable(f"{name} reads a value the record does not hold")
                return env[a.key]
            return self._cast(self.rec.copies[a.key]).clone()  # an in-place op must not change the copy
        if isinstance(a, torch.dtype) and a in _FLOATS and not self.native:
            return torch.float64
        return a

    def _run(
        self, e: Entry, env: dict[tuple[int, int], torch.Tensor], by_leaf: dict[int, torch.Tensor], i: int = -1
    ) -> None:
        name = e.func.overloadpacket.__name__
        if isinstance(e.func, GradOf):
            xs = [self._arg(a, env, by_leaf, name) for a in e.args]
            for k, g in zip(e.outs, e.func.run(xs, self.native, self._holding is not None), strict=False):
                env[k] = g
            return
        if e.random and name != "native_dropout":
            for k, t in zip(e.outs, e.results, strict=True):
                env[k] = self._cast(t).clone()  # an in-place op after it must not change the record
            return

        args, kwargs = parts.map_args(
            lambda a: self._arg(a, env, by_leaf, name), e.args, e.kwargs
        )  # as the log nested them
        args, kwargs = parts.dense_backward(e.func, args, kwargs)
        holds = self._holding is not None and kinks.rule_for(e.func) is not None
        if self._holding is not None and self.smooth is not None and parts.smooth_norm(e.func, args, kwargs):
            self.smooth.add(i)
        # an in-place op (clamp_) overwrites the input its branch is read from: the point is read before it runs
        before = (
            kinks.point(e.func, *parts.map_args(parts.copy_of, args, kwargs), None)
            if holds and e.func._schema.is_mutable
            else None
        )
        at = self.points.get(i) if self.points is not None else None
        rule = kinks.rule_for(e.func) if at is not None else None
        if name == "native_dropout":  # the recorded mask, not a new draw
            x, p = args[0], args[1]
            mask = self._cast(e.results[1])
            res: Any = (x * mask / (1 - p) if p < 1 else x * 0, mask)
        elif at is not None and rule is not None:  # a piecewise op on the branch it took at the point
            res = kinks.held(e.func, rule, args, kwargs, at)
        else:
            try:
                res = e.func(*args, **kwargs)
            except (RuntimeError, NotImplementedError) as err:
                res = self._narrow(e, args, kwargs, err)
        if holds:
            at_point = kinks.point(e.func, args, kwargs, res)
            self._holding[i] = at_point if before is None else kinks.Point(before.args, at_point.results)  # type: ignore[index]
        outs = [o for o in parts.leaves((res,), {}) if isinstance(o, torch.Tensor)]
        for k, o in zip(e.outs, outs, strict=False):
            env[k] = o
