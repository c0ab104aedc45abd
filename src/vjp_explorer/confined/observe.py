"""Every backward and grad call of a snippet, observed from the inside of the child that runs it.

`Observer.install()` wraps `Tensor.backward`, `torch.autograd.backward` and `torch.autograd.grad`, and the
autograd engine itself (`Variable._execution_engine`, which every one of them reaches, so a snippet that
restores torch's functions or calls the engine directly is still seen), and `autograd.Function.apply`, so a
custom forward is recorded as the function it computes; it records the forward's ATen operations
(record.py). Each call runs exactly as the snippet wrote it, once; the tool never calls the snippet's graph
again (a custom backward or a hook would run twice). This process only records: each call's event carries
its record (the op log from oplog.py, v, the grads), and the judge, a process the snippet never touches
(judge.py), makes its checks. Every call is announced ("started", "ended") through a sender of its own, so
a call whose event is dropped in here is still known to the parent.
"""

from __future__ import annotations

import contextlib
import inspect
import linecache
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

import torch

from ..events import Event, LeafGrad
from . import calls as call_parts
from . import checks, conventions, payload, protocol
from .calls import FOLDED_VALUES, Call, delta, dense, dtype_name, grad_of, info, sparse_grad, values_of
from .diagnose_records import unreached_parameters
from .hooks import HookWatch
from .nonfinite import NonfiniteWatch, custom_functions
from .observe_parts import (
    FULL_PER_LINE,
    SAMPLE,
    STATEMENT_ENTRIES,
    TORCH_DIR,
    LineMode,
    Statements,
    arguments,
    as_written_once,
    graph_leaves,
    in_functorch_transform,
    plain,
    quiet,
    signature_of,
    v_as_given,
    watch_compile,
)
from .observe_record import record_of
from .record import LINE, Recorder, serial
from .record_parts import watch_numbers
from .records import RecordBudget
from .words import event_notes, unreached_note

Send = Callable[[dict[str, Any]], None]


