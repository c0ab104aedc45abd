"""Sizes checked before a call runs: tensors made from shapes, amplifying ops, Python sequences and ints.

Each guard looks only at shapes, lengths and counts, so a refused call allocates nothing.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ..errors import LimitError

MAX_SEQUENCE = 10_000_000  # items in one Python list, tuple, range consumed at once, or characters in a string
MAX_INT_BITS = 100_000  # bits of one Python integer
MAX_WIDTH = 10_000  # width or precision in a format spec
MAX_FLOPS = 20_000_000_000  # multiply-adds of one matrix product


def limit_error(what: str, needed: float, limit: float, name: str | None = None) -> LimitError:
    raise_with = f" Raise it with --limit {name}=N." if name else ""
    return LimitError(f"{what}: {needed:,.0f} needed, the limit is {limit:,.0f}.{raise_with}")


def _shape_of(args: tuple[Any, ...]) -> list[int] | None:
    """A size given as ints or as one sequence of ints (`zeros(2, 3)`, `zeros((2, 3))`, `zeros([2, 3])`)."""
    import torch

    if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)):
        args = tuple(args[0])
    if args and all(isinstance(a, int) and not isinstance(a, bool) for a in args):
        return [int(a) for a in args]
    return None


def broadcast(*shapes: Any) -> list[int] | None:
    """The broadcast of some shapes, or None where they do not broadcast (the real call then raises).

    Written out because torch.broadcast_shapes imports torch.fx and sympy on first use (0.8 s).
    """
    out: list[int] = []
    for shape in shapes:
        dims = [int(d) for d in shape]
        if len(dims) > len(out):
            out = [1] * (len(dims) - len(out)) + out
        for i, d in enumerate(dims):
            j = len(out) - len(dims) + i
            if out[j] == 1:
                out[j] = d
            elif d != 1 and d != out[j]:
                return None
    return out


def numel(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= max(int(d), 0)
    return n


def _shape_only(value: Any) -> Any:
    """A numpy array as a tensor of its shape on the meta device (no data): the checks below read shapes."""
    if type(value).__name__ == "ndarray" and type(value).__module__ == "numpy":
        import torch

        return torch.empty(value.shape, device="meta")
    return value


def check_call(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], elements: int) -> None:
    """Refuse a call whose result would exceed `elements` elements or the arithmetic budget, before it runs."""
    import torch

    args = tuple(_shape_only(a) for a in args)
    kwargs = {k: _shape_only(v) for k, v in kwargs.items()}

    base = name.rsplit(".", 1)[-1]
    need = 0
    if base in (
        "zeros",
        "ones",
        "empty",
        "rand",
        "randn",
        "new_zeros",
        "new_ones",
        "new_empty",
        "Tensor",
        "FloatTensor",
        "DoubleTensor",
        "LongTensor",
        "IntTensor",
        "BoolTensor",
        "HalfTensor",
        "ByteTensor",
    ):
        shape = _shape_of(args) if "size" not in kwargs else _shape_of((kwargs["size"],))
        if shape is not None:
            need = numel(shape)
    elif base in ("full", "new_full") and args:
        shape = _shape_of((args[0],))
        need = numel(shape) if shape is not None else 0
    elif base in ("normal", "uniform") and "size" in kwargs or base in ("normal", "uniform") and len(args) > 2:
        shape = _shape_of((kwargs.get("size", args[2] if len(args) > 2 else None),))
        need = numel(shape) if shape is not None else 0
    elif base in ("randint",) and args:
        shape = _shape_of((kwargs.get("size", args[-1]),))
        need = numel(shape) if shape is not None else 0
    elif base in ("eye",):
        dims = [a for a in args if isinstance(a, int)]
        need = dims[0] * (dims[1] if len(dims) > 1 else dims[0]) if dims else 0
    elif base in ("arange",):
        nums = [a for a in args if isinstance(a, (int, float)) and not isinstance(a, bool)]
        if nums:
            start, end, step = (
                (0, nums[0], 1) if len(nums) == 1 else (nums[0], nums[1], nums[2] if len(nums) > 2 else 1)
            )
            if step and all(math.isfinite(float(x)) for x in (start, end, step)):
                need = max(0, math.ceil((end - start) / step))
    elif base in ("linspace", "logspace"):
        steps = kwargs.get("steps", args[2] if len(args) > 2 else None)
        if isinstance(steps, int):
            need = steps
    elif base in ("randperm",) and args and isinstance(args[0], int):
        need = args[0]
    elif base in ("repeat", "tile"):
        reps = _shape_of(args[1:]) if args and isinstance(args[0], torch.Tensor) else _shape_of(args)
        src = next((a for a in args if isinstance(a, torch.Tensor)), None)
        if reps is not None and src is not None:
            need = src.numel() * numel(reps)
    elif name.startswith("nn.") and base in _PARAMETER_SHAPES:
        need = _parameter_elements(base, args, kwargs)
    elif base in ("expand", "broadcast_to"):
        need = 0  # a view: nothing is allocated until it is used, and then the next op is checked
    elif base in ("matmul", "mm", "bmm", "mv", "dot", "einsum", "tensordot", "kron", "outer", "cdist", "inner"):
        need = _check_product(base, args)
    tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
    if len(tensors) >= 2 and base not in ("cat", "concat", "concatenate", "stack", "where", "index_select", "gather"):
        shape = broadcast(*(t.shape for t in tensors))
        if shape is not None:  # shapes that do not broadcast: the call itself raises torch's own message
            need = max(need, numel(shape))
    if need > elements:
        what = "an array" if name.startswith(("np.", "ndarray.")) else "a tensor"
        raise limit_error(f"{name} would make {what} of {need:,} elements", need, elements, "elements")


# nn modules whose parameters are sized by their arguments: the argument names, in torch's order
_PARAMETER_SHAPES = {
    "Linear": ("in_features", "out_features"),
    "Bilinear": ("in1_features", "in2_features", "out_features"),
    "Embedding": ("num_embeddings", "embedding_dim"),
    "Conv1d": ("in_channels", "out_channels", "kernel_size"),
    "Conv2d": ("in_channels", "out_channels", "kernel_size"),
}


def _parameter_elements(base: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """The weight's elements of nn.Linear(4, 3) and the like, from the sizes given, before it is allocated."""
    sizes = dict(zip(_PARAMETER_SHAPES[base], args, strict=False))
    sizes.update({k: v for k, v in kwargs.items() if k in _PARAMETER_SHAPES[base]})
    n = 1
    for key in _PARAMETER_SHAPES[base]:
        value = sizes.get(key, 1)
        dims = value if isinstance(value, tuple) else (value,)
        if base == "Conv2d" and key == "kernel_size" and not isinstance(value, tuple):
            dims = (value, value)
        for d in dims:
            if isinstance(d, int) and not isinstance(d, bool):
                n *= max(d, 0)
    return n


