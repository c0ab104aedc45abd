"""The recorded forward as plain data: written by the snippet's process, rebuilt by the judge's.

`export` turns the entries of record.Recorder that lead from a call's inputs to its outputs into the
FORWARD object of calls.py: each operation by its name (`aten::mul.Tensor`), its arguments with tensors
as references, its inputs from outside the log as arrays. `rebuild` is the judge's side: it treats the
object as untrusted data (it was checked against calls.FORWARD already), resolves each name in torch's
own operator namespaces only, refuses sizes past the budget before anything allocates, and returns a
record.Replay over the rebuilt log: the replay code is record.py's, only where it runs has moved.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..calls import ENUMS, GRAD_OF, MAX_ELEMENTS, MAX_GRAD_DEPTH, OP_NAME, decode_bytes, encode_bytes
from .record import Entry, GradOf, NotReplayable, Recorder, Replay, _Ref, key, serial

MAX_COPY_BYTES = 512_000_000  # bytes of the inputs one rebuilt forward may hold (record.Recorder's bound)
_MEMORY_FORMATS = {
    "contiguous_format": torch.contiguous_format,
    "preserve_format": torch.preserve_format,
    "channels_last": torch.channels_last,
    "channels_last_3d": torch.channels_last_3d,
}


class Unsendable(Exception):
    """An argument the channel has no form for (a Generator, a custom object): the forward stays here."""


# ------------------------------------------------------------------ the snippet's side


def array(t: torch.Tensor) -> dict[str, Any]:
    """A tensor as the channel's array: its dtype, shape and little-endian bytes (on the CPU)."""
    t = t.detach().to("cpu").contiguous()
    name = str(t.dtype).removeprefix("torch.")
    flat = t.reshape(-1)
    if flat.numel() and flat.stride(0) != 1:  # one element with a stride of its own counts as contiguous
        flat = flat.clone(memory_format=torch.contiguous_format)
    data = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
    return encode_bytes(name, list(t.shape), data)


def export(rec: Recorder, outputs: list[torch.Tensor], leaves: list[torch.Tensor]) -> dict[str, Any]:
    """The forward from `leaves` to `outputs` as calls.FORWARD; Unsendable where an argument has no form."""
    entries = rec.slice_for(outputs, leaves)
    return _forward(rec, entries, [key(o) for o in outputs], [serial(t) for t in leaves], 0)


def _forward(
    rec: Recorder, entries: list[Entry], outs: list[tuple[int, int]], leaves: list[int], depth: int
) -> dict[str, Any]:
    used: dict[tuple[int, ...], None] = {}
    ops = []
    for e in entries:
        if isinstance(e.func, GradOf):
            ops.append(_grad_of(rec, e, used, depth))
            continue
        name = e.func.name()
        random = e.random and e.func.overloadpacket.__name__ != "native_dropout"
        args = [] if random else [_arg(a, used) for a in e.args]
        kwargs = {} if random else {k: _arg(v, used) for k, v in e.kwargs.items()}
        results = [array(t) for t in e.results] if e.random else None
        ops.append([name, args, kwargs, [list(k) for k in e.outs], results])
    if any(k not in rec.copies for k in used):
        raise NotReplayable("an input the forward read was dropped from the log to bound its memory")
    copies = [[list(k), _held(rec.copies[k])] for k in used]
    return {"ops": ops, "copies": copies, "outs": [list(k) for k in outs], "leaves": list(leaves)}


def _held(t: torch.Tensor) -> dict[str, Any]:
    """An input of the log as the channel carries it: an array, or a sparse COO constant (`torch.sparse.mm`'s
    matrix) as its indices, values and size; any other layout stays here."""
    if t.layout == torch.strided:
        return array(t)
    if t.layout != torch.sparse_coo:
        raise Unsendable(f"an input of the layout {t.layout}")
    if math.prod(t.shape) > MAX_ELEMENTS:
        raise Unsendable(f"a sparse input of more than {MAX_ELEMENTS:,} elements")
    return {"sparse_coo": {"indices": array(t._indices()), "values": array(t._values()), "size": list(t.shape)}}


