"""The call record: one backward/grad call as plain data, and the one schema it is checked against wherever
it crosses a process (the snippet's child -> the parent -> the judge -> the parent).

A call (`CallEvent`) is what the observer saw: its outputs, v, its inputs (leaves) with their grads, the
graph, notes and checks (the event the view shows), and `record` (`Record`): what the judge needs to check
it on its own, the recorded forward (`Forward`: an op log of torch's operators with its inputs as arrays),
v and the grads as arrays; the judge answers with a `Verdict`. Everything
that arrives from a snippet's process may have been forged by the snippet, so `validate_event` checks every
field's type, every number (finite, or JSON's explicit NaN/Infinity tokens), how deep lists nest and how
large they are, and the keys of the graph's nodes, before anything reads it. Its shape follows
confined/protocol.py: one table per object (EVENT, RECORD, ...), one function that checks a dict against it.
Arrays travel as {"dtype", "shape", "data": base64 of the little-endian bytes}; no pickle, ever.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Callable
from typing import Any, TypedDict, cast

MAX_DIMS = 16  # dimensions of one tensor
MAX_ELEMENTS = 50_000_000  # elements of one array, and of any size an op of the log asks for
MAX_LIST = 1_000_000  # items of one list of the channel (values, ops, inputs)
MAX_OPS = 200_000  # operations of one recorded forward (record.Recorder keeps at most this many)
MAX_ARG_DEPTH = 4  # nesting of one operator argument (a list of lists of ints is 2)
MAX_TEXT = 1_000_000  # characters of one string
MAX_GRAPH = 100_000  # nodes of one graph

# dtype -> bytes per element: the dtypes an array of the channel may have
ITEMSIZE = {
    "float16": 2,
    "bfloat16": 2,
    "float32": 4,
    "float64": 8,
    "complex64": 8,
    "complex128": 16,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "bool": 1,
}
MAX_GRAD_DEPTH = 4  # gradients of gradients nested in one recorded forward (a create_graph gradient's entry)
# the name of a recorded create_graph gradient in the log (record.GradOf): its kwargs are GRAD_OF below
GRAD_OF = "vjp::grad_of"
# where an operator may come from: torch's own namespaces, nothing the snippet registered
OP_NAME = re.compile(r"^(aten|prims)::[a-z_][a-z0-9_]{0,80}(\.[A-Za-z_][A-Za-z0-9_]{0,40})?$")
ANY_OP_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,40}::[A-Za-z_][A-Za-z0-9_]{0,80}(\.[A-Za-z_][A-Za-z0-9_]{0,40})?$")
# the torch enums an operator's argument may name, each with the values the judge may rebuild
ENUMS = {
    "dtype": set(ITEMSIZE),
    "device": {"cpu", "meta"},
    "layout": {"strided"},
    "memory_format": {"contiguous_format", "preserve_format", "channels_last", "channels_last_3d"},
}


class Array(TypedDict):
    """An array of the channel: `data` is base64 of prod(shape) elements of `dtype`, little-endian."""

    dtype: str
    shape: list[int]
    data: str


class Forward(TypedDict):
    """The recorded forward (FORWARD): operations as [name, args, kwargs, results' keys, random results]."""

    ops: list[list[Any]]
    copies: list[list[Any]]  # [[serial, version, generation], Array]: inputs read from outside the log
    outs: list[list[int]]  # each output's key (serial, version)
    leaves: list[int]  # each input's serial, in the call's order


class Record(TypedDict):
    """What the judge needs to check one call (RECORD)."""

    forward: Forward | None
    unreplayable: str | None
    outputs: list[Array]
    v: list[Array]
    at: list[Array]
    grads: list[Array | None]
    before: list[Array | None]
    names: list[str]
    cheap: bool
    jacobian_rows: int
    hook: str | None
    customs: list[str]
    second: dict[str, Any] | None
    tangent: dict[str, Any] | None


class CallEvent(TypedDict):
    """One backward/grad call as plain data (EVENT): what the view shows (snippet/result.Event's fields,
    as dicts and lists), and the record the judge checks it by."""

    index: int
    line: int
    source: str
    call: str
    outputs: list[dict[str, Any]]
    v: list[dict[str, Any]]
    v_origin: str
    retain_graph: bool
    create_graph: bool
    inputs: list[dict[str, Any]]
    checks: list[dict[str, Any]]
    notes: list[str]
    diagnosis: str | None
    graph: list[dict[str, Any]] | None
    results: list[dict[str, Any]]
    reference: list[dict[str, Any]]
    backward_code: dict[str, Any] | None
    record: Record | None
    started: int | None
    kinks: list[dict[str, Any]]


class Verdict(TypedDict):
    """The judge's answer about one call (VERDICT)."""

    call: int
    checks: list[dict[str, Any]]
    jtv: list[Any]
    jacobian: list[Any]
    finite_difference: list[Any]
    omitted: list[list[str]]
    reference: list[Any]
    notes: list[str]
    unverified: str | None


class RecordError(ValueError):
    """A record that is not what the schema says: the snippet broke the channel."""


Check = Callable[[Any], bool]


def _int(x: Any) -> bool:
    return type(x) is int and -(2**63) <= x < 2**63


def _num(x: Any) -> bool:
    """A number: an int, a float (JSON's NaN and Infinity tokens are the explicit markers of nan and inf)."""
    return _int(x) or type(x) is float


def _finite(x: Any) -> bool:
    return _int(x) or (type(x) is float and math.isfinite(x))


def _str(x: Any) -> bool:
    return type(x) is str and len(x) <= MAX_TEXT


def _opt(check: Check) -> Check:
    return lambda x: x is None or check(x)


def _list(check: Check, most: int = MAX_LIST) -> Check:
    return lambda x: type(x) is list and len(x) <= most and all(check(v) for v in x)


def _shape(x: Any) -> bool:
    return (
        type(x) is list
        and len(x) <= MAX_DIMS
        and all(_int(d) and 0 <= d <= MAX_ELEMENTS for d in x)
        and math.prod(x) <= MAX_ELEMENTS
    )


def _values(x: Any, depth: int = 0) -> bool:
    """A tensor's values as nested lists of numbers (complex ones as their text), or one number."""
    if _num(x) or type(x) is bool:
        return True
    if _str(x) and (depth == 0 or len(x) <= 100):
        return True  # complex values, each as torch prints it, "(1+2j)" (render them, never parse them)
    if type(x) is not list or depth >= MAX_DIMS or len(x) > MAX_LIST:
        return False
    kinds = set(map(type, x))
    if kinds <= _FLAT:  # a row of numbers, the common case: one pass, no call per element
        return int not in kinds or all(-(2**63) <= v < 2**63 for v in x if type(v) is int)
    return all(_values(v, depth + 1) for v in x)


_FLAT = {float, bool, int}


def _dtype(x: Any) -> bool:
    return type(x) is str and len(x) <= 40 and x.replace("_", "").isalnum()


def _tensor_info(x: Any) -> bool:
    return _fields(x, TENSOR_INFO)


def _summary(x: Any) -> bool:
    """A cotangent on a graph's edge (engine/backward_graph.summary)."""
    if x is None:
        return True
    if type(x) is not dict or not {"shape", "norm"} <= set(x) or not set(x) <= {"shape", "norm", "values"}:
        return False
    return _shape(x["shape"]) and _num(x["norm"]) and ("values" not in x or _values(x["values"]))


def _edge(x: Any) -> bool:
    return _fields(x, EDGE)


def _node(x: Any) -> bool:
    return _fields(x, NODE)


# a tensor as the view shows it (snippet/result.TensorInfo)
TENSOR_INFO: dict[str, Check] = {"name": _str, "shape": _shape, "dtype": _dtype, "values": _opt(_values)}
# one input of a call (snippet/result.LeafGrad)
LEAF: dict[str, Check] = {
    "name": _str,
    "shape": _shape,
    "dtype": _dtype,
    "value": _opt(_values),
    "grad_before": _opt(_values),
    "grad_after": _opt(_values),
    "grad": _opt(_values),
    "jtv": _opt(_values),
    "jacobian": _opt(_values),
    "finite_difference": _opt(_values),
    "grad_norm": _opt(_num),
    "omitted": _list(_str, 20),
}
# one check (verdicts.Check); the parent keeps a snippet process's checks only where no judge can make them
CHECK: dict[str, Check] = {
    "name": _str,
    "status": lambda s: s in ("agree", "disagree", "skipped", "inconclusive"),
    "compares": _str,
    "max_abs_diff": _opt(_num),
    "max_rel_diff": _opt(_num),
    "tolerance": _opt(
        lambda t: _str(t) or (type(t) is dict and set(t) == {"rtol", "atol"} and all(map(_num, t.values())))
    ),
    "reason": _opt(_str),
    "undefined": _list(_str, 10_000),
    "overflow": _list(_str, 10_000),
    "worst": _opt(_str),
    "spurious": _list(_str, 10_000),
    "nonfinite": _list(_str, 10_000),
    "independent": _opt(lambda b: type(b) is bool),
}
# one edge and one node of a call's backward graph (engine/backward_graph.GraphProbe.finish)
EDGE: dict[str, Check] = {"to": _opt(_int), "input_nr": _int, "value": _summary, "local": _summary}
NODE: dict[str, Check] = {
    "id": _int,
    "name": _str,
    "leaf": _opt(_str),
    "value_of": _opt(_str),
    "line": _opt(_int),
    "source": _opt(_str),
    "ran": lambda b: type(b) is bool,
    "arriving": _summary,
    "edges": _list(_edge, 10_000),
}


def _array(x: Any) -> bool:
    """An array: dtype, shape, and base64 of exactly as many bytes as they say."""
    if type(x) is not dict or set(x) != {"dtype", "shape", "data"}:
        return False
    if x["dtype"] not in ITEMSIZE or not _shape(x["shape"]) or type(x["data"]) is not str:
        return False
    size = math.prod(x["shape"]) * ITEMSIZE[x["dtype"]]
    if len(x["data"]) != 4 * ((size + 2) // 3):
        return False
    try:
        return len(base64.b64decode(x["data"], validate=True)) == size
    except (binascii.Error, ValueError):
        return False


def _ref(x: Any) -> bool:
    """A tensor argument of an op: made by an earlier op (serial, version) or an input copied in (serial,
    version, generation)."""
    if type(x) is not dict or set(x) != {"ref", "made"} or type(x["made"]) is not bool:
        return False
    key = x["ref"]
    return type(key) is list and len(key) == (2 if x["made"] else 3) and all(_int(k) for k in key)


def _arg(x: Any, depth: int = 0) -> bool:
    """One argument of an operator: a number, a bool, None, a short string, a tensor reference, a torch enum
    ({"dtype": "float32"}, {"device": "cpu"}, ...), a complex number, or a list of these, nested a little."""
    if x is None or type(x) is bool or _int(x) or type(x) is float:
        return True
    if type(x) is str:
        return len(x) <= 100
    if type(x) is list:
        if depth >= MAX_ARG_DEPTH or len(x) > 10_000:
            return False
        if x and all(_int(v) for v in x) and math.prod(abs(v) for v in x) > MAX_ELEMENTS * 64:
            return False  # a size no op of the log may allocate; checked before the judge runs anything
        return all(_arg(v, depth + 1) for v in x)
    if type(x) is dict and len(x) == 1:
        ((kind, value),) = x.items()
        if kind in ENUMS:
            return value in ENUMS[kind]
        if kind == "complex":
            return type(value) is list and len(value) == 2 and all(_num(v) for v in value)
        return False
    return _ref(x)


def _op(x: Any, depth: int = 0) -> bool:
    """One operation as it ran: [name, args, kwargs, results' keys, recorded results (random ops) or null].
    A create_graph gradient (GRAD_OF) has tensor references for args and GRAD_OF's fields for kwargs."""
    if type(x) is not list or len(x) != 5:
        return False
    name, args, kwargs, outs, results = x
    if type(name) is not str or ANY_OP_NAME.match(name) is None or type(args) is not list or type(kwargs) is not dict:
        return False
    if name == GRAD_OF:
        ok = len(args) <= 10_000 and all(_ref(a) for a in args) and _grad_of(kwargs, depth) and results is None
    else:
        ok = (
            len(args) <= 64
            and all(_arg(a) for a in args)
            and len(kwargs) <= 64
            and all(type(k) is str and len(k) <= 60 and _arg(v) for k, v in kwargs.items())
            and (results is None or _list(_array, 1_000)(results))
        )
    return ok and _list(lambda k: type(k) is list and len(k) == 2 and all(_int(v) for v in k), 1_000)(outs)


def _grad_of(x: dict[str, Any], depth: int) -> bool:
    """A create_graph gradient's own fields: the forward it differentiates (nested no deeper than
    MAX_GRAD_DEPTH), the v it was taken with, which of its inputs got a gradient."""
    return (
        depth < MAX_GRAD_DEPTH
        and set(x) == {"forward", "v", "which"}
        and _forward(x["forward"], depth + 1)
        and _list(_array, 1_000)(x["v"])
        and _list(lambda k: _int(k) and k >= 0, 10_000)(x["which"])
    )


def _forward(x: Any, depth: int = 0) -> bool:
    return _fields(x, {**FORWARD, "ops": _list(lambda op: _op(op, depth), MAX_OPS)})


def _sparse(x: Any) -> bool:
    """A sparse COO input: {"sparse_coo": {"indices": int64 [sparse dims, nnz], "values": [nnz, *dense dims],
    "size"}}; that each index lies within the size is torch's check when the judge builds it."""
    if type(x) is not dict or set(x) != {"sparse_coo"} or type(x["sparse_coo"]) is not dict:
        return False
    p = x["sparse_coo"]
    if set(p) != {"indices", "values", "size"} or not (_array(p["indices"]) and _array(p["values"])):
        return False
    index, values, size = p["indices"]["shape"], p["values"]["shape"], p["size"]
    return (
        p["indices"]["dtype"] == "int64"
        and len(index) == 2
        and len(values) >= 1
        and index[1] == values[0]
        and _shape(size)
        and len(size) == index[0] + len(values) - 1
        and index[0] >= 1
        and size[index[0] :] == values[1:]
    )


def _copies(x: Any) -> bool:
    """The inputs the forward read from outside the log: [[serial, version, generation], array] pairs (an
    array, or a sparse COO constant's parts)."""
    return _list(
        lambda p: (
            type(p) is list and len(p) == 2 and _ref({"ref": p[0], "made": False}) and (_array(p[1]) or _sparse(p[1]))
        )
    )(x)


# the recorded forward, as the judge replays it (confined/oplog.py writes and reads it)
FORWARD: dict[str, Check] = {
    "ops": _list(_op, MAX_OPS),
    "copies": _copies,
    "outs": _list(lambda k: type(k) is list and len(k) == 2 and all(_int(v) for v in k), 1_000),
    "leaves": _list(_int, 10_000),
}
# what the judge needs to check one call: its forward (or why there is none), the point, v, the grads
SECOND: dict[str, Check] = {"result": _array}  # a record's second derivative (RECORD's "second")
# a record's derivative by forward mode (RECORD's "tangent"): the tangent u of each input, and Ju, the call's
# result, one per output (torch.func.jvp, torch.autograd.functional.jvp, forward_ad.unpack_dual)
TANGENT: dict[str, Check] = {"u": _list(_array, 10_000), "result": _list(_array, 1_000)}
RECORD: dict[str, Check] = {
    "forward": _opt(_forward),
    "unreplayable": _opt(_str),  # why the child could not give a forward (a legitimate reason, in words)
    "outputs": _list(_array, 1_000),  # each output's values as the call began, in its own dtype
    "v": _list(_array, 1_000),
    "at": _list(_array, 10_000),  # each input's value where the grads were taken
    "grads": _list(_opt(_array), 10_000),  # what the call gave each input (None: no gradient)
    "before": _list(_opt(_array), 10_000),  # each input's .grad before (None: none, or a grad call)
    "names": _list(_str, 10_000),
    "cheap": lambda b: type(b) is bool,  # a folded call: finite differences along random directions only
    "jacobian_rows": _int,
    "hook": _opt(_str),  # the kind of the snippet's hook that changed a gradient during the call (hooks.py)
    "customs": _list(_str, 100),  # the custom autograd.Functions the gradient passes through
    # a second derivative of a one-number function (a hessian, jacrev(jacrev(f)), grad(grad(f))): `result`,
    # the call's ∂²f/∂x², shaped (*x.shape, *x.shape) for one input, N × N over several inputs' elements
    # joined in order (the blocks ∂²f/∂x_a∂x_b); the judge checks it by second differences
    "second": _opt(lambda x: _fields(x, SECOND)),
    # a derivative along tangents by forward mode: the judge checks Ju by central differences along u; `v`
    # is then empty (there is no cotangent) and `grads` all None
    "tangent": _opt(lambda x: _fields(x, TANGENT)),
}
# an input on a kink or tie, and the convention PyTorch's backward follows there (events.Event.kinks)
KINK: dict[str, Check] = {
    "op": _str,
    "line": _opt(_int),
    "input": _str,  # the snippet's name for the op's input, "" where it has none
    "elements": _list(_str, 8),
    "count": lambda n: _int(n) and n >= 0,
    "convention": _str,
}
# one call as the snippet's process sends it (events.Event, with its record)
EVENT: dict[str, Check] = {
    "index": _int,
    "line": _int,
    "source": _str,
    "call": _str,
    "outputs": _list(_tensor_info, 1_000),
    "v": _list(_tensor_info, 1_000),
    "v_origin": _str,
    "retain_graph": lambda b: type(b) is bool,
    "create_graph": lambda b: type(b) is bool,
    "inputs": _list(lambda x: _fields(x, LEAF), 10_000),
    "checks": _list(lambda x: _fields(x, CHECK), 100),
    "notes": _list(_str, 1_000),
    "diagnosis": _opt(_str),
    "graph": _opt(_list(_node, MAX_GRAPH)),
    "results": _list(_tensor_info, 1_000),
    "reference": _list(_tensor_info, 1_000),
    # --code: what the call's backward script is written from; read field by field by backward_code/script.py
    "backward_code": _opt(lambda d: type(d) is dict),
    "record": _opt(lambda r: _fields(r, RECORD)),
    "started": _opt(_int),  # the call's number in the observer's "started" frames, where it sent one
    "kinks": _list(lambda k: _fields(k, KINK), 100),  # inputs on a kink or tie (confined/conventions.py)
}


def _fields(x: Any, table: dict[str, Check]) -> bool:
    return type(x) is dict and set(x) == set(table) and all(check(x[name]) for name, check in table.items())


def validate_event(event: Any) -> CallEvent:
    """The event if every field is what EVENT says (and the record's arrays are as long as their shapes say);
    RecordError naming the first field that is not."""
    _checked(event, EVENT, "an event")
    record = event["record"]
    if record is not None:
        _consistent(record)
    return cast(CallEvent, event)


# what a functional call's record says where the snippet's process checked it itself (a higher derivative
# the judge has no record form for: a third derivative, a mixed or has_aux second one, the vjp of grad(f));
# the parent keeps that check and marks it as the snippet's word (confined/judging.merge)
CHECKED_IN_CHILD = "a derivative of a derivative: checked by second differences in the snippet's own process"


def validate_record(record: Any) -> Record:
    """A record sent in its own frame (the judge's, apart from its event) if it is what RECORD says and its
    lists line up; RecordError otherwise."""
    _checked(record, RECORD, "a record")
    _consistent(cast(Record, record))
    return cast(Record, record)


def _checked(x: Any, table: dict[str, Check], what: str) -> None:
    """x is an object with exactly `table`'s fields, each what its check says; RecordError naming the first
    that is not."""
    if type(x) is not dict:
        raise RecordError(f"{what} that is not an object")
    if set(x) != set(table):
        raise RecordError(f"{what} with fields {sorted(x)[:20]} (wants {sorted(table)})")
    for name, check in table.items():
        try:
            ok = check(x[name])
        except RecursionError:
            ok = False
        if not ok:
            raise RecordError(f"{what} whose {name!r} is not what the schema says")


def _consistent(record: Record) -> None:
    """The record's lists agree with each other: one grad, one value, one name per input."""
    n = len(record["names"])
    if not (len(record["at"]) == len(record["grads"]) == len(record["before"]) == n):
        raise RecordError("a record whose inputs, values and grads do not line up")
    tangent = record["tangent"]
    if len(record["v"]) != (0 if tangent is not None else len(record["outputs"])):
        raise RecordError("a record with a v per output that does not line up")
    if record["forward"] is None and record["unreplayable"] is None:
        raise RecordError("a record with neither a forward nor why it has none")
    for a, g in zip(record["at"], record["grads"], strict=True):
        if g is not None and g["shape"] != a["shape"]:
            raise RecordError("a record whose grad has another shape than its input")
    second = record["second"]
    elements = sum(math.prod(a["shape"]) for a in record["at"])
    if second is not None and (
        n == 0
        or n == 1
        and second["result"]["shape"] != 2 * record["at"][0]["shape"]
        or n > 1
        and second["result"]["shape"] != [elements, elements]
    ):
        raise RecordError(
            "a record of a second derivative whose result is not ∂²f/∂x² of its one input, or the N × N "
            "matrix of its inputs joined"
        )
    if tangent is not None and (
        second is not None
        or [u["shape"] for u in tangent["u"]] != [a["shape"] for a in record["at"]]
        or [r["shape"] for r in tangent["result"]] != [o["shape"] for o in record["outputs"]]
        or any(g is not None for g in record["grads"])
    ):
        raise RecordError("a record of a derivative along tangents whose u or Ju do not fit its inputs and outputs")


def validate_verdict(verdict: Any) -> Verdict:
    """What the judge sends back about one call (see VERDICT); RecordError otherwise."""
    if not _fields(verdict, VERDICT):
        raise RecordError("a verdict that is not what the schema says")
    return cast(Verdict, verdict)


# what the judge says about one call: its checks, the arrays the view shows beside the grads, and where it
# found the record inconsistent (`unverified`: why; then the run cannot end well)
VERDICT: dict[str, Check] = {
    "call": _int,
    "checks": _list(lambda x: _fields(x, CHECK), 100),
    "jtv": _list(_opt(_values), 10_000),
    "jacobian": _list(_opt(_values), 10_000),
    "finite_difference": _list(_opt(_values), 10_000),
    "omitted": _list(_list(_str, 20), 10_000),  # of these arrays, those left out for size (confined/payload.py)
    "reference": _list(_opt(_values), 1_000),  # a tangent call's reference for each Ju (None: not shown)
    "notes": _list(_str, 100),
    "unverified": _opt(_str),
}


def decode_bytes(array: dict[str, Any]) -> bytes:
    """An array's bytes (validated already: their length is the shape's)."""
    return base64.b64decode(array["data"])


def encode_bytes(dtype: str, shape: list[int], data: bytes) -> dict[str, Any]:
    """An array for the channel from its little-endian bytes."""
    return {"dtype": dtype, "shape": list(shape), "data": base64.b64encode(data).decode("ascii")}


def finite_or_marker(x: float) -> float | str:
    """A number for a JSON document: itself if finite, else the marker "nan", "inf" or "-inf"."""
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
