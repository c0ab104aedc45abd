"""The fix of a diagnosis (snippet/why.py), written for the snippet's own line: `x += 1` becomes `x = x + 1`,
the `sqrt` under a `where` gets the double-where, `h` carried across a loop gets `h = h.detach()`.

The snippet's lines are read with `ast` to rewrite them as text; nothing is run. Where a line cannot be read,
the fix says the same in general words.
"""

from __future__ import annotations

import ast
import re
from typing import Any

# the ops a `.double()`, `.float()`, `.to(...)`, `.cuda()` of a leaf runs: the result is a copy, not a leaf
CONVERSIONS = ("_to_copy", "to", "double", "float", "half", "bfloat16", "cuda", "cpu", "type")


def fix_for(
    kind: str, name: str, line: int, cause: dict[str, Any], d: dict[str, Any], facts: dict[str, Any], lines: list[str]
) -> str:
    return _FIXES[kind](name, line, cause, d, facts, lines)


def _source(lines: list[str], line: int | None) -> str:
    """The code of a line as pasted, without a REPL's or IPython's prompt, and without its comment where it
    is a whole statement (written again by ast.unparse)."""
    if line is None or not 0 < line <= len(lines):
        return ""
    text = _PROMPT.sub("", lines[line - 1].strip()).strip()
    try:
        return ast.unparse(ast.parse(text))
    except SyntaxError:
        return text


_PROMPT = re.compile(r"^(>>>|\.\.\.|In \[\d+\]:|\s*\.\.\.:)(\s|$)")


def _statement(text: str) -> ast.stmt | None:
    try:
        tree = ast.parse(text.rstrip(":").strip())
    except SyntaxError:
        return None
    return tree.body[0] if tree.body else None


def _inplace(
    name: str, line: int, cause: dict[str, Any], d: dict[str, Any], facts: dict[str, Any], lines: list[str]
) -> str:
    at = cause["line"]
    text = _source(lines, at)
    stmt = _statement(text)
    where = f"line {at}: "
    if facts.get("stepped"):  # a parameter an optimizer (or the snippet's own update) stepped in place
        return (
            f"finish every backward through the old graph before `{text}` changes `{name}` (line {at}), or run "
            f"the forward again after it: the graph saved `{name}` as it was before the step."
        )
    if "inplace=True" in text:
        return where + f"pass inplace=False (`{text.replace('inplace=True', 'inplace=False')}`)."
    ctor = next((k + 1 for k, s in enumerate(lines) if "inplace=True" in s), None)
    if ctor is not None and cause["op"] in ("relu", "relu_", "leaky_relu", "hardtanh", "elu", "dropout", "silu"):
        layer = _source(lines, ctor).replace("inplace=True", "inplace=False")
        return f"line {ctor}: make the layer with inplace=False (`{layer}`)."
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
        target = stmt.target.id
        new = f"{target} = {target} {_OPS.get(type(stmt.op), '+')} {ast.unparse(stmt.value)}"
        return where + f"`{new}` makes a new tensor and leaves the saved one as it was."
    if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Subscript) for t in stmt.targets):
        sub = next(t for t in stmt.targets if isinstance(t, ast.Subscript))
        base = ast.unparse(sub.value)
        saved_here = (d.get("saved") or {}).get("line") == at  # the write's own statement saved what it reads
        copied = _reads_cloned(stmt.value, base) if saved_here else None
        if copied is not None:  # `buf[2:] = buf[0:1] * x`: what is saved is read from the very memory written
            return where + (
                f"the statement reads `{base}` and writes into it; read a copy, `{ast.unparse(sub)} = {copied}`, "
                "so that what backward saved is not the memory being written."
            )
        return where + f"change a copy: `{base} = {base}.clone()` just before `{text}`."
    through = facts.get("through") or {}
    if through.get("name") and through.get("line"):
        made = _source(lines, through["line"])
        op = through.get("op", "")
        return (
            f"line {through['line']}: `{through['name']}` shares its memory with `{name}` ({op}): make it a copy "
            f"(`{made}` followed by `.clone()`), so that line {at} changes the copy only."
            if made
            else where + f"change a `.clone()` of `{through['name']}`, not the memory `{name}` shares with it."
        )
    call = _inplace_call(stmt)
    if call is not None:
        receiver, method, args = call
        form = _OUT_OF_PLACE.get(method, "{r}." + method.removesuffix("_") + "({args})")
        out = f"{receiver} = " + form.replace("{r}", receiver).replace("{args}", args)
        return where + f"`{out}` (out of place), or `.clone()` `{receiver}` before changing it."
    return where + f"work on a copy (`{name}.clone()`) or use the out-of-place form of `{cause['op']}`."


