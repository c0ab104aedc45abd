"""Calls and attributes of a program: the registry's functions, their tensors and their static parameters.

A mixin of the parser (language/parser.py): it reads `f(x)`, `torch.f(x)`, `x.f()`, `F.f(x)`, checks every
argument against the entry's signature, and refuses unknown names with the closest real ones.
"""

from __future__ import annotations

import ast
import math
from typing import TYPE_CHECKING

from ..errors import LimitError
from ..ops import ATTRIBUTES, REGISTRY, OpSpec, Param, by_base, function_list, how_to_write, lookup, near_names
from . import program as P
from .constructors import dtype_name, maker_name
from .literals import NAMED_CONSTANTS, dotted, literal_number, named_constant

if TYPE_CHECKING:
    from ..errors import VjpError
    from ..limits import Limits

# module names people paste from numpy/functional code: refused with a pointer to the torch name
_OTHER_MODULES = {"np", "numpy", "F", "nn", "math", "jnp", "sp", "scipy"}
_MAX_DIM = 64  # a dim= value, or the length of a dim=(...) tuple: no tensor here has more dims
_MAX_STRING = 200  # a string parameter: reduction='mean', an einsum equation
ALL_FUNCTIONS = "vjp functions lists every function (vjp functions WORD, those that mention WORD)."
# the parameter kinds that may be read from the program's values when the call runs (P.Sizes)
_SIZED = frozenset({"int", "dim", "dims", "dimlist", "shape", "intlist"})
# the functions whose tuple torch names (values, indices), for entries marked tuple_result
NAMED_TUPLES = frozenset(
    {"max", "min", "max_dim", "min_dim", "sort", "topk", "kthvalue", "median", "mode", "cummax", "cummin"}
)


