"""The stages of one exploration, called directly: their inputs and outputs are explicit."""

from __future__ import annotations

import torch

from vjp_explorer.language.parser import parse_program
from vjp_explorer.request import Request
from vjp_explorer.stages import bind, forward
from vjp_explorer.stages.call import explain_call
from vjp_explorer.stages.checks import magnitudes
from vjp_explorer.stages.context import RunContext


def _prepared(program: str, values: dict[str, str], consts: dict[str, str], grad: str):
    req = Request(program, values, consts, grad=grad)
    ctx = RunContext(req)
    prog = parse_program(req.program, req.output, req.limits)
    specs, consts = bind.check_names(req, prog)
    kinds, grad_specs, _ = bind.probe_specs(req, prog)
    bound = bind.bind_values(req, prog, specs, consts, kinds, grad_specs)
    fwd, out = forward.run_forward(prog, bound, ctx)
    v, _ = forward.grad_v(ctx, grad_specs[0], out, prog, bound.gen)
    return ctx, prog, bound, fwd, out, v


def test_one_backward_call_explained_against_plain_torch():
    from vjp_explorer.engine.compare import TOLERANCES
    from vjp_explorer.engine.jacobian import compute_jacobians

    ctx, prog, bound, fwd, out, v = _prepared(
        "W @ x + 3*b", {"x": "1,2", "b": "0.5,-1"}, {"W": "[[1,2],[3,4]]"}, "1,-2"
    )
    jacs = compute_jacobians(fwd, bound.leaves, bound.consts, v, ctx.limits, prog.output)
    how = {"tol": TOLERANCES["float32"], "big": 3e38, "mags": magnitudes(v, jacs, 2)}
    kept = forward.kept_intermediates(prog, bound.env, bound.leaves)
    record = explain_call(ctx, fwd, prog.output, out, v, bound, kept, jacs, 2, True, how)
    # the oracle: plain torch, the same program, backward(v) twice
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    b = torch.tensor([0.5, -1.0], requires_grad=True)
    W = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    y = W @ x + 3 * b
    vt = torch.tensor([1.0, -2.0])
    y.backward(vt, retain_graph=True)
    y.backward(vt)
    assert record.grads_before == {"x": None, "b": None}
    assert torch.equal(record.grads["x"], x.grad) and torch.equal(record.grads["b"], b.grad)
    assert torch.equal(record.jtv("x"), x.grad)  # 2 x Jᵀv, as .grad holds it
    assert record.checks["jtv"].status == "agree" and record.none_grads == []
    assert set(ctx.timings) == {"backward", "jtv check"}
