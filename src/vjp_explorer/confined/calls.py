"""One observed call's parts: the call as read before it runs (`Call`), and its tensors as the channel
carries them (values as nested lists of float64, a sparse gradient made dense, outputs named as written)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..events import TensorInfo

FOLDED_VALUES = 100  # past the explained calls, a tensor's values travel only up to this many elements


def wrap_entry_points(call: Callable[[str, tuple[Any, ...], dict[str, Any]], Any]) -> dict[str, Any]:
    """Replace torch's three backward entry points with wrappers that hand each call to `call(qualname, args,
    kwargs)` (the observer's and the diagnoser's); returns the real ones by qualname. The wrappers keep the
    real ones' names, docstrings and signatures: a snippet that prints help(x.backward) sees torch's."""
    real: dict[str, Any] = {
        "Tensor.backward": torch.Tensor.backward,
        "torch.autograd.backward": torch.autograd.backward,
        "torch.autograd.grad": torch.autograd.grad,
    }

    def backward(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        return call("Tensor.backward", (self, *args), kwargs)

    def autograd_backward(*args: Any, **kwargs: Any) -> Any:
        return call("torch.autograd.backward", args, kwargs)

    def grad(*args: Any, **kwargs: Any) -> Any:
        return call("torch.autograd.grad", args, kwargs)

    wrappers: list[Any] = [(backward, real["Tensor.backward"]), (autograd_backward, real["torch.autograd.backward"])]
    for fn, was in wrappers:
        fn.__doc__, fn.__name__, fn.__signature__ = was.__doc__, was.__name__, inspect.signature(was)
    grad.__doc__, grad.__name__ = real["torch.autograd.grad"].__doc__, "grad"
    torch.Tensor.backward = backward  # type: ignore[method-assign]
    torch.autograd.backward = autograd_backward
    torch.autograd.grad = grad
    return real


def as_written(qualname: str, source: str, n: int) -> list[str | None]:
    """The outputs as the call's line writes them: `y.sum()` of `y.sum().backward()`, `dy.sum()` of
    `torch.autograd.grad(dy.sum(), x)` (or its outputs=); None where the line does not say."""
    import ast

    names: list[str | None] = [None] * n
    try:
        tree = ast.parse(source.strip().rstrip(":"))
    except SyntaxError:
        return names
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, (ast.Attribute, ast.Name)):
            continue
        word = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
        if qualname == "Tensor.backward" and word == "backward" and isinstance(node.func, ast.Attribute):
            first: ast.expr | None = node.func.value
        elif qualname != "Tensor.backward" and word == qualname.rsplit(".", 1)[-1]:
            keyword = "outputs" if qualname.endswith("grad") else "tensors"
            first = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == keyword), None)
        else:
            continue
        if isinstance(first, (ast.List, ast.Tuple)) and len(first.elts) == n:
            return [ast.unparse(e) for e in first.elts]
        if first is not None and n == 1:
            return [ast.unparse(first)]
        return names
    return names


@dataclass
class Call:
    """One backward/grad call as read before it runs, and what it left once it ran."""

    qualname: str
    p: inspect.BoundArguments
    outs: list[torch.Tensor]
    v_used: list[Any]
    given: bool
    leaves: list[torch.Tensor]
    is_grad: bool
    before: list[Any]
    line: int
    source: str
    explain: bool
    checked: bool
    every: int
    watch: Any
    customs: list[str]
    probe: Any
    values: list[Any]  # each input's values as the call began (a hook may step an optimizer during it)
    outputs: list[TensorInfo]  # the outputs as the call began, named as the line writes them
    diagnosis: str | None = None
    graph: Any = None
    started: int | None = None  # its number in the observer's "started" frames


DENSE_MAX = 10_000_000  # elements of a sparse gradient made dense to show and check; past it, not read


def dense(t: Any) -> Any:
    """A gradient as a plain strided tensor (a sparse one from Embedding(sparse=True) made dense)."""
    if not isinstance(t, torch.Tensor) or t.layout == torch.strided:
        return t
    if t.numel() > DENSE_MAX:
        raise ValueError(f"a sparse gradient of {t.numel():,} elements, more than {DENSE_MAX:,} to make dense")
    return t.detach().to_dense()


def _grad(x: torch.Tensor) -> Any:
    """x.grad, read without torch's warning for a non-leaf that does not retain its grad (None there)."""
    return None if x.grad_fn is not None and not x.retains_grad else x.grad


def grad_of(x: torch.Tensor) -> Any:
    """A copy of x.grad as it is now (None where it is None), dense."""
    g = _grad(x)
    return None if g is None else dense(g.detach()).clone()


def sparse_grad(x: torch.Tensor) -> bool:
    g = _grad(x)
    return g is not None and g.layout != torch.strided


def delta(before: Any, after: Any) -> Any:
    if after is None:
        return None
    return after if before is None else after - before


def dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def values_of(t: Any) -> Any:
    if t is None:
        return None
    t = dense(t.detach())  # a sparse leaf or grad: its values as the dense tensor it stands for
    if t.is_complex():  # each element as its text, "(1+2j)", in the tensor's own nesting: JSON has no complex
        return _texts(t.tolist())
    return t.to(torch.float64).tolist() if t.is_floating_point() else t.tolist()


def _texts(x: Any) -> Any:
    return [_texts(v) for v in x] if isinstance(x, list) else str(x)


def info(name: str, t: torch.Tensor, whole: bool = True) -> TensorInfo:
    return TensorInfo(name, list(t.shape), dtype_name(t), values_of(t) if whole or t.numel() <= FOLDED_VALUES else None)
