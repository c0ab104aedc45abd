"""A captured backward call (engine/backward_capture.py's plain record) -> a standalone Python script.

The script computes each input's gradient from v with one statement per node of the backward graph, in the
order autograd ran them, from the formula table (formulas.py); no autograd. Everything that came from the
snippet (names, source lines, node names of custom Functions) is untrusted: a name becomes a variable only
if it is a plain identifier (else a generated one), a JSON key only as a string literal checked by
`ast.literal_eval`, a source line only as a comment with control characters and line breaks removed; saved
values become code only through `formulas.lit` (numbers, bools, None) after `check_record` has checked them.
"""

from __future__ import annotations

import ast
import builtins
import json
import keyword
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from .formulas import ATEN, FORMULAS, VIEWS, At, Unwritable, lit
from .helpers import HELPERS

_KEY = re.compile(r"t\d{1,7}")
_WORD = re.compile(r"[a-z_]{1,20}")  # a saved string: an option such as "none", "tanh"
DTYPES = frozenset(
    {"float16", "bfloat16", "float32", "float64", "complex64", "complex128", "int8", "int16", "int32", "int64"}
    | {"uint8", "bool"}
)
_RESERVED = {"torch", "json", "math", "pathlib", "T", "grads", *dir(builtins), *HELPERS}
_PICK = re.compile(r"(.+)\[(\d)\]")  # a helper's tuple, indexed per edge: unpacked once instead
# nodes whose formula may hand back its cotangent itself or a view of it: a buffer that more paths add to
# (`+=`, in place) then starts as its own copy, so that the addition changes nothing else
_ALIASING = set(VIEWS) - {
    "SelectBackward0",
    "SliceBackward0",
    "IndexBackward0",
    "IndexSelectBackward0",
    "GatherBackward0",
    "SplitBackward0",
    "SplitWithSizesBackward0",
    "UnbindBackward0",
    "RepeatBackward0",
}
_ALIASING |= {"AddBackward0", "AddBackward1", "SubBackward0", "SubBackward1", "CloneBackward0", "AliasBackward0"}
_ALIASING |= {"ToCopyBackward0", "AddmmBackward0", "WhereBackward0"}
_ALIASING |= {
    "SumBackward0",
    "SumBackward1",
    "ConstantPadNdBackward0",
}  # g.expand(...): one element in many places, += would write it twice


class BadRecord(ValueError):
    """A record that is not what a capture makes (a forged or broken event): no script is written."""


@dataclass
class Script:
    """The script's text and what it needs and says: the tensors to save beside it, its node count, and which
    nodes the table wrote (only then is the script independent of autograd's kernels)."""

    code: str
    keys: list[str]  # the tensors of the record it loads
    nodes: int  # statements, one per node autograd ran
    covered: bool  # every node from the formula table
    aten: list[str] = field(default_factory=list)  # nodes written as a call to autograd's own ATen op
    recorded: list[str] = field(default_factory=list)  # nodes whose recorded result the script loads
    # per node in the order autograd ran them: its index in the record and the script's lines it wrote
    steps: list[tuple[int, list[str]]] = field(default_factory=list)


def comment(text: Any, width: int = 100) -> str:
    """Text safe inside a `# comment`: no line breaks, no control or format characters, at most `width`."""
    text = "".join(ch if unicodedata.category(ch)[0] not in "CZ" or ch == " " else " " for ch in str(text))
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def string(text: str) -> str:
    """A Python string literal for `text` (a JSON string literal is one), checked to read back as it."""
    out = json.dumps(str(text), ensure_ascii=True)
    if ast.literal_eval(out) != text:
        raise BadRecord("a name that does not survive quoting")
    return out


class _Names:
    """Variable names: an identifier from the source where it is a safe one, else a generated one; unique."""

    def __init__(self) -> None:
        self.taken: set[str] = set(_RESERVED) | set(keyword.kwlist) | set(keyword.softkwlist)

    def new(self, wanted: str | None, fallback: str) -> str:
        base = (wanted or "").replace(".", "_")
        if not (base.isidentifier() and base.isascii() and len(base) <= 40) or base in self.taken:
            base = fallback if fallback not in self.taken else fallback
        name, k = base, 2
        while name in self.taken or keyword.iskeyword(name):
            name, k = f"{base}_{k}", k + 1
        self.taken.add(name)
        return name


