"""Wrong verdicts and wrong words an outside hunt found in everyday snippets (issue 36's judge, docs/why.md),
each against what torch computes or what a hand derivation says, and the fix the tool gives, tried."""

from __future__ import annotations

import textwrap

import pytest

from vjp_explorer.confined.launch import confinement_available
from vjp_explorer.snippet import run_snippet

pytestmark = pytest.mark.skipif(confinement_available() is not None, reason="no confinement on this machine")


def _run(src: str):
    return run_snippet(textwrap.dedent(src), seed=0)


def _checks(event):
    return {c.name: c for c in event.checks}


def test_a_write_into_an_index_of_a_buffer_is_not_held_constant():
    # d/dw0 (3·w0 + w0) = 4, as torch says; the log does not follow `outs[0] = ...`: skipped, never disagree
    r = _run(
        """
        import torch
        w = torch.tensor([0.5, -1.0], requires_grad=True)
        outs = torch.zeros(2)
        outs[0] = w[0] * 3
        loss = outs.sum() + w[0]
        loss.backward()
        print(w.grad)
        """
    )
    assert r.stdout == "tensor([4., 0.])\n" and r.exit_code == 0
    fd = _checks(r.events[0])["finite_difference"]
    assert fd.status == "skipped" and "through an index or a view" in fd.reason


def test_a_new_backward_line_after_a_loop_is_checked():
    r = _run(
        """
        import torch
        class MySquare(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x
            @staticmethod
            def backward(ctx, g):
                x, = ctx.saved_tensors
                return g * 3 * x  # 2 * x is right
        w = torch.tensor([1.0, 2.0], requires_grad=True)
        opt = torch.optim.SGD([w], lr=0.01)
        for step in range(3):
            opt.zero_grad()
            (w ** 2).sum().backward()
            opt.step()
        w.grad = None
        MySquare.apply(w).sum().backward()
        """
    )
    assert r.exit_code == 3 and _checks(r.events[-1])["finite_difference"].status == "disagree"


def test_an_embeddings_padding_row_is_torchs_design_not_a_wrong_gradient():
    r = _run(
        """
        import torch
        torch.manual_seed(0)
        emb = torch.nn.Embedding(5, 2, padding_idx=0)
        idx = torch.tensor([[0, 2, 2], [1, 0, 3]])
        emb(idx).sum().backward()
        """
    )
    fd = _checks(r.events[0])["finite_difference"]
    assert r.exit_code == 0 and fd.status == "skipped" and "padding_idx" in fd.reason


def test_a_sampled_categoricals_log_prob_is_checked():
    r = _run(
        """
        import torch
        from torch.distributions import Categorical
        torch.manual_seed(0)
        logits = torch.randn(3, requires_grad=True)
        c = Categorical(logits=logits)
        (-c.log_prob(c.sample())).backward()
        """
    )
    assert r.exit_code == 0 and _checks(r.events[0])["finite_difference"].status == "agree"


def test_backward_twice_through_a_tensor_made_before_the_loop_is_told_to_compute_it_inside():
    src = """
        import torch
        torch.manual_seed(0)
        W = torch.randn(3, 3, requires_grad=True)
        x = torch.randn(3)
        h = torch.tanh(W @ x)
        for i in range(3):
            loss = (h * (i + 1)).sum()
            loss.backward()
        """
    (d,) = _run(src).diagnoses
    assert d.kind == "backward_twice" and "computed once, before the loop (line 6)" in d.fix
    assert "detach" not in d.fix  # h.detach() would leave W without a gradient
    fixed = src.replace("        h = torch.tanh(W @ x)\n", "").replace("loss = (h", "loss = (torch.tanh(W @ x)")
    assert _run(fixed).exit_code == 0


