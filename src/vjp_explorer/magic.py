"""`%load_ext vjp_explorer` and the `%%vjp` cell magic: a notebook cell's backward and grad calls explained.

The cell runs in the user's own kernel and namespace (trusted: the user's own code, through trusted.run_cell),
so its variables stay for the next cell. While it runs, the observer the confined child uses
(confined/observe.py) watches torch's autograd entry points; every attribute it patches is put back after
the cell, whatever the cell did. The calls are shown in one HTML display, as `run_snippet` shows a snippet's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from .calls import Verdict

CELLS = [0]  # cells run so far: each gets a file name of its own, as IPython's do


def load_ipython_extension(ipython: Any) -> None:
    """What `%load_ext vjp_explorer` calls: register `%%vjp`."""
    ipython.register_magic_function(vjp_magic, magic_kind="cell", magic_name="vjp")


def vjp_magic(line: str, cell: str) -> None:
    """%%vjp: run the cell here; explain each backward/grad call it made in one display."""
    from IPython import get_ipython
    from IPython.display import HTML, display

    shell = get_ipython()
    namespace = shell.user_ns if shell is not None else {}
    result, raised = explain_cell(cell, namespace)
    display(HTML(result._repr_html_() or ""))
    if raised is not None:
        raise raised  # the cell's own error, after what ran before it: IPython shows it as it would


def explain_cell(cell: str, namespace: dict[str, Any]) -> tuple[Any, BaseException | None]:
    """Run `cell` in `namespace`, observed: (the SnippetResult of its calls, the exception it raised or None)."""
    import torch

    from .confined.judging import merge, paired
    from .confined.protocol import safe_text
    from .confined.verdict import verdict
    from .snippet.door import _event
    from .snippet.result import SnippetResult
    from .trusted import run_cell

    CELLS[0] += 1
    filename = f"<vjp cell {CELLS[0]}>"
    frames: list[dict[str, Any]] = []
    raised: BaseException | None = None
    with _observed(frames.append, filename, namespace):
        try:
            run_cell(cell, namespace, filename)
        except Exception as error:  # the cell's own error: shown after the calls that ran before it
            raised = error
    sent = paired(frames)  # each event with its record
    for raw in sent:  # the cell is the user's own code in their own kernel: judged here, as the judge would
        merge(raw, cast("Verdict", verdict(raw)) if raw.get("record") is not None else None)
    events = [_event(raw, k + 1, safe_text) for k, raw in enumerate(sent)]
    steps = _steps(cell)
    for event in events:
        at = next((s for s in steps if s.line <= event.line <= s.end_line), None)
        if at is not None:
            at.events.append(event.index)
    result = SnippetResult(
        label="%%vjp cell",
        seed=int(torch.initial_seed() % 2**31),
        seed_given=True,  # the kernel's own generator state: nothing to pass back
        repl=False,
        torch_version=torch.__version__,
        steps=steps,
        events=events,
        error=None,
        notes=[],
        stdout="",
    )
    return result, raised


def _steps(cell: str) -> list[Any]:
    """The cell's top-level statements, as a snippet's transcript lists them (their output went to the cell)."""
    import ast

    from .snippet.result import Step

    lines = cell.split("\n")
    try:
        body = ast.parse(cell).body
    except SyntaxError:
        return []
    out = []
    for stmt in body:
        end = stmt.end_lineno or stmt.lineno
        out.append(Step(line=stmt.lineno, end_line=end, source="\n".join(lines[stmt.lineno - 1 : end]), stdout=""))
    return out


def torch_attributes() -> list[tuple[Any, dict[str, Any]]]:
    """What the observer may patch, as it is now: every torch module loaded (whatever the observer wraps,
    now or later) and the classes it patches, each with a copy of its attributes (put_back restores them)."""
    import sys

    import torch
    import torch.autograd.forward_ad  # noqa: F401 - its make_dual/unpack_dual are wrapped (confined/functional.py)
    import torch.autograd.functional
    import torch.autograd.graph
    import torch.func
    from torch.autograd.function import _HookMixin
    from torch.autograd.variable import Variable

    modules = [m for n, m in sorted(sys.modules.items()) if n.split(".")[0] == "torch" and m is not None]
    patched = [
        *modules,
        torch.Tensor,
        torch.autograd.graph.saved_tensors_hooks,
        torch.autograd.Function,
        _HookMixin,  # a node's register_hook (confined/hooks.py)
        torch.nn.Module,
        Variable,  # its _execution_engine (observe._engine): left wrapped, the judging after the cell was observed
    ]
    return [(obj, dict(vars(obj))) for obj in patched]


def put_back(before: list[tuple[Any, dict[str, Any]]]) -> None:
    """Every attribute set or added since torch_attributes() put back (a submodule imported meanwhile stays)."""
    import types

    for obj, was in before:
        for name, value in list(vars(obj).items()):
            if name not in was:
                if not isinstance(value, types.ModuleType):
                    delattr(obj, name)
            elif was[name] is not value:
                setattr(obj, name, was[name])


@contextmanager
def _observed(send: Any, filename: str, namespace: dict[str, Any]) -> Iterator[None]:
    """The child's observer over torch's autograd entry points, for the length of one cell; then every
    attribute it set on torch's modules and classes is put back, and its recording mode left."""
    from .confined.observe import Observer

    before = torch_attributes()
    observer = Observer(send, filename, _UserNames(namespace), {"graph": False})
    entered = False
    try:
        observer.install()  # its recording mode is entered last
        entered = True
        yield
    finally:
        if entered:
            from torch.utils._python_dispatch import _get_current_dispatch_mode, _pop_mode

            observer.recorder.__exit__(None, None, None)
            while _get_current_dispatch_mode() is observer.recorder:  # switched on again by a call (record.switch)
                _pop_mode()
        put_back(before)


class _UserNames(dict):  # type: ignore[type-arg]
    """The notebook's namespace as the observer reads names from it: the user's own, live, without IPython's
    (`_`, `_3`, `Out`, ...), which hold the last values shown and would name a tensor `_`."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        super().__init__()
        self.namespace = namespace

    def items(self) -> list[tuple[str, Any]]:  # type: ignore[override]
        hidden = ("In", "Out", "get_ipython", "exit", "quit", "open")
        return [(k, v) for k, v in list(self.namespace.items()) if not k.startswith("_") and k not in hidden]

    def values(self) -> list[Any]:  # type: ignore[override]
        return [v for _, v in self.items()]