def _short(node_name: str) -> str:
    """`MulBackward0` -> `mul`: the stem generated names are made from."""
    stem = re.sub(r"Backward\d*$", "", node_name)
    stem = re.sub(r"(?<!^)(?=[A-Z])", "_", stem).lower()
    return stem if stem.isidentifier() and stem.isascii() else "node"


def build(record: dict[str, Any], stem: str, title: str, numbers: dict[str, float] | None = None) -> Script:
    """The script of one call; `record` must have passed `check_record`. `numbers`: the value of each 0-d
    tensor (a number the source wrote, such as the 3 of 3*a), said beside its load."""
    numbers = numbers or {}
    nodes, order = record["nodes"], record["order"]
    names = _Names()
    tensor_var: dict[str, str] = {}
    loads: list[str] = []

    def var_of(key: str, attr: str, node_name: str) -> str:
        if key not in tensor_var:
            source = record["names"].get(key)
            tensor_var[key] = names.new(source, f"{_short(node_name)}_{attr}")
            said = f"  # {comment(source)}, as backward saved it" if source else ""
            if not source and key in numbers:
                said = f"  # the number {numbers[key]:.8g}"
            loads.append(f"{tensor_var[key]} = T[{string(key)}]{said}")
        return tensor_var[key]

    # where more than one contribution arrives: the first starts a copy, the rest add with +=
    arriving: dict[tuple[int, int], int] = {}
    ran = set(order)
    mixed = len({e["dtype"] for i in order for e in nodes[i]["edges"] if e["dtype"]}) > 1  # see _cast
    for i in order:
        for e in nodes[i]["edges"]:
            if e["to"] is not None and e["shape"] is not None:
                arriving[(e["to"], e["input_nr"])] = arriving.get((e["to"], e["input_nr"]), 0) + 1
    for r in record["roots"]:
        arriving[(r["node"], r["input_nr"])] = arriving.get((r["node"], r["input_nr"]), 0) + 1

    buffers: dict[tuple[int, int], str] = {}

    def buffer_name(target: tuple[int, int]) -> str:
        node = nodes[target[0]]
        if node["name"] == "AccumulateGrad" and node["leaf"]:
            wanted = f"grad_{str(node['leaf']).replace('.', '_')}"
        elif node["value_of"] and target[1] == 0:
            wanted = f"grad_{node['value_of']}"
        else:
            wanted = None
        return names.new(wanted, f"grad_{_short(node['name'])}{target[0]}")

    body: list[tuple[str, str]] = []  # (code, comment)

    def contribute(parts: list[tuple[tuple[int, int], str, bool]], said: str) -> None:
        """One statement for the node: new buffers assigned, existing ones added to with += after it."""
        fresh_targets, fresh_exprs, adds = [], [], []
        for target, expr, aliasing in parts:
            if target in buffers:
                temp = names.new(None, "part")
                fresh_targets.append(temp)
                fresh_exprs.append(expr)
                adds.append((buffers[target], temp))
            else:
                buffers[target] = buffer_name(target)
                if arriving.get(target, 0) > 1 and aliasing:
                    expr = f"({expr}).clone()" if not expr.isidentifier() else f"{expr}.clone()"
                fresh_targets.append(buffers[target])
                fresh_exprs.append(expr)
        if len(fresh_targets) == 1 and adds and adds[0][1] == fresh_targets[0]:  # only an addition: one +=
            body.append((f"{adds[0][0]} += {fresh_exprs[0]}", said))
            return
        picks = [_PICK.fullmatch(e) for e in fresh_exprs]
        if len(picks) > 1 and all(picks) and len({p.group(1) for p in picks if p}) == 1:
            slots = ["_"] * (1 + max(int(p.group(2)) for p in picks if p))
            for slot, p in zip(fresh_targets, picks, strict=True):
                slots[int(p.group(2)) if p else 0] = slot
            call = picks[0].group(1) if picks[0] else ""
            body.append((f"{', '.join(slots)}, *_ = {call}", said))  # *_: the parts no edge takes
        else:
            body.append((f"{', '.join(fresh_targets)} = {', '.join(fresh_exprs)}", said))
        for total, temp in adds:
            body.append((f"{total} += {temp}", "a second path adds its part"))

    v_names: list[str] = []
    for k, r in enumerate(record["roots"]):
        v = names.new("v" if len(record["roots"]) == 1 else f"v{k + 1}", f"v{k + 1}")
        loads.append(f"{v} = T[{string(r['v'])}]  # the v given to backward: the cotangent of the output")
        v_names.append(v)
        target = (r["node"], r["input_nr"])
        contribute([(target, v, True)], f"v enters at {comment(nodes[r['node']]['name'], 40)}")

    aten: list[str] = []
    recorded: list[str] = []
    results = record["results"]
    lines = _lines(nodes, order)
    shown_line = None
    statements = 0
    marks: list[tuple[int, int]] = []  # (node, where its statements start in body)
    for i in order:
        marks.append((i, len(body)))
        node = nodes[i]
        name = node["name"]
        line, source = lines.get(i, (None, None))
        if line is not None and line != shown_line and source:
            body.append(("", f"line {line}: {comment(source)}"))
        shown_line = line if line is not None else shown_line
        where = f"line {line}" if line is not None else "line unknown"
        statements += 1
        if name == "AccumulateGrad":
            buf = buffers.get((i, 0))
            which = next((j for j, r in enumerate(results) if r["node"] == i), None)
            leaf = comment(node["leaf"] or "a leaf", 60)
            if which is None or buf is None:
                why = "nothing arrived" if buf is None else "not an input of this call"
                body.append(("pass", f"AccumulateGrad, {leaf}.grad: {why}"))
                continue
            body.append((f"grads[{string(results[which]['name'])}] = {buf}", f"AccumulateGrad, {leaf}.grad"))
            continue
        grads = [buffers.get((i, k)) for k in range(max(1, len(node["received"])))]
        at = At(
            grads=grads,
            saved=node["saved"],
            names=_LazyNames(node, var_of),
            edges=node["edges"],
            received=node["received"],
        )
        exprs, how, broadcasts = _write(node, at)
        if how == "aten":
            aten.append(name)
        elif how == "recorded":
            recorded.append(name)
            exprs = [None if key is None else f"T[{string(key)}]" for key in (node["result"] or [])]
        parts = []
        received = node["received"][0] if node["received"] else None
        for k, e in enumerate(node["edges"]):
            expr = exprs[k] if k < len(exprs) else None
            if e["to"] is None or e["shape"] is None or expr is None or e["to"] not in ran | {e["to"]}:
                continue
            spread = broadcasts is True or (isinstance(broadcasts, tuple) and k in broadcasts)
            if spread and received is not None and e["shape"] != received:
                expr = f"({expr}).sum_to_size({lit(e['shape'])})"  # autograd's engine sums a broadcast input back
            aliasing = how == "recorded" or name in _ALIASING or expr.isidentifier()
            parts.append(((e["to"], e["input_nr"]), _cast(expr, e["dtype"]) if mixed else expr, aliasing))
        said = f"{comment(name, 60)}, {where}"
        if node["value_of"]:
            said += f" ({comment(node['value_of'], 40)})"
        if how == "aten":
            said += ": no formula in the table; autograd's own ATen op"
        elif how == "recorded":
            kind = "a custom Function's backward" if node["custom"] else "no formula in the table"
            said += f": {kind}, its result as recorded when it ran"
        if not parts:
            body.append(("pass", said + "; sends nothing on"))
            continue
        contribute(parts, said)

    steps = _steps(marks, body)
    body += _returned(results, nodes, ran, buffers)

    used = sorted({h for n in (nodes[i] for i in order) for h in _helpers(n)})
    code = _assemble(stem, title, loads, body, used)
    return Script(
        code=code,
        keys=list(tensor_var) + [r["v"] for r in record["roots"]] + _recorded_keys(nodes, order, recorded),
        nodes=statements,
        covered=not aten and not recorded,
        aten=aten,
        recorded=recorded,
        steps=steps,
    )