def _grad_of(rec: Recorder, e: Entry, used: dict[tuple[int, ...], None], depth: int) -> list[Any]:
    """A create_graph gradient's entry (record.GradOf): its inputs as references, and as calls.GRAD_OF its
    own forward (recursively: a gradient of a gradient), the v it was taken with, which inputs got one."""
    g = e.func
    if depth >= MAX_GRAD_DEPTH:
        raise Unsendable(f"gradients nested more than {MAX_GRAD_DEPTH} deep")
    inner = _forward(g.inner.rec, g.inner.entries, g.inner.outs, g.inner.leaves, depth + 1)
    fields = {"forward": inner, "v": [array(v) for v in g.vs], "which": list(g.which)}
    return [GRAD_OF, [_arg(a, used) for a in e.args], fields, [list(k) for k in e.outs], None]


def _arg(a: Any, used: dict[tuple[int, ...], None]) -> Any:
    if isinstance(a, _Ref):
        if not a.made:
            used[a.key] = None
        return {"ref": list(a.key), "made": a.made}
    if a is None or isinstance(a, (bool, int, float, str)):
        return a
    if isinstance(a, complex):
        return {"complex": [a.real, a.imag]}
    if isinstance(a, (list, tuple)):
        return [_arg(v, used) for v in a]
    if isinstance(a, torch.dtype):
        return {"dtype": str(a).removeprefix("torch.")}
    if isinstance(a, torch.device):
        return {"device": "cpu" if a.type != "meta" else "meta"}  # the judge replays on the CPU
    if isinstance(a, torch.layout):
        if a != torch.strided:
            raise Unsendable(f"the layout {a}")
        return {"layout": "strided"}
    if isinstance(a, torch.memory_format):
        return {"memory_format": str(a).removeprefix("torch.")}
    raise Unsendable(f"an argument of type {type(a).__name__}")


# ------------------------------------------------------------------ the judge's side


def tensor(x: dict[str, Any]) -> torch.Tensor:
    """An array of the channel (validated: its bytes are as many as its shape says) as a CPU tensor."""
    dtype = getattr(torch, x["dtype"])
    if math.prod(x["shape"]) == 0:
        return torch.empty(x["shape"], dtype=dtype)
    raw = torch.frombuffer(bytearray(decode_bytes(x)), dtype=torch.uint8)
    return raw.view(dtype).reshape(x["shape"]).clone()


def _sparse(x: dict[str, Any]) -> torch.Tensor:
    """A sparse COO input (its parts validated by calls.py), its indices checked against its size by torch."""
    try:
        return torch.sparse_coo_tensor(tensor(x["indices"]), tensor(x["values"]), x["size"], check_invariants=True)
    except RuntimeError as e:
        raise NotReplayable(f"a sparse input that is not one ({str(e).splitlines()[0][:120]})") from None


class OverBudget(Exception):
    """A forward larger than the judge's budget: not replayed (a skipped check, never a verdict)."""


class Foreign(Exception):
    """An operator outside torch's own namespaces (a custom op the snippet registered): not replayed here."""


def rebuild(forward: dict[str, Any], held: list[int] | None = None) -> Replay:
    """The replay of a forward sent by the snippet's process. Foreign for an operator the judge may not
    run, OverBudget for sizes past its budget (before anything allocates); NotReplayable where the log
    cannot be what it claims (a dangling reference, random results that do not match). `held`: the bytes
    of inputs rebuilt so far, shared with the forwards of the gradients nested in this one."""
    rec = Recorder()
    held = [0] if held is None else held
    for k, a in forward["copies"]:
        parts = [a["sparse_coo"]["indices"], a["sparse_coo"]["values"]] if "sparse_coo" in a else [a]
        held[0] += sum(math.prod(p["shape"]) * 8 for p in parts)
        if held[0] > MAX_COPY_BYTES:
            raise OverBudget(f"the recorded inputs hold more than {MAX_COPY_BYTES:,} bytes, the judge's budget")
        rec.copies[tuple(k)] = _sparse(a["sparse_coo"]) if "sparse_coo" in a else tensor(a)
    made: set[tuple[int, ...]] = {(n,) for n in forward["leaves"]}  # an input the grads are taken at is given
    for name, args, kwargs, outs, results in forward["ops"]:
        if name == GRAD_OF:
            entry = _gradient(args, kwargs, outs, rec, made, held)
            rec.entries.append(entry)
            for i, k in enumerate(entry.outs):
                rec.made[k] = (entry, i)
                made.add(k)
            continue
        func = _operator(name)
        values = tuple(_value(a, rec, made, name) for a in args)
        entry = Entry(
            func, values, {k: _value(v, rec, made, name) for k, v in kwargs.items()}, [tuple(k) for k in outs]
        )
        base = func.overloadpacket.__name__
        entry.random = results is not None
        if entry.random:
            entry.results = [tensor(r) for r in results]
            if base != "native_dropout" and len(entry.results) != len(entry.outs):
                raise NotReplayable(f"{name}'s recorded results do not match its outputs")
        elif base != "native_dropout" and any(base.startswith(r) for r in ("bernoulli", "normal", "uniform", "rand")):
            raise NotReplayable(f"{name} draws random numbers, yet its results were not recorded")
        rec.entries.append(entry)
        for i, k in enumerate(entry.outs):
            rec.made[k] = (entry, i)
            made.add(k)
    return Replay(rec, rec.entries, [(int(a), int(b)) for a, b in forward["outs"]], list(forward["leaves"]))


