"""`--code` in the child: the backward graph of an explained call captured (engine/backward_capture.py) and
sent as plain data with the event. The parent writes the script from it (backward_code/); nothing here makes
code, and nothing the parent runs comes from this process as text.
"""

from __future__ import annotations

import base64
from typing import Any

from ..backward_code.formulas import keeps_result
from ..backward_code.script import BadRecord, build, check_record
from ..engine.backward_capture import CodeCapture
from .checks import outside_the_log

CODE_BYTES = 1_500_000  # bytes of tensors one call's script may load (the event travels in one frame)


def start(observer: Any, outs: list[Any], vs: list[Any], inputs: list[Any]) -> CodeCapture:
    """Before the call runs: its graph walked, saved tensors read, hooks put on every node."""
    import linecache

    from .observe import LINE

    made: dict[int, str] = {}
    for name, value in observer.namespace.items():
        if getattr(value, "grad_fn", None) is not None and not name.startswith("__"):
            made.setdefault(id(value.grad_fn), name)

    def describe(node: Any) -> dict[str, Any]:
        leaf = getattr(node, "variable", None)
        line = (node.metadata.get(LINE, 0) or _stack_line(node, observer.filename)) if leaf is None else 0
        return {
            "leaf": None if leaf is None else observer.name_of(leaf),
            "value_of": made.get(id(node)),
            "line": line or None,
            "source": linecache.getline(observer.filename, line).strip() if line else None,
        }

    by_storage = _by_storage(observer)

    def name_of(t: Any) -> str | None:
        name = by_storage.get(_ident(t))
        if name is None and (t.requires_grad or t.grad_fn is not None):
            name = observer.name_of(t)
        return None if name is None or name.startswith("tensor[") else name

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
    if capture.failed:
        return {"skipped": f"the graph could not be read ({capture.failed})"}
    try:
        with outside_the_log():
            record = capture.record()
            script = build(check_record(record), "call", "")
    except BadRecord as e:
        return {"skipped": f"the graph could not be read back ({e})"}
    tensors = {k: capture.tensors[k] for k in dict.fromkeys(script.keys)}
    size = sum(t.numel() * t.element_size() for t in tensors.values())
    if size > CODE_BYTES:
        return {"skipped": f"its tensors hold {size:,} bytes, more than the {CODE_BYTES:,} a script is sent"}
    return {"record": record, "tensors": {k: encode(t) for k, t in tensors.items()}}


def encode(t: Any) -> dict[str, Any]:
    """A tensor as plain data: dtype, shape and its bytes in base64 (read back by backward_code/files.py)."""
    import torch

    t = t.detach().contiguous()
    raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
    return {
        "dtype": str(t.dtype).removeprefix("torch."),
        "shape": list(t.shape),
        "data": base64.b64encode(raw).decode(),
    }


def _ident(t: Any) -> tuple[Any, ...] | None:
    """What makes two tensor objects one tensor: a saved tensor comes back as a new object on the same memory."""
    if not t.numel():
        return None
    try:
        return (t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.storage_offset(), t.dtype)
    except RuntimeError:  # a tensor with no storage (a sparse or functorch one)
        return None


def _by_storage(observer: Any) -> dict[Any, str]:
    """The snippet's names for its tensors (globals, then modules' parameters), by `_ident`."""
    import torch

    found: dict[Any, str] = {}
    for name, value in list(observer.namespace.items()):
        if name.startswith("__"):
            continue
        if isinstance(value, torch.Tensor):
            found.setdefault(_ident(value), name)
        elif isinstance(value, torch.nn.Module):
            for pname, param in value.named_parameters():
                found.setdefault(_ident(param), f"{name}.{pname}")
    found.pop(None, None)
    return found


def _stack_line(node: Any, filename: str) -> int:
    """The snippet's innermost line in the forward stack anomaly mode kept for the node, else 0."""
    stack = node.metadata.get("traceback_") or []
    mark = f'File "{filename}", line '
    for frame in reversed(list(stack)):
        text = str(frame).strip()
        if text.startswith(mark):
            number = text[len(mark) :].split(",", 1)[0]
            return int(number) if number.isdigit() else 0
    return 0
