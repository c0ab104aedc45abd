"""`class Net(nn.Module)` in snippets: a real torch.nn.Module subclass whose methods run through the interpreter.

torch's own Module machinery does the rest: `self.fc = nn.Linear(2, 1)` registers a submodule and
`nn.Parameter(...)` a parameter (real leaves), `net(x)` runs hooks and then `forward`, `net.parameters()`
feeds an optimizer. The snippet reaches only its own attributes and methods and the whitelisted ones of
nn.Module; `super().__init__()` is what torch needs first, so it is done before the snippet's `__init__`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from .names import refuse

if TYPE_CHECKING:
    from .interp import Interpreter
    from .runtime import Scope, UserFunction


@dataclass(frozen=True)
class ModuleClass:
    """A snippet's nn.Module subclass: calling it builds an instance of the real class `cls`."""

    name: str
    cls: Any

    def __repr__(self) -> str:
        return f"<class '__main__.{self.name}'>"


@cache
def module_base() -> Any:
    """The base of every snippet Module (a marker, so that attribute access knows whose rules apply)."""
    import torch

    class SnippetModule(torch.nn.Module):
        _vjp_methods: dict[str, UserFunction] = {}

    return SnippetModule


def is_snippet_module(obj: Any) -> bool:
    return isinstance(obj, module_base())


def define_module(it: Interpreter, s: ast.ClassDef, scope: Scope) -> ModuleClass:
    """Build the real Module subclass for `class Name(nn.Module)`."""
    import torch

    methods: dict[str, UserFunction] = {}
    for st in s.body:
        if isinstance(st, ast.Pass) or isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant):
            continue  # a docstring
        if not isinstance(st, ast.FunctionDef):
            raise refuse(
                f"{type(st).__name__} in the body of class {s.name}",
                hint="A Module's class body holds its methods (__init__, forward, ...); set attributes in __init__.",
            )
        if st.name.startswith("_") and st.name != "__init__":
            hint = "A Module's methods are __init__, forward and your own."
            raise refuse(f"The method {s.name}.{st.name}", hint=hint)
        if st.decorator_list:
            raise refuse(f"A decorator on {s.name}.{st.name}")
        body = [b for b in st.body if not _is_super_init(b)] if st.name == "__init__" else st.body
        methods[st.name] = it.make_function(f"{s.name}.{st.name}", st.args, body or [ast.Pass()], scope)

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        torch.nn.Module.__init__(self)
        if "__init__" in methods:
            it.call_user(methods["__init__"], [self, *args], kwargs, None)
        elif args or kwargs:
            raise TypeError(f"{s.name}() takes no arguments")

    namespace: dict[str, Any] = {"__init__": init, "_vjp_methods": methods, "__module__": "__main__"}
    if "forward" in methods:
        fwd = methods["forward"]
        namespace["forward"] = lambda self, *a, **k: it.call_user(fwd, [self, *a], k, None)
    return ModuleClass(s.name, type(s.name, (module_base(),), namespace))


def _is_super_init(st: ast.stmt) -> bool:
    """`super().__init__()` or `super(Net, self).__init__()`: done already, before the snippet's __init__."""
    if not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Call)):
        return False
    f = st.value.func
    return (
        isinstance(f, ast.Attribute)
        and f.attr == "__init__"
        and isinstance(f.value, ast.Call)
        and isinstance(f.value.func, ast.Name)
        and f.value.func.id == "super"
    )


def get_own(obj: Any, name: str) -> tuple[bool, Any]:
    """(found, value) of an attribute the snippet gave its Module: a method, a submodule, a parameter, a value."""
    if name in type(obj)._vjp_methods and name not in ("__init__", "forward"):
        return True, _Bound(obj, type(obj)._vjp_methods[name])
    if name in obj.__dict__.get("_vjp_names", ()) or name == "training":
        return True, getattr(obj, name)
    return False, None


def set_own(obj: Any, name: str, value: Any) -> None:
    """`self.name = value`: through nn.Module's own __setattr__ (which registers modules and parameters)."""
    import torch

    if name.startswith("_") or (hasattr(torch.nn.Module, name) and name != "training"):
        raise refuse(f"Setting .{name} on a Module", hint="That name belongs to nn.Module itself; choose another.")
    obj.__dict__.setdefault("_vjp_names", set()).add(name)
    setattr(obj, name, value)


@dataclass(frozen=True)
class _Bound:
    """`self.helper`: a snippet method bound to its Module."""

    obj: Any
    fn: Any

    def __repr__(self) -> str:
        return f"<bound method {self.fn.name} of {type(self.obj).__name__}>"
