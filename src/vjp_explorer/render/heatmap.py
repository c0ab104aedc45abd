"""A Jacobian too large for a table -> a heat-map in the terminal: sign and size of each entry, and its zeros.

One character per entry, or per block of entries when J is larger than the map (the block shows its entry
largest in size). Positive and negative entries differ in glyph and colour (a diverging scale, red and blue);
a zero the program's structure makes (off the diagonal of an elementwise J) is blank, a zero that only these
inputs make (relu off, a zero factor) is a dot. The numbers stay in --full and --json.
"""

from __future__ import annotations

import math

from rich.console import Group, RenderableType
from rich.text import Text

from ..result import Jacobian, TensorData, element_label

MAX_ROWS = 24  # rows of the map; more output elements share a row
MAX_COLS = 48  # columns of the map; more leaf elements share a column
POSITIVE = ("░", "▒", "▓", "█")  # |entry| / max |entry| above 0, 1/4, 1/2, 3/4
NEGATIVE = ("-", "=", "≡", "■")
POSITIVE_ASCII = (".", ":", "+", "#")
NEGATIVE_ASCII = ("-", "=", "~", "%")
POSITIVE_STYLE = ("rgb(252,187,161)", "rgb(251,106,74)", "rgb(203,24,29)", "rgb(103,0,13)")
NEGATIVE_STYLE = ("rgb(198,219,239)", "rgb(107,174,214)", "rgb(33,113,181)", "rgb(8,48,107)")


def heatmap(
    jac: Jacobian, out_name: str, out_shape: tuple[int, ...], leaf_data: TensorData, ascii: bool = False
) -> RenderableType:
    """The map of jac.value (rows: the output's elements, columns: the leaf's), its legend and sparsity."""
    import numpy as np

    assert jac.value is not None
    m, n = math.prod(out_shape), leaf_data.numel
    flat = jac.value.flat
    a = np.asarray(flat, dtype=np.float64).reshape(m, n)
    b = max(-(-m // MAX_ROWS), -(-n // MAX_COLS))  # entries per cell: square blocks keep a diagonal one
    bm, bn = min(b, m), min(b, n)
    rows, cols = -(-m // bm), -(-n // bn)
    pad = np.zeros((rows * bm, cols * bn))
    pad[:m, :n] = a
    blocks = pad.reshape(rows, bm, cols, bn).transpose(0, 2, 1, 3).reshape(rows, cols, bm * bn)
    finite = np.asarray(np.isfinite(blocks).all(axis=2))
    safe = np.where(np.isfinite(blocks), blocks, 0.0)
    hi, lo = safe.max(axis=2), safe.min(axis=2)
    big = np.where(np.abs(hi) >= np.abs(lo), hi, lo)  # the entry largest in size, with its sign
    scale = float(np.abs(a[np.isfinite(a)]).max()) if np.isfinite(a).any() else 0.0
    structural = _structural(jac.structure, m, n, bm, bn, rows, cols)

    pos, neg = (POSITIVE_ASCII, NEGATIVE_ASCII) if ascii else (POSITIVE, NEGATIVE)
    # a zero is told apart only where the program's structure is known entry by entry (an elementwise J);
    # elsewhere (a matmul, a reduction) it may be either kind, and says so
    elementwise = jac.structure == "diagonal" and m == n
    zero_dot = ("0" if ascii else "·") if elementwise else ("o" if ascii else "∘")
    kinds: set[str] = set()
    labels = [element_label(out_name, out_shape, r * bm) for r in range(rows)]
    width = max(len(s) for s in labels)
    first, last = element_label(jac.leaf, leaf_data.shape, 0), element_label(jac.leaf, leaf_data.shape, n - 1)
    head = " " * (width + 2) + first
    wide = 2 if 2 * cols <= MAX_COLS else 1  # two characters a cell where they fit: closer to square
    head += " " * max(1, width + 2 + wide * cols - len(last) - len(head)) + last if n > 1 else ""
    lines: list[RenderableType] = [Text(head, style="dim")]
    for r in range(rows):
        line = Text(labels[r].ljust(width) + " │")
        for c in range(cols):
            x = float(big[r, c])
            if not finite[r, c]:
                line.append("!" * wide, style="bold magenta")
            elif structural[r][c]:
                line.append(" " * wide)
                kinds.add("structural")
            elif x == 0.0:
                line.append(zero_dot * wide, style="dim")
                kinds.add("zero")
            else:
                level = min(3, int(4 * abs(x) / scale)) if scale > 0 else 3
                glyphs, styles = (pos, POSITIVE_STYLE) if x > 0 else (neg, NEGATIVE_STYLE)
                line.append(glyphs[level] * wide, style=styles[level])
        line.append("│")
        lines.append(line)

    cell = "one character per entry" if bm == bn == 1 else f"one character per {bm} x {bn} block (its largest entry)"
    legend = Text(f"heat-map of J, {cell}:\n")
    legend.append("".join(reversed(pos)) + " positive, " + "".join(reversed(neg)) + " negative: ")
    legend.append(f"|J| >= 3/4, 1/2, 1/4, > 0 of max |J| = {scale:.4g}\n")
    zeros = []
    if "zero" in kinds:
        zeros.append(
            f"{zero_dot} zero at these inputs only"
            if elementwise
            else f"{zero_dot} zero: by structure or at these inputs (J is not elementwise)"
        )
    if "structural" in kinds:
        zeros.append("blank: zero by the program's structure")
    if not finite.all():
        zeros.append("! nan or inf")
    legend.append(", ".join(zeros) or "no zero entries")
    nonzero = int(np.count_nonzero(a))
    n_struct = _structural_count(jac.structure, m, n)
    zero_kinds = (
        f"{n_struct:,} zero by structure (elementwise: off the diagonal), {m * n - nonzero - n_struct:,} "
        "at these inputs only"
        if elementwise
        else f"the output does not depend on {jac.leaf}"
        if jac.structure == "zero"
        else f"{m * n - nonzero:,} zero, by structure or at these inputs (not told apart: J is not elementwise)"
    )
    sparsity = Text(
        f"sparsity: {nonzero:,} of {m * n:,} entries non-zero ({100 * nonzero / (m * n):.3g}%); {zero_kinds}",
        style="dim",
    )
    return Group(legend, *lines, sparsity)


def _structural(structure: str, m: int, n: int, bm: int, bn: int, rows: int, cols: int) -> list[list[bool]]:
    """Per cell: whether every entry in it is zero by the program's structure (never a numerical zero)."""
    if structure == "zero":
        return [[True] * cols for _ in range(rows)]
    if structure != "diagonal" or m != n:
        return [[False] * cols for _ in range(rows)]
    # an elementwise J: entry (i, j) can be non-zero only where i == j
    return [
        [not (r * bm < min(m, (c + 1) * bn) and c * bn < min(n, (r + 1) * bm)) for c in range(cols)]
        for r in range(rows)
    ]


def _structural_count(structure: str, m: int, n: int) -> int:
    if structure == "zero":
        return m * n
    if structure == "diagonal" and m == n:
        return m * n - m
    return 0