def _check_product(base: str, args: tuple[Any, ...]) -> int:
    """Refuse a product past the arithmetic budget; the elements of its result (0: not known here)."""
    import torch

    ts = [a for a in args if isinstance(a, torch.Tensor)]
    if len(ts) < 2:
        return 0
    a, b = ts[0], ts[1]
    if base in ("kron", "outer", "cdist"):
        flops = out = a.numel() * b.numel()
    elif a.dim() == 0 or b.dim() == 0:
        flops = out = a.numel() * b.numel()
    else:
        k = a.shape[-1]
        n = b.shape[-1] if b.dim() > 1 else 1
        batch_shape = broadcast(a.shape[:-2], b.shape[:-2]) if a.dim() > 2 or b.dim() > 2 else []
        if batch_shape is None:
            return 0
        batch = numel(batch_shape)
        m = a.shape[-2] if a.dim() > 1 else 1
        flops = batch * m * n * k
        # an equation or axes decide einsum's and tensordot's result: the work is bounded, not the size
        out = 0 if base in ("einsum", "tensordot") else batch * m * n
    if flops > MAX_FLOPS:
        raise LimitError(
            f"{base} of shapes {list(a.shape)} and {list(b.shape)} needs about {flops:,} multiply-adds; the limit "
            f"is {MAX_FLOPS:,} (a snippet explains autograd, it is not a benchmark)."
        )
    return out


def check_binop(op: str, left: Any, right: Any, elements: int) -> None:
    """Python-level bombs (`10**10**9`, `[0]*10**10`, `'a'*10**10`) and tensor broadcasts, before they run."""
    import torch

    left, right = _shape_only(left), _shape_only(right)

    if op == "**" and isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1:
        if right * abs(left).bit_length() > MAX_INT_BITS:
            raise LimitError(f"{left} ** {right} would be an integer of about {right * abs(left).bit_length():,} bits.")
    if op == "<<" and isinstance(left, int) and isinstance(right, int) and right > MAX_INT_BITS:
        raise LimitError(f"{left} << {right} would be an integer of {right:,} bits.")
    if op == "*":
        for seq, n in ((left, right), (right, left)):
            if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * n > MAX_SEQUENCE:
                raise LimitError(f"repeating a sequence of {len(seq):,} items {n:,} times is over {MAX_SEQUENCE:,}.")
    if op == "+" and isinstance(left, (str, list, tuple)) and isinstance(right, (str, list, tuple)):
        if len(left) + len(right) > MAX_SEQUENCE:
            raise LimitError(f"a sequence of {len(left) + len(right):,} items is over {MAX_SEQUENCE:,}.")
    if op == "%" and isinstance(left, str):
        check_format_text(left)
    if isinstance(left, torch.Tensor) and isinstance(right, torch.Tensor):
        if op == "@":
            _check_product("matmul", (left, right))
        else:
            shape = broadcast(left.shape, right.shape)
            if shape is None:
                return
            need = numel(shape)
            if need > elements:
                raise limit_error(
                    f"broadcasting {list(left.shape)} {op} {list(right.shape)} would make {need:,} elements",
                    need,
                    elements,
                    "elements",
                )


_WIDTH = re.compile(r"\d{5,}")


def check_format_text(spec: str) -> None:
    """A format spec or %-format whose width or precision would make a huge string."""
    for m in _WIDTH.finditer(spec):
        if int(m.group()) > MAX_WIDTH:
            raise LimitError(f"a format width or precision of {m.group()} is over {MAX_WIDTH:,}.")


def check_length(what: str, value: Any) -> None:
    """A range or sequence about to be consumed at once (list(range(10**12)), sum(range(10**12)))."""
    try:
        n = len(value)
    except (TypeError, OverflowError):
        if isinstance(value, range):
            raise LimitError(f"{what}: a range that long is over {MAX_SEQUENCE:,} items.") from None
        return
    if n > MAX_SEQUENCE and not _is_tensor(value):
        raise LimitError(f"{what}: {n:,} items is over {MAX_SEQUENCE:,}.")


def _is_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor)
