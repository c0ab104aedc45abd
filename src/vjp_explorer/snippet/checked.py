"""The child's events checked for the shapes the renderers read, before anything reads them.

An event is the snippet's word about itself (the snippet shares the child's process and can write frames
on its pipe): a field missing or of another type, an array that is not numbers, or a graph edge to no node
would otherwise raise deep in a renderer. Each check raises Malformed naming the field; the door makes that
"the snippet broke the channel". The values themselves are not judged here: they are only shown.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from typing import Any

MAX_DEPTH = 64  # nesting of an array's lists (a tensor's dimensions: torch allows 64)


class Malformed(ValueError):
    """Child-supplied data that is not what the renderers read; the message names the field."""


def array(x: Any, where: str) -> None:
    """None, a number, a text (a complex tensor's, or "nan"), or nested lists of those (a tensor's values)."""
    stack = [(x, 0)]
    while stack:
        item, depth = stack.pop()
        if item is None or type(item) in (int, float, bool, str):  # str: a complex tensor, as its text
            continue
        if type(item) is not list or depth >= MAX_DEPTH:
            raise Malformed(f"{where} is not an array of numbers")
        stack.extend((v, depth + 1) for v in item)


def record(cls: type, data: Any, where: str) -> dict[str, Any]:
    """`data` as keyword arguments of the dataclass `cls`: the required fields there, no other, each of
    its annotated type (`Any` fields are arrays, a class other than the basic ones is refused)."""
    if type(data) is not dict:
        raise Malformed(f"{where} is not an object")
    hints, known = _shape_of(cls)
    extra = set(data) - set(known)
    if extra:
        raise Malformed(f"{where} has unknown fields {sorted(extra)[:5]}")
    for name, f in known.items():
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if name not in data:
            if required:
                raise Malformed(f"{where} lacks {name!r}")
            continue
        if not _fits(data[name], hints[name], f"{where}.{name}"):
            raise Malformed(f"{where}.{name} is not what it should be")
        if hints[name] is Any and "shape" in data and data[name] is not None:
            _shaped(data[name], data["shape"], name, f"{where}.{name}")
    return data


@functools.cache
def _shape_of(cls: type) -> tuple[dict[str, Any], dict[str, dataclasses.Field[Any]]]:
    """A dataclass's field types and fields, read once per class (get_type_hints evaluates every annotation's
    text anew: a loop's thousands of events paid for it each time)."""
    return typing.get_type_hints(cls), {f.name: f for f in dataclasses.fields(cls)}


def _shaped(values: Any, shape: list[int], name: str, where: str) -> None:
    """The renderers index an array by the flat position of each element of `shape`: it must have them all
    (a Jacobian: one row per output element, each with this tensor's elements)."""
    n = math.prod(shape)
    if name == "jacobian":
        if type(values) is not list or not all(type(r) is list and _count(r) == n for r in values):
            raise Malformed(f"{where} is not a Jacobian of rows of {n} elements")
    elif _count(values) != n:
        raise Malformed(f"{where} does not have the {n} elements of its shape {shape}")


def _count(x: Any) -> int:
    """Elements of nested lists (a number counts one)."""
    total, stack = 0, [x]
    while stack:
        item = stack.pop()
        if type(item) is list:
            stack.extend(item)
        else:
            total += 1
    return total


def _fits(value: Any, hint: Any, where: str) -> bool:
    if hint is Any:
        array(value, where)
        return True
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, h, where) for h in typing.get_args(hint) if _plain(h))
    if origin in (list, tuple):
        item = typing.get_args(hint)[0]
        return type(value) is list and all(_fits(v, item, where) for v in value)
    if hint is type(None):
        return value is None
    if hint is float:
        return type(value) in (int, float)
    if hint in (int, str, bool):
        return type(value) is hint
    return False  # a class of ours (Tolerance, say): the child sends none


def _plain(hint: Any) -> bool:
    return hint in (int, float, str, bool, type(None), Any) or typing.get_origin(hint) in (list, tuple)


def summary(x: Any, where: str) -> None:
    """A graph's tensor summary: None, or {shape, norm, values?} (what graph_view reads)."""
    if x is None:
        return
    if type(x) is not dict or not _fits(x.get("shape"), list[int], where) or type(x.get("norm")) not in (int, float):
        raise Malformed(f"{where} is not a tensor summary")
    if "values" in x:
        array(x["values"], f"{where}.values")


_NODE = {"name": str, "ran": bool}
_NODE_OPTIONAL = {"leaf": str, "value_of": str, "source": str, "line": int}


def graph(nodes: Any, where: str) -> list[dict[str, Any]] | None:
    """The backward graph's nodes as graph_view reads them: node k has id k (it is looked up by position),
    every edge goes to a node or to None."""
    if nodes is None:
        return None
    if type(nodes) is not list or not all(type(n) is dict for n in nodes):
        raise Malformed(f"{where} is not a list of nodes")
    ids = range(len(nodes))
    for k, node in enumerate(nodes):
        if type(node.get("id")) is not int or node["id"] != k:
            raise Malformed(f"{where}[{k}].id is not {k}")
        at = f"{where}[{k}]"
        for name, kind in _NODE.items():
            if type(node.get(name)) is not kind:
                raise Malformed(f"{at}.{name} is not what it should be")
        for name, kind in _NODE_OPTIONAL.items():
            if name not in node or (node[name] is not None and type(node[name]) is not kind):
                raise Malformed(f"{at}.{name} is not what it should be")
        if "arriving" not in node:
            raise Malformed(f"{at} lacks 'arriving'")
        summary(node["arriving"], f"{at}.arriving")
        edges = node.get("edges")
        if type(edges) is not list:
            raise Malformed(f"{at}.edges is not a list")
        for edge in edges:
            if (
                type(edge) is not dict
                or "to" not in edge
                or "value" not in edge
                or type(edge.get("input_nr")) is not int
            ):
                raise Malformed(f"{at}.edges has an edge that is not one")
            if edge["to"] is not None and (type(edge["to"]) is not int or edge["to"] not in ids):
                raise Malformed(f"{at}.edges has an edge to no node")
            summary(edge["value"], f"{at}.edges.value")
            summary(edge.get("local"), f"{at}.edges.local")
    return nodes
