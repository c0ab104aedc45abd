"""Check your own backward: the trusted door (`vjp check module.py:NAME`, `vjp_explorer.check(fn, *inputs)`).

This is the one place that runs a user's own Python: it imports the file the user names, on the user's own
say-so, and calls the function or autograd.Function found there. Programs, expression files and snippets
never reach it. The reference is the function's own forward, differentiated by central differences in
float64; the custom backward is probed with one-hot, random, scaled and zero v, so a mistake is named by
kind (a factor, a flipped sign, a transposed Jacobian, an offset, a v it is not linear in, a missing or
ignored input, a float32 precision problem) and by element.
"""

from __future__ import annotations

import importlib.util
import math
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from .errors import UsageError
from .snippet.result import Check, Event, LeafGrad, SnippetResult, TensorInfo

FULL = 1_000_000  # output × input entries up to which the whole Jacobian is built both ways
MAX_ELEMENTS = 2_000  # input (and output) elements up to which every element is checked
DIRECTIONS = 3


def load_target(target: str) -> tuple[Any, str]:
    """`path/to/module.py:NAME` -> (the object, a label). Imports (runs) the module: the trusted door."""
    path_text, colon, name = target.rpartition(":")
    if not colon or not path_text.endswith(".py") or not name.isidentifier():
        raise UsageError(f"{target!r} is not MODULE.py:NAME.", hint="For example: vjp check my_ops.py:Square --x 1,2")
    path = Path(path_text)
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise UsageError(f"{path_text}: not a regular file.")
    except OSError as e:
        raise UsageError(f"{path_text}: cannot be read ({e.strerror}).") from None
    spec = importlib.util.spec_from_file_location(f"vjp_check_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise UsageError(f"{path_text}: cannot be imported as a module.")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 - the user's module raised while importing: say so, exit 2
        raise UsageError(f"importing {path_text} raised {type(e).__name__}: {e}") from None
    if not hasattr(module, name):
        names = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise UsageError(f"{path_text} has no {name!r}.", hint=f"It defines: {', '.join(names) or 'nothing callable'}.")
    return getattr(module, name), f"{path_text}:{name}"


def parameters(obj: Any) -> list[str]:
    """The input names a function or autograd.Function takes (without ctx)."""
    import inspect

    import torch

    fn = obj.forward if isinstance(obj, type) and issubclass(obj, torch.autograd.Function) else obj
    names = [
        p.name
        for p in inspect.signature(fn).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    return names[1:] if fn is not obj else names


def check(obj: Any, *inputs: Any, v: Any = None, label: str | None = None) -> SnippetResult:
    """Check the backward of `obj` (a function or a torch.autograd.Function) at `inputs`, with `v` (default 1)."""
    import torch

    fn = obj.apply if isinstance(obj, type) and issubclass(obj, torch.autograd.Function) else obj
    name = str(label or getattr(obj, "__name__", "function"))
    names = _names(obj, len(inputs))
    xs = [
        x.detach().clone().requires_grad_(x.is_floating_point()) if isinstance(x, torch.Tensor) else x for x in inputs
    ]
    leaves = [x for x in xs if isinstance(x, torch.Tensor) and x.requires_grad]
    leaf_names = [n for n, x in zip(names, xs, strict=True) if isinstance(x, torch.Tensor) and x.requires_grad]
    y = fn(*xs)
    notes = []
    if isinstance(y, (tuple, list)) and y and all(isinstance(o, torch.Tensor) for o in y):
        shapes = ", ".join(str(list(o.shape)) for o in y)
        notes.append(
            f"{name} returns {len(y)} tensors ({shapes}); they are checked as one output, flattened and "
            "concatenated in order, so v (and J's rows) run over all of them."
        )
        several = fn

        def fn(*args: Any) -> Any:
            return torch.cat([o.reshape(-1) for o in several(*args)])

        y = fn(*xs)
    if not isinstance(y, torch.Tensor):
        raise UsageError(f"{name} returned {type(y).__name__}, not a tensor or tensors; vjp check takes tensors.")
    vv = torch.ones_like(y) if v is None else torch.as_tensor(v, dtype=y.dtype).reshape(y.shape)
    event = Event(
        1,
        0,
        f"{name}({', '.join(names)})",
        "check",
        [_info("y", y)],
        [_info("v", vv)],
        "given" if v is not None else "ones (default)",
        False,
        False,
        [],
    )
    result = SnippetResult(name, 0, True, False, torch.__version__, [], [event], None, [], "", kind="check")
    try:
        grads = _backward(fn, xs, leaves, vv)
    except RuntimeError as e:
        event.diagnosis = _refused(str(e))
        if event.diagnosis is None:
            raise
        event.checks.append(
            Check(
                "backward",
                "disagree",
                "what the custom backward returns, as torch checks it",
                reason=str(e).splitlines()[0],
            )
        )
        return result
    for n, x, g in zip(leaf_names, leaves, grads, strict=True):
        event.inputs.append(
            LeafGrad(n, list(x.shape), str(x.dtype).removeprefix("torch."), _list(x), None, None, _list(g))
        )
    with promoted(obj) as wide:
        if wide:
            notes.append(
                f"the float64 reference runs the whole forward in float64: {', '.join(wide)} (what {name} reads "
                "besides its inputs) promoted to float64 for those runs and restored afterwards."
            )
    event.notes.extend(notes)
    _compare(event, fn, xs, leaves, vv, grads, lambda: promoted(obj))
    return result


@contextmanager
def promoted(obj: Any) -> Iterator[list[str]]:
    """Run the float64 reference on the whole forward in float64: every float tensor the function (or the
    autograd.Function's forward and backward) reads as a module global or a closure, and every nn.Module
    among them, is promoted to float64 for the reference run and restored afterwards. Yields the names."""
    import torch

    fns = [obj.forward, obj.backward] if isinstance(obj, type) and issubclass(obj, torch.autograd.Function) else [obj]
    fns = [getattr(f, "__func__", f) for f in fns]
    undo: list[Any] = []
    names: list[str] = []

    def promote(value: Any, put: Any, name: str) -> None:
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype != torch.float64:
            put(value.detach().double().requires_grad_(value.requires_grad))
            undo.append(lambda: put(value))
            names.append(name)
        elif isinstance(value, torch.nn.Module):
            dtypes = {p.dtype for p in [*value.parameters(), *value.buffers()] if p.is_floating_point()}
            if dtypes and dtypes != {torch.float64}:
                value.double()
                (old,) = dtypes if len(dtypes) == 1 else (torch.float32,)
                undo.append(lambda: value.to(old))
                names.append(name)

    for f in fns:
        code, glob = getattr(f, "__code__", None), getattr(f, "__globals__", None)
        if code is not None and glob is not None:
            for n in code.co_names:
                if n in glob:
                    promote(glob[n], lambda t, n=n, g=glob: g.__setitem__(n, t), n)
        for n, cell in zip(getattr(code, "co_freevars", ()), getattr(f, "__closure__", None) or (), strict=False):
            promote(cell.cell_contents, lambda t, c=cell: setattr(c, "cell_contents", t), n)
    try:
        yield names
    finally:
        for step in reversed(undo):
            step()


def _refused(message: str) -> str | None:
    """A backward torch refused to use: the kind of mistake, in words, or None for another error."""
    import re

    if m := re.search(
        r"invalid gradient at index (\d+) - got \[([^\]]*)\] but expected shape compatible "
        r"with \[([^\]]*)\]",
        message,
    ):
        return (
            f"wrong shape: the gradient for input {m.group(1)} has shape [{m.group(2)}], the input has "
            f"[{m.group(3)}]; backward must return one gradient of each input's shape"
        )
    if m := re.search(r"different than None at position (\d+), but the corresponding forward input was not", message):
        return (
            f"backward returns a gradient for input {int(m.group(1)) - 1}, which is not a tensor: return None "
            "there (ctx.needs_input_grad says which inputs need a gradient)"
        )
    if m := re.search(r"incorrect number of gradients \(expected (\d+), got (\d+)\)", message):
        return (
            f"backward returns {m.group(2)} gradients; it must return one per input of forward "
            f"({m.group(1)}), None for those that need none"
        )
    return None


def _names(obj: Any, n: int) -> list[str]:
    try:
        names = parameters(obj)
    except (TypeError, ValueError):
        names = []
    return (names + [f"input{k}" for k in range(len(names), n)])[:n]


def _backward(fn: Any, xs: list[Any], leaves: list[Any], v: Any) -> list[Any]:
    """The custom backward's grads for v (None where it gave none), through real autograd."""
    import torch

    y = fn(*xs)
    got = torch.autograd.grad(y, leaves, v, allow_unused=True)
    return [g if g is None else g.detach() for g in got]


def _info(name: str, t: Any) -> TensorInfo:
    return TensorInfo(name, list(t.shape), str(t.dtype).removeprefix("torch."), _list(t))


def _list(t: Any) -> Any:
    import torch

    return None if t is None else t.detach().to(torch.float64).tolist()


def _reference_jacobians(fn: Any, xs: list[Any], leaves: list[Any]) -> list[Any]:
    """For each leaf, J (m × n, float64) from central differences of the forward, one column at a time."""
    import torch

    xs64 = [x.detach().to(torch.float64) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in xs]
    index = [k for k, x in enumerate(xs) if any(x is leaf for leaf in leaves)]

    def y(k: int, shift: Any) -> Any:
        args = list(xs64)
        args[k] = xs64[k] + shift
        with torch.no_grad():
            return fn(*args).detach().to(torch.float64).reshape(-1)

    out = []
    for k in index:
        flat = xs64[k].reshape(-1)
        cols = []
        for j in range(flat.numel()):
            h = 1e-6 * max(abs(float(flat[j])), 1e-2)
            e = torch.zeros_like(flat)
            e[j] = h
            cols.append((y(k, e.reshape(xs64[k].shape)) - y(k, -e.reshape(xs64[k].shape))) / (2 * h))
        out.append(torch.stack(cols, dim=1))
    return out


def _reference(fn: Any, xs: list[Any], leaves: list[Any], v: Any) -> list[Any]:
    """Jᵀv for each leaf from central differences of the forward in float64 (no autograd)."""
    import torch

    v64 = v.detach().reshape(-1).to(torch.float64)
    return [(J.T @ v64).reshape(x.shape) for J, x in zip(_reference_jacobians(fn, xs, leaves), leaves, strict=True)]


def _compare(
    event: Event, fn: Any, xs: list[Any], leaves: list[Any], v: Any, grads: list[Any], wide: Any = None
) -> None:
    """The finite-difference check for v, then the diagnosis from probing the backward with other v. `wide`
    makes the context (promoted) in which the reference runs its whole forward in float64."""
    import torch

    wide = wide or nullcontext
    fn64 = _within(fn, wide)

    m = v.numel()
    n = sum(x.numel() for x in leaves)
    compares = "the custom backward's grads vs Jᵀv from central differences of the forward (float64)"
    if m * n > FULL or n > MAX_ELEMENTS or m > MAX_ELEMENTS:
        event.notes.append(
            f"{n:,} input and {m:,} output elements: checked along {DIRECTIONS} random directions, "
            "not element by element (the full Jacobian would take too long)."
        )
        _directions(event, fn64, xs, leaves, v, grads, compares)
        return
    refs = _reference(fn64, xs, leaves, v)
    bad: list[str] = []
    worst = 0.0
    dtype = str(leaves[0].dtype).removeprefix("torch.") if leaves else "float32"
    atol, rtol = (1e-14, 1e-7) if dtype == "float64" else (1e-6, 1e-4)
    for k, (x, g, ref) in enumerate(zip(leaves, grads, refs, strict=True)):
        event.inputs[k].finite_difference = ref.tolist()
        if g is None:
            if bool(ref.abs().max() > 0):
                bad.append(f"{event.inputs[k].name}: backward returned None, but its gradient is not zero")
            continue
        if g.shape != x.shape:
            bad.append(f"{event.inputs[k].name}: shape {list(g.shape)} instead of {list(x.shape)}")
            continue
        diff = (g.to(torch.float64) - ref).abs()
        worst = max(worst, float(diff.max()) if diff.numel() else 0.0)
        over = diff > atol + rtol * ref.abs() + 1e-6 * float(ref.abs().max() if ref.numel() else 0)
        for j in torch.nonzero(over.reshape(-1)).reshape(-1).tolist()[:10]:
            bad.append(
                f"{event.inputs[k].name}{_index(x.shape, j)} ({float(g.reshape(-1)[j]):.6g} vs "
                f"{float(ref.reshape(-1)[j]):.6g})"
            )
    tol = f"|Δ| <= {atol:g} + {rtol:g}·|ref| ({dtype})"
    event.checks.append(
        Check(
            "finite_difference",
            "disagree" if bad else "agree",
            compares,
            max_abs_diff=worst,
            tolerance=tol,
            reason=("differs at " + ", ".join(bad)) if bad else None,
        )
    )
    event.diagnosis = diagnose(fn, xs, leaves, v, event, wide)


def _directions(
    event: Event, fn: Any, xs: list[Any], leaves: list[Any], v: Any, grads: list[Any], compares: str
) -> None:
    import torch

    gen = torch.Generator().manual_seed(7)
    xs64 = [x.detach().to(torch.float64) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in xs]
    index = [k for k, x in enumerate(xs) if any(x is leaf for leaf in leaves)]
    v64 = v.detach().to(torch.float64)
    bad = []
    worst = 0.0
    for d in range(DIRECTIONS):
        us = [torch.randn(xs64[k].shape, generator=gen, dtype=torch.float64) for k in index]

        def g(sign: float, us: list[Any] = us, h: float = 1e-6) -> float:
            args = list(xs64)
            for k, u in zip(index, us, strict=True):
                args[k] = xs64[k] + sign * h * u
            with torch.no_grad():
                return float((fn(*args).to(torch.float64) * v64).sum())

        ref = (g(1) - g(-1)) / (2 * 1e-6)
        dot = sum(float((gr.to(torch.float64) * u).sum()) for gr, u in zip(grads, us, strict=True) if gr is not None)
        worst = max(worst, abs(dot - ref))
        if abs(dot - ref) > 1e-4 * (abs(ref) + 1e-6) * 10:
            bad.append(f"direction {d + 1}: ⟨u, grad⟩ = {dot:.6g}, finite differences {ref:.6g}")
    event.checks.append(
        Check(
            "finite_difference",
            "disagree" if bad else "agree",
            compares.replace("Jᵀv", f"⟨u, Jᵀv⟩ along {DIRECTIONS} random directions u,"),
            max_abs_diff=worst,
            tolerance="|Δ| <= 1e-3·|ref|",
            reason="; ".join(bad) or None,
        )
    )


def _index(shape: Any, flat: int) -> str:
    from .snippet.result import element_index

    return element_index(shape, flat)


def _within(fn: Any, wide: Any) -> Any:
    """fn, each call run inside the context `wide()` (the whole forward in float64)."""

    def fn64(*args: Any) -> Any:
        with wide():
            return fn(*args)

    return fn64


def diagnose(fn: Any, xs: list[Any], leaves: list[Any], v: Any, event: Event, wide: Any = None) -> str | None:
    """Name the kind of mistake, probing the backward with one-hot rows, 0·v, 2·v and float64."""
    import torch

    y = fn(*xs)
    m = y.numel()
    findings: list[str] = []
    zero = _backward(fn, xs, leaves, torch.zeros_like(v))
    offsets = [g for g in zero if g is not None and bool(g.abs().max() > 0)]
    if offsets:
        findings.append(
            f"backward(0) is not 0 (it adds {float(offsets[0].reshape(-1)[0]):.6g} whatever grad_output "
            "is): the gradient has a constant offset; smallest v that shows it: v = 0"
        )
    once, twice = _backward(fn, xs, leaves, v), _backward(fn, xs, leaves, 2 * v)
    for k, (a, b) in enumerate(zip(once, twice, strict=True)):
        if a is not None and b is not None and not offsets and not torch.allclose(b, 2 * a, rtol=1e-4, atol=1e-6):
            findings.append(
                f"{event.inputs[k].name}: backward is not linear in v (backward(2v) ≠ 2·backward(v)): "
                "it uses grad_output non-linearly, e.g. squares it; one-hot v, as gradcheck uses, "
                "cannot show this; smallest v that shows it: 2·v"
            )
            break
    if findings:
        event.checks.append(
            Check(
                "linearity",
                "disagree",
                "backward(0) vs 0 and backward(2v) vs 2·backward(v): a backward must be linear in v",
                reason="; ".join(findings),
            )
        )
    else:
        event.checks.append(
            Check(
                "linearity",
                "agree",
                "backward(0) vs 0 and backward(2v) vs 2·backward(v): a backward must be linear in v",
            )
        )
    entries = m * sum(x.numel() for x in leaves)
    wide = wide or nullcontext
    custom_rows, ref_rows = _jacobians(fn, xs, leaves, y, _within(fn, wide)) if entries <= FULL else ([], [])
    if custom_rows:  # every one-hot v at once: with linearity, right rows mean a right backward for every v
        wrong = [
            event.inputs[k].name
            for k, (a, b) in enumerate(zip(custom_rows, ref_rows, strict=True))
            if not bool(torch.isclose(a, b, rtol=1e-4, atol=1e-6 * (1 + float(b.abs().max()))).all())
        ]
        event.checks.append(
            Check(
                "jacobian",
                "disagree" if wrong else "agree",
                "J from the custom backward (one-hot v, row by row) vs J from finite differences of the forward",
                reason=f"wrong entries in the Jacobian of {', '.join(wrong)}" if wrong else None,
            )
        )
    if event.status != "disagree":
        return None
    if leaves and leaves[0].dtype == torch.float32 and not findings:
        xs64 = [x.detach().double().requires_grad_(x.requires_grad) if isinstance(x, torch.Tensor) else x for x in xs]
        leaves64 = [x for x in xs64 if isinstance(x, torch.Tensor) and x.requires_grad]
        with wide():  # forward and the custom backward both in float64, module globals included
            g64 = _backward(fn, xs64, leaves64, v.double())
            refs64 = _reference(fn, xs64, leaves64, v.double())
            pairs = list(zip(g64, refs64, strict=True))
            if custom_rows:  # J as well: a mistake that v happens to hide must not pass for rounding
                pairs += list(zip(*_jacobians(fn, xs64, leaves64, fn(*xs64)), strict=True))
        if all(a is not None and torch.allclose(a.double(), r, rtol=1e-7, atol=1e-10) for a, r in pairs):
            return "in float64 the backward agrees: this is float32 precision (rounding), not a bug in the formula"
    refs = [torch.tensor(x.finite_difference, dtype=torch.float64) for x in event.inputs]
    for k, x in enumerate(leaves):
        g = once[k]
        name = event.inputs[k].name
        if g is None:
            findings.append(f"{name}: backward returned None, but {name} requires grad and the output depends on it")
            continue
        ref = refs[k]
        if bool(g.abs().max() == 0) and bool(ref.abs().max() > 0):
            findings.append(f"{name}: the gradient is all zeros: the backward ignores this input")
            continue
        if custom_rows:
            findings.extend(_jacobian_pattern(name, custom_rows[k], ref_rows[k], x.shape))
    return "; ".join(findings) or None


def _jacobians(fn: Any, xs: list[Any], leaves: list[Any], y: Any, ref_fn: Any = None) -> tuple[list[Any], list[Any]]:
    """J from the custom backward (one-hot v, one call per row) and from finite differences, per input."""
    import torch

    custom: list[list[Any]] = [[] for _ in leaves]
    for i in range(y.numel()):
        e = torch.zeros_like(y)
        e.view(-1)[i] = 1
        for k, g in enumerate(_backward(fn, xs, leaves, e)):
            custom[k].append(
                torch.zeros(leaves[k].numel(), dtype=torch.float64) if g is None else g.reshape(-1).to(torch.float64)
            )
    return [torch.stack(c) for c in custom], _reference_jacobians(ref_fn or fn, xs, leaves)


def _jacobian_pattern(name: str, got: Any, ref: Any, shape: Any) -> list[str]:
    """What the custom Jacobian of one input does wrong: transposed, a factor, a sign, one row or column."""
    import torch

    close = torch.isclose(got, ref, rtol=1e-4, atol=1e-6 * (1 + float(ref.abs().max())))
    if bool(close.all()):
        return []
    out = []
    if got.shape[0] == got.shape[1] and bool(torch.allclose(got, ref.T, rtol=1e-4, atol=1e-6)):
        return [
            f"{name}: the Jacobian is transposed (the backward computes J·v instead of Jᵀ·v, e.g. W @ g "
            "where Wᵀ @ g is needed)"
        ]
    nz = ref.abs() > 1e-12
    if bool(nz.any()) and bool((got[~nz].abs() < 1e-12).all()):
        ratio = got[nz] / ref[nz]
        r = float(ratio.median())
        if bool(((ratio - r).abs() <= 1e-3 * max(1.0, abs(r))).all()) and not math.isclose(r, 1.0):
            return [
                f"{name}: every entry is off by the factor {r:.6g}"
                + (" (the sign is flipped)" if math.isclose(r, -1.0) else "")
            ]
    rows = torch.nonzero(~close.all(dim=1)).reshape(-1).tolist()
    cols = torch.nonzero(~close.all(dim=0)).reshape(-1).tolist()
    if len(rows) == 1 and got.shape[0] > 1:
        out.append(
            f"{name}: only row {rows[0]} of J is wrong (output element {rows[0]}): smallest v that shows it: "
            f"one-hot at {rows[0]}"
        )
    elif len(cols) == 1 and got.shape[1] > 1:
        out.append(f"{name}: only the gradient of {name}{_index(shape, cols[0])} is wrong (column {cols[0]} of J)")
    else:
        out.append(
            f"{name}: {int((~close).sum())} of {close.numel()} Jacobian entries are wrong "
            f"(rows {rows[:6]}, columns {cols[:6]})"
        )
    return out