class CallParser:
    """The call and attribute half of the program parser."""

    limits: Limits
    src: str

    if TYPE_CHECKING:  # given by the parser

        def err(
            self, message: str, node: ast.AST | P.Span | None, hint: str | None = None, cls: type[VjpError] = ...
        ) -> VjpError: ...

        def _expr(self, node: ast.expr) -> P.Expr: ...

        def _constructor(self, name: str, node: ast.Call, sp: P.Span) -> P.Const: ...

        def _requires_grad_(self, node: ast.Call, receiver: P.Expr) -> P.Const: ...

        def span(self, node: ast.AST) -> P.Span: ...

    def _attribute(self, node: ast.Attribute, sp: P.Span) -> P.Expr:
        attr = node.attr
        if attr.startswith("_"):
            raise self.err(f"The attribute {attr!r} is not allowed.", node)
        name = dotted(node)
        if name in NAMED_CONSTANTS:
            value = NAMED_CONSTANTS[name]
            if not math.isfinite(value):
                raise self.err(f"{name} is only allowed as a parameter value (clamp(x, max={name})).", node)
            return P.Num(value, sp)
        if lookup(name) is not None:
            raise self.err(f"{name} is a function; call it: {name}(x).", node)
        if isinstance(node.value, ast.Name) and node.value.id == "torch":
            raise self.unknown_function(f"torch.{attr}", node)
        if dotted(node.value).startswith("torch."):
            raise self._torch_submodule(node)
        if attr == "ndim":
            return P.Scalar("dim", self._expr(node.value), None, sp)
        if attr == "shape":
            raise self.err("x.shape is a tuple of sizes here: index it, x.shape[0] (or x.size(0)).", node)
        if attr in ("values", "indices"):  # x.max(dim=0).values: torch's named tuples only
            call = self._take(node.value, 0 if attr == "values" else 1, node, sp)
            if call.func not in NAMED_TUPLES:
                raise self.err(f"{call.func}() gives a plain tuple, without .{attr}: index it, [0].", node)
            return call
        if attr == "mT":  # the matrix transpose of the last two dims
            return P.Call("transpose", (self._expr(node.value),), (("dim0", -2), ("dim1", -1)), sp)
        if attr in ATTRIBUTES:
            return P.Call(ATTRIBUTES[attr], (self._expr(node.value),), (), sp)
        if lookup(f".{attr}") is not None:
            raise self.err(f".{attr} is a method; call it: x.{attr}().", node)
        raise self.err(
            f"Unknown attribute {attr!r}. Attributes are .T and .data; methods are: {function_list()}.", node
        )

    def _torch_submodule(self, node: ast.Attribute) -> VjpError:
        # torch.nn.functional.relu, torch.linalg.norm, torch.os...: only torch.<function> exists here
        name = dotted(node)
        spec = by_base(node.attr)
        hint = how_to_write(spec) if spec else f"The functions are: {function_list()}."
        return self.err(f"{name} is not available: of torch's modules, only the spellings listed are.", node, hint)

    def unknown_function(self, name: str, node: ast.AST) -> VjpError:
        if name.endswith(".backward"):
            return self.err(
                "backward() is not part of the program: vjp calls y.backward(v) for you on the output.",
                node,
                "Give v with --grad (e.g. --grad 0.1,1,0.0001), and the output with --output NAME.",
            )
        base = name.split(".")[-1]
        spec = by_base(base)
        if spec is not None:  # a real function, under a name torch does not give it (x.gelu())
            what = f".{base}() is not a tensor method in torch" if name.startswith(".") else f"torch has no {name}"
            return self.err(f"{what}; {base} is spelled otherwise.", node, how_to_write(spec))
        near = near_names(base)
        if near:  # the hint first: a list of every function would bury it (vjp functions lists them)
            return self.err(f"Unknown function {name!r}. Did you mean {', '.join(near)}?", node, ALL_FUNCTIONS)
        return self.err(f"Unknown function {name!r}. The functions are: {function_list()}.", node)

    def _call(self, node: ast.Call, sp: P.Span) -> P.Expr:
        special = self._special_call(node, sp)
        if special is not None:
            return special
        func = node.func
        receiver: ast.expr | None = None
        spec: OpSpec | None
        if isinstance(func, ast.Name):
            spec = lookup(func.id)
            if spec is None:
                raise self.unknown_function(func.id, func)
        elif isinstance(func, ast.Attribute):
            if func.attr.startswith("_"):
                raise self.err(f"The attribute {func.attr!r} is not allowed.", func)
            spec = lookup(dotted(func))  # torch.exp, F.gelu, torch.special.erf, torch.nn.functional.relu
            if spec is not None and dotted(func).startswith("F.") and len(node.args) < spec.tensors:
                spec = None  # F.softmax(dim=1): a method of a variable named F
            if spec is not None:
                pass
            elif isinstance(func.value, ast.Name) and func.value.id == "torch":
                raise self.unknown_function(f"torch.{func.attr}", func)
            elif dotted(func.value).startswith("torch."):
                raise self._torch_submodule(func)
            elif (
                isinstance(func.value, ast.Name)
                and func.value.id in _OTHER_MODULES
                and (lookup(f".{func.attr}") is None or _looks_like_module_call(func.attr, node))
            ):
                known = by_base(func.attr)
                near = near_names(func.attr)
                what = f"{func.value.id}.{func.attr} is not available: only torch's names are."
                if known:
                    raise self.err(f"{what} {how_to_write(known)}", func)
                if near:  # the hint before the list of every function, which would bury it
                    raise self.err(f"{what} Did you mean {', '.join(near)}?", func, ALL_FUNCTIONS)
                raise self.err(f"{what} The functions are: {function_list()}.", func)
            else:
                spec = lookup(f".{func.attr}")
                if spec is None:
                    # report the leftmost problem first: in __import__('os').system() that is __import__
                    self._expr(func.value)
                    raise self.unknown_function(f".{func.attr}", func)
                receiver = func.value
        else:
            hint = None
            if isinstance(func, ast.Constant | ast.BinOp | ast.UnaryOp | ast.Call):
                hint = "Multiplication is written with '*': 2*(x + 1), not 2(x + 1)."
            raise self.err("Only named functions can be called.", func, hint)
        name = spec.name
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise self.err("'*' unpacking is not part of the language.", a)
        for kw in node.keywords:
            if kw.arg is None:
                raise self.err("'**' unpacking is not part of the language.", kw.value)
        positional = list(node.args)
        lead = len(spec.leading)
        listed = positional[lead] if spec.variadic and len(positional) > lead else None
        if isinstance(listed, ast.List | ast.Tuple):
            # torch.cat([a, b], dim=0), torch.einsum("ik,kj->ij", [a, b]): the operands as one list
            positional = positional[:lead] + list(listed.elts) + positional[lead + 1 :]
        params: dict[str, P.Static | P.Sizes] = {}
        for p in spec.leading:  # einsum("ij,j->i", W, x): parameters before the tensors
            if positional and receiver is None:
                params[p.name] = self._static(p, positional.pop(0), name)
        positional = ([receiver] if receiver is not None else []) + positional
        if len(positional) < spec.tensors:
            raise self.err(f"{name}() takes {spec.tensors} tensor argument(s).", node)
        count = len(positional) if spec.variadic else spec.tensors
        if count > self.limits.call_operands:
            raise self.err(
                f"{name}() got {count} tensor operands; the limit is {self.limits.call_operands} "
                "(--limit call_operands=N).",
                node,
                cls=LimitError,
            )
        if name in ("max", "min") and (
            len(positional) == 2
            and literal_number(positional[1]) is not None
            or any(kw.arg in ("dim", "keepdim") for kw in node.keywords)
        ):  # max(x, dim): the (values, indices) of torch's named tuple
            spec, count = REGISTRY[f"{name}_dim"], 1  # messages still say max(), as the program does
        tensors = tuple(self._expr(a) for a in positional[:count])
        self._positional_params(spec, positional[count:], params, node)
        by_name = {p.name: p for p in (*spec.leading, *spec.params)}
        for kw in node.keywords:
            if kw.arg is None:
                raise self.err("'**' unpacking is not part of the language.", kw.value)
            if kw.arg not in by_name:
                raise self.err(f"{name}() has no keyword {kw.arg!r} ({self._signature(spec)}).", kw.value)
            if kw.arg in params:
                raise self.err(f"{name}() got {kw.arg!r} twice.", kw.value)
            params[kw.arg] = self._static(by_name[kw.arg], kw.value, name)
        for p in (*spec.leading, *spec.params):
            if p.required and p.name not in params:
                raise self.err(f"{name}() needs {p.name}= ({self._signature(spec)}).", node)
        ordered = tuple((p.name, params[p.name]) for p in (*spec.leading, *spec.params) if p.name in params)
        return P.Call(spec.name, tensors, ordered, sp)

    def _take(self, node: ast.expr, item: int, at: ast.AST, sp: P.Span, unpack: int | None = None) -> P.Call:
        """One tensor of a tuple-valued call: x.chunk(2)[0], x.max(dim=0).values, a, b = x.chunk(2)."""
        call = self._expr(node) if isinstance(node, ast.Call) else None
        if not (isinstance(call, P.Call) and REGISTRY[call.func].tuple_result):
            raise self.err(
                "Only a call that gives a tuple of tensors (chunk, split, unbind) can be unpacked or give "
                ".values and .indices.",
                at,
            )
        extra = (("item", item),) + ((("unpack", unpack),) if unpack is not None else ())
        return P.Call(call.func, call.args, call.params + extra, sp)

    def _gather(self, name: str, positional: list[ast.expr], node: ast.Call, sp: P.Span) -> P.Call:
        """gather(x, dim, index) and index_select(x, dim, index), positional or by keyword."""
        given = dict(zip(("input", "dim", "index"), positional, strict=False))
        for kw in node.keywords:
            if kw.arg not in ("input", "dim", "index") or kw.arg in given:
                raise self.err(f"{name}() takes x, dim and index.", kw.value if kw.arg else node)
            given[kw.arg] = kw.value
        if len(positional) > 3 or set(given) != {"input", "dim", "index"}:
            raise self.err(f"{name}() takes x, dim and index: x.{name}(0, torch.tensor([1, 0])).", node)
        dim = self._dim(given["dim"], name, "dim")
        return P.Call(name, (self._expr(given["input"]), self._expr(given["index"])), (("dim", dim),), sp)

    def _special_call(self, node: ast.Call, sp: P.Span) -> P.Expr | None:
        """Calls that are not registry functions: constructors, requires_grad_(), .to(dtype), float('inf'),
        Python numbers read from a tensor (len(x), x.size(0), math.sqrt(d))."""
        func = node.func
        scalar = self._scalar_call(node, sp)
        if scalar is not None:
            return scalar
        if dotted(func) in ("torch.gather", "torch.index_select"):
            return self._gather(dotted(func).removeprefix("torch."), list(node.args), node, sp)
        maker = maker_name(func)
        if maker is not None and (isinstance(func, ast.Name) or dotted(func).startswith("torch.")):
            return self._constructor(maker, node, sp)
        if named_constant(node) is not None:
            raise self.err("float('inf') is only allowed as a parameter value (masked_fill(m, float('-inf'))).", node)
        if not isinstance(func, ast.Attribute) or dotted(func).startswith("torch."):
            return None
        if func.attr in ("gather", "index_select"):  # x.gather(dim, index): the dim between the tensors
            return self._gather(func.attr, [func.value, *node.args], node, sp)
        if func.attr == "where" and len(node.args) == 2 and not node.keywords:  # x.where(mask, y)
            mask, other = (self._expr(a) for a in node.args)
            return P.Call("where", (mask, self._expr(func.value), other), (), sp)
        if func.attr == "requires_grad_":
            return self._requires_grad_(node, self._expr(func.value))
        if func.attr == "to":
            d = dtype_name(node.args[0]) if len(node.args) == 1 and not node.keywords else None
            if d is None and len(node.keywords) == 1 and node.keywords[0].arg == "dtype" and not node.args:
                d = dtype_name(node.keywords[0].value)
            if d not in ("float32", "float64"):
                raise self.err(
                    ".to() takes torch.float32 or torch.float64 here (.float(), .double()); devices are the "
                    "run's --device.",
                    node,
                )
            return P.Call("float" if d == "float32" else "double", (self._expr(func.value),), (), sp)
        return None

    def _scalar_call(self, node: ast.Call, sp: P.Span) -> P.Expr | None:
        """len(x), x.size(d), x.numel(), x.dim(), math.sqrt(d): plain numbers, constants to backward."""
        func = node.func
        name = dotted(func)
        if isinstance(func, ast.Name) and func.id == "len" or name.startswith("math."):
            what = "len" if name == "len" else name.removeprefix("math.")
            if what != "len" and what not in P.MATH_FUNCTIONS:
                return None  # math.pi and the like are constants, not calls; anything else is refused later
            if len(node.args) != 1 or node.keywords:
                raise self.err(f"{name}() takes one argument.", node)
            if what == "len" and self._whole_shape(node.args[0]):  # len(x.size()), len(x.shape): x.dim()
                x = node.args[0]
                x = x.value if isinstance(x, ast.Attribute) else x.func.value  # type: ignore[attr-defined]
                return P.Scalar("dim", self._expr(x), None, sp)
            return P.Scalar(what, self._expr(node.args[0]), None, sp)
        if not isinstance(func, ast.Attribute) or name.startswith(("torch.", "math.", "F.")):
            return None
        if func.attr in ("numel", "dim", "ndimension") and not node.args and not node.keywords:
            return P.Scalar("numel" if func.attr == "numel" else "dim", self._expr(func.value), None, sp)
        if func.attr == "size":
            if not node.args and not node.keywords:
                raise self.err("x.size() is a tuple of sizes here: index it, x.size(0) or x.shape[0].", node)
            if len(node.args) != 1 or node.keywords:
                raise self.err("x.size(d) takes one dimension, an integer literal.", node)
            return P.Scalar("size", self._expr(func.value), self._dim(node.args[0], "size", "dim"), sp)
        return None

    def _positional_params(
        self, spec: OpSpec, extra: list[ast.expr], params: dict[str, P.Static | P.Sizes], node: ast.Call
    ) -> None:
        """The parameters given by position after the tensors, into params."""
        name = spec.shown
        for k, (p, a) in enumerate(zip(spec.params, extra, strict=False)):
            if p.kind == "shape" and len(extra) > k + 1:  # reshape(2, 3): the rest of the positionals
                literal = all(literal_number(e) is not None for e in extra[k:])
                params[p.name] = (
                    self._shape(extra[k:], name, p.name, node) if literal else self._sizes(p, extra[k:], node, name)
                )
                return
            last = k == len(spec.params) - 1
            if p.kind in ("dims", "dimlist") and last and len(extra) > k + 1:  # x.permute(1, 0), x.flip(0, 1)
                if len(extra) - k > _MAX_DIM:
                    raise self.err(f"{name}(): {p.name} lists more than {_MAX_DIM} dimensions.", node)
                params[p.name] = tuple(self._dim(a, name, p.name) for a in extra[k:])
                return
            params[p.name] = self._static(p, a, name)
        if len(extra) > len(spec.params):
            raise self.err(f"{name}() got too many arguments ({self._signature(spec)}).", extra[len(spec.params)])

    @staticmethod
    def _signature(spec: OpSpec) -> str:
        tensors = ["x", "y", "z"][: spec.tensors] if spec.tensors <= 3 else [f"x{i}" for i in range(spec.tensors)]
        if spec.variadic:
            tensors.append("...")
        lead = [p.name for p in spec.leading]
        parts = lead + tensors + [p.name if p.required else f"{p.name}=..." for p in spec.params]
        return f"{spec.name}({', '.join(parts)})"

    def _literal(self, node: ast.expr) -> bool:
        """Whether a parameter is written as number literals only (checked as such below)."""
        if isinstance(node, ast.Tuple | ast.List):
            return all(literal_number(e) is not None for e in node.elts)
        return literal_number(node) is not None

    def _sizes(self, p: Param, nodes: list[ast.expr], at: ast.AST, fname: str) -> P.Sizes:
        """A size or dim written with the program's values: len(x), x.shape, x.size(0), a constant d."""
        if len(nodes) > _MAX_DIM:
            raise self.err(f"{fname}(): {p.name} has more than {_MAX_DIM} parts.", at)
        for n in nodes:
            if isinstance(n, ast.Constant) and (isinstance(n.value, bool) or not isinstance(n.value, int | float)):
                what = "integers: literals" if p.kind in ("shape", "intlist") else "an integer: a literal"
                raise self.err(
                    f"{fname}(): {p.name} must be {what}, or sizes read from the program (x.size(0), len(x), x.shape).",
                    n,
                )
        one = p.kind in ("int", "dim") or p.kind == "dims" and len(nodes) == 1 and not self._whole_shape(nodes[0])
        if one and len(nodes) != 1:
            raise self.err(f"{p.name} takes one number here.", at)
        parts: list[int | P.Expr] = []
        for n in nodes:
            v = literal_number(n)
            if v is not None and float(v).is_integer():
                parts.append(int(v))
            elif self._whole_shape(n):  # x.shape or x.size(): every size of x
                value = n.value if isinstance(n, ast.Attribute) else n.func.value  # type: ignore[attr-defined]
                parts.append(P.Scalar("shape", self._expr(value), None, self.span(n)))
            else:
                parts.append(self._expr(n))
        return P.Sizes(tuple(parts), one, self.span(at))

    @staticmethod
    def _whole_shape(n: ast.expr) -> bool:
        if isinstance(n, ast.Attribute) and n.attr == "shape":
            return True
        return (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "size"
            and not n.args
            and not n.keywords
        )

    def _static(self, p: Param, node: ast.expr, fname: str) -> P.Static | P.Sizes:
        if p.kind in _SIZED and not self._literal(node):
            return self._sizes(p, list(node.elts) if isinstance(node, ast.Tuple | ast.List) else [node], node, fname)
        if p.kind in ("choice", "string"):
            if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
                want = " or ".join(repr(c) for c in p.choices) if p.choices else "a string literal"
                raise self.err(f"{fname}(): {p.name} must be {want}.", node)
            text = node.value
            if p.choices and text not in p.choices:
                allowed = ", ".join(repr(c) for c in p.choices)
                raise self.err(f"{fname}(): {p.name} must be one of {allowed}.", node)
            if len(text) > _MAX_STRING or not all(" " <= ch <= "~" for ch in text):
                raise self.err(f"{fname}(): {p.name} must be at most {_MAX_STRING} printable ASCII characters.", node)
            return text
        if p.kind == "shape":
            if isinstance(node, ast.Tuple | ast.List):
                return self._shape(node.elts, fname, p.name, node)
            return self._shape([node], fname, p.name, node)
        if p.kind == "int":
            v = literal_number(node)
            if v is None or not float(v).is_integer() or abs(v) > self.limits.literal:
                raise self.err(f"{fname}(): {p.name} must be an integer literal.", node)
            return int(v)
        if p.kind == "bool":
            if isinstance(node, ast.Constant) and isinstance(node.value, bool):
                return node.value
            raise self.err(f"{fname}(): {p.name} must be True or False.", node)
        if p.kind == "number":
            strings = [c for c in p.choices if c != "inf"]  # norm's p: a number or 'fro'
            if strings and isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in strings:
                return node.value
            v = literal_number(node)
            if v is None or math.isnan(v) or math.isfinite(v) and abs(v) > self.limits.literal:
                words = ["a number literal", *(repr(c) for c in strings)]
                words += ["float('inf')"] if "inf" in p.choices else []
                want = f"{', '.join(words[:-1])} or {words[-1]}" if len(words) > 1 else words[0]
                raise self.err(f"{fname}(): {p.name} must be {want}.", node)
            return v
        if p.kind == "intlist":  # split(x, 2) or split(x, [1, 2])
            if isinstance(node, ast.Tuple | ast.List):
                return self._shape(node.elts, fname, p.name, node)
            return self._static(Param(p.name, "int"), node, fname)
        if p.kind == "dimlist":  # dims torch wants as a tuple even when one is given: flip(x, 0)
            dims = self._static(Param(p.name, "dims"), node, fname)
            return dims if isinstance(dims, tuple) else (int(dims),)  # type: ignore[arg-type]
        if p.kind == "dims" and isinstance(node, ast.Tuple | ast.List):
            if len(node.elts) > _MAX_DIM:
                raise self.err(f"{fname}(): {p.name}= lists more than {_MAX_DIM} dimensions.", node)
            dims = tuple(self._dim(e, fname, p.name) for e in node.elts)
            if not dims:
                raise self.err(f"{fname}(): {p.name}=() is empty.", node)
            return dims
        return self._dim(node, fname, p.name)

    def _shape(self, nodes: list[ast.expr], fname: str, pname: str, at: ast.AST) -> tuple[int, ...]:
        """A shape written as integer literals: (2, 3), [2, 3] or the arguments 2, 3; -1 once, to infer."""
        if len(nodes) > _MAX_DIM:
            raise self.err(f"{fname}(): {pname} has more than {_MAX_DIM} dimensions.", at)
        sizes = []
        for n in nodes:
            v = literal_number(n)
            if v is None or not float(v).is_integer() or isinstance(n, ast.Constant) and isinstance(n.value, float):
                raise self.err(f"{fname}(): {pname} must be integer literals, e.g. (2, 3).", n)
            if v < -1 or v > self.limits.elements:
                raise self.err(
                    f"{fname}(): the size {int(v)} is out of range (-1, to infer it, or 0 to "
                    f"{self.limits.elements:,}, the elements limit).",
                    n,
                )
            sizes.append(int(v))
        if sizes.count(-1) > 1 and fname not in ("expand", "broadcast_to"):  # there -1 keeps a size
            raise self.err(f"{fname}(): only one size can be -1 (inferred).", at)
        return tuple(sizes)

    def _dim(self, node: ast.expr, fname: str, pname: str) -> int:
        v = literal_number(node)
        if v is None or not float(v).is_integer() or isinstance(node, ast.Constant) and isinstance(node.value, float):
            raise self.err(f"{fname}(): {pname} must be an integer literal.", node)
        if abs(v) > _MAX_DIM:
            raise self.err(f"{fname}(): {pname}={int(v)} is out of range (at most {_MAX_DIM}).", node)
        return int(v)


def _looks_like_module_call(name: str, node: ast.Call) -> bool:
    """np.log(x) or F.softmax(x, dim=0): a module function given the tensor, not a method (F.sum())."""
    spec = lookup(name)
    if spec is None or spec.tensors != 1 or not node.args:
        return False
    return literal_number(node.args[0]) is None and not isinstance(node.args[0], ast.Tuple)
