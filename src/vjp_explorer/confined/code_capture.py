"""`--code` in the child: the backward graph of an explained call captured (engine/backward_capture.py) and
sent as plain data with the event. The parent writes the script from it (backward_code/); nothing here makes
code that runs, and nothing the parent runs comes from this process as text.
"""

from __future__ import annotations

from typing import Any

from ..backward_code.formulas import keeps_result
from ..engine.backward_capture import CodeCapture, id_of, names_by_storage
from .checks import outside_the_log


def start(observer: Any, outs: list[Any], vs: list[Any], inputs: list[Any], line_key: str) -> CodeCapture:
    """Before the call runs: its graph walked, saved tensors read, hooks put on every node. `line_key`: the
    metadata key under which --graph's hook left each node's line (record.LINE)."""
    import linecache

    made: dict[int, str] = {}
    for name, value in observer.namespace.items():
        if getattr(value, "grad_fn", None) is not None and not name.startswith("__"):
            made.setdefault(id(value.grad_fn), name)

    def describe(node: Any) -> dict[str, Any]:
        leaf = getattr(node, "variable", None)
        line = (node.metadata.get(line_key, 0) or _stack_line(node, observer.filename)) if leaf is None else 0
        return {
            "leaf": None if leaf is None else observer.name_of(leaf),
            "value_of": made.get(id(node)),
            "line": line or None,
            "source": linecache.getline(observer.filename, line).strip() if line else None,
        }

    by_storage = names_by_storage(observer.namespace)

    def name_of(t: Any) -> str | None:
        name = by_storage.get(id_of(t))
        if name is None and (t.requires_grad or t.grad_fn is not None):
            name = observer.name_of(t)
        return None if name is None or name.startswith("tensor[") else name

    observer.recorder.mark_lines()  # the forward's last op: its node was made after the log saw it
    names = [observer.name_of(x) for x in inputs]
    capture = CodeCapture(outs, vs, inputs, names, describe, name_of, keeps_result)
    observer.recorder.paused += 1  # reading the saved tensors is not the forward
    try:
        with outside_the_log():
            capture.start()
    except Exception as e:  # noqa: BLE001 - the tool's own failure is never the snippet's exception
        capture.stop()
        capture.failed = f"{type(e).__name__}: {str(e)[:200]}"
    finally:
        observer.recorder.paused -= 1
    return capture


def finish(capture: CodeCapture) -> dict[str, Any]:
    """After the call: the record and the tensors its script loads, encoded for the channel."""
    capture.stop()
    try:
        with outside_the_log():
            return capture.payload()
    except Exception as e:  # noqa: BLE001 - the tool's own failure is never the snippet's exception
        return {"skipped": f"the graph could not be read ({type(e).__name__}: {str(e)[:200]})"}


def _stack_line(node: Any, filename: str) -> int:
    """The snippet's innermost line in the forward stack anomaly mode kept for the node (where the snippet
    turned anomaly mode on itself and the log's mark is missing), else 0."""
    stack = node.metadata.get("traceback_") or []
    mark = f'File "{filename}", line '
    for frame in reversed(list(stack)):
        text = str(frame).strip()
        if text.startswith(mark):
            number = text[len(mark) :].split(",", 1)[0]
            return int(number) if number.isdigit() else 0
    return 0
