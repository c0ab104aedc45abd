"""Custom autograd Functions in snippets: `class Name(torch.autograd.Function)` with static forward/backward.

The class becomes a real subclass of torch.autograd.Function whose forward and backward are closures that run
the snippet's own methods through the interpreter (never exec), so backward through it is real torch autograd.
`ctx` is shown to the snippet through `CtxView`: save_for_backward, saved_tensors, needs_input_grad and its
own attributes (`ctx.k = 3`), nothing else of torch's context object.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .names import Fn, refuse

if TYPE_CHECKING:
    from .interp import Interpreter
    from .runtime import Scope

_METHODS = ("forward", "backward", "setup_context")
CTX_METHODS = frozenset({"save_for_backward", "mark_dirty", "mark_non_differentiable", "set_materialize_grads"})
CTX_ATTRS = frozenset({"saved_tensors", "needs_input_grad"})


@dataclass(frozen=True)
class CustomFunction:
    """A snippet's autograd Function: `cls` is the real torch class built from it."""

    name: str
    cls: Any

    def __repr__(self) -> str:
        return f"<class '__main__.{self.name}'>"


class CtxView:
    """What the snippet sees of torch's ctx: the whitelisted methods and attributes, and its own attributes."""

    def __init__(self, real: Any) -> None:
        self.real = real
        if not hasattr(real, "_vjp_attrs"):
            real._vjp_attrs = {}

    def get(self, name: str) -> tuple[bool, Any]:
        if name in CTX_ATTRS:
            return False, getattr(self.real, name)
        if name in CTX_METHODS:
            return True, name
        attrs = self.real._vjp_attrs
        if name in attrs:
            return False, attrs[name]
        raise AttributeError(f"'FunctionCtx' object has no attribute '{name}'")

    def set(self, name: str, value: Any) -> None:
        if name in CTX_ATTRS or name in CTX_METHODS or hasattr(self.real, name):
            raise refuse(f"Setting ctx.{name}")
        self.real._vjp_attrs[name] = value


def define(it: Interpreter, s: ast.ClassDef, scope: Scope) -> Any:
    """Build the real Function subclass for a `class` statement, or refuse anything else a class could be."""
    import torch

    bases = [it.eval(b, scope) for b in s.bases]
    if len(bases) == 1 and isinstance(bases[0], Fn) and bases[0].real is torch.nn.Module and not s.keywords:
        from .modules import define_module

        return define_module(it, s, scope)  # type: ignore[return-value]
    if len(bases) != 1 or not isinstance(bases[0], Fn) or bases[0].real is not torch.autograd.Function:
        raise refuse(
            f"class {s.name}",
            hint="A snippet may define subclasses of torch.autograd.Function (static forward and backward) and "
            "of nn.Module.",
        )
    if s.keywords or s.decorator_list:
        raise refuse(f"Keywords or decorators on class {s.name}")
    methods: dict[str, Any] = {}
    for st in s.body:
        if isinstance(st, ast.Pass) or isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant):
            continue  # a docstring
        if not isinstance(st, ast.FunctionDef) or st.name not in _METHODS:
            what = st.name if isinstance(st, ast.FunctionDef) else type(st).__name__
            raise refuse(
                f"{what} in the body of class {s.name}",
                hint="A custom Function holds static forward and backward methods (and setup_context).",
            )
        if not all(isinstance(d, ast.Name) and d.id == "staticmethod" for d in st.decorator_list):
            raise refuse(f"A decorator other than @staticmethod on {s.name}.{st.name}")
        methods[st.name] = it.make_function(f"{s.name}.{st.name}", st.args, st.body, scope)
    if "forward" not in methods or "backward" not in methods:
        raise refuse(f"class {s.name} without both forward and backward")

    def runner(fn: Any, has_ctx: bool) -> Any:
        def run(*args: Any) -> Any:
            first = [CtxView(args[0])] if has_ctx else []
            return it.call_user(fn, [*first, *args[1 if has_ctx else 0 :]], {}, None)

        return staticmethod(run)

    namespace = {name: runner(fn, True) for name, fn in methods.items()}
    if "setup_context" in methods:
        fwd = methods["forward"]
        namespace["forward"] = staticmethod(lambda *a: it.call_user(fwd, list(a), {}, None))

        def setup(ctx: Any, inputs: Any, output: Any) -> Any:
            return it.call_user(methods["setup_context"], [CtxView(ctx), inputs, output], {}, None)

        namespace["setup_context"] = staticmethod(setup)
    return CustomFunction(s.name, type(s.name, (torch.autograd.Function,), namespace))
