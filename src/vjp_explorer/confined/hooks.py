"""The snippet's hooks that change a gradient on its way: then `.grad` is not Jᵀv, by the snippet's design.

Every way PyTorch lets code change a gradient during backward is watched where it is registered, and the
hook is wrapped so its effect is seen when it runs: what it returns (another gradient) or what it changes
in place (`grad *= 2`, `g.clamp_(-1, 1)`, an optimizer step in a post-accumulate-grad hook):
- `Tensor.register_hook(fn)`: fn(grad);
- a backward node's `register_hook(fn)` / `register_prehook(fn)` (`y.grad_fn.register_hook`): torch routes
  both through `Function._register_hook`; fn(grad_inputs, grad_outputs) / fn(grad_outputs);
- `Module.register_full_backward_hook(fn)` / `register_full_backward_pre_hook(fn)` / `register_backward_hook`,
  and for every module at once `torch.nn.modules.module.register_module_full_backward_hook(fn)` /
  `register_module_full_backward_pre_hook(fn)`: fn(module, grad_input, grad_output) / fn(module, grad_output);
- `Tensor.register_post_accumulate_grad_hook(fn)`: fn(tensor), after `.grad` is written;
- `torch.autograd.graph.saved_tensors_hooks(pack, unpack)`: what backward reads is unpack(pack(x)).
`HookWatch.changed` names the first kind that changed a gradient since `reset()`. The wrappers call the
snippet's hook exactly once, with its own arguments, and return what it returns.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from . import checks

TENSOR, NODE, MODULE, ACCUMULATED, SAVED = (
    "register_hook",
    "a hook on a backward node (grad_fn.register_hook or register_prehook)",
    "a module's backward hook",
    "a post-accumulate-grad hook",
    "saved_tensors_hooks whose unpack does not give back what was saved",
)
SAVED_COPY = 1_000_000  # elements of a saved tensor kept to compare with what unpack gives back


class HookWatch:
    """Installs the wrappers; `changed` is set by a hook that changed a gradient."""

    def __init__(self) -> None:
        self.changed: str | None = None

    def reset(self) -> None:
        self.changed = None

    def install(self) -> None:
        self._tensor_hooks()
        self._node_hooks()
        self._module_hooks()
        self._saved_tensor_hooks()

    def _saved_tensor_hooks(self) -> None:
        """`with torch.autograd.graph.saved_tensors_hooks(pack, unpack)`: what backward reads is what unpack
        returns; a lossy pair (rounding, compression) changes the gradient by the snippet's design."""
        cls = torch.autograd.graph.saved_tensors_hooks
        real = cls.__init__
        watch = self

        def __init__(self: Any, pack_hook: Any, unpack_hook: Any) -> None:
            if type(self) is not cls or not callable(pack_hook) or not callable(unpack_hook):
                return real(self, pack_hook, unpack_hook)  # torch's own (save_on_cpu, checkpointing)

            def pack(x: torch.Tensor) -> Any:
                with checks.outside_the_log():
                    kept = x.detach().clone() if x.numel() <= SAVED_COPY else None
                return (pack_hook(x), kept)

            def unpack(packed: Any) -> Any:
                inner, kept = packed
                out = unpack_hook(inner)
                if kept is not None and watch.changed is None:
                    with checks.outside_the_log():
                        if _differs(out, kept):
                            watch.changed = SAVED
                return out

            return real(self, pack, unpack)

        cls.__init__ = __init__  # type: ignore[method-assign]

    def _watched(self, hook: Any, kind: str, replaced: int) -> Any:
        """`hook` wrapped: a result other than None that differs from argument `replaced`, or that argument
        changed in place, marks `kind`."""
        watch = self
        if str(getattr(hook, "__module__", None) or "").startswith(("torch.", "vjp_explorer.")):
            return hook  # torch's own (a module's backward hook rides on node hooks), or the tool's watches

        @functools.wraps(hook)
        def watched(*args: Any) -> Any:
            given = args[replaced] if len(args) > replaced else None
            kept = _copy(given) if watch.changed is None else None
            out = hook(*args)
            if watch.changed is None:
                with checks.outside_the_log():
                    if (out is not None and _differs(out, given)) or (kept is not None and _differs(given, kept)):
                        watch.changed = kind
            return out

        return watched

    def _tensor_hooks(self) -> None:
        real = torch.Tensor.register_hook
        accumulated = torch.Tensor.register_post_accumulate_grad_hook
        watch = self

        def register_hook(self: torch.Tensor, hook: Any) -> Any:
            return real(self, watch._watched(hook, TENSOR, 0) if callable(hook) else hook)

        def register_post_accumulate_grad_hook(self: torch.Tensor, hook: Any) -> Any:
            if not callable(hook):
                return accumulated(self, hook)  # torch's own error

            @functools.wraps(hook)
            def watched(t: torch.Tensor) -> Any:
                with checks.outside_the_log():
                    kept = (_copy(t.detach()), _copy(t.grad)) if watch.changed is None else None
                out = hook(t)
                if kept is not None:
                    with checks.outside_the_log():
                        if _differs(t.detach(), kept[0]) or _differs(t.grad, kept[1]):
                            watch.changed = ACCUMULATED
                return out

            return accumulated(self, watched)

        for fn, was in ((register_hook, real), (register_post_accumulate_grad_hook, accumulated)):
            fn.__doc__, fn.__name__ = was.__doc__, was.__name__
        torch.Tensor.register_hook = register_hook  # type: ignore[method-assign]
        torch.Tensor.register_post_accumulate_grad_hook = register_post_accumulate_grad_hook  # type: ignore[method-assign]

    def _node_hooks(self) -> None:
        from torch.autograd.function import _HookMixin

        real = _HookMixin._register_hook
        watch = self

        def _register_hook(backward_hooks: Any, hook: Any) -> Any:
            return real(backward_hooks, watch._watched(hook, NODE, 0) if callable(hook) else hook)

        _HookMixin._register_hook = staticmethod(_register_hook)  # type: ignore[method-assign,assignment]

    def _module_hooks(self) -> None:
        module = torch.nn.Module
        watch = self
        for name, replaced in (
            ("register_full_backward_hook", 1),
            ("register_full_backward_pre_hook", 1),
            ("register_backward_hook", 1),
        ):
            real = getattr(module, name)

            def register(self: Any, hook: Any, *args: Any, _real: Any = real, _at: int = replaced, **kw: Any) -> Any:
                return _real(self, watch._watched(hook, MODULE, _at) if callable(hook) else hook, *args, **kw)

            register.__doc__, register.__name__ = real.__doc__, name
            setattr(module, name, register)
        # the same hooks registered for every module at once (torch.nn.modules.module.register_module_...)
        where = torch.nn.modules.module
        for name in (
            "register_module_full_backward_hook",
            "register_module_full_backward_pre_hook",
            "register_module_backward_hook",
        ):
            real = getattr(where, name)

            def every(hook: Any, _real: Any = real) -> Any:
                return _real(watch._watched(hook, MODULE, 1) if callable(hook) else hook)

            every.__doc__, every.__name__ = real.__doc__, name
            setattr(where, name, every)


def _copy(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.detach().clone()
    if isinstance(x, (tuple, list)):
        return type(x)(_copy(t) for t in x)
    return x


def _differs(a: Any, b: Any) -> bool:
    """Whether two gradients (tensors, or tuples of them with Nones) differ in shape or value."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape != b.shape or not bool(torch.equal(a.detach(), b.detach()))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) != len(b) or any(_differs(x, y) for x, y in zip(a, b, strict=True))
    return (a is None) != (b is None) or (a is not None and type(a) is not type(b))
