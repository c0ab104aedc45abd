"""Reading the one JSON document (docs/json.md, schema 5) in tests: a call's event, its inputs by name, and
one array per leaf (what schema 4 kept in top-level dicts such as `grads` and `jtv`)."""

from __future__ import annotations

from typing import Any


def event(doc: dict[str, Any], k: int = 0) -> dict[str, Any]:
    """The k-th backward/grad call of the document (a program's run has one)."""
    return doc["events"][k]


def inputs(doc: dict[str, Any], k: int = 0) -> dict[str, dict[str, Any]]:
    """The call's inputs by name."""
    return {x["name"]: x for x in event(doc, k)["inputs"]}


def per_leaf(doc: dict[str, Any], key: str, k: int = 0) -> dict[str, Any]:
    """One field of every input that requires grad, by name: per_leaf(d, "jtv") is schema 4's d["jtv"]."""
    return {x["name"]: x[key] for x in event(doc, k)["inputs"] if x["requires_grad"]}
