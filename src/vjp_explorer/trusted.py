"""Check your own backward: the trusted door (`vjp check module.py:NAME`, `vjp_explorer.check(fn, *inputs)`).

This is the one place that runs a user's own Python: it imports the file the user names, on the user's own
say-so, and calls the function or autograd.Function found there. Programs, expression files and snippets
never reach it. The reference is the function's own forward, differentiated by the one finite-difference
driver in float64 (engine/finite_diff.py, through trusted_checks.py); the custom backward is probed with
one-hot, random, scaled and zero v, so a mistake is named by kind (a factor, a flipped sign, a transposed
Jacobian, an offset, a v it is not linear in, a missing or ignored input, a float32 precision problem) and
by element.
"""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .check_result import CheckResult
from .errors import UsageError
from .events import Event, LeafGrad, TensorInfo
from .trusted_checks import backward_of, compare
from .trusted_judge import record_of
from .verdicts import Check


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
    return list(_positional(obj))


def defaulted(obj: Any) -> set[str]:
    """The positional parameters that have a default (they may be left out, from the last one back)."""
    return {name for name, p in _positional(obj).items() if p.default is not p.empty}


def _positional(obj: Any) -> dict[str, Any]:
    import inspect

    import torch

    fn = obj.forward if isinstance(obj, type) and issubclass(obj, torch.autograd.Function) else obj
    params = {
        p.name: p
        for p in inspect.signature(fn).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    }
    # forward(ctx, ...), unless the Function defines setup_context (torch.func's form): then forward(...)
    with_ctx = fn is not obj and obj.setup_context is torch.autograd.Function.setup_context
    return dict(list(params.items())[1:]) if with_ctx else params


def check(
    obj: Any,
    *inputs: Any,
    gradient: Any = None,
    v: Any = None,
    label: str | None = None,
    constants: tuple[int, ...] = (),
) -> CheckResult:
    """Check the backward of `obj` (a function or a torch.autograd.Function) at `inputs`, with v (default 1).

    `gradient` is v, the argument of `y.backward(gradient)`, as `explore` takes it; `v=` is the same keyword;
    "ones" is v = 1 of the output's shape. The inputs at the positions in `constants` are held fixed (no
    gradient is asked of them), as are inputs that are not tensors (a Python number: an exponent `n`)."""
    import torch

    if gradient is not None:
        if v is not None:
            raise UsageError("v is given twice, as gradient= and as v=; give it once (gradient=).")
        v = gradient

    raw = obj.apply if isinstance(obj, type) and issubclass(obj, torch.autograd.Function) else obj
    fn: Any = same_draws(raw)
    name = str(label or getattr(obj, "__name__", "function"))
    names = _names(obj, len(inputs))
    xs = [
        x.detach().clone().requires_grad_(x.is_floating_point() and k not in constants)
        if isinstance(x, torch.Tensor)
        else x
        for k, x in enumerate(inputs)
    ]
    leaves = [x for x in xs if isinstance(x, torch.Tensor) and x.requires_grad]
    leaf_names = [n for n, x in zip(names, xs, strict=True) if isinstance(x, torch.Tensor) and x.requires_grad]
    if not leaves:
        raise UsageError(
            f"{name} takes no floating-point tensor input: there is nothing to differentiate.",
            hint="vjp check needs a function or autograd.Function of at least one tensor, e.g. --x 1,2,3.",
        )
    y = fn(*xs)
    notes = []
    if isinstance(y, (tuple, list)) and y and all(isinstance(o, torch.Tensor) for o in y):
        shapes = ", ".join(str(list(o.shape)) for o in y)
        notes.append(
            f"{name} returns {len(y)} tensors ({shapes}); they are checked as one output, flattened and "
            "concatenated in order, so v (and J's rows) run over all of them."
        )

        def joined(*args: Any) -> Any:
            return torch.cat([o.reshape(-1) for o in raw(*args)])

        fn = same_draws(joined)  # the generators are as the first run found them: the same draws
        y = fn(*xs)
    if not isinstance(y, torch.Tensor):
        raise UsageError(f"{name} returned {type(y).__name__}, not a tensor or tensors; vjp check takes tensors.")
    ones = isinstance(v, str) and v == "ones"  # `--grad ones`: given, of the output's shape
    vv = _v_for(y, v, ones, name)
    event = Event(
        1,
        0,
        f"{name}({', '.join(names)})",
        "check",
        [_info("y", y)],
        [_info("v", vv)],
        "ones" if ones else "given" if v is not None else "ones (default)",
        False,
        False,
        [],
    )
    result = CheckResult(name, 0, True, False, torch.__version__, [], [event], None, [], "", kind="check")
    try:
        grads = backward_of(fn, xs, leaves, vv)
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
    record = record_of(fn, xs, leaves, vv, grads, leaf_names)
    compare(event, fn, xs, leaves, vv, grads, lambda: promoted(obj), record)
    return result