def _cast(expr: str, dtype: str | None) -> str:
    """In a graph of several dtypes, a cotangent cast to its input's dtype, as autograd's engine casts each one
    (float64 v through a float32 value is rounded there); in a graph of one dtype, no cast is written."""
    return f"({expr}).to(torch.{dtype})" if dtype else expr


def _steps(marks: list[tuple[int, int]], body: list[tuple[str, str]]) -> list[tuple[int, list[str]]]:
    """Each node's statements (headings left out), from where each node's statements start in `body`."""
    ends = [start for _, start in marks[1:]] + [len(body)]
    return [(i, _rendered([b for b in body[start:end] if b[0]])) for (i, start), end in zip(marks, ends, strict=True)]


def _returned(
    results: list[dict[str, Any]], nodes: list[dict[str, Any]], ran: set[int], buffers: dict[tuple[int, int], str]
) -> list[tuple[str, str]]:
    """autograd.grad returns its inputs' cotangents; no AccumulateGrad ran for them: one statement each."""
    out = []
    for r in results:
        at_node = r["node"]
        if at_node is not None and nodes[at_node]["name"] == "AccumulateGrad" and at_node in ran:
            continue
        buf = buffers.get((at_node, r["input_nr"])) if at_node is not None else None
        said = "what the call returns for it" if buf is not None else "no path from the output reaches it"
        out.append((f"grads[{string(r['name'])}] = {buf if buf is not None else 'None'}", said))
    return out