# in-place methods whose out-of-place form is not the name without its underscore
_OUT_OF_PLACE = {
    "zero_": "torch.zeros_like({r})",
    "fill_": "torch.full_like({r}, {args})",
    "copy_": "{args}.clone()",
    "normal_": "torch.randn_like({r})",
    "uniform_": "torch.rand_like({r})",
}

_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**", ast.MatMult: "@"}


def _reads_cloned(value: ast.expr, base: str) -> str | None:
    """The right-hand side with each read of `base` (`buf`, `buf[0:1]`) made a `.clone()`; None where it reads
    none."""

    class Clone(ast.NodeTransformer):
        found = False

        def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
            if ast.unparse(node.value) == base:
                self.found = True
                return ast.Call(ast.Attribute(node, "clone", ast.Load()), [], [])
            return self.generic_visit(node)

        def visit_Name(self, node: ast.Name) -> ast.AST:
            if node.id == base:
                self.found = True
                return ast.Call(ast.Attribute(node, "clone", ast.Load()), [], [])
            return node

    import copy

    clone = Clone()
    new = clone.visit(copy.deepcopy(value))
    return ast.unparse(new) if clone.found else None


def _inplace_call(stmt: ast.stmt | None) -> tuple[str, str, str] | None:
    """`h.relu_()` of a statement: (receiver, method, arguments as written)."""
    if stmt is None:
        return None
    for node in ast.walk(stmt):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.endswith("_"):
            if node.func.attr.startswith("_"):
                continue
            args = ", ".join([ast.unparse(a) for a in node.args] + [ast.unparse(k) for k in node.keywords])
            return ast.unparse(node.func.value), node.func.attr, args
    return None


def _twice(
    name: str, line: int, cause: dict[str, Any], d: dict[str, Any], facts: dict[str, Any], lines: list[str]
) -> str:
    shared = facts.get("shared") or {}
    header = _loop_header(lines, line)
    if facts.get("loop") and d["tensor"] and header and shared.get("line") and shared["line"] < header:
        return (
            f"`{name}` is computed once, before the loop (line {shared['line']}), and the first iteration's "
            f"backward freed its graph: compute `{name}` inside the loop, before line {line}, so that each "
            f"iteration has a graph of its own; or, if every iteration really backpropagates through that one "
            f"graph, pass retain_graph=True at line {cause['line']}."
        )
    if facts.get("loop") and d["tensor"]:
        return (
            f"`{name}` is carried from one iteration to the next with its graph: detach it where an iteration "
            f"begins (`{name} = {name}.detach()`), as truncated BPTT does. retain_graph=True would keep every "
            "earlier step's graph alive and make each backward longer."
        )
    forward = f"the forward (line {shared['line']})" if shared.get("line") else "the forward"
    if facts.get("same_output") and not facts.get("stepped"):
        again = f" (line {shared['line']})" if shared.get("line") else ""
        return (
            f"The same output is backpropagated twice: compute it again{again} before line {line}; or, if "
            f"the second call is meant to add the same gradients once more, pass retain_graph=True at line "
            f"{cause['line']}."
        )
    if facts.get("stepped"):
        return (
            f"Run the forward again before the backward at line {line} (compute the loss anew after the "
            f"optimizer step): the parameters changed in place after line {cause['line']}, so retain_graph=True "
            "would only trade this error for an in-place one."
        )
    detach = (
        f" If the first loss should not reach `{name}`'s graph at all (a GAN's discriminator step), use "
        f"`{name}.detach()` there."
        if d["tensor"]
        else ""
    )
    return (
        f"Run {forward} again before line {line}; or, if both losses really "
        f"share this graph, pass retain_graph=True to the backward at line {cause['line']}.{detach}"
    )


