"""The baseline: the same forward and y.backward(v) that `vjp run` does, in plain torch, nothing else.

Usage: python bare_torch.py seed            # a, b, c = 3-vectors, v = [0.1, 1, 0.0001]
       python bare_torch.py linspace N      # a = b = c = linspace(1, 2, N), v = ones
       ... --fast-exit                      # then leave with os._exit, skipping interpreter teardown, as vjp does
"""

from __future__ import annotations

import os
import sys

import torch


def leaves(argv: list[str]) -> tuple[list[torch.Tensor], torch.Tensor | None]:
    if argv[1] == "seed":
        values = [[1.0, 2.0, 3.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0]]
        return [torch.tensor(x, requires_grad=True) for x in values], torch.tensor([0.1, 1.0, 0.0001])
    n = int(argv[2])
    return [torch.linspace(1, 2, n).requires_grad_(True) for _ in range(3)], None


def main() -> None:
    argv = [a for a in sys.argv if a != "--fast-exit"]
    (a, b, c), v = leaves(argv)
    y = 3 * a + 2 * b * b + torch.log(c)
    y.backward(torch.ones_like(y) if v is None else v)
    if "--fast-exit" in sys.argv:
        sys.stdout.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