def _lines(nodes: list[dict[str, Any]], order: list[int]) -> dict[int, tuple[int, str | None]]:
    """Each node's line: its own, else that of the node that sent it its cotangent (a node made inside a
    torch function, such as matmul's expand and bmm, has none of its own; its consumer's line made it)."""
    found: dict[int, tuple[int, str | None]] = {}
    for i, node in enumerate(nodes):
        if node["line"] is not None:
            found[i] = (node["line"], node["source"])
    for i in order:
        if i not in found:
            continue
        for e in nodes[i]["edges"]:
            to = e["to"]
            if to is not None and to not in found and nodes[to]["name"] != "AccumulateGrad":
                found[to] = found[i]
    return found


def _recorded_keys(nodes: list[dict[str, Any]], order: list[int], recorded: list[str]) -> list[str]:
    if not recorded:
        return []
    keys = []
    for i in order:
        n = nodes[i]
        if n["name"] in recorded and n["result"]:
            keys += [k for k in n["result"] if k is not None]
    return keys


class _LazyNames(dict):  # type: ignore[type-arg]
    """A saved tensor's key -> its variable, made (and loaded in the script) the first time a formula asks."""

    def __init__(self, node: dict[str, Any], var_of: Any) -> None:
        super().__init__()
        self.node, self.var_of = node, var_of
        self.attr_of: dict[str, str] = {}
        for attr, value in node["saved"].items():
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, dict) and "tensor" in item:
                    self.attr_of.setdefault(item["tensor"], attr)

    def __missing__(self, key: str) -> str:
        if key not in self.attr_of:
            raise Unwritable(f"a tensor {key!r} the node did not save")
        return str(self.var_of(key, self.attr_of[key], self.node["name"]))


def _write(node: dict[str, Any], at: At) -> tuple[list[str | None], str, bool | tuple[int, ...]]:
    """The node's expressions per edge and how they were found: "table", "aten" or "recorded"."""
    name = node["name"]
    if node["custom"]:
        return [], "recorded", False
    entry = FORMULAS.get(name)
    if entry is not None:
        try:
            return entry.rule(at), "table", entry.broadcasts
        except (Unwritable, KeyError, TypeError, IndexError, ValueError, ZeroDivisionError):
            pass
    aten = ATEN.get(name)
    if aten is not None:
        try:
            return aten(at), "aten", False
        except (Unwritable, KeyError, TypeError, IndexError, ValueError):
            pass
    return [], "recorded", False


def _helpers(node: dict[str, Any]) -> tuple[str, ...]:
    entry = FORMULAS.get(node["name"])
    return entry.helpers if entry is not None and not node["custom"] else ()


def _rendered(body: list[tuple[str, str]], width: int | None = None) -> list[str]:
    """Statements as the script writes them, each with its comment (at `width`, else just after it)."""
    lines: list[str] = []
    for code, said in body:
        if not code:  # a heading: the source line the next statements come from
            lines += ["", f"# {said}"]
        else:
            lines.append(f"{code.ljust(width or 0)}  # {said}" if said else code)
    return lines


def _assemble(stem: str, title: str, loads: list[str], body: list[tuple[str, str]], helpers: list[str]) -> str:
    width = max([len(c) for c, _ in body if len(c) <= 88] + [40])
    width = min(width, 88)
    lines = [
        f"# {comment(title, 110)}",
        "# Written by vjp-explorer (vjp run ... --code DIR): the backward pass autograd ran for this call, one",
        "# statement per node of the backward graph in the order autograd ran them, in plain tensor arithmetic",
        f"# (no autograd). The saved tensors and v come from {stem}.pt. `python {stem}.py` prints one line of",
        "# JSON: each input's gradient.",
        "import json",
        "import math",
        "import pathlib",
        "",
        "import torch",
        "",
        f"T = torch.load(pathlib.Path(__file__).resolve().with_name({string(stem + '.pt')}), weights_only=True)",
    ]
    for h in helpers:
        lines += HELPERS[h].rstrip("\n").split("\n")
    lines += ["", *loads, "grads = {}", ""]
    lines += _rendered(body, width)
    lines += [
        "",
        "print(json.dumps({k: None if g is None else g.tolist() for k, g in grads.items()}))",
        "",
    ]
    return "\n".join(lines)