def _loop_header(lines: list[str], line: int) -> int | None:
    """The line of the nearest `for` or `while` above `line` that holds it (by indentation), or None."""
    if not 0 < line <= len(lines):
        return None
    indent = len(lines[line - 1]) - len(lines[line - 1].lstrip())
    for k in range(line - 1, 0, -1):
        text = lines[k - 1]
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        at = len(text) - len(text.lstrip())
        if at < indent:
            if text.lstrip().startswith(("for ", "while ", "async for ")):
                return k
            indent = at
    return None


def _grad_none(
    name: str, line: int, cause: dict[str, Any], d: dict[str, Any], facts: dict[str, Any], lines: list[str]
) -> str:
    op = cause["op"]
    if op == "non-leaf" and facts.get("made_by") in CONVERSIONS:
        return (
            f"Make the tensor in its final dtype and device and set requires_grad there, e.g. "
            f"`torch.randn(..., dtype=torch.float64, device=..., requires_grad=True)`; or convert first and "
            f"then call `.requires_grad_()` on `{name}`."
        )
    if op == "non-leaf":
        after = f" right after line {cause['line']}" if cause.get("line") else ""
        return f"Call `{name}.retain_grad()`{after}, before the backward, to keep its gradient; or read a leaf's .grad."
    if op == "requires_grad never set":
        return _requires_grad(name, cause, lines)
    if op == "unused":
        return (
            f"Use `{name}` in the forward if it should learn; if it is meant to sit out, leave it out of the "
            "optimizer (DistributedDataParallel needs find_unused_parameters=True for such parameters)."
        )
    if op == "before backward":
        return (
            f"Zero the gradient after the step instead, or set it to None (`{name}.grad = None`, or the "
            f"optimizer's `zero_grad()`, which handle a None .grad); or guard it: `if {name}.grad is not None: "
            f"{name}.grad.zero_()`."
        )
    return _uncut(op, cause, lines)


def _uncut(op: str, cause: dict[str, Any], lines: list[str]) -> str:
    at = cause.get("line")
    text = _source(lines, at)
    where = f"line {at}: " if at else ""
    python = next((word for word in (".numpy()", ".item()", ".tolist()") if word in text), None)
    if python is not None:
        op = python  # `w.detach().numpy()`: the detach is there for the numpy; the round trip is the cut
    if op == ".detach()" and text:
        return where + f"drop .detach() where the gradient should flow (`{text.replace('.detach()', '')}`)."
    if op == ".data" and text:
        plain = re.sub(r"\.data\b", "", text)
        return where + f"use the tensor itself, not .data (`{plain}`)."
    if op == "torch.no_grad()":
        return where + "compute it outside `with torch.no_grad():` (that block is for updates and evaluation)."
    if op in (".item()", ".tolist()", ".numpy()", "float()", "int()"):
        return (
            where + f"keep the computation in torch tensors: {op} and a tensor made again from the numbers "
            "(torch.tensor(...)) give a new leaf with no path back."
        )
    return where + f"`{op}` has no gradient (a cast to an integer type, a comparison): keep the path in floats."


def _requires_grad(name: str, cause: dict[str, Any], lines: list[str]) -> str:
    at = cause.get("line")
    text = _source(lines, at)
    stmt = _statement(text)
    if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call) and not stmt.value.keywords and at:
        made = ast.unparse(stmt.value)
        if made.endswith(")"):
            return f"line {at}: `{ast.unparse(stmt.targets[0])} = {made[:-1]}, requires_grad=True)`."
    where = f" (line {at})" if at else ""
    return (
        f"Create `{name}` with requires_grad=True where it is made{where}, or call `{name}.requires_grad_()` "
        "before the forward."
    )


def _nonscalar(
    name: str, line: int, cause: dict[str, Any], d: dict[str, Any], facts: dict[str, Any], lines: list[str]
) -> str:
    shape = list(facts.get("shape") or [])
    return (
        f"`{name}.sum().backward()` when the sum is meant (the same as v = torch.ones_like({name}): the column sums "
        f"of J); otherwise `{name}.backward(v)` with v of shape {shape}, v[i] = dL/d{name}[i] (vjp's own `--grad` "
        "is that v)."
    )


