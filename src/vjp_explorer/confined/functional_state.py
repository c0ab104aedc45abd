"""The snippet's state around the re-evaluations of its function (functional.py's references, and the
forward functional_judged.py records): what the function rebinds or fills put back afterwards (`untouched`),
and its float constants in float64 meanwhile (`widened`).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from typing import Any

import torch
from torch.utils import _pytree as pytree

_NARROW = (torch.float16, torch.bfloat16, torch.float32)


def _code_of(func: Any) -> tuple[Any, Any]:
    """The plain Python function behind func (a partial, a bound method, a wrapper), and its globals."""
    seen = 0
    while seen < 8:
        seen += 1
        inner = getattr(func, "__wrapped__", None) or getattr(func, "func", None) or getattr(func, "__func__", None)
        if inner is None or inner is func:
            break
        func = inner
    return (func, func.__globals__) if inspect.isfunction(func) else (None, None)


def _modules_of(func: Any) -> list[torch.nn.Module]:
    """The modules a function computes with: itself, the object of a bound method, those it closes over or
    names as globals."""
    found = [m for m in (func, getattr(func, "__self__", None)) if isinstance(m, torch.nn.Module)]
    plain, names = _code_of(func)
    if plain is not None:
        cells = [c.cell_contents for c in plain.__closure__ or () if _full(c)]
        named = [names[n] for n in plain.__code__.co_names if n in names]
        found += [m for m in (*cells, *named) if isinstance(m, torch.nn.Module)]
    return found


def _full(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


@contextlib.contextmanager
def untouched(func: Any) -> Any:
    """While references re-evaluate func many times: afterwards the globals it rebinds, the lists and dicts
    it fills, the cells it writes (nonlocal) and the random generators hold what the real call left there,
    as they would after `python FILE.py` (the re-evaluations happen on copies of the snippet's view)."""
    import random

    plain, names = _code_of(func)
    kept = dict(names) if names is not None else None
    filled = [
        (v, list(v) if isinstance(v, list) else dict(v))
        for v in (kept or {}).values()
        if isinstance(v, (list, dict)) and v is not names
    ]
    cells = [(c, c.cell_contents) for c in (plain.__closure__ or ()) if _full(c)] if plain is not None else []
    rng = (torch.get_rng_state(), random.getstate())
    tensors = _reachable(func, plain, names)
    try:
        yield
    finally:
        with torch.no_grad():  # what the re-runs wrote in place (a BatchNorm's statistics, a counter) put back
            for t, version, value in tensors:  # (a kernel's own writes, BatchNorm's, leave the version as it was)
                if t.shape == value.shape and (t._version != version or not torch.equal(t, value)):
                    t.copy_(value)
        if names is not None and kept is not None:
            for k in [k for k in names if k not in kept]:
                del names[k]
            names.update(kept)
        for container, was in filled:
            if isinstance(container, list):
                container[:] = was
            else:
                container.clear()
                container.update(was)
        for cell, value in cells:
            cell.cell_contents = value
        torch.set_rng_state(rng[0])
        random.setstate(rng[1])


SNAPSHOT = 10_000_000  # elements of the tensors a function can reach that are copied before its re-runs


def _reachable(func: Any, plain: Any, names: Any) -> list[tuple[torch.Tensor, int, torch.Tensor]]:
    """The tensors func can write in place: its modules' parameters and buffers, the tensors it closes over
    or names as globals; each with its version and a copy of its values (up to SNAPSHOT elements in all)."""
    found: dict[int, torch.Tensor] = {}
    for m in _modules_of(func):
        for t in (*m.parameters(), *m.buffers()):
            found.setdefault(id(t), t)
    if plain is not None:
        cells = [c.cell_contents for c in plain.__closure__ or () if _full(c)]
        named = [names[n] for n in plain.__code__.co_names if n in names]
        for t in (*cells, *named):
            if isinstance(t, torch.Tensor) and t.layout == torch.strided:
                found.setdefault(id(t), t)
    kept, room = [], SNAPSHOT
    for t in found.values():
        if t.numel() <= room:
            room -= t.numel()
            kept.append((t, t._version, t.detach().clone()))
    return kept


@contextlib.contextmanager
def widened(func: Any) -> Any:
    """func's float constants in float64 while a reference runs (and restored): a float32 tensor it closes
    over, names as a global, holds as a parameter or makes (torch.ones(3): the default dtype) would
    otherwise win type promotion over a float64 input of no dimensions, and the differences would run in
    float32."""
    plain, names = _code_of(func)
    cells = [c for c in (plain.__closure__ or ()) if _full(c)] if plain is not None else []
    was_cells = [(c, c.cell_contents) for c in cells if _narrow(c.cell_contents)]
    was_names = [
        (n, names[n])
        for n in (plain.__code__.co_names if plain is not None else ())
        if n in (names or {}) and _narrow(names[n])
    ]
    was_data = [(t, t.data) for m in _modules_of(func) for t in [*m.parameters(), *m.buffers()] if _narrow(t)]
    default = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch.float64)
        for c, t in was_cells:
            c.cell_contents = t.detach().double()
        for n, t in was_names:
            names[n] = t.detach().double()
        for t, data in was_data:
            t.data = data.double()
        yield
    finally:
        torch.set_default_dtype(default)
        for c, t in was_cells:
            c.cell_contents = t
        for n, t in was_names:
            names[n] = t
        for t, data in was_data:
            t.data = data


def _narrow(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.dtype in _NARROW


def flat_args(func: Any, primals: Any) -> Any:
    """func as a function of the tensors of its arguments' pytree (a dict of parameters: its values)."""
    shape = pytree.tree_structure(tuple(primals))

    @functools.wraps(func)  # __wrapped__: the snippet's state is put back after re-runs (untouched)
    def flat(*leaves: Any) -> Any:
        return func(*pytree.tree_unflatten(list(leaves), shape))

    return flat


def default_v(t: Any) -> list[torch.Tensor]:
    """v = 1 for each one-number tensor of t (a tensor or a tuple of them), as torch takes v=None."""
    ts = [t] if isinstance(t, torch.Tensor) else list(t) if isinstance(t, (tuple, list)) else []
    ok = ts and all(isinstance(x, torch.Tensor) and x.numel() == 1 for x in ts)
    return [torch.ones_like(x) for x in ts] if ok else []


def without_aux(func: Any) -> Any:  # a function with has_aux=True, without its aux
    return lambda *xs, **kw: func(*xs, **kw)[0]