class Observer:
    """Turns each autograd call of the snippet into an event dict, sent as it happens."""

    def __init__(
        self, send: Send, filename: str, namespace: dict[str, Any], explain: dict[str, Any] | None = None
    ) -> None:
        self.send, self.filename, self.namespace = send, filename, namespace
        self.recorder = Recorder()
        self.count = 0
        self.higher = False  # a call with create_graph=True ran: its grads have a graph the log never saw
        self.hooks = HookWatch()  # the snippet's hooks that change a gradient on its way (hooks.py)
        self.full = 0  # calls explained in full so far
        self.per_line: dict[int, int] = {}  # calls made from each line so far
        self._names: dict[int, tuple[Any, str]] = {}  # id -> (weakref, name): name_of within a statement
        self.wanted: dict[int, bool] = {}  # per line: whether its next call is checked (then the log runs)
        self.statements = Statements()  # which top-level statements may reach a backward call
        explain = explain or {}
        self.explained = int(explain.get("calls", 50))  # events explained in full; later ones get cheap checks
        self.jacobian_rows = int(explain.get("jacobian_rows", checks.JACOBIAN_ROWS))
        self.graph = bool(explain.get("graph", False))
        self.code = bool(explain.get("code", False))  # --code: each explained call's graph for its script
        self.records = RecordBudget(int(explain.get("record_bytes", 2_000_000_000)))  # snippet_record_bytes

        self.batched: list[Any] | None = None  # inside the snippet's torch.vmap: its autograd.grad calls
        self._local = threading.local()  # per thread: a snippet's threads call backward independently
        self.real: dict[str, Any] = {}
        self.started = 0  # calls announced so far
        self.active = 0  # observed calls running now, in any thread (autograd's threads write .grad too)
        self.rng_before: torch.Tensor | None = None  # the random state before the last functional call (_run)
        self.said: set[int] = set()  # lines already reported for a backward that ran unobserved
        self.watched: set[int] = set()  # the leaves whose .grad autograd tells us of
        self.manual: Any = None  # manual.ManualWatch where the snippet writes gradients by hand

    @property
    def depth(self) -> int:
        """Inside one of our wrappers, in this thread: torch's own nested calls are not events."""
        return int(getattr(self._local, "depth", 0))

    @depth.setter
    def depth(self, n: int) -> None:
        self._local.depth = n

    def install(self) -> None:
        """Wrap torch's entry points and start recording (before the snippet's first line)."""
        self._accumulated = torch.Tensor.register_post_accumulate_grad_hook  # torch's own, before hooks.py's
        self.recorder.on_leaf = self.watch_leaf
        self.recorder.where = self.line_now  # asked only where an input sits on a kink (conventions.py)
        self.real = call_parts.wrap_entry_points(self.call)
        self._engine()
        announce = self.send  # held here: a snippet that replaces the observer's sender still announces calls
        self.announce = lambda message: quiet(announce, message)
        apply = torch.autograd.Function.apply.__func__  # type: ignore[attr-defined]
        rec = self.recorder

        def recorded_apply(cls: Any, *args: Any, **kwargs: Any) -> Any:
            rec.custom_depth += 1
            undo = watch_numbers(rec) if rec.custom_depth == 1 else None
            try:
                out = apply(cls, *args, **kwargs)
            finally:
                if undo is not None:
                    undo()
                rec.custom_depth -= 1
                rec.read_number = rec.read_number and rec.custom_depth > 0
            return rec.mark(out)  # --code: its node is made here, at the line that called apply

        torch.autograd.Function.apply = classmethod(recorded_apply)  # type: ignore[assignment]
        self.hooks.install()
        if self.graph:  # each node of the graph learns the snippet's line that made it
            LineMode(self.line_now).__enter__()
        elif self.code:  # each node is told its line by the log's own mode: nothing the snippet could see
            self.recorder.lines = self.line_now
        from .functional import install

        install(self)
        watch_compile()
        self.recorder.__enter__()

    def _engine(self) -> None:
        """Wrap the engine every backward reaches (`Variable._execution_engine.run_backward`): a call made
        through it directly, or through torch's own functions restored by the snippet, is an event too."""
        from torch.autograd.variable import Variable

        engine = Variable._execution_engine
        real = engine.run_backward
        self.real["engine.run_backward"] = real
        observer = self

        class Engine:
            """The engine, with run_backward observed; everything else is the engine's own."""

            def run_backward(self, *args: Any, **kwargs: Any) -> Any:
                return observer.call("engine.run_backward", args, kwargs)

            def __getattr__(self, name: str) -> Any:
                return getattr(engine, name)

        Variable._execution_engine = Engine()  # type: ignore[assignment]

    def unobserved(self, t: torch.Tensor) -> None:
        """A leaf's .grad was written outside every observed call: say so once per line (autograd's hook)."""
        if self.active or self.depth:
            return
        line = self.line_now()
        if line in self.said:
            return
        self.said.add(line)
        what = f"{self.name_of(t)}'s .grad was written by a backward pass the observer did not see"
        self.announce({"type": "unobserved", "line": line, "what": what})

    def watch_leaf(self, t: torch.Tensor) -> None:
        """Ask autograd to tell us whenever backward writes this leaf's .grad (the recorder meets each leaf
        when the forward first reads it, again at each new version: once is enough)."""
        n = serial(t)
        if n in self.watched or t._is_view():
            return
        self.watched.add(n)
        try:
            self._accumulated(t, self.unobserved)
        except RuntimeError:
            pass  # a leaf that cannot take a hook: nothing to watch

    def emit(self, event: Event, record: dict[str, Any] | None = None) -> None:
        """Number an event made elsewhere (a functional call) and send it, with its record for the judge."""
        self.count += 1
        event.index = self.count
        self.send_event(event, record)

    def send_event(self, event: Event, record: dict[str, Any] | None = None, started: int | None = None) -> None:
        """Send a call's record (in a frame of its own, for the judge: records.py), then its event with its
        arrays within payload.NUMBERS; if still too large for a frame, with no arrays and no graph."""
        if record is not None:
            self.records.send(self.send, event.index, record)
        payload.fit(event)
        try:
            self.send({"type": "event", "event": {**plain(event), "record": None, "started": started}})
            return
        except protocol.FrameTooLarge:
            event.graph = event.backward_code = None
            payload.fit(event, budget=0)
        self.send({"type": "event", "event": {**plain(event), "record": None, "started": started}})

    def before_statement(self, stmt: Any) -> None:
        """The runner's hook: a statement that may reach a backward line not seen yet (observe_parts.Statements)
        runs with the log on until its first call, or STATEMENT_ENTRIES operations (then the log idles)."""
        due = any(self.wanted.values()) or not self.wanted  # before any call, the log runs from the start
        self.recorder.switch(self.statements.may_backward(stmt) or due)  # asked first: it learns definitions
        if not due and self.recorder.on:
            self.recorder.idle_after = len(self.recorder.entries) + STATEMENT_ENTRIES

    def after_statement(self, stmt: Any) -> None:
        """The runner's hook; events are sent as they happen. The names of tensors may change now."""
        self._names.clear()

    def after_run(self) -> None:
        """The runner's hook after the snippet's last statement: the hand-written gradients (manual.py)."""
        if self.manual is not None:
            self._manual(self.manual.finish)

    def _manual(self, step: Callable[[], None]) -> None:
        """A step of manual.py: the tool's own failure there is never the snippet's exception."""
        try:
            step()
        except Exception:  # noqa: BLE001,S110 - then the parent gets fewer "manual" frames, and says nothing
            pass

    # ------------------------------------------------------------------ one call

    def call(self, qualname: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        real = self.real[qualname]
        if self.depth:  # Tensor.backward calls torch.autograd.backward: one event, not two
            return real(*args, **kwargs)
        if in_functorch_transform():  # torch.func's own grad calls, on wrappers with no storage to read
            self.depth += 1  # the engine's run_backward inside it is the same call, not one more
            try:
                value = real(*args, **kwargs)
            finally:
                self.depth -= 1
            # autograd.grad the snippet itself calls inside its torch.vmap (not torch.func's own): one event
            if self.batched is not None and not sys._getframe(2).f_code.co_filename.startswith(TORCH_DIR):
                self._note_batched(qualname, real, args, kwargs, value)
            return value
        try:
            p = signature_of(qualname, real).bind(*args, **kwargs)
        except TypeError:
            return real(*args, **kwargs)  # torch raises its own TypeError, as Python would
        p.apply_defaults()
        try:
            c = self._read(qualname, p)
        except Exception:  # noqa: BLE001 - a call the tool cannot read runs as written, unexplained
            c = None
        if c is None:
            return self._run(real, args, kwargs)
        for started in (c.watch, c.probe):
            if started is not None:
                started.start()
        if self.manual is not None:
            self._manual(lambda: self.manual.at_backward(c.outs))
        code = self._code_start(c) if self.code and c.explain else None
        self.hooks.reset()
        self.started += 1
        c.started = self.started
        self.announce({"type": "started", "call": c.started, "line": c.line})
        ok = False
        try:
            value = self._run(real, args, kwargs)
            ok = True
        finally:
            self.announce({"type": "ended", "call": c.started, "ok": ok})
            c.diagnosis = c.watch.finish() if c.watch is not None else None
            c.graph = c.probe.finish() if c.probe is not None else None
            if code is not None:
                code.stop()
        self.higher = self.higher or bool(p.arguments.get("create_graph"))
        if p.arguments.get("create_graph"):
            self._record_grad(c, value)
        try:
            self._explain(c, value, code)
        except Exception as e:  # noqa: BLE001 - the tool's own failure is never the snippet's exception
            self._unread(c, e)
        self._record_next(c.line)
        return value

    def _record_next(self, line: int) -> None:
        """Decide, as a call from `line` ends, whether the next call from it is checked: the forward log runs
        only while some line's next call is (a loop's unchecked steps then run with no dispatch mode at all:
        the log's Python work on every forward op was most of a folded loop's cost)."""
        seen = self.per_line.get(line, 0)
        explain = seen < FULL_PER_LINE and self.full < self.explained
        every = SAMPLE if seen < 10 * SAMPLE else 10 * SAMPLE
        self.wanted[line] = explain or (seen - FULL_PER_LINE) % every == every - 1
        self.recorder.switch(any(self.wanted.values()))

    def _read(self, qualname: str, p: inspect.BoundArguments) -> Call | None:
        """What the call will do, read before it runs; None for a call that is not one to explain."""
        outs, vs, inputs = arguments(qualname, p.arguments)
        if not outs or not all(isinstance(o, torch.Tensor) for o in outs):
            return None
        if any(v is not None and not isinstance(v, torch.Tensor) for v in vs):
            return None
        vs = (vs + [None] * len(outs))[: len(outs)]
        line, source = self._where()
        explain, checked, every = self._plan(line)
        with checks.outside_the_log():  # the default v is ours, not the forward's
            v_used = v_as_given(outs, vs, explain or checked)
        if inputs is None:
            inputs = self.in_snippet_order(graph_leaves(outs))
        leaves = [x for x in inputs if isinstance(x, torch.Tensor)]
        is_grad = qualname == "torch.autograd.grad" or (
            qualname == "engine.run_backward" and not p.arguments.get("accumulate_grad", True)
        )
        return Call(
            qualname=qualname,
            p=p,
            outs=outs,
            v_used=v_used,
            given=any(v is not None for v in vs),
            leaves=leaves,
            is_grad=is_grad,
            before=[None if is_grad else grad_of(x) for x in leaves],
            line=line,
            source=source,
            explain=explain,
            checked=checked,
            every=every,
            watch=NonfiniteWatch(outs) if explain else None,
            customs=custom_functions(outs) if explain else [],
            probe=self._graph_probe(outs) if explain and self.graph else None,
            values=[values_of(x) if explain or x.numel() <= FOLDED_VALUES else None for x in leaves],
            outputs=[
                info(written or self.name_of(o), o, explain)
                for o, written in zip(outs, as_written_once(qualname, source, len(outs)), strict=True)
            ],
        )

    def _explain(self, c: Call, value: Any, code: Any = None) -> None:
        """The event of a call that ran: its grads, the checks on the replay, the notes; sent."""
        after = [None if c.is_grad else grad_of(x) for x in c.leaves]
        got = [dense(g) for g in value] if c.is_grad else [delta(b, a) for b, a in zip(c.before, after, strict=True)]
        self.count += 1

        def keep(t: Any) -> Any:  # past the explained calls, only small tensors' values travel
            return values_of(t) if c.explain or t is None or t.numel() <= FOLDED_VALUES else None

        event = Event(
            index=self.count,
            line=c.line,
            source=c.source,
            call=c.qualname,
            outputs=c.outputs,
            v=[info("v", v) for v in c.v_used if isinstance(v, torch.Tensor)],
            v_origin="grad_outputs" if c.is_grad and c.given else "given" if c.given else "scalar default 1",
            retain_graph=bool(c.p.arguments.get("retain_graph") or c.p.arguments.get("create_graph")),
            create_graph=bool(c.p.arguments.get("create_graph")),
            inputs=[
                LeafGrad(
                    self.name_of(x),
                    list(x.shape),
                    dtype_name(x),
                    value,
                    keep(b),
                    None if c.is_grad else keep(a),
                    keep(g),
                    grad_norm=None if g is None else float(g.detach().abs().to(torch.float64).norm()),
                )
                for x, value, b, a, g in zip(c.leaves, c.values, c.before, after, got, strict=True)
            ],
        )
        event.graph = c.graph
        if code is not None:
            from .code_capture import finish

            event.backward_code = finish(code)
        nonfinite = any(isinstance(g, torch.Tensor) and not bool(torch.isfinite(g).all()) for g in got)
        event.diagnosis = c.diagnosis if nonfinite else None
        record = record_of(self, c, event, got)
        if c.p.arguments.get("is_grads_batched"):  # a batch of v, one Jᵀv per row: as autograd.grad inside vmap
            from .functional_judged import batch_record

            skip = "" if c.checked else f"past the first calls of a line, every {c.every}th is checked"
            record = batch_record(self, event, c.outs, c.leaves, c.v_used, got, skip, not c.explain)
            event.results = [info(f"grad[{k}]" if len(got) > 1 else "grad", g, c.explain) for k, g in enumerate(got)]
            event.inputs = []  # each result holds one Jᵀv per row of v (batch first), as the results show
            event.notes.append("is_grads_batched=True: one backward per row of v (batch first), each row's Jᵀv.")
        event.notes.extend(event_notes(event, c.before))
        event.kinks = conventions.of_entries(self.recorder.slice_for(c.outs, c.leaves), self.global_name)
        event.notes.extend(self._unreached(c))
        if any(sparse_grad(x) for x in c.leaves):
            event.notes.append("A sparse gradient: shown and checked as the dense tensor it stands for.")
        self.send_event(event, record, c.started)
        if not event.retain_graph:
            self.recorder.forget(self.recorder.slice_for(c.outs, c.leaves))

    def _unreached(self, c: Call) -> list[str]:
        """A note naming the parameters of a module this backward used in part that it left without a gradient
        (snippet/why.py runs the diagnosis for them when the snippet reads their .grad or steps an optimizer)."""
        if c.is_grad or c.p.arguments.get("inputs") is not None:
            return []
        names = [n for n, _ in unreached_parameters(self.namespace, {id(x) for x in c.leaves})]
        return [unreached_note(names)] if names else []

    def _note_batched(self, qualname: str, real: Any, args: Any, kwargs: Any, value: Any) -> None:
        """An autograd.grad call inside torch.vmap, its batched v and grads unwrapped (functional.unbatched);
        None where it cannot be read (the event says so)."""
        from .functional_refs import unbatched

        assert self.batched is not None
        try:
            p = inspect.signature(real).bind(*args, **kwargs)
            p.apply_defaults()
            outs, vs, inputs = arguments(qualname, p.arguments)
            self.batched.append(unbatched(outs, vs, inputs, value))
        except Exception:  # noqa: BLE001 - the tool's own failure: the call ran, the event says it is unread
            self.batched.append(None)

    def _record_grad(self, c: Call, value: Any) -> None:
        """A create_graph gradient into the log (record.Recorder.record_grad), so a later call's replay
        recomputes it from its inputs; where .grad accumulated onto an earlier grad, it is not recorded."""
        grads = (
            list(value)
            if c.is_grad
            else [None if b is not None else x.grad for x, b in zip(c.leaves, c.before, strict=True)]
        )
        try:
            with checks.outside_the_log():
                # g depends on every leaf of the graph, not only on those it is taken for (a gradient penalty's
                # ∂out/∂x depends on w): the replay of g reads them all
                others = [t for t in graph_leaves(c.outs) if all(t is not x for x in c.leaves)]
                self.recorder.record_grad(c.outs, c.v_used, c.leaves, grads, others)
        except Exception:  # noqa: BLE001, S110 - the tool's own failure: the gradient stays a constant to the replay
            pass

    def _unread(self, c: Call, error: Exception) -> None:
        """A call that ran but the tool could not read back: an event that says so, the snippet goes on."""
        why = f"the tool could not read this call back ({type(error).__name__}: {str(error)[:200]})"
        event = Event(self.count, c.line, c.source, c.qualname, [], [], "", False, False, [])
        self.count = max(self.count, event.index)
        record: dict[str, Any] = {
            **{name: [] for name in ("outputs", "v", "at", "grads", "before", "names")},
            "forward": None,
            "unreplayable": why,
            "cheap": True,
            "jacobian_rows": self.jacobian_rows,
            "hook": None,
            "customs": [],
            "second": None,
            "tangent": None,
        }
        self.send_event(event, record, c.started)

    def _code_start(self, c: Call) -> Any:
        """--code: the call's graph captured before it runs (code_capture.py; imported only when asked)."""
        from .code_capture import start

        return start(self, c.outs, c.v_used, c.leaves, LINE)

    def _plan(self, line: int) -> tuple[bool, bool, int]:
        """For the next call from `line`: whether it is explained in full (the first calls of each line, what
        the transcript shows in full, up to the limit overall), whether it gets the cheap checks (every
        SAMPLE-th call of the line past those, every 10·SAMPLE-th past 100: a loop's steps cost a forward each),
        and that period."""
        seen = self.per_line.get(line, 0)
        self.per_line[line] = seen + 1
        explain = seen < FULL_PER_LINE and self.full < self.explained
        self.full += explain
        every = SAMPLE if seen < 10 * SAMPLE else 10 * SAMPLE
        # a line's first calls past the overall limit (a long snippet of one-off lines) get the cheap checks
        return explain, seen < FULL_PER_LINE or (seen - FULL_PER_LINE) % every == every - 1, every

    def _graph_probe(self, outs: list[torch.Tensor]) -> Any:
        """The backward graph with what each node received (engine/backward_graph.py), named by the snippet."""
        from ..engine.backward_graph import GraphProbe

        made: dict[int, str] = {}
        for name, value in self.namespace.items():
            if isinstance(value, torch.Tensor) and value.grad_fn is not None and not name.startswith("__"):
                made.setdefault(id(value.grad_fn), name)

        def describe(node: Any) -> dict[str, Any]:
            leaf = getattr(node, "variable", None)
            line = node.metadata.get(LINE, 0) if leaf is None else 0
            source = linecache.getline(self.filename, line).strip() if line else None
            return {
                "leaf": None if leaf is None else self.name_of(leaf),
                "value_of": made.get(id(node)),
                "line": line or None,
                "source": source,
            }

        return GraphProbe(outs, describe)

    def unseen(self) -> str:
        """Where the forward of an output the log does not hold ran, as far as the observer can tell."""
        if not self.recorder.on:
            return "the log was off: calls from the loop's lines were not due for a check"
        if threading.current_thread() is not threading.main_thread():
            return "this call came from another thread; the log sees the main thread's forward operations only"
        if self.higher:
            return (
                "it was computed by a backward pass with create_graph=True, a gradient of a gradient: the log "
                "replays forward operations only, so higher derivatives have no independent check here yet"
            )
        return (
            "the log does not follow how it was made: most often an in-place write into a view or an index of it "
            "(b[0] = ..., b[mask] = ...), else another thread or a backward pass"
        )

    def _run(self, real: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not self.depth:  # the outermost call: a functional call's re-run draws what the call drew
            self.rng_before = torch.get_rng_state()
        self.depth += 1
        self.active += 1
        self.recorder.paused += 1  # backward's own operations are not the forward
        try:
            if not self.recorder.on:
                return real(*args, **kwargs)
            with checks.outside_the_log():  # nor pay the log's Python dispatch
                return real(*args, **kwargs)
        finally:
            self.recorder.paused -= 1
            self.active -= 1
            self.depth -= 1

    def _where(self) -> tuple[int, str]:
        """The snippet's line that made this call (the innermost frame of the snippet's own code)."""
        line = self.line_now()
        return line, linecache.getline(self.filename, line).strip() if line else ""

    def line_now(self) -> int:
        """The innermost line of the snippet's own code on the stack (a library's code reports its caller's)."""
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename != self.filename:
            frame = frame.f_back  # type: ignore[assignment]
        return 0 if frame is None else frame.f_lineno

    def in_snippet_order(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        """Tensors ordered as the snippet first named them (unnamed ones last, as found)."""
        order = {id(v): k for k, v in enumerate(self.namespace.values())}
        return sorted(tensors, key=lambda t: order.get(id(t), len(order)))

    def name_of(self, t: torch.Tensor) -> str:
        """What the snippet calls a tensor: a global bound to it, a module's parameter, else its shape. Kept
        per tensor while the statement runs (a loop names the same parameters every step)."""
        held = self._names.get(id(t))
        if held is not None and held[0]() is t:
            return held[1]
        name = self._name_of(t)
        with contextlib.suppress(TypeError):
            self._names[id(t)] = (weakref.ref(t), name)
        return name

    def global_name(self, t: torch.Tensor) -> str | None:
        """The snippet's own name for a tensor (a global, a module's parameter), or None."""
        name = self.name_of(t)
        return None if name.startswith("tensor[") else name

    def _name_of(self, t: torch.Tensor) -> str:
        for name, value in self.namespace.items():
            if value is t and not name.startswith("__"):
                return name
        for name, value in list(self.namespace.items()):
            if isinstance(value, torch.nn.Module):
                for pname, param in value.named_parameters():
                    if param is t:
                        return f"{name}.{pname}"
        return f"tensor{list(t.shape)}"


def observer_for(
    send: Send, filename: str, seed: int | None, explain: dict[str, Any], manual: str | None = None
) -> Callable[[dict[str, Any]], Any]:
    """What the runner calls with the snippet's namespace: seeds the generators (with --seed), then observes;
    `manual`, the code that runs where it writes gradients by hand, has them watched too (manual.py)."""

    def make(namespace: dict[str, Any]) -> Observer:
        if seed is not None:
            import random

            torch.manual_seed(seed)
            random.seed(seed)
            if "numpy" in sys.modules or _has_numpy():
                import numpy

                numpy.random.seed(seed % 2**32)
        observer = Observer(send, filename, namespace, explain)
        if manual is not None:  # before install: the watch holds torch's own register_hook
            from .manual import ManualWatch

            observer.manual = ManualWatch(send, manual, filename, namespace)
        observer.install()
        return observer

    return make


def _has_numpy() -> bool:
    import importlib.util

    return importlib.util.find_spec("numpy") is not None
