"""The observer's stateless parts (observe.py): how a call's arguments are read, the dispatch mode that
tells each backward node its line, torch.compile's skip marks, a replay's outputs as the forward made them,
and a dataclass as plain data for the channel.
"""

from __future__ import annotations

import ast
import functools
import inspect
import os
from collections.abc import Callable
from dataclasses import fields, is_dataclass
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from .calls import as_written
from .nonfinite import graph_nodes
from .record import LINE, NotReplayable, Recorder
from .record_parts import differs

Send = Callable[[dict[str, Any]], None]

FULL_PER_LINE = 3  # calls of one line explained in full (render/snippet_view.py folds the rest: FOLD_AFTER)
SAMPLE = 10  # past those, every SAMPLE-th call of the line gets the cheap checks (past 100 calls, every 100th)


class LineMode(TorchFunctionMode):
    """With --graph: after each torch function, the grad_fn of its results is told the line that ran it
    (autograd has set it by then; below autograd, the log cannot see it)."""

    def __init__(self, line_now: Callable[[], int]) -> None:
        super().__init__()
        self.line_now = line_now

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            node = getattr(t, "grad_fn", None) if isinstance(t, torch.Tensor) else None
            if node is not None and LINE not in node.metadata:
                node.metadata[LINE] = self.line_now()
        return out


def watch_compile() -> None:
    """torch.compile traces into the frames of an active dispatch mode unless they are marked to be skipped,
    and the log's are not (marking them imports torch._dynamo, 1.2 s, at a snippet's first operation): a
    compiled function then traced the log's own bookkeeping (and ran out of memory). The first call of
    torch.compile marks them, as torch would have; dynamo is being imported then anyway."""
    real = torch.compile

    @functools.wraps(real)
    def compile(*args: Any, **kwargs: Any) -> Any:
        for cls, name in ((Recorder, "__torch_dispatch__"), (LineMode, "__torch_function__")):
            raw = cls.__dict__[name]
            if not getattr(raw, "_vjp_skipped", False):
                skipped = torch._disable_dynamo(raw, recursive=True)
                skipped._vjp_skipped = True  # type: ignore[attr-defined]
                setattr(cls, name, skipped)
        return real(*args, **kwargs)

    torch.compile = compile  # type: ignore[assignment]


TORCH_DIR = os.path.dirname(torch.__file__)
_torch_signature = functools.lru_cache(maxsize=64)(inspect.signature)  # torch's entry points: read once
as_written_once = functools.lru_cache(maxsize=1024)(as_written)  # a loop's line is parsed once, not every step


def plain(x: Any) -> Any:
    """A dataclass as dicts and lists for the channel; lists of numbers pass as they are (dataclasses.asdict
    would copy every number of every tensor, the larger part of a folded loop's cost)."""
    if type(x) in _PLAIN:
        return x
    names = _FIELDS.get(type(x))
    if names is None and is_dataclass(x) and not isinstance(x, type):
        names = _FIELDS[type(x)] = tuple(f.name for f in fields(x))
    if names is not None:
        return {name: plain(getattr(x, name)) for name in names}
    if type(x) is tuple:  # a check's names (a few): a list, as the channel carries it and calls.py wants
        return [plain(v) for v in x]
    if type(x) is list and x and (type(x[0]) in _FIELDS or is_dataclass(x[0]) or isinstance(x[0], dict)):
        return [plain(v) for v in x]
    return x


_ENGINE = inspect.Signature(
    [
        inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default)
        for name, default in (
            ("tensors", inspect.Parameter.empty),
            ("grad_tensors", None),
            ("keep_graph", False),
            ("create_graph", False),
            ("inputs", ()),
            ("allow_unreachable", True),
            ("accumulate_grad", True),
        )
    ]
)


def signature_of(qualname: str, real: Any) -> inspect.Signature:
    """The call's parameters: torch's own signature, or the engine's (a builtin, which states none)."""
    return _ENGINE if qualname == "engine.run_backward" else _torch_signature(real)


def as_made(replay: Any, x0: list[Any], leaves: list[torch.Tensor], outs: list[torch.Tensor]) -> list[torch.Tensor]:
    """Each output as the recorded forward made it: the output itself, or, where the snippet changed a value
    on its way since (`out.data.zero_()` before `out.sum()`), the replay's, in the forward's dtypes; the
    judge then finds a record that reproduces itself, and checks the grads against that forward."""
    xs = [
        leaf.detach() if x is None else x.to(leaf.dtype) if x.is_floating_point() else x
        for x, leaf in zip(x0, leaves, strict=True)
    ]
    try:
        with torch.no_grad():
            ys = replay.in_native_dtypes()(*xs)
    except (NotReplayable, RuntimeError, NotImplementedError):
        return outs  # no kernel in that dtype here: the judge compares nothing either
    return [
        y.detach().to(o.dtype) if y.shape == o.shape and differs(y, o) else o for y, o in zip(ys, outs, strict=True)
    ]