class same_draws:  # noqa: N801 - used as the function it wraps
    """`fn`, each call of it starting from the random generators' state of now (torch's, Python's, numpy's),
    the caller's generators left as they were: a forward that draws (dropout, randn_like) draws the same
    numbers every time the check runs it, so backward(v), its probes and the replay are all of one function,
    the call with that draw. `draws`: whether a run of it drew at all."""

    def __init__(self, fn: Any) -> None:
        import torch

        self.fn, self.draws = fn, False
        self.cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
        self.state = _states()
        self.cuda_state = torch.cuda.get_rng_state_all() if self.cuda else None

    def __call__(self, *args: Any) -> Any:
        import torch

        caller = _states()  # torch's own are put back by fork_rng
        with torch.random.fork_rng(devices=range(torch.cuda.device_count()) if self.cuda else []):
            _put(self.state)
            if self.cuda_state is not None:
                torch.cuda.set_rng_state_all(self.cuda_state)
            try:
                return self.fn(*args)
            finally:
                self.draws = self.draws or not _same(self.state, _states())
                _put(caller)


def _states() -> tuple[Any, Any, Any]:
    """torch's CPU generator, Python's and numpy's (None where numpy was never imported)."""
    import random

    import torch

    np = sys.modules.get("numpy")
    return torch.random.get_rng_state(), random.getstate(), np.random.get_state() if np is not None else None


def _put(state: tuple[Any, Any, Any]) -> None:
    import random

    import torch

    torch.random.set_rng_state(state[0])
    random.setstate(state[1])
    np = sys.modules.get("numpy")
    if np is not None and state[2] is not None:
        np.random.set_state(state[2])


def _same(a: tuple[Any, Any, Any], b: tuple[Any, Any, Any]) -> bool:
    import torch

    numpy_same = a[2] is None or b[2] is None or (a[2][2] == b[2][2] and bool((a[2][1] == b[2][1]).all()))
    return bool(torch.equal(a[0], b[0])) and a[1] == b[1] and numpy_same


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


def _v_for(y: Any, v: Any, ones: bool, name: str) -> Any:
    """v for the output y: ones where not given (or "ones"), else the given values in y's shape."""
    import torch

    if v is None or ones:
        return torch.ones_like(y)
    given = torch.as_tensor(v)
    if given.shape != y.shape:  # as torch's backward(gradient) refuses it: one weight per output element
        raise UsageError(
            f"v (--grad, gradient=) has shape {list(given.shape)} ({given.numel()} elements), but {name}'s output "
            f"has shape {list(y.shape)} ({y.numel()} elements): v holds one weight per output element, in the "
            "output's shape.",
            hint="Give v of the output's shape (nested brackets for a matrix: --grad '[[1,2],[3,4]]'), or --grad ones.",
        )
    return given.to(y.dtype)


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


def _info(name: str, t: Any) -> TensorInfo:
    return TensorInfo(name, list(t.shape), str(t.dtype).removeprefix("torch."), _list(t))


def _list(t: Any) -> Any:
    import torch

    return None if t is None else t.detach().to(torch.float64).tolist()


def run_cell(code: str, namespace: dict[str, Any], filename: str) -> None:
    """A notebook cell (`%%vjp`), run as IPython runs it: in the user's own namespace, in this process.

    The trusted door's second use: the text is the user's own code in the user's own kernel, as a module
    given to `vjp check` is. `filename` names the cell's frames, so that an observed call finds its line.
    """
    import ast
    import linecache

    tree = ast.parse(code, filename)  # a SyntaxError is Python's, pointed at the cell's line
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)  # for its tracebacks
    exec(compile(tree, filename, "exec"), namespace)  # the user's own code, in the user's own kernel