def _gradient(
    args: list[Any], fields: dict[str, Any], outs: list[list[int]], rec: Recorder, made: set[Any], held: list[int]
) -> Entry:
    """A create_graph gradient's entry, rebuilt: its own forward (a Replay, rebuilt the same way), its v,
    which inputs it gives a gradient; NotReplayable where these do not fit each other."""
    inner = rebuild(fields["forward"], held)
    refs = tuple(_value(a, rec, made, GRAD_OF) for a in args)
    if len(refs) != len(inner.leaves) or any(k >= len(refs) for k in fields["which"]):
        raise NotReplayable("a recorded gradient whose inputs do not match its forward")
    if len(fields["v"]) != len(inner.outs) or len(outs) > len(fields["which"]):
        raise NotReplayable("a recorded gradient whose v or results do not match its forward")
    vs = [tensor(v) for v in fields["v"]]
    return Entry(GradOf(inner, vs, list(fields["which"])), refs, {}, [(int(a), int(b)) for a, b in outs])


def _operator(name: str) -> Any:
    """torch.ops.aten.NAME.OVERLOAD (or prims): nothing else, whatever the name says."""
    if OP_NAME.match(name) is None:
        raise Foreign(name)
    space, rest = name.split("::")
    op, _, overload = rest.partition(".")
    try:
        packet = getattr(getattr(torch.ops, space), op)
        return getattr(packet, overload or "default")
    except (AttributeError, RuntimeError):
        raise NotReplayable(f"{name} is no operator of this torch") from None


def _value(a: Any, rec: Recorder, made: set[tuple[int, ...]], op: str) -> Any:
    """An argument as the op takes it: references as record._Ref (checked to exist), enums as torch's."""
    if isinstance(a, list):
        if a and all(type(v) is int for v in a) and math.prod(abs(v) for v in a) > MAX_ELEMENTS:
            raise OverBudget(f"{op} asks for a size past the judge's budget of {MAX_ELEMENTS:,} elements")
        return [_value(v, rec, made, op) for v in a]
    if not isinstance(a, dict):
        return a
    if "ref" in a:
        k = tuple(a["ref"])
        if a["made"] and k not in made and (k[0],) not in made:
            raise NotReplayable(f"{op} reads a value no earlier operation of the log made")
        if not a["made"] and k not in rec.copies:
            raise NotReplayable(f"{op} reads an input the log does not hold")
        return _Ref(k, k[0], a["made"])
    ((kind, value),) = a.items()
    if kind == "complex":
        return complex(value[0], value[1])
    if kind not in ENUMS or value not in ENUMS[kind]:
        raise NotReplayable(f"{op} has an argument the judge does not know")
    if kind == "dtype":
        return getattr(torch, value)
    if kind == "device":
        return torch.device(value)
    if kind == "layout":
        return torch.strided
    return _MEMORY_FORMATS[value]


def refs_of(entry: Entry) -> list[_Ref]:
    """The references among an entry's arguments: the tensors it reads."""
    from .record_parts import leaves

    return [r for r in leaves(entry.args, entry.kwargs) if isinstance(r, _Ref)]
