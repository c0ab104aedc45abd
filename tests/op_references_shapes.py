"""Independent numpy references for the entries that move elements, choose by masks or convert dtypes.

numpy only, as in op_references.py: each gives the program that calls the function and the numpy function
of its inputs. Merged into REFERENCES at the bottom of op_references.py.
"""

from __future__ import annotations

import numpy as np

from op_references import Ref


def _away(x: float) -> float:
    """Distance to 0, where a mask such as a > 0 flips."""
    return abs(x)


SHAPE_REFERENCES = {
    "reshape": Ref(lambda a: np.reshape(a, (3, 2)) ** 2, "a.reshape(3, 2) ** 2", shape=(2, 3)),
    "view": Ref(lambda a: np.reshape(a, (-1,)) * np.arange(6.0), "a.view(-1) * torch.arange(6.0)", shape=(2, 3)),
    "flatten": Ref(lambda a: np.reshape(a, (2, 6)) ** 2, "torch.flatten(a, 1) ** 2", shape=(2, 2, 3)),
    "unflatten": Ref(lambda a: np.reshape(a, (2, 3)) ** 2, "a.unflatten(0, (2, 3)) ** 2", shape=(6,)),
    "squeeze": Ref(lambda a: np.squeeze(a, 0) ** 2, "a.squeeze(0) ** 2", shape=(1, 3)),
    "unsqueeze": Ref(lambda a: a[:, None] * a[None, :], "a.unsqueeze(1) * a"),
    "permute": Ref(lambda a: np.transpose(a, (2, 0, 1)) ** 2, "a.permute(2, 0, 1) ** 2", shape=(2, 3, 2)),
    "movedim": Ref(lambda a: np.moveaxis(a, 0, -1) ** 2, "torch.movedim(a, 0, -1) ** 2", shape=(2, 3)),
    "expand": Ref(
        lambda a: np.broadcast_to(a, (2, 3)) * np.arange(6.0).reshape(2, 3),
        "a.expand(2, -1) * torch.arange(6.0).reshape(2, 3)",
    ),
    "expand_as": Ref(lambda a, b: np.broadcast_to(a, (2, 3)) * b, "a.expand_as(b) * b", b_shape=(2, 3)),
    "broadcast_to": Ref(lambda a: np.broadcast_to(a, (2, 3)) ** 2, "torch.broadcast_to(a, (2, 3)) ** 2"),
    "repeat": Ref(lambda a: np.tile(a, (2, 2)) ** 2, "a.repeat(2, 2) ** 2"),
    "tile": Ref(lambda a: np.tile(a, 2) ** 2, "torch.tile(a, (2,)) ** 2"),
    "flip": Ref(lambda a: a[::-1] * a, "a.flip(0) * a"),
    "roll": Ref(lambda a: np.roll(a, 1) * a, "torch.roll(a, 1) * a"),
    "narrow": Ref(lambda a: a[:, 1:3] ** 2, "a.narrow(1, 1, 2) ** 2", shape=(2, 3)),
    "clone": Ref(lambda a: a * a, "a.clone() * a"),
    "contiguous": Ref(lambda a: a.T**2, "a.t().contiguous() ** 2", shape=(2, 3)),
    "cat": Ref(lambda a, b: np.concatenate([a, b * b]), "torch.cat([a, b * b], dim=0)", leaves=2),
    "stack": Ref(lambda a, b: np.stack([a, a * b], axis=1), "torch.stack([a, a * b], dim=1)", leaves=2),
    "hstack": Ref(lambda a, b: np.hstack([a, b**2]), "torch.hstack([a, b ** 2])", leaves=2),
    "vstack": Ref(lambda a, b: np.vstack([a, b**2]), "torch.vstack([a, b ** 2])", leaves=2),
    "diag_embed": Ref(lambda a: np.diag(a) * 2.0 + np.diag(a**2), "torch.diag_embed(a) * 2 + torch.diag_embed(a ** 2)"),
    "chunk": Ref(lambda a: a[:3] * a[3:], "x1, x2 = a.chunk(2)\ny = x1 * x2", shape=(6,)),
    "split": Ref(lambda a: a[2:] ** 2, "torch.split(a, [2, 4])[1] ** 2", shape=(6,)),
    "unbind": Ref(lambda a: a[0] * a[1], "r, s = a.unbind(0)\ny = r * s", shape=(2, 3)),
    "gather": Ref(lambda a: a[[2, 0, 0]] * a, "a.gather(0, torch.tensor([2, 0, 0])) * a", leaves=1),
    "index_select": Ref(
        lambda a: a[:, [1, 1]] ** 2, "torch.index_select(a, 1, torch.tensor([1, 1])) ** 2", shape=(2, 3), leaves=1
    ),
    "all": Ref(lambda a: a * np.all(a > 0), "a * (a > 0).all()", kinks=_away),
    "any": Ref(lambda a: a * np.any(a > 1, axis=0), "a * (a > 1).any(dim=0)", shape=(2, 3), kinks=lambda x: abs(x - 1)),
    "where": Ref(lambda a, b, c: np.where(a > 0, b * b, c), "torch.where(a > 0, b * b, c)", kinks=_away),
    "masked_fill": Ref(lambda a, b: np.where(b > 0, 0.5, a * a), "(a * a).masked_fill(b > 0, 0.5)", kinks=_away),
    "float": Ref(lambda a: (a > 0) * a * a, "(a > 0).float() * a * a", kinks=_away),
    "double": Ref(lambda a: a * a, "a.double() * a"),
}
