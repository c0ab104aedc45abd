"""Forward: run the program on the bound tensors, with a trace of what ran, and choose v.

Inputs: the program, the bound values, the request's v (a value, ones, or a probe). Outputs: the Forward
(engine.interpreter: the steps, the environment, the control flow taken), the output tensor, v and where it
came from, and the intermediates whose grads are kept.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import LimitError, Origin, ProgramError, ShapeError
from ..language import program as P
from ..language.values import ValueSpec
from .bind import Bound
from .context import RunContext


def run_forward(prog: P.Program, bound: Bound, ctx: RunContext) -> tuple[Any, Any]:
    """(the Forward, the output tensor in the run's dtype)."""
    import torch

    from ..engine.interpreter import Interpreter

    if ctx.req.graph or ctx.req.code:  # --code's script names each node's line as --graph does
        from ..engine.program_graph import RecordingInterpreter

        ctx.recorder = RecordingInterpreter(prog, ctx.limits, bound.dtype, bound.gen)
    try:
        fwd = (ctx.recorder or Interpreter(prog, ctx.limits, bound.dtype, bound.gen)).run(bound.env)
    except RecursionError:
        raise LimitError(
            "The program's expressions are nested too deeply to evaluate; split them into assignments."
        ) from None
    out = fwd.output.v
    if not isinstance(out, torch.Tensor) or not out.requires_grad:
        raise ProgramError(
            f"The output {prog.output!r} does not depend on any leaf"
            + (" (it is a constant)" if not isinstance(out, torch.Tensor) else "")
            + ", so there is nothing to differentiate. torch would say: 'element 0 of tensors "
            "does not require grad and does not have a grad_fn'.",
            hint=_output_hint(prog, bound.env, ctx.req.origins.of("output")),
        )
    if out.dtype != bound.dtype:
        out = out.to(bound.dtype)
    return fwd, out


def _output_hint(prog: P.Program, env: dict[str, Any], output: Origin) -> str:
    import torch

    others = [
        n
        for n in prog.assigned
        if n != prog.output and n in env and isinstance(env[n].v, torch.Tensor) and env[n].v.requires_grad
    ]
    if others:
        return (
            f"The output is the last variable assigned ({prog.output!r}); to differentiate another one, "
            f"name it: {output.give_text(others[-1])}."
        )
    return "Use the leaves in the output, or give them as inputs rather than constants."


def kept_intermediates(prog: P.Program, env: dict[str, Any], leaves: dict[str, Any]) -> dict[str, Any]:
    """The assigned tensors that need grad, set to keep theirs: the v that arrives at each intermediate."""
    import torch

    inter = {
        n: env[n].v
        for n in prog.assigned
        if n in env and isinstance(env[n].v, torch.Tensor) and env[n].v.requires_grad and n not in leaves
    }
    for tensor in inter.values():
        if not tensor.is_leaf:
            tensor.retain_grad()
    return inter


def step_shape(fwd: Any, s: Any) -> tuple[int, ...]:
    """The shape of what one traced step computed."""
    val = fwd.env.get(s.target)
    return tuple(getattr(val.v, "shape", ())) if val is not None else ()


def work(fwd: Any) -> int:
    """How many elements the traced steps computed."""
    return sum(math.prod(step_shape(fwd, s)) for s in fwd.steps)


def tolerance_dtype(fwd: Any, dtype: str) -> str:
    """The dtype whose tolerance the checks take: the run's, or float32 where a float64 run computes part of
    its forward in float32 (`x.float()`, `.to(torch.float32)`): autograd then rounds there, as the forward does."""
    narrowed = any(
        isinstance(e, P.Call) and e.func == "float" and not isinstance(e.args[0], P.Compare)  # a mask's: exact
        for s in fwd.steps
        for e in P.walk_exprs(s.expr)
    )
    return "float32" if dtype == "float64" and narrowed else dtype


def grad_v(ctx: RunContext, spec: ValueSpec | None, out: Any, prog: P.Program, gen: Any) -> tuple[Any, str]:
    """(v, where it came from) for one --grad value (None: the default for a single-number output)."""
    import torch

    shape = list(out.shape)
    origin = ctx.req.origins.of("grad")
    if spec is None:
        if out.numel() != 1:
            raise ShapeError(
                f"The output {prog.output!r} has shape {shape} ({out.numel()} values), so backward() needs v: "
                "torch says 'grad can be implicitly created only for scalar outputs'. The default v = 1 "
                "exists only for single-number outputs.",
                hint=f"Add {origin.give('VALUES', '[...]')} with shape {shape} (v holds dL/d{prog.output}: how "
                f"much a downstream loss cares about each output), or {origin.give_text('ones')}, which equals "
                f"backward of {prog.output}.sum().",
            )
        ctx.v_ones = True
        return torch.ones_like(out), "default (scalar output)"
    if spec.generator == "ones_like":
        ctx.v_ones = True
        return torch.ones_like(out), "ones"
    from ..engine.tensors import make_tensor

    if spec.shape != tuple(out.shape):
        raise ShapeError(
            f"v has shape {list(spec.shape)} but the output {prog.output!r} has shape {shape}. "
            f"v lives in output space: it needs one weight per output element ({out.numel()}), while the "
            f"grads live in input space. torch says: 'Mismatch in shape: grad_output[0] has a shape of "
            f"torch.Size({list(spec.shape)}) and output[0] has a shape of torch.Size({shape})'.",
            spec.text,
            0,
            len(spec.text),
            hint=f"Give v the output's shape, or write {origin.give_text('ones')}.",
            origin=origin,
        )
    # the same generator as the inputs, after them: the seed shown reproduces v too
    dtype_origin = ctx.req.origins.of("dtype")
    return make_tensor(spec, origin, out.dtype, gen, ctx.req.device, dtype_origin), ctx.req.grad_label