def _no_graph(
    name: str, line: int, cause: dict[str, Any], d: dict[str, Any], facts: dict[str, Any], lines: list[str]
) -> str:
    if cause["op"] == "requires_grad never set":
        leaves = facts.get("leaves") or [name]
        return _requires_grad(str(leaves[0]), cause, lines)
    return _uncut(cause["op"], cause, lines)


def _nonfinite(
    name: str, line: int, cause: dict[str, Any], d: dict[str, Any], facts: dict[str, Any], lines: list[str]
) -> str:
    at = cause.get("line")
    text = _source(lines, at)
    op = cause["op"]
    where = f"line {at}: " if at else ""
    if facts.get("backward_overflow"):
        return where + (
            f"the gradient overflows {facts['backward_overflow']}: scale the loss (or v) down before backward "
            "(torch.amp.GradScaler does so for float16 and unscales the grads after), or compute in float64."
        )
    if facts.get("overflow"):
        source = facts.get("from") or {}
        if source.get("line"):
            where, op = f"line {source['line']}: ", source.get("op", op)
        return where + (
            f"`{op}` overflows float32 here: use a stable form that never forms the huge value (torch.softmax, "
            "torch.logsumexp, F.log_softmax instead of exp(x) / exp(x).sum()), or compute in float64."
        )
    double = _double_where(text)
    if double is not None:
        return where + (
            f"`{double}`: torch.where differentiates both branches, and the branch not taken still gets 0·inf = nan; "
            "the inner where makes that branch's input safe (the double-where trick)."
        )
    if op in ("sqrt", "norm") and ("**" in text or "pow" in text):
        return where + (
            "a norm written by hand has no derivative at zero: use torch.linalg.vector_norm (PyTorch's norm takes "
            "the subgradient 0 there), or add a small constant under the sqrt (`torch.sqrt(s + 1e-12)`)."
        )
    if op in ("log", "sqrt", "log2", "log10", "rsqrt", "reciprocal"):
        arg = _argument_of(text, op)
        if arg is not None:
            return where + f"keep the input away from 0: `torch.{op}({arg}.clamp_min(1e-12))`."
        return where + f"clamp the input of {op} away from 0 (`.clamp_min(1e-12)`)."
    if op in ("div", "__truediv__", "true_divide"):
        return where + "keep the denominator away from 0 (`.clamp_min(1e-12)`, or add a small constant)."
    return where + "clamp the input of this operation away from the point where its derivative blows up."


def _argument_of(text: str, op: str) -> str | None:
    stmt = _statement(text)
    if stmt is None:
        return None
    for node in ast.walk(stmt):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == op and node.args:
            arg = node.args[0]
            atom = isinstance(arg, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))
            return ast.unparse(arg) if atom else f"({ast.unparse(arg)})"  # `(loss * 0).clamp_min(...)`
    return None


class _DoubleWhere(ast.NodeTransformer):
    """torch.where(c, f(e), b) -> torch.where(c, f(torch.where(c, e, 1.0)), b) for f in sqrt, log, ..."""

    def __init__(self) -> None:
        self.done = False

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if _called(node) != "where" or len(node.args) != 3:
            return node
        cond = node.args[0]
        for k, branch in ((1, False), (2, True)):
            arg = node.args[k]
            if isinstance(arg, ast.Call) and _called(arg) in _SINGULAR and arg.args:
                safe = (
                    ast.Call(ast.Attribute(ast.Name("torch"), "where"), [cond, ast.Constant(1.0), arg.args[0]], [])
                    if branch
                    else ast.Call(ast.Attribute(ast.Name("torch"), "where"), [cond, arg.args[0], ast.Constant(1.0)], [])
                )
                arg.args[0] = safe
                self.done = True
        return node


_SINGULAR = ("sqrt", "log", "log2", "log10", "rsqrt", "reciprocal", "pow")


def _called(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _double_where(text: str) -> str | None:
    stmt = _statement(text)
    if stmt is None:
        return None
    t = _DoubleWhere()
    new = t.visit(stmt)
    return ast.unparse(new) if t.done else None


_FIXES = {
    "inplace_modified": _inplace,
    "backward_twice": _twice,
    "grad_none": _grad_none,
    "nonscalar_output": _nonscalar,
    "no_grad_fn": _no_graph,
    "nonfinite_grad": _nonfinite,
}
