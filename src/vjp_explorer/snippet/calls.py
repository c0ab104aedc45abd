"""Calls and attribute reads of a snippet: what each kind of callee may do, checked before it runs."""

from __future__ import annotations

import ast
import builtins
import operator
import string
from typing import TYPE_CHECKING, Any

from . import guards
from . import whitelist as W
from .names import (
    MODULE_OBJECT_ATTRS,
    MODULE_OBJECT_METHODS,
    NODE_ATTRS,
    NODE_METHODS,
    OPTIMIZER_METHODS,
    Autograd,
    Builtin,
    Fn,
    Method,
    Module,
    module_attr,
    refuse,
)
from .runtime import SnippetRaised, UserFunction

if TYPE_CHECKING:
    from .interp import Interpreter, Scope

# builtins that consume a whole iterable at once: their argument's length is checked first
_CONSUMING = frozenset({"list", "tuple", "set", "dict", "sorted", "sum", "min", "max", "any", "all", "str"})


def call(it: Interpreter, e: ast.Call, scope: Scope) -> Any:
    """Evaluate a call expression: the callee, its arguments, then the call by the callee's kind."""
    func = it.eval(e.func, scope)
    args = it.eval_items(e.args, scope)
    kwargs: dict[str, Any] = {}
    for kw in e.keywords:
        if kw.arg is None:
            more = it.eval(kw.value, scope)
            if not isinstance(more, dict) or not all(isinstance(k, str) for k in more):
                raise refuse("** of something other than a dict with string keys")
            kwargs.update(more)
        else:
            kwargs[kw.arg] = it.eval(kw.value, scope)
    if isinstance(func, UserFunction):
        it.tick(e)
        return it.call_user(func, args, kwargs, e)
    if isinstance(func, Builtin):
        return call_builtin(it, func.name, args, kwargs, e)
    if isinstance(func, Autograd):
        return it.on_autograd(func.qualname, func.real, None, args, kwargs, e)
    if isinstance(func, Fn):
        return call_fn(it, func, args, kwargs, e)
    if isinstance(func, Method):
        return call_method(it, func, args, kwargs, e)
    import torch

    from .modules import ModuleClass, _Bound, is_snippet_module

    if isinstance(func, ModuleClass):
        return it.real(func.cls, *args, node=e, **kwargs)
    if isinstance(func, _Bound):
        it.tick(e)
        return it.call_user(func.fn, [func.obj, *args], kwargs, e)
    if is_snippet_module(func):  # its forward runs here, each operation traced as any other
        it.tick(e)
        return it.real(func, *args, node=e, **kwargs)
    if isinstance(func, torch.nn.Module):
        return call_module(it, func, args, kwargs, e)
    if isinstance(func, type) and issubclass(func, BaseException) and func.__name__ in W.EXCEPTIONS:
        return it.real(func, *args, node=e, **kwargs)
    if isinstance(func, type) and func.__module__ == "numpy" and func.__name__ in W.NUMPY_SCALARS:
        return it.real(func, *args, node=e, **kwargs)  # np.float32(1.5): a number of that dtype
    raise SnippetRaised(TypeError(f"'{type(func).__name__}' object is not callable"), e)