def test_a_statement_that_reads_and_writes_the_same_tensor_is_told_to_read_a_copy():
    src = """
        import torch
        x = torch.tensor([1.0, 2.0], requires_grad=True)
        buf = torch.zeros(3)
        buf[:2] = x
        buf[2:] = buf[0:1] * x[1]
        buf.sum().backward()
        print(x.grad)
        """
    (d,) = _run(src).diagnoses
    assert "`buf[2:] = buf[0:1].clone() * x[1]`" in d.fix
    fixed = _run(src.replace("buf[2:] = buf[0:1] * x[1]", "buf[2:] = buf[0:1].clone() * x[1]"))
    assert fixed.exit_code == 0 and fixed.stdout == "tensor([3., 2.])\n"  # d/dx0 = 1 + x1, d/dx1 = 1 + x0


def test_of_two_tensors_changed_in_place_the_one_torch_names_is_blamed():
    # torch: "output 0 of Zero": b, changed at line 8
    r = _run(
        """
        import torch
        torch.manual_seed(0)
        x = torch.randn(4, requires_grad=True)
        a = x.exp()
        b = x.tanh()
        out = a * b
        b.zero_()
        a.add_(1)
        out.sum().backward()
        """
    )
    (d,) = r.diagnoses
    assert d.tensor == "b" and d.cause == {"line": 8, "op": "zero_"} and "line 8" in d.fix


def test_a_nan_from_zero_times_an_infinite_local_derivative_is_an_artefact():
    # the diagonal distances are 0 for every a: their gradient is 0, finite; sqrt′(0)·0 gives nan
    r = _run(
        """
        import torch
        torch.manual_seed(0)
        a = torch.randn(4, 2, requires_grad=True)
        diff = a.unsqueeze(0) - a.unsqueeze(1)
        dist = (diff ** 2).sum(-1).sqrt()
        dist.sum().backward()
        """
    )
    (d,) = r.diagnoses
    assert d.kind == "nonfinite_grad" and d.spurious is True and "gradient of the whole is finite" in d.text


def test_the_json_stdout_is_what_the_snippet_printed_and_the_view_makes_it_visible():
    import json

    from vjp_explorer.render import snippet_view

    r = run_snippet('print("\\x1b[31m")\nprint(r"\\x1b[31m")\n', seed=0)
    assert r.stdout == "\x1b[31m\n\\x1b[31m\n"  # two different lines, as python printed them
    parts: list[str] = []
    snippet_view.write_json(r, parts.append)
    assert "\x1b" not in "".join(parts) and json.loads("".join(parts))["stdout"] == r.stdout
    from rich.console import Console

    console = Console(record=True, width=100, color_system=None)
    console.print(snippet_view.render(r, explain=False, full=False))
    shown = console.export_text()
    assert "\x1b" not in shown and "␛[31m" in shown


def test_a_write_after_an_earlier_save_is_told_to_clone_the_tensor_first():
    # `y = buf * w` saved buf at line 5; line 6 writes into buf: cloning what line 6 reads would not help
    (d,) = _run(
        """
        import torch
        w = torch.ones(3, requires_grad=True)
        buf = torch.arange(3.0)
        y = buf * w
        buf[0] = buf[1] + 1
        y.sum().backward()
        """
    ).diagnoses
    assert "`buf = buf.clone()` just before" in d.fix


def test_a_write_through_an_index_is_blamed_as_torch_blames_it():
    # torch: "output 0 of torch::autograd::CopySlices": b, written at line 8
    (d,) = _run(
        """
        import torch
        p = torch.ones(3, requires_grad=True)
        q = torch.ones(3, requires_grad=True)
        a = p * 2
        b = q * 3
        out = a * b
        b[0] = 5.0
        a.sub_(1)
        out.sum().backward()
        """
    ).diagnoses
    assert d.tensor == "b" and d.cause["line"] == 8


@pytest.mark.parametrize("x", ["1e-3", "2e-3", "3e-3"])
def test_a_float32_gradient_within_its_forwards_rounding_is_no_evidence_either_way(x):
    """(1 − cos x)/x² in float32: autograd's gradient (8.26 at 2e-3) is the float32 forward's rounding, the
    float64 derivative about −x/12. The allowance was the measured rounding to the last digit: 2e-3 read
    `disagree` by 5e-7 in 8.26 while 1e-3, off by 46, agreed. Now twice it (another order rounds too); and as
    the allowance is as large as the reference, the element is no evidence: inconclusive, never `agree`."""
    r = _run(f"""
        import torch
        x = torch.tensor([{x}], requires_grad=True)
        y = (1 - torch.cos(x)) / x ** 2
        y.sum().backward()
        """)
    (event,) = r.events
    fd = _checks(event)["finite_difference"]
    assert r.exit_code == 0 and fd.status == "inconclusive" and "no evidence at x[0]" in (fd.reason or ""), fd