def quiet(send: Send, message: dict[str, Any]) -> None:
    """Send, and let a failure to (a closed channel) not become the snippet's exception."""
    try:
        send(message)
    except OSError:
        pass


_PLAIN = (int, float, str, bool, type(None))
_FIELDS: dict[type, tuple[str, ...]] = {}  # a dataclass's field names (dataclasses.fields is slow per call)


def in_functorch_transform() -> bool:
    """Whether a torch.func transform (grad, jacrev, vmap, ...) is running: its tensors are wrappers."""
    peek = getattr(getattr(torch._C, "_functorch", None), "peek_interpreter_stack", None)
    return peek is not None and peek() is not None


def arguments(qualname: str, p: dict[str, Any]) -> tuple[list[Any], list[Any], Any]:
    if qualname == "Tensor.backward":
        return [p["self"]], [p.get("gradient")], p.get("inputs")
    if qualname == "torch.autograd.backward":
        return seq(p.get("tensors")), seq(p.get("grad_tensors")), p.get("inputs")
    if qualname == "engine.run_backward":
        inputs = seq(p.get("inputs"))
        return seq(p.get("tensors")), seq(p.get("grad_tensors")), inputs or None
    return seq(p.get("outputs")), seq(p.get("grad_outputs")), seq(p.get("inputs"))


def graph_leaves(outs: list[torch.Tensor]) -> list[torch.Tensor]:
    """The leaves backward reaches from `outs`, in the order the graph names them."""
    found: list[torch.Tensor] = [o for o in outs if o.grad_fn is None and o.requires_grad]
    for node in graph_nodes([o.grad_fn for o in outs]):
        var = node.variable if type(node).__name__ == "AccumulateGrad" else None
        if var is not None and all(var is not f for f in found):
            found.append(var)
    return found


def seq(x: Any) -> list[Any]:
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]


STATEMENT_ENTRIES = 20_000  # operations a statement may log before its first backward call (then the log idles)
# the names by which a statement reaches a backward or grad call (Tensor.backward, autograd.grad, torch.func)
BACKWARD_WORDS = frozenset(
    {"backward", "grad", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "hvp", "vhp", "jacobian", "linearize"}
)
_LOOPS = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


class Statements:
    """Which top-level statements may reach a backward call, read from their text as they come: one that is
    not a loop may (it is cheap to log); a loop only where it names a backward word or a function or class of
    the snippet that does (through others: the names are closed over as definitions arrive)."""

    def __init__(self) -> None:
        self.mentions: dict[str, set[str]] = {}  # each definition's name -> the names its body mentions
        self.reaching: set[str] = set(BACKWARD_WORDS)

    def may_backward(self, stmt: ast.stmt) -> bool:
        for node in ast.walk(stmt):
            if isinstance(node, _DEFS):
                self.mentions.setdefault(node.name, set()).update(_names(node))
        self._close()
        if isinstance(stmt, _DEFS):
            return False  # a definition runs nothing
        if not any(isinstance(n, _LOOPS) for n in ast.walk(stmt)):
            return True
        return bool(_names(stmt) & self.reaching)

    def _close(self) -> None:
        grew = True
        while grew:
            grew = False
            for name, said in self.mentions.items():
                if name not in self.reaching and said & self.reaching:
                    self.reaching.add(name)
                    grew = True


def _names(tree: ast.AST) -> set[str]:
    return {
        n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(tree) if isinstance(n, (ast.Name, ast.Attribute))
    }


def v_as_given(outs: list[torch.Tensor], vs: list[Any], kept: bool) -> list[Any]:
    """The v of each output as the call is given it: torch's default of 1 for a one-element output, and a
    copy of a given v where the call is kept for the judge, since a custom backward may scale its
    grad_output in place (`g *= s`), and that tensor is the snippet's v itself."""
    return [
        torch.ones_like(o, requires_grad=False)
        if v is None and o.numel() == 1
        else v.detach().clone()
        if v is not None and kept and not v.requires_grad
        else v
        for o, v in zip(outs, vs, strict=True)
    ]