def call_module(it: Interpreter, module: Any, args: list[Any], kwargs: dict[str, Any], e: ast.AST) -> Any:
    """`model(x)` for torch's own modules, recorded so that the replay can vary their parameters: a Linear as
    F.linear of its weight and bias, a Sequential as its layers in turn, a module without parameters as
    itself. Anything else (a hook on it, other parameters) is recorded as opaque, saying why."""
    import torch

    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    guards.check_call(type(module).__name__, tuple(tensors), {}, it.limits.elements)
    run = lambda: it.real(module, *args, node=e, **kwargs)  # noqa: E731
    hooked = bool(module._forward_hooks or module._forward_pre_hooks)
    plain = len(args) == 1 and not kwargs and isinstance(args[0], torch.Tensor) and not hooked
    if plain and type(module) is torch.nn.Sequential:
        x = args[0]
        for layer in module:
            x = call_module(it, layer, [x], {}, e)
        return x
    if plain and type(module) is torch.nn.Linear:
        linear = torch.nn.functional.linear
        return it.traced("call", linear, (args[0], module.weight, module.bias), {}, run)
    random = isinstance(module, torch.nn.Dropout) and module.training and module.p > 0
    if not hooked and not random and not any(True for _ in module.parameters()) and not list(module.buffers()):
        return it.traced("call", module, args, kwargs, run)
    return it.traced(
        "call",
        module,
        args,
        kwargs,
        run,
        opaque=f"the forward calls the module {type(module).__name__}, whose parameters the replay cannot vary"
        if not random
        else "dropout draws a random mask, which a replay would draw again",
    )