def test_a_wrong_float32_backward_is_still_caught_beside_its_rounding():
    r = _run("""
        import torch
        class Cube(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x ** 3
            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return 3.001 * x ** 2 * g  # 0.03% off: past float32's tolerance, far past its rounding here
        x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
        Cube.apply(x).sum().backward()
        """)
    (event,) = r.events
    assert r.exit_code == 3 and _checks(event)["finite_difference"].status == "disagree"


def test_a_sum_that_cancels_is_differenced_at_its_terms_size():
    """The judge's differences of the replay round at the size of x² (1e8) in E[x²] − E[x]²: autograd's right
    gradient read `disagree` (|Δ| 1.2e-6 against an estimate at the variance's size); a wrong one still fails."""
    src = """
        import torch
        torch.manual_seed(0)
        x = (torch.randn(50, dtype=torch.float64) + 1e4).requires_grad_()
        var = (x ** 2).mean() - x.mean() ** 2
        var.backward()
        class Twice(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return (x ** 2).mean() - x.mean() ** 2
            @staticmethod
            def backward(ctx, g):
                return g * 4 * (x.detach() - x.detach().mean()) / x.numel()  # twice the right one
        Twice.apply(x).backward()
        """
    r = _run(src)
    right, wrong = r.events
    assert _checks(right)["finite_difference"].status == "agree", right.checks
    assert _checks(wrong)["finite_difference"].status == "disagree" and r.exit_code == 3


@pytest.mark.parametrize("factor, verdict", [("10", "disagree"), ("2", "disagree"), ("1", "agree")])
def test_a_wrong_float32_backward_is_caught_where_the_terms_cancel(factor, verdict):
    # grad = Wᵀv with v = [1, −1] and rows of W ≈ 1000 equal to 1e-5: the terms (1000) cancel to 0.0078. Allowing
    # rtol (1e-4) of the terms' size let the 10x wrong backward agree (0.2 allowed); roundoff units of it do not
    r = _run(
        f"""
        import torch
        class Lin(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, W):
                ctx.save_for_backward(x, W)
                return W @ x
            @staticmethod
            def backward(ctx, g):
                x, W = ctx.saved_tensors
                return {factor} * (W.t() @ g), torch.outer(g, x)
        W = torch.full((2, 3), 1000.0)
        W[0] += torch.tensor([0.0078125, 0.015625, -0.0078125])
        x = torch.randn(3, requires_grad=True)
        Lin.apply(x, W).backward(torch.tensor([1.0, -1.0]))
        print(x.grad)
        """
    )
    checks = _checks(r.events[0])
    assert checks["finite_difference"].status == verdict and checks["jtv"].status == verdict
    assert r.exit_code == (3 if verdict == "disagree" else 0)


@pytest.mark.parametrize("call", ["y.backward(v)", "torch.autograd.grad(y, x, grad_outputs=v)"])
def test_a_backward_that_scales_its_grad_output_in_place_is_judged_against_the_v_given(call):
    # `g *= s` writes into v itself (autograd hands the given v to the first node): the judge read v after the
    # call, [10, -10, 5], and the wrong s²·v agreed with it. The view and the record keep v as it was given
    r = _run(
        f"""
        import torch
        class Scale(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, s):
                ctx.s = s
                return x * s
            @staticmethod
            def backward(ctx, g):
                g *= ctx.s
                return g * ctx.s, None
        x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
        v = torch.tensor([1.0, -1.0, 0.5])
        y = Scale.apply(x, 10.0)
        {call}
        print(v)
        """
    )
    assert r.stdout == "tensor([ 10., -10.,   5.])\n"  # what python prints: the snippet's v was written into
    (event,) = r.events
    assert event.v[0].values == [1.0, -1.0, 0.5]
    checks = _checks(event)
    assert checks["finite_difference"].status == "disagree" and checks["jtv"].status == "disagree"
    assert r.exit_code == 3


