"""The seed documents' worked examples, through the CLI, with the numbers they printed."""

from __future__ import annotations

import json

import pytest

from documents import event


def run_json(vjp, *args):
    r = vjp("run", *args, "--json")
    assert r.exit_code == 0, r.output + r.stderr
    return json.loads(r.stdout)


def close(got, want, rel=1e-4, abs_=1e-6):
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), (got, want)
        for g, w in zip(got, want, strict=True):
            close(g, w, rel, abs_)
    else:
        assert got == pytest.approx(want, rel=rel, abs=abs_), (got, want)


def test_seed_example_1_three_vector(vjp):
    d = run_json(vjp, "3*a+2*b*b+log(c)", "--a", "1,2,3", "--b", "3,4,5", "--c", "6,7,8", "--grad", "0.1,1,0.0001")
    close(event(d)["grads"]["a"], [3.0000e-01, 3.0000e00, 3.0000e-04])
    close(event(d)["grads"]["b"], [1.2000e00, 1.6000e01, 2.0000e-03])
    close(event(d)["grads"]["c"], [1.6667e-02, 1.4286e-01, 1.2500e-05])
    assert event(d)["checks"]["symbolic"]["status"] == "agree"
    assert event(d)["checks"]["jtv"]["status"] == "agree"


def test_seed_example_2_scalar(vjp):
    d = run_json(vjp, "3*a + 2*b*b + torch.log(c)", "--a", "0.1", "--b", "1", "--c", "0.1")
    assert event(d)["v_origin"].startswith("default")
    close(event(d)["grads"]["a"], 3.0)
    close(event(d)["grads"]["b"], 4.0)
    close(event(d)["grads"]["c"], 10.0)


def test_seed_example_4_accumulates(vjp):
    d = run_json(vjp, "3*a + 2*b*b + torch.log(c)", "--a", "1", "--b", "1", "--c", "1", "--backward-calls", "2")
    close(event(d)["grads"]["a"], 6.0)
    close(event(d)["grads"]["b"], 8.0)
    close(event(d)["grads"]["c"], 2.0)
    assert any(n["code"] == "accumulated" for n in event(d)["notes"])


@pytest.mark.parametrize(
    ("v", "want"),
    [
        ("[[1,0,0,0]]", [[2, 0, 0, 0]]),
        ("[[0,1,0,0]]", [[0, 2, 0, 0]]),
        ("[[1,1,1,1]]", [[2, 2, 2, 2]]),
    ],
)
def test_seed_z_equals_2x_one_hot_rows(vjp, v, want):
    d = run_json(vjp, "z = 2*x; loss = z.sum(dim=1)", "--x", "[[1,2,3,4]]", "--output", "z", "--grad", v)
    close(event(d)["grads"]["x"], want)


def test_seed_loss_sum_dim1_default_v(vjp):
    # loss has shape [1]: a single value, so backward() needs no v (as in the seed)
    d = run_json(vjp, "z = 2*x; loss = z.sum(dim=1)", "--x", "[[1,2,3,4]]")
    close(event(d)["grads"]["x"], [[2, 2, 2, 2]])


SEED_X = "[[0.6734, -2.4904, 2.0093], [-0.2601, -0.3734, -1.5601], [0.9121, 0.3902, 1.0404]]"


def test_seed_pow_ones(vjp):
    d = run_json(vjp, "y = x.pow(2)", "--x", SEED_X, "--grad", "ones")
    close(
        event(d)["grads"]["x"],
        [[1.3468, -4.9807, 4.0187], [-0.5203, -0.7469, -3.1202], [1.8243, 0.7804, 2.0808]],
        rel=0,
        abs_=1.5e-4,  # the seed printed x rounded to 4 decimals
    )


def test_seed_pow_weighted_rows(vjp):
    d = run_json(vjp, "y = x.pow(2)", "--x", SEED_X, "--grad", "[[1,1,1],[0.1,0.1,0.1],[0.01,0.01,0.01]]")
    close(
        event(d)["grads"]["x"],
        [[1.3468, -4.9807, 4.0187], [-0.0520, -0.0747, -0.3120], [0.0182, 0.0078, 0.0208]],
        rel=0,
        abs_=1.5e-4,
    )


def test_seed_pow_sum(vjp):
    d = run_json(vjp, "y = x.pow(2).sum()", "--x", SEED_X)
    close(event(d)["outputs"][0]["value"], 15.4006, rel=0, abs_=2e-4)
    close(
        event(d)["grads"]["x"],
        [[1.3468, -4.9807, 4.0187], [-0.5203, -0.7469, -3.1202], [1.8243, 0.7804, 2.0808]],
        0,
        1.5e-4,
    )


def test_seed_mean_4_5(vjp):
    d = run_json(vjp, "y = x + 2; z = y*y*3; out = z.mean()", "--x", "ones(2,2)")
    close(event(d)["grads"]["x"], [[4.5, 4.5], [4.5, 4.5]])
