"""The snippet interpreter: walks Python's syntax tree against the whitelist and runs it through real torch.

Never `exec`: each statement and expression kind the snippet language knows has a branch here; anything else
is refused with a message pointing at it. Real exceptions of torch or Python operations are the snippet's own
(they stop the transcript as Python would); our refusals and limits are `VjpError`s.
"""

from __future__ import annotations

import ast
import operator
import time
import warnings
from collections.abc import Callable
from typing import Any

from ..errors import LimitError, VjpError
from ..limits import Limits
from . import guards
from . import whitelist as W
from .comprehensions import comprehension
from .names import IMPLICIT, Autograd, Builtin, Fn, Method, Module, module_attr, refuse
from .runtime import (
    _BINOPS,
    _CMP,
    _INPLACE,
    _UNARY,
    Scope,
    SnippetRaised,
    UserFunction,
    _Break,
    _Continue,
    _Return,
    bind_arguments,
)
from .source import Source


class Interpreter:
    """Runs one snippet. `on_autograd` explains each backward/grad call (see events.py)."""

    def __init__(self, src: Source, label: str, limits: Limits, on_autograd: Callable[..., Any]) -> None:
        self.src = src
        self.label = label
        self.limits = limits
        self.on_autograd = on_autograd
        self.globals = Scope()
        self.out: list[str] = []
        self.out_chars = 0
        self.steps = 0
        self.depth = 0
        self.created = 0
        self.hooks = 0
        self.deadline = time.monotonic() + limits.snippet_seconds
        self.implicit_used: set[str] = set()
        self.warnings: list[tuple[int, str]] = []
        self.current_line = 0
        self.quiet = False  # while the tool itself runs snippet code (probes, replays): no output, no step count
        self.retained: list[Any] = []  # tensors the snippet called .retain_grad() on
        self.uninitialised: list[int] = []  # lines that made tensors from uninitialised memory
        self.replay: Any = None  # the trace of tensor ops, for the finite-difference route (replay.py)

    def where(self, node: ast.AST | None) -> int:
        return self.src.original_line(getattr(node, "lineno", self.current_line) or self.current_line)

    def point(self, err: VjpError, node: ast.AST | None) -> VjpError:
        """Attach the snippet's line, with a marker under `node`, to an error raised while running it."""
        if err.source is None and node is not None and hasattr(node, "lineno"):
            line = self.where(node)
            lines = self.src.original.split("\n")
            text = lines[line - 1] if 0 < line <= len(lines) else ""
            shift = 4 if self.src.repl else 0
            col, end_col = getattr(node, "col_offset", 0), getattr(node, "end_col_offset", None)
            start = col + shift
            same_line = getattr(node, "end_lineno", None) == node.lineno and end_col is not None
            end = end_col + shift if same_line and end_col is not None else len(text)
            err.source, err.start = text, max(0, min(start, len(text)))
            err.end = max(err.start + 1, min(end, len(text)))
            err.label = f"{self.label}, line {line}"
        return err

    def tick(self, node: ast.AST) -> None:
        self.steps += 0 if self.quiet else 1
        if self.steps > self.limits.snippet_steps:
            raise LimitError(
                f"The snippet ran {self.limits.snippet_steps:,} steps without finishing (a loop that never ends?).",
                hint="Raise the limit with --limit snippet_steps=N.",
            )
        if time.monotonic() > self.deadline:
            raise LimitError(
                f"The snippet ran longer than {self.limits.snippet_seconds:g} s.",
                hint="Raise the limit with --limit snippet_seconds=S.",
            )

    def write(self, text: str) -> None:
        if self.quiet:
            return
        self.out_chars += len(text)
        if self.out_chars > self.limits.snippet_output_chars:
            raise LimitError(
                f"The snippet printed more than {self.limits.snippet_output_chars:,} characters.",
                hint="Raise the limit with --limit snippet_output_chars=N.",
            )
        self.out.append(text)

    def real(self, fn: Callable[..., Any], *args: Any, node: ast.AST | None = None, **kwargs: Any) -> Any:
        """Call a real operation; its own exceptions are the snippet's, torch's warnings are recorded."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                value = fn(*args, **kwargs)
            except (VjpError, SnippetRaised, _Return, _Break, _Continue):
                raise
            except RecursionError:
                raise LimitError("The snippet nests calls too deeply.") from None
            except Exception as e:  # noqa: BLE001 - every other exception is the snippet's own, as in Python
                raise SnippetRaised(e, node) from None
        for w in caught:
            if issubclass(w.category, DeprecationWarning | PendingDeprecationWarning) and _inside_torch(w.filename):
                continue  # raised inside torch's own code: Python's default filters hide it from a script
            self.warnings.append((self.where(node), f"{w.category.__name__}: {w.message}"))
        self.count(value)
        return value

    def traced(
        self, kind: str, fn: Any, args: Any, kwargs: dict[str, Any], run: Callable[[], Any], opaque: str | None = None
    ) -> Any:
        """Run a tensor operation and record it for the replay (arguments as they are before it runs)."""
        from .replay import has_tensor

        trace = self.replay
        if trace is None or not (has_tensor(args) or has_tensor(kwargs)):
            return run()
        pre_args, pre_kwargs = trace.wrap(tuple(args)), trace.wrap(kwargs)
        value = run()
        trace.record(kind, fn, pre_args, pre_kwargs, value, opaque)
        return value

    def count(self, value: Any) -> None:
        import torch

        if isinstance(value, torch.Tensor):
            self.created += value.numel()
            if self.created > self.limits.snippet_elements:
                raise LimitError(
                    f"The snippet created more than {self.limits.snippet_elements:,} tensor elements in all.",
                    hint="Raise the limit with --limit snippet_elements=N.",
                )

    # ------------------------------------------------------------------ statements
    def run(self, tree: ast.Module, on_statement: Callable[[ast.stmt, Callable[[], None]], None]) -> None:
        """Run the top-level statements in order; `on_statement` wraps each (the transcript records it)."""
        for stmt in tree.body:

            def run_one(s: ast.stmt = stmt) -> None:
                self.exec_block([s], self.globals, top=True)

            on_statement(stmt, run_one)

    def exec_block(self, body: list[ast.stmt], scope: Scope, top: bool = False) -> None:
        for stmt in body:
            self.current_line = stmt.lineno
            if self.replay is not None:
                self.replay.line = self.where(stmt)
            self.tick(stmt)
            try:
                self.exec_stmt(stmt, scope, top)
            except VjpError as e:
                raise self.point(e, stmt) from None

    def exec_stmt(self, s: ast.stmt, scope: Scope, top: bool) -> None:
        if isinstance(s, ast.Expr):
            value = self.eval(s.value, scope)
            if top and value is not None:
                self.write(self.real(repr, value, node=s) + "\n")
        elif isinstance(s, ast.Assign):
            value = self.eval(s.value, scope)
            for target in s.targets:
                self.assign(target, value, scope)
        elif isinstance(s, ast.AnnAssign):
            if s.value is not None:
                self.assign(s.target, self.eval(s.value, scope), scope)
        elif isinstance(s, ast.AugAssign):
            self.aug_assign(s, scope)
        elif isinstance(s, ast.If):
            self.exec_block(s.body if self.truth(self.eval(s.test, scope), s.test) else s.orelse, scope)
        elif isinstance(s, ast.While):
            self.exec_while(s, scope)
        elif isinstance(s, ast.For):
            self.exec_for(s, scope)
        elif isinstance(s, ast.Break):
            raise _Break()
        elif isinstance(s, ast.Continue):
            raise _Continue()
        elif isinstance(s, ast.Pass):
            pass
        elif isinstance(s, (ast.Import, ast.ImportFrom)):
            from .statements import run_import

            run_import(self, s, scope)
        elif isinstance(s, ast.FunctionDef):
            if s.decorator_list:
                raise refuse("A decorator")
            scope.vars[s.name] = self.make_function(s.name, s.args, s.body, scope)
        elif isinstance(s, ast.ClassDef):
            from .custom import define

            scope.vars[s.name] = define(self, s, scope)
        elif isinstance(s, ast.Return):
            raise _Return(None if s.value is None else self.eval(s.value, scope))
        elif isinstance(s, ast.With):
            from .statements import run_with

            run_with(self, s, scope)
        elif isinstance(s, ast.Delete):
            for t in s.targets:
                self.delete(t, scope)
        elif isinstance(s, ast.Assert):
            if not self.truth(self.eval(s.test, scope), s.test):
                msg = () if s.msg is None else (self.eval(s.msg, scope),)
                raise SnippetRaised(AssertionError(*msg), s)
        elif isinstance(s, ast.Try):
            from .statements import run_try

            run_try(self, s, scope)
        elif isinstance(s, ast.Raise):
            exc = self.eval(s.exc, scope) if s.exc is not None else RuntimeError("No active exception to reraise")
            if not isinstance(exc, BaseException):
                raise refuse("raise of something that is not an exception")
            raise SnippetRaised(exc, s)
        else:
            raise refuse(f"A {type(s).__name__} statement")

    def exec_while(self, s: ast.While, scope: Scope) -> None:
        while self.truth(self.eval(s.test, scope), s.test):
            self.tick(s)
            if not self.loop_body(s.body, scope):
                return
        self.exec_block(s.orelse, scope)

    def loop_body(self, body: list[ast.stmt], scope: Scope) -> bool:
        """One pass of a loop's body; False where it hit `break`."""
        try:
            self.exec_block(body, scope)
        except _Break:
            return False
        except _Continue:
            pass
        return True

    def exec_for(self, s: ast.For, scope: Scope) -> None:
        items = self.eval(s.iter, scope)
        iterator = self.real(iter, items, node=s.iter)
        while True:
            self.tick(s)
            try:
                item = next(iterator)
            except StopIteration:
                break
            except Exception as e:  # noqa: BLE001 - iterating a 0-d tensor raises TypeError in Python too
                raise SnippetRaised(e, s.iter) from None
            self.assign(s.target, item, scope)
            if not self.loop_body(s.body, scope):
                return
        self.exec_block(s.orelse, scope)

    def assign(self, target: ast.expr, value: Any, scope: Scope) -> None:
        if isinstance(target, ast.Name):
            scope.vars[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            stars = [i for i, t in enumerate(target.elts) if isinstance(t, ast.Starred)]
            items = list(self.real(list, value, node=target)) if not isinstance(value, (list, tuple)) else list(value)
            if stars:
                i = stars[0]
                after = len(target.elts) - i - 1
                if len(items) < len(target.elts) - 1:
                    raise SnippetRaised(ValueError("not enough values to unpack"), target)
                parts = [*items[:i], items[i : len(items) - after], *items[len(items) - after :]]
                for t, v in zip(target.elts, parts, strict=True):
                    self.assign(t.value if isinstance(t, ast.Starred) else t, v, scope)
                return
            if len(items) != len(target.elts):
                n, k = len(target.elts), len(items)
                msg = (
                    f"too many values to unpack (expected {n})"
                    if k > n
                    else f"not enough values to unpack (expected {n}, got {k})"
                )
                raise SnippetRaised(ValueError(msg), target)
            for t, v in zip(target.elts, items, strict=True):
                self.assign(t, v, scope)
        elif isinstance(target, ast.Attribute):
            obj = self.eval(target.value, scope)
            self.set_attribute(obj, target.attr, value, target)
        elif isinstance(target, ast.Subscript):
            obj = self.eval(target.value, scope)
            self.set_item(obj, self.eval_index(target.slice, scope), value, target)
        else:
            raise refuse(f"Assigning to a {type(target).__name__}")

    def inplace(self, sym: str, left: Any, right: Any, node: ast.AST) -> Any:
        """`left op= right`, in place where Python does it in place (on a tensor), recorded for the replay."""
        fn = _INPLACE[sym]
        return self.traced("inplace", fn, (left, right), {}, lambda: self.real(fn, left, right, node=node))

    def set_item(self, obj: Any, index: Any, value: Any, node: ast.AST) -> None:
        """`obj[index] = value`: for a tensor, an in-place write with PyTorch's own semantics, recorded."""
        import torch

        self.check_setitem(obj, node)
        if self.replay is None or not isinstance(obj, torch.Tensor):
            self.real(operator.setitem, obj, index, value, node=node)
            return
        pre = self.replay.wrap((obj, index, value))
        self.real(operator.setitem, obj, index, value, node=node)
        self.replay.record("setitem", operator.setitem, pre, {}, obj)

    def check_setitem(self, obj: Any, node: ast.AST) -> None:
        import torch

        if not isinstance(obj, (torch.Tensor, list, dict)):
            raise refuse(f"Item assignment into a {type(obj).__name__}")

    def aug_assign(self, s: ast.AugAssign, scope: Scope) -> None:
        sym, _ = _BINOPS[type(s.op)]
        t = s.target
        right = self.eval(s.value, scope)
        if isinstance(t, ast.Name):
            found, left = scope.find(t.id)
            if not found:
                left = self.lookup(t.id, t, scope)
            guards.check_binop(sym, left, right, self.limits.elements)
            scope.vars[t.id] = self.inplace(sym, left, right, s)
        elif isinstance(t, ast.Attribute):
            obj = self.eval(t.value, scope)
            left = self.get_attribute(obj, t.attr, t)
            guards.check_binop(sym, left, right, self.limits.elements)
            self.set_attribute(obj, t.attr, self.inplace(sym, left, right, s), t)
        elif isinstance(t, ast.Subscript):
            obj = self.eval(t.value, scope)
            index = self.eval_index(t.slice, scope)
            self.check_setitem(obj, t)
            left = self.traced(
                "call", operator.getitem, (obj, index), {}, lambda: self.real(operator.getitem, obj, index, node=t)
            )
            guards.check_binop(sym, left, right, self.limits.elements)
            self.set_item(obj, index, self.inplace(sym, left, right, s), t)
        else:
            raise refuse(f"Augmented assignment to a {type(t).__name__}")

    def delete(self, t: ast.expr, scope: Scope) -> None:
        if isinstance(t, ast.Name):
            if t.id not in scope.vars:
                raise SnippetRaised(NameError(f"name '{t.id}' is not defined"), t)
            del scope.vars[t.id]
        elif isinstance(t, ast.Subscript):
            obj = self.eval(t.value, scope)
            if not isinstance(obj, (list, dict)):
                raise refuse(f"del on an item of a {type(obj).__name__}")
            self.real(operator.delitem, obj, self.eval_index(t.slice, scope), node=t)
        else:
            raise refuse("This del")

    # ------------------------------------------------------------------ expressions
    def eval(self, e: ast.expr, scope: Scope) -> Any:
        try:
            return self._eval(e, scope)
        except VjpError as err:
            raise self.point(err, e) from None

    def _eval(self, e: ast.expr, scope: Scope) -> Any:  # noqa: C901 - one branch per expression kind
        if isinstance(e, ast.Constant):
            return e.value
        if isinstance(e, ast.Name):
            return self.lookup(e.id, e, scope)
        if isinstance(e, ast.Attribute):
            return self.get_attribute(self.eval(e.value, scope), e.attr, e)
        if isinstance(e, ast.Call):
            from .calls import call

            return call(self, e, scope)
        if isinstance(e, ast.BinOp):
            left = self.eval(e.left, scope)
            right = self.eval(e.right, scope)
            sym, fn = _BINOPS[type(e.op)]
            guards.check_binop(sym, left, right, self.limits.elements)
            return self.traced("call", fn, (left, right), {}, lambda: self.real(fn, left, right, node=e))
        if isinstance(e, ast.UnaryOp):
            operand, unary = self.eval(e.operand, scope), _UNARY[type(e.op)]
            return self.traced("call", unary, (operand,), {}, lambda: self.real(unary, operand, node=e))
        if isinstance(e, ast.BoolOp):
            value: Any = None
            for v in e.values:
                value = self.eval(v, scope)
                truth = self.truth(value, v)
                if isinstance(e.op, ast.And) and not truth or isinstance(e.op, ast.Or) and truth:
                    return value
            return value
        if isinstance(e, ast.Compare):
            left = self.eval(e.left, scope)
            result: Any = True
            for cmpop, comp in zip(e.ops, e.comparators, strict=True):
                right = self.eval(comp, scope)
                result = self.compare(_CMP[type(cmpop)], left, right, e)
                if len(e.ops) > 1 and not self.truth(result, e):
                    return result
                left = right
            return result
        if isinstance(e, ast.IfExp):
            return self.eval(e.body if self.truth(self.eval(e.test, scope), e.test) else e.orelse, scope)
        if isinstance(e, ast.Subscript):
            obj = self.eval(e.value, scope)
            index = self.eval_index(e.slice, scope)
            return self.traced(
                "call", operator.getitem, (obj, index), {}, lambda: self.real(operator.getitem, obj, index, node=e)
            )
        if isinstance(e, ast.Tuple):
            return tuple(self.eval_items(e.elts, scope))
        if isinstance(e, ast.List):
            return self.eval_items(e.elts, scope)
        if isinstance(e, ast.Set):
            return set(self.eval_items(e.elts, scope))
        if isinstance(e, ast.Dict):
            out = {}
            for k, v in zip(e.keys, e.values, strict=True):
                if k is None:
                    out.update(self.eval(v, scope))
                else:
                    out[self.eval(k, scope)] = self.eval(v, scope)
            return out
        if isinstance(e, ast.Slice):
            return self.eval_index(e, scope)
        if isinstance(e, ast.JoinedStr):
            return "".join(self.eval_fstring_part(p, scope) for p in e.values)
        if isinstance(e, ast.Lambda):
            return self.make_function("<lambda>", e.args, e.body, scope)
        if isinstance(e, (ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp)):
            return comprehension(self, e, scope)
        raise refuse(f"A {type(e).__name__} expression")

    def compare(self, cmp: Callable[[Any, Any], Any], left: Any, right: Any, node: ast.AST) -> Any:
        return self.traced("call", cmp, (left, right), {}, lambda: self.real(cmp, left, right, node=node))

    def eval_items(self, elts: list[ast.expr], scope: Scope) -> list[Any]:
        out: list[Any] = []
        for el in elts:
            if isinstance(el, ast.Starred):
                value = self.eval(el.value, scope)
                guards.check_length("unpacking", value)
                out.extend(self.real(list, value, node=el))
            else:
                out.append(self.eval(el, scope))
        return out

    def eval_index(self, e: ast.expr, scope: Scope) -> Any:
        if isinstance(e, ast.Slice):
            parts = [None if p is None else self.eval(p, scope) for p in (e.lower, e.upper, e.step)]
            return slice(*parts)
        if isinstance(e, ast.Tuple):
            return tuple(self.eval_index(el, scope) for el in e.elts)
        return self.eval(e, scope)

    def eval_fstring_part(self, p: ast.expr, scope: Scope) -> str:
        if isinstance(p, ast.Constant):
            return str(p.value)
        if isinstance(p, ast.FormattedValue):
            value = self.eval(p.value, scope)
            if p.conversion == ord("r"):
                value = self.real(repr, value, node=p)
            elif p.conversion == ord("s"):
                value = self.real(str, value, node=p)
            elif p.conversion == ord("a"):
                value = self.real(ascii, value, node=p)
            spec = "" if p.format_spec is None else self.eval(p.format_spec, scope)
            guards.check_format_text(spec)
            return str(self.real(format, value, spec, node=p))
        raise refuse("This f-string part")

    def truth(self, value: Any, node: ast.AST) -> bool:
        return bool(self.real(bool, value, node=node))

    def lookup(self, name: str, node: ast.AST, scope: Scope) -> Any:
        found, value = scope.find(name)
        if found:
            return value
        if name == "__name__":
            return "__main__"  # `if __name__ == "__main__":` runs, as in a script run directly
        if name in W.BUILTINS or name in ("True", "False", "None"):
            return Builtin(name)
        if name in W.EXCEPTIONS:
            import builtins

            return getattr(builtins, name)
        if name in IMPLICIT or name in ("tensor", "Variable", "grad", "Function"):
            self.implicit_used.add(name)
            if name in IMPLICIT:
                return IMPLICIT[name]
            return module_attr(Module("torch" if name == "tensor" else "torch.autograd"), name)
        import builtins

        if hasattr(builtins, name) or name.startswith("__"):
            raise refuse(f"The builtin {name!r}")
        raise SnippetRaised(NameError(f"name '{name}' is not defined"), node)

    def make_function(self, name: str, args: ast.arguments, body: Any, scope: Scope) -> UserFunction:
        if args.posonlyargs:
            raise refuse("Positional-only parameters")
        defaults = [self.eval(d, scope) for d in args.defaults]
        kw_defaults = [None if d is None else self.eval(d, scope) for d in args.kw_defaults]
        return UserFunction(name, args, body, scope, defaults, kw_defaults)

    def call_user(self, fn: UserFunction, args: list[Any], kwargs: dict[str, Any], node: ast.AST | None) -> Any:
        self.depth += 1
        try:
            if self.depth > self.limits.snippet_call_depth:
                raise LimitError(
                    f"Calls nest deeper than {self.limits.snippet_call_depth} (a recursion that never ends?).",
                    hint="Raise the limit with --limit snippet_call_depth=N.",
                )
            frame = Scope(fn.scope)
            bind_arguments(fn, args, kwargs, frame, node)
            if isinstance(fn.body, list):
                try:
                    self.exec_block(fn.body, frame)
                except _Return as r:
                    return r.value
                return None
            return self.eval(fn.body, frame)
        finally:
            self.depth -= 1

    def as_callable(self, value: Any) -> Any:
        """A snippet function handed to torch (a hook, a function to differentiate): a closure that runs it here."""
        if isinstance(value, UserFunction):
            return lambda *a, **k: self.call_user(value, list(a), k, None)
        if isinstance(value, (Fn, Autograd)):
            return value.real
        if isinstance(value, (Builtin, Method, Module)):
            raise refuse("Passing a builtin, method or module where torch expects a function")
        return value

    # ------------------------------------------------------------------ attributes
    def get_attribute(self, obj: Any, name: str, node: ast.AST) -> Any:
        from .calls import get_attribute

        return get_attribute(self, obj, name, node)

    def set_attribute(self, obj: Any, name: str, value: Any, node: ast.AST) -> None:
        import torch

        from .custom import CtxView

        if isinstance(obj, CtxView) and not name.startswith("_"):
            obj.set(name, value)
            return
        if isinstance(obj, torch.Tensor) and name in W.TENSOR_SETTABLE:
            self.real(setattr, obj, name, value, node=node)
            return
        from .modules import is_snippet_module, set_own

        if is_snippet_module(obj):
            set_own(obj, name, value)
            return
        if isinstance(obj, torch.nn.Module) and name in ("weight", "bias"):
            self.real(setattr, obj, name, value, node=node)
            return
        raise refuse(f"Setting .{name} on a {type(obj).__name__}")


def _inside_torch(filename: str) -> bool:
    import os

    import torch

    return os.path.abspath(filename).startswith(os.path.dirname(os.path.abspath(torch.__file__)) + os.sep)
