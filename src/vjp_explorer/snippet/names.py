"""How a snippet's names resolve: modules, torch functions, tensor attributes and methods, builtins.

A value the interpreter hands out is either plain data (numbers, strings, tuples, lists, dicts, tensors,
dtypes, sizes) or one of the small wrappers below, which carry what may be done with them. Nothing else of
torch or Python is reachable.
"""

from __future__ import annotations

import builtins
import math
from dataclasses import dataclass
from typing import Any

from ..errors import ProgramError
from . import whitelist as W


@dataclass(frozen=True)
class Module:
    """A module a snippet imported (or uses without importing): attribute lookup goes through the whitelist."""

    name: str

    def __repr__(self) -> str:
        return f"<module '{self.name}'>"


@dataclass(frozen=True)
class Fn:
    """A whitelisted callable of torch or math: `qualname` as the snippet wrote it, `real` the object called."""

    qualname: str
    real: Any
    made_from: tuple[str, Any, dict[str, Any]] | None = None  # torch.func.grad(f, **kw): ("grad", f, kw)

    def __repr__(self) -> str:
        return repr(self.real)


@dataclass(frozen=True)
class Method:
    """`obj.name` for a whitelisted method of a tensor, module, optimizer or Python value, not yet called."""

    obj: Any
    name: str

    def __repr__(self) -> str:
        return repr(getattr(self.obj, self.name))


@dataclass(frozen=True)
class Builtin:
    """A Python builtin a snippet may call (print is the interpreter's own)."""

    name: str

    def __repr__(self) -> str:
        return f"<built-in function {self.name}>"


@dataclass(frozen=True)
class Autograd:
    """An autograd entry point the snippet explains as an event: backward, grad and the functional API."""

    qualname: str
    real: Any

    def __repr__(self) -> str:
        return repr(self.real)


class NotInLanguage(ProgramError):
    """A name or attribute outside the snippet whitelist."""


def refuse(what: str, hint: str | None = None) -> NotInLanguage:
    return NotInLanguage(
        f"{what} is not in the snippet language (snippets run through a whitelist, never through Python itself).",
        hint=hint,
    )


MODULE_ALIASES = {
    "torch.nn.functional": "torch.nn.functional",
    "torch.autograd.functional": "torch.autograd.functional",
}

_SUBMODULES = {
    "numpy": {"random"},
    "torch": {"nn", "autograd", "linalg", "special", "func", "optim"},
    "torch.nn": {"functional"},
    "torch.autograd": {"functional"},
}


def module_attr(mod: Module, name: str) -> Any:
    """`torch.exp`, `F.relu`, `math.pi`, `torch.float64`, ... : the value a module's attribute stands for."""
    import torch

    if name.startswith("_"):
        raise refuse(f"{mod.name}.{name}")
    if name in _SUBMODULES.get(mod.name, ()):
        return Module(f"{mod.name}.{name}")
    if mod.name == "math":
        if name in W.MATH:
            value = getattr(math, name)
            return Fn(f"math.{name}", value) if callable(value) else value
    elif mod.name == "torch":
        if name in W.TORCH_DTYPES:
            return getattr(torch, name)
        if name in ("pi", "e", "inf", "nan"):
            return getattr(math, name)
        if name in W.TORCH_FUNCTIONS or name in W.TORCH_OTHER:
            return Fn(f"torch.{name}", getattr(torch, name))
    elif mod.name == "torch.nn.functional":
        if name in W.FUNCTIONAL:
            return Fn(f"F.{name}", getattr(torch.nn.functional, name))
    elif mod.name == "torch.nn":
        if name in W.NN_MODULES:
            return Fn(f"nn.{name}", getattr(torch.nn, name))
    elif mod.name == "torch.linalg":
        if name in W.LINALG:
            return Fn(f"torch.linalg.{name}", getattr(torch.linalg, name))
    elif mod.name == "torch.special":
        if name in W.SPECIAL:
            return Fn(f"torch.special.{name}", getattr(torch.special, name))
    elif mod.name == "torch.autograd":
        if name in ("grad", "backward"):
            return Autograd(f"torch.autograd.{name}", getattr(torch.autograd, name))
        if name in W.AUTOGRAD:
            return Fn(f"torch.autograd.{name}", getattr(torch.autograd, name))
    elif mod.name == "torch.autograd.functional":
        if name in W.AUTOGRAD_FUNCTIONAL:
            return Fn(f"torch.autograd.functional.{name}", getattr(torch.autograd.functional, name))
    elif mod.name == "torch.func":
        if name in W.FUNC:
            return Fn(f"torch.func.{name}", getattr(torch.func, name))
    elif mod.name == "torch.optim":
        if name in W.OPTIMIZERS:
            return Fn(f"torch.optim.{name}", getattr(torch.optim, name))
    elif mod.name in ("numpy", "numpy.random"):
        import numpy

        where = numpy if mod.name == "numpy" else numpy.random
        if name in (W.NUMPY if mod.name == "numpy" else W.NUMPY_RANDOM):
            return Fn(f"{'np' if mod.name == 'numpy' else 'np.random'}.{name}", getattr(where, name))
        if mod.name == "numpy" and name in W.NUMPY_VALUES:
            return getattr(numpy, name)
    raise refuse(f"{mod.name}.{name}", hint=_closest(mod.name, name))


def _closest(modname: str, name: str) -> str | None:
    import difflib

    pool = {
        "torch": W.TORCH_FUNCTIONS | W.TORCH_DTYPES | W.TORCH_OTHER,
        "torch.nn.functional": W.FUNCTIONAL,
        "math": W.MATH,
        "numpy": W.NUMPY | W.NUMPY_VALUES,
        "torch.nn": W.NN_MODULES,
        "torch.linalg": W.LINALG,
    }.get(modname, frozenset())
    near = difflib.get_close_matches(name, sorted(pool), n=3, cutoff=0.75)
    return f"Did you mean {', '.join(f'{modname}.{n}' for n in near)}?" if near else None


# attributes of nn modules and optimizers a snippet may touch
MODULE_OBJECT_ATTRS = frozenset({"weight", "bias", "in_features", "out_features"})
MODULE_OBJECT_METHODS = frozenset(
    {
        "parameters",
        "named_parameters",
        "zero_grad",
        "forward",
        "train",
        "eval",
        "requires_grad_",
        "double",
        "float",
        "to",
        "cpu",
        "children",
        "named_children",
        "modules",
        "named_modules",
    }
)
OPTIMIZER_METHODS = frozenset({"step", "zero_grad"})
NODE_METHODS = frozenset({"name"})
NODE_ATTRS = frozenset({"next_functions"})


def is_builtin_name(name: str) -> bool:
    return hasattr(builtins, name)


IMPLICIT = {
    # what the snippet oracle binds before a pasted fragment: used (with a note) when the snippet leaves it out
    "torch": Module("torch"),
    "T": Module("torch"),
    "nn": Module("torch.nn"),
    "F": Module("torch.nn.functional"),
    "math": Module("math"),
}
