"""The snippet's seed banner says only what is true of the snippet (issue 31): the seed given, that the
snippet seeds itself, the seed drawn where it draws random numbers, and nothing where it draws none."""

from __future__ import annotations

import pytest

PLAIN = "import torch\nx = torch.tensor([1.0, 2.0], requires_grad=True)\n(x * x).sum().backward()\n"
DRAWS = "import torch\nx = torch.randn(2, requires_grad=True)\n(x * x).sum().backward()\n"
LAYER = "import torch\nnet = torch.nn.Linear(2, 1)\nnet(torch.ones(2)).sum().backward()\n"
SEEDS = "import torch\ntorch.manual_seed(3)\nx = torch.randn(2, requires_grad=True)\n(x * x).sum().backward()\n"


def banner(vjp, tmp_path, code: str, *options: str) -> str:
    path = tmp_path / "snippet.py"
    path.write_text(code)
    r = vjp("run", str(path), *options)
    assert r.exit_code == 0, r.stderr
    return r.stdout.splitlines()[1]  # "snippet PATH", then "torch VERSION · ..."


@pytest.mark.parametrize(
    ("code", "options", "want", "not_want"),
    [
        (PLAIN, (), None, ["seed", "drawn"]),
        (DRAWS, (), "(drawn; pass --seed N to repeat it)", []),
        (LAYER, (), "(drawn; pass --seed N to repeat it)", []),
        (SEEDS, (), "seeded by the snippet itself", ["drawn"]),
        (PLAIN, ("--seed", "5"), "seed 5 (--seed)", ["drawn"]),
    ],
)
def test_the_seed_banner_tells_the_truth(vjp, tmp_path, code, options, want, not_want):
    line = banner(vjp, tmp_path, code, *options)
    assert line.startswith("torch ")
    if want is None:
        assert " · " not in line, line
    else:
        assert want in line, line
    assert not any(word in line for word in not_want), line


def test_a_drawn_seed_repeats_the_run(vjp, tmp_path):
    # what the banner advises works: the drawn seed, passed back, gives the same numbers
    path = tmp_path / "snippet.py"
    path.write_text(DRAWS + "print(x.grad)\n")
    first = vjp("run", str(path))
    seed = first.stdout.splitlines()[1].split("seed ")[1].split(" ")[0]
    again = vjp("run", str(path), "--seed", seed)
    grads = [line for line in first.stdout.splitlines() if line.strip().startswith("tensor(")]
    assert grads and grads == [line for line in again.stdout.splitlines() if line.strip().startswith("tensor(")]


def test_words_in_comments_and_strings_draw_nothing(vjp, tmp_path):
    code = PLAIN + "# a random init would use torch.randn here\nprint('randn and Linear')\n"
    line = banner(vjp, tmp_path, code)
    assert " · " not in line, line