@pytest.mark.parametrize(
    "src",
    [
        # (1e10·x)² at x ≈ 1e-20: 1e-20 at the point, 3.6e9 a step (6e-6) away: its difference rounds by 2%
        "x = torch.tensor([1e-20, 3e-20, -2e-20], requires_grad=True)\n(x * 1e10).pow(2).sum().backward()\n",
        # the self-energy k·q²/(2r) of charges of 1.6e-19 C, in float64: dE/dq = k·q/r exactly, as torch says
        "q = torch.tensor([1.602176634e-19, -3.2e-19], dtype=torch.float64, requires_grad=True)\n"
        "(8.9875517923e9 * q ** 2 / 2e-10).sum().backward()\n",
    ],
)
def test_a_right_grad_at_inputs_far_below_the_step_is_no_false_alarm(src):
    # the differences' rounding was sized at |f| at the point, not at the stepped points: a reference 2% off
    # with an error estimate of 1e-16 read `disagree`, exit 3, on torch's exact gradient
    r = _run("import torch\n" + src)
    fd = _checks(r.events[0])["finite_difference"]
    assert fd.status != "disagree" and r.exit_code == 0


SIGMOID = """
    class Sig(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            s = 1 / (1 + torch.exp(-x))
            ctx.save_for_backward(s)
            return s
        @staticmethod
        def backward(ctx, g):
            s, = ctx.saved_tensors
            return g * s * ({wrong}1 - s)
    x = (torch.randn(50) * 8).requires_grad_()
    Sig.apply(x).backward(torch.randn(50) * 1e3)
"""
NORM = """
    class LN(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            xc = x - x.mean(-1, keepdim=True)
            rstd = torch.rsqrt((xc * xc).mean(-1, keepdim=True) + 1e-5)
            ctx.save_for_backward(xc * rstd, rstd)
            return xc * rstd
        @staticmethod
        def backward(ctx, g):
            xhat, rstd = ctx.saved_tensors
            return rstd * (g - g.mean(-1, keepdim=True) - {wrong}xhat * (g * xhat).mean(-1, keepdim=True))
    x = (torch.randn(4, 64) * 0.01 + 1e3).requires_grad_()
    (LN.apply(x) * torch.randn(4, 64)).sum().backward()
"""


@pytest.mark.parametrize("src", [SIGMOID, NORM], ids=["sigmoid", "layer_norm"])
@pytest.mark.parametrize("wrong", ["", "1.1 * "])
def test_a_right_custom_backward_that_rounds_by_its_own_formula_agrees(src, wrong):
    # s·(1 − s) near s = 1 and the textbook layer-norm backward at an offset of 1e3 (float32) round otherwise
    # than autograd of their forwards, element by element, about as much in all: the forward's measured
    # rounding counts leaf-wide for a custom backward. The same formulas 10% wrong still disagree (at 1e3 ±
    # 0.01 the float32 forward itself is off by 0.6% per element: 1% is within its rounding there)
    r = _run("import torch\ntorch.manual_seed(0)\n" + textwrap.dedent(src).format(wrong=wrong))
    jtv = _checks(r.events[0])["jtv"]
    assert (jtv.status, r.exit_code) == (("disagree", 3) if wrong else ("agree", 0)), jtv.reason


def test_batch_norm_at_an_offset_is_replayed_with_the_snippets_threads():
    # float32 batch norm's variance at 1e3 ± 0.05 rounds by how the sum is split among threads: replayed on
    # the judge's one thread it missed the recorded output by 5%, and a right call read unverified, exit 2
    r = _run(
        """
        import torch
        torch.manual_seed(0)
        bn = torch.nn.BatchNorm1d(8)
        x = (torch.randn(64, 8) * 0.05 + 1e3).requires_grad_()
        (bn(x) * torch.randn(64, 8)).sum().backward()
        """
    )
    assert r.exit_code == 0 and "disagree" not in {c.status for c in r.events[0].checks}