def check_record(record: Any) -> dict[str, Any]:
    """The record if it has the shape and types a capture makes, else BadRecord: what the parent will turn into
    code came from the snippet's process, so nothing in it is trusted."""
    try:
        return _checked(record)
    except BadRecord:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise BadRecord(f"a malformed record ({type(e).__name__})") from None


def _checked(record: dict[str, Any]) -> dict[str, Any]:
    names = {str(k): str(v) for k, v in dict(record["names"]).items()}
    if not all(_KEY.fullmatch(k) for k in names):
        raise BadRecord("a tensor key that is not one")
    nodes = list(record["nodes"])
    n = len(nodes)
    out_nodes = []
    for node in nodes:
        edges = [
            {
                "to": _index(e["to"], n),
                "input_nr": _int(e["input_nr"]),
                "shape": _shape(e["shape"]),
                "dtype": _dtype(e["dtype"]),
            }
            for e in node["edges"]
        ]
        out_nodes.append(
            {
                "name": str(node["name"]),
                "custom": bool(node["custom"]) and node["custom"] is True,
                "saved": {str(k): _value(v) for k, v in dict(node["saved"]).items() if str(k).isidentifier()},
                "edges": edges,
                "received": [_shape(s) for s in node["received"]],
                "result": None if node["result"] is None else [None if k is None else _key(k) for k in node["result"]],
                "leaf": None if node["leaf"] is None else str(node["leaf"]),
                "value_of": None if node["value_of"] is None else str(node["value_of"]),
                "line": None if node["line"] is None else _int(node["line"]),
                "source": None if node["source"] is None else str(node["source"]),
            }
        )
    order = [_index(i, n) for i in record["order"]]
    if None in order or len(set(order)) != len(order):
        raise BadRecord("an order that is not one")
    roots = [
        {"node": _index(r["node"], n), "input_nr": _int(r["input_nr"]), "v": _key(r["v"])} for r in record["roots"]
    ]
    if any(r["node"] is None for r in roots):
        raise BadRecord("a root that is not a node")
    results = [
        {
            "name": str(r["name"]),
            "node": None if r["node"] is None else _index(r["node"], n),
            "input_nr": _int(r["input_nr"]),
        }
        for r in record["results"]
    ]
    return {"nodes": out_nodes, "order": order, "roots": roots, "results": results, "names": names}


def _int(x: Any) -> int:
    if type(x) is not int or not -(2**63) <= x < 2**63:
        raise BadRecord("a number that is not an int")
    return x


def _index(x: Any, n: int) -> int | None:
    if x is None:
        return None
    if type(x) is not int or not 0 <= x < n:
        raise BadRecord("a node index out of range")
    return x


def _shape(x: Any) -> list[int] | None:
    if x is None:
        return None
    if not isinstance(x, list) or not all(type(d) is int and 0 <= d < 2**62 for d in x):
        raise BadRecord("a shape that is not one")
    return list(x)


def _dtype(x: Any) -> str | None:
    if x is None:
        return None
    if x not in DTYPES:
        raise BadRecord("a dtype that is not one")
    return str(x)


def _key(x: Any) -> str:
    if not isinstance(x, str) or not _KEY.fullmatch(x):
        raise BadRecord("a tensor key that is not one")
    return x


def _value(x: Any) -> Any:
    """A saved value: a number, a bool, None, a short lowercase word, a tensor key, or a list of those."""
    if x is None or type(x) in (bool, float):
        return x
    if type(x) is int:
        return _int(x)
    if isinstance(x, str):
        if not _WORD.fullmatch(x):
            raise BadRecord("a saved string that is not a plain option")
        return x
    if isinstance(x, list):
        return [_value(v) for v in x]
    if isinstance(x, dict) and set(x) == {"tensor"}:
        return {"tensor": _key(x["tensor"])}
    if isinstance(x, dict) and set(x) == {"unreadable"}:
        return {"unreadable": "?"}
    raise BadRecord("a saved value of an unknown kind")