def call_fn(it: Interpreter, fn: Fn, args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> Any:
    """A whitelisted torch or math function: sizes checked, snippet functions handed over as closures."""
    guards.check_call(fn.qualname, tuple(args), kwargs, it.limits.elements)
    args = [it.as_callable(a) for a in args]
    kwargs = {k: it.as_callable(v) for k, v in kwargs.items()}
    opaque = "out= writes the result in place" if "out" in kwargs else None
    base = fn.qualname.rsplit(".", 1)[-1]
    sized = bool(args) and all(isinstance(a, int) for a in args)  # torch.Tensor(3): a size, not data
    if base in ("empty", "empty_like") or base.endswith("Tensor") and sized:
        it.uninitialised.append(it.where(node))
    value = it.traced(
        "call", fn.real, args, kwargs, lambda: it.real(fn.real, *args, node=node, **kwargs), opaque=opaque
    )
    from .functional import CHECKED

    if fn.qualname in CHECKED and hasattr(it.on_autograd, "functional"):
        it.on_autograd.functional(fn.qualname, fn.real, args, kwargs, node, value)
    if fn.qualname in ("torch.func.vjp", "torch.func.jvp") and hasattr(it.on_autograd, "transformed"):
        if fn.qualname == "torch.func.jvp":
            it.on_autograd.transformed(fn, args, kwargs, node, value)
        elif isinstance(value, tuple) and len(value) >= 2 and callable(value[1]) and args:
            # vjp_fn(v) is where Jᵀv is computed: it is explained when the snippet calls it
            vjp_origin = ("vjp_fn", args[0], {"primals": tuple(args[1:]), **kwargs})
            return (value[0], Fn("torch.func.vjp(...)[1]", value[1], vjp_origin), *value[2:])
    if fn.made_from is not None and hasattr(it.on_autograd, "transformed"):
        it.on_autograd.transformed(fn, args, kwargs, node, value)
    if fn.qualname.startswith(("torch.func.", "torch.autograd.functional.")) and callable(value):
        origin = (fn.qualname.rsplit(".", 1)[-1], args[0], dict(kwargs)) if args else None
        return Fn(f"{fn.qualname}(...)", value, origin)  # a transformed function, e.g. torch.func.grad(f)
    return value


def call_method(it: Interpreter, m: Method, args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> Any:
    import torch

    obj, name = m.obj, m.name
    if isinstance(obj, type) and issubclass(obj, torch.autograd.Function) and name == "apply":
        guards.check_call(f"{obj.__name__}.apply", tuple(args), kwargs, it.limits.elements)
        return it.traced("call", obj.apply, args, kwargs, lambda: it.real(obj.apply, *args, node=node, **kwargs))
    if isinstance(obj, torch.Tensor):
        if name == "backward":
            return it.on_autograd("Tensor.backward", torch.Tensor.backward, obj, args, kwargs, node)
        if name == "retain_grad":
            it.retained.append(obj)
        if name == "register_hook":
            it.hooks += 1
            args = [it.as_callable(a) for a in args]
        guards.check_call(f"Tensor.{name}", (obj, *args), kwargs, it.limits.elements)
        kind = "inplace" if name.endswith("_") and name not in ("requires_grad_",) else "method"
        return it.traced(
            kind, name, (obj, *args), kwargs, lambda: it.real(getattr(obj, name), *args, node=node, **kwargs)
        )
    if type(obj).__module__ == "numpy":  # a numpy array's method: sized as the torch calls are
        guards.check_call(f"ndarray.{name}", (obj, *args), kwargs, it.limits.elements)
    if isinstance(obj, str):
        if name == "format":
            _check_format_fields(obj)
        for a in args:
            if isinstance(a, int) and a > guards.MAX_WIDTH and name in ("ljust", "rjust", "center", "zfill"):
                raise refuse(f"str.{name} with a width of {a:,}")
    if isinstance(obj, list) and name == "sort" and "key" in kwargs:
        kwargs["key"] = it.as_callable(kwargs["key"])
    if isinstance(obj, (list, dict)) and name in ("extend", "update"):
        for a in args:
            guards.check_length(f"{type(obj).__name__}.{name}", a)
    return it.real(getattr(obj, name), *args, node=node, **kwargs)


def _check_format_fields(text: str) -> None:
    """str.format may only fill fields by position or name: `{0.__class__}` would walk attributes."""
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError:
        return  # the real call raises Python's own message
    for _, field, spec, _ in parsed:
        if field is not None and field and not (field.isdigit() or field.isidentifier()):
            raise refuse(f"The format field {{{field}}}", hint="Fields may name an argument; use an f-string.")
        if spec:
            guards.check_format_text(spec)


def call_builtin(it: Interpreter, name: str, args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> Any:

    if name == "print":
        if "file" in kwargs:
            raise refuse("print(..., file=...)")
        sep = kwargs.get("sep", " ")
        end = kwargs.get("end", "\n")
        if not isinstance(sep, (str, type(None))) or not isinstance(end, (str, type(None))):
            raise refuse("print's sep and end other than strings")
        text = (" " if sep is None else sep).join(it.real(str, a, node=node) for a in args)
        it.write(text + ("\n" if end is None else end))
        return None
    if name in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[name]
    if name in _CONSUMING:
        for a in args:
            guards.check_length(f"{name}(...)", a)
    if name in ("map", "filter", "sorted", "max", "min"):
        args = [it.as_callable(a) for a in args]
        kwargs = {k: it.as_callable(v) for k, v in kwargs.items()}
    if name == "isinstance" and len(args) == 2:
        kinds = args[1] if isinstance(args[1], tuple) else (args[1],)
        args[1] = tuple(k.real if isinstance(k, Fn) else k for k in kinds)
    if name == "pow" and len(args) >= 2:
        guards.check_binop("**", args[0], args[1], it.limits.elements)
    if name == "format" and len(args) > 1:
        guards.check_format_text(str(args[1]))
    if name == "type" and len(args) != 1:
        raise refuse("type() with more than one argument")
    real = getattr(builtins, name)
    return it.traced("call", real, args, kwargs, lambda: it.real(real, *args, node=node, **kwargs))


def get_attribute(it: Interpreter, obj: Any, name: str, node: ast.AST) -> Any:  # noqa: C901 - one branch per kind
    """`obj.name` for the kinds of value a snippet holds; anything else is refused by name."""
    import torch

    if name.startswith("_"):
        raise refuse(f"The attribute {name!r}", hint="Names starting with an underscore are never reachable.")
    if isinstance(obj, Module):
        return module_attr(obj, name)
    from .custom import CtxView, CustomFunction

    if isinstance(obj, CustomFunction):
        if name == "apply":
            return Method(obj.cls, "apply")
        return _no(obj, name)
    if isinstance(obj, CtxView):
        try:
            is_method, value = obj.get(name)
        except AttributeError as e:
            raise SnippetRaised(e, node) from None
        return Method(obj.real, value) if is_method else value
    if isinstance(obj, Fn) and obj.real is torch.Tensor:
        return Method(obj.real, name) if name in W.TENSOR_METHODS else _no(obj, name)
    if isinstance(obj, torch.Tensor):
        if name in ("T", "mT", "H", "mH", "real", "imag"):
            get = operator.attrgetter(name)
            return it.traced("call", get, (obj,), {}, lambda: it.real(get, obj, node=node))
        if name in W.TENSOR_ATTRS:
            return it.real(getattr, obj, name, node=node)
        if name in W.TENSOR_METHODS or name.endswith("_") and name[:-1] in W.TENSOR_METHODS:
            return Method(obj, name)  # x.f_() is the in-place form of a whitelisted x.f()
        raise refuse(f"The tensor attribute .{name}", hint=_tensor_hint(name))
    if isinstance(obj, torch.nn.Module):
        from .modules import get_own, is_snippet_module

        if is_snippet_module(obj):
            found, value = get_own(obj, name)
            if found:
                return value
        if name in MODULE_OBJECT_ATTRS:
            return it.real(getattr, obj, name, node=node)
        if name in MODULE_OBJECT_METHODS:
            return Method(obj, name)
        return _no(obj, name)
    if isinstance(obj, torch.optim.Optimizer):
        if name in OPTIMIZER_METHODS:
            return Method(obj, name)
        if name == "param_groups":
            return obj.param_groups
        return _no(obj, name)
    if isinstance(obj, torch.autograd.graph.Node):
        if name in NODE_METHODS:
            return Method(obj, name)
        if name in NODE_ATTRS:
            return it.real(getattr, obj, name, node=node)
        return _no(obj, name)
    if type(obj).__name__ == "RemovableHandle" and name == "remove":
        return Method(obj, name)
    if type(obj).__module__ == "numpy":  # an array or a numpy scalar (numpy is loaded: it made obj)
        import numpy

        if name in W.NDARRAY_ATTRS and hasattr(obj, name):
            return it.real(getattr, obj, name, node=node)
        if name in W.NDARRAY_METHODS and hasattr(obj, name):
            return Method(obj, name)
        if isinstance(obj, numpy.dtype) and name in ("name", "itemsize", "kind"):
            return getattr(obj, name)
        return _no(obj, name)
    if isinstance(obj, torch.Size):
        return Method(obj, name) if name in ("numel", "index", "count") else _no(obj, name)
    if isinstance(obj, tuple) and hasattr(obj, "_fields") and name in obj._fields:  # torch.return_types
        return getattr(obj, name)
    if isinstance(obj, torch.dtype) and name in ("is_floating_point", "is_complex", "itemsize", "is_signed"):
        return getattr(obj, name)
    if isinstance(obj, torch.device) and name in ("type", "index"):
        return getattr(obj, name)
    if isinstance(obj, BaseException) and name == "args":
        return obj.args
    if (
        isinstance(obj, (int, float, complex))
        and not isinstance(obj, bool)
        and name in ("real", "imag", "is_integer", "conjugate", "bit_length")
    ):
        value = getattr(obj, name)
        return Method(obj, name) if callable(value) else value
    allowed = {list: W.LIST_METHODS, dict: W.DICT_METHODS, str: W.STR_METHODS, tuple: {"count", "index"}}
    for kind, names in allowed.items():
        if isinstance(obj, kind) and name in names:
            return Method(obj, name)
    return _no(obj, name)


def _no(obj: Any, name: str) -> Any:
    raise refuse(f"The attribute .{name} of a {type(obj).__name__}")


def _tensor_hint(name: str) -> str | None:
    if name in ("cuda", "storage", "untyped_storage", "data_ptr"):
        if name == "cuda":
            return "Snippets run on the CPU."
        return "Storage and pointers are outside what a snippet can see."
    import difflib

    near = difflib.get_close_matches(name, sorted(W.TENSOR_METHODS | W.TENSOR_ATTRS), n=3, cutoff=0.75)
    return f"Did you mean {', '.join('.' + n for n in near)}?" if near else None
