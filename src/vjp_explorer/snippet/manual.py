"""The learner's hand-written gradients judged in the parent: each against autograd's, the first wrong line.

The child's "manual" frames (confined/manual.py) are checked field by field; each paired gradient is
compared with autograd's (manual_kinds.py), the first wrong line found and diagnosed, and the lines after it
that only inherit its error marked so (docs/manual.md).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from . import manual_kinds as kinds
from .checked import Malformed
from .manual_formula import expression

MAX_SHOWN = 64  # characters of a name shown


@dataclass
class ManualLine:
    """One hand-written gradient against autograd's: the cmp numbers, the verdict and, if wrong, the kind."""

    name: str  # the learner's variable (`dlogits`)
    of: str  # the tensor it is the gradient of (`logits`)
    line: int  # where it is last assigned
    verdict: str  # agree, disagree, or shape (manual_kinds.VERDICTS)
    kind: str | None  # None where it agrees; "inherits" where only its inputs are wrong; else manual_kinds.KINDS
    max_abs_diff: float | None  # as the learners' cmp: after broadcasting (None: the shapes do not broadcast)
    exact: bool
    approximate: bool
    shape: list[int]  # the learner's gradient's shape
    expected_shape: list[int]  # the tensor's
    inherits_from: int | None = None  # the line of the first wrong gradient this one only inherits from
    why: str = ""  # the diagnosis in words
    factor: float | None = None  # for kind "factor": written = factor · autograd's
    expected: str | None = None  # a wrong line's right expression, where the formula table writes it

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Manual:
    """Every hand-written gradient of a run, in line order, and the first wrong one."""

    lines: list[ManualLine] = field(default_factory=list)

    @property
    def first_wrong(self) -> ManualLine | None:
        """The first line that is not right by its own formula (else the first that disagrees at all)."""
        wrong = [m for m in self.lines if m.verdict != "agree"]
        return next((m for m in wrong if m.kind != "inherits"), wrong[0] if wrong else None)

    def to_json(self) -> dict[str, Any]:
        """The snippet document's fragment (top-level keys): `manual`, one object per line, and `manual_first_wrong`,
        the line of the first that does not agree (null where every line agrees)."""
        first = self.first_wrong
        lines = [m.to_dict() for m in self.lines]
        return {"manual": lines, "manual_first_wrong": None if first is None else first.line}


def judge(frames: list[dict[str, Any]], expected: set[tuple[str, str]]) -> Manual:
    """The child's frames -> a Manual. `expected`: the (name, of) pairs the parent's own reading of the text
    found (confined/manual_source.py); a frame about anything else, or a second about one, is dropped.
    Raises Malformed where a frame is not what confined/manual.py sends."""
    seen: dict[str, _Pair] = {}
    for frame in frames:
        pair = _read(frame)
        if (pair.name, pair.of) not in expected or pair.name in seen:
            continue
        if pair.written is None or pair.truth is None:
            continue  # too large to send: not compared
        if not _pairs(pair.written.shape, pair.truth.shape):
            continue  # not a gradient of that tensor
        seen[pair.name] = pair
    out: dict[str, ManualLine] = {}
    sizes = [float(np.nanmax(np.abs(p.truth))) for p in seen.values() if p.truth is not None and p.truth.size]
    chain = max([s for s in sizes if math.isfinite(s)], default=0.0)  # the largest true gradient of the chain
    for pair in sorted(seen.values(), key=lambda p: (p.line, p.name)):
        out[pair.name] = _line(pair, out, chain)
    return Manual(list(out.values()))


def _pairs(written: tuple[int, ...], truth: tuple[int, ...]) -> bool:
    """Shapes that broadcast together (an unsummed gradient of a broadcast tensor still pairs: that is a
    mistake to catch), or of the same size (a transposed gradient)."""
    try:
        np.broadcast_shapes(written, truth)
    except ValueError:
        return math.prod(written) == math.prod(truth)
    return True


@dataclass
class _Pair:
    name: str
    of: str
    line: int
    reads: list[str]
    accumulated: bool
    uses: int
    written: np.ndarray | None
    written_dtype: str
    truth: np.ndarray | None
    truth_dtype: str
    again: np.ndarray | None
    expected: str | None  # the right expression, from the formula table (manual_formula.py)


def _line(p: _Pair, before: dict[str, ManualLine], chain: float) -> ManualLine:
    """One pair judged; `before`: the lines judged so far (this one's upstream gradients among them);
    `chain`: the size of the chain's gradients, whose rounding any line may differ by."""
    assert p.written is not None and p.truth is not None
    dtypes = (p.written_dtype, p.truth_dtype)
    allowed = max(kinds.bound(p.truth, *dtypes), kinds.rounding_floor(chain, *dtypes))
    m = ManualLine(
        name=p.name,
        of=p.of,
        line=p.line,
        verdict=kinds.verdict(p.written, p.truth, allowed),
        kind=None,
        shape=list(p.written.shape),
        expected_shape=list(p.truth.shape),
        **kinds.cmp(p.written, p.truth),
    )
    if m.verdict == "agree":
        return m
    wrong_upstream = [before[u] for u in p.reads if u in before and before[u].verdict != "agree"]
    own_right = p.again is not None and kinds.verdict(p.again, p.truth, allowed) == "agree"
    if own_right and wrong_upstream:
        m.kind = "inherits"
        m.inherits_from = min(u.inherits_from or u.line for u in wrong_upstream)
        m.why = f"{p.name} is right by its own formula: it inherits the error of line {m.inherits_from}"
        return m
    mine = p.again if p.again is not None else p.written  # the line's own formula, on right inputs if it could
    m.kind = kinds.kind(mine, p.truth, allowed, uses=p.uses, accumulated=p.accumulated)
    if m.kind == "factor":
        m.factor = kinds.factor_of(mine, p.truth)
    m.why = _why(m, p)
    m.expected = None if p.expected is None else f"{p.name} = {p.expected}"
    return m


def _why(m: ManualLine, p: _Pair) -> str:
    """The diagnosis of a line's own mistake, in words."""
    of, name = m.of, m.name
    shape, want = _shape(m.shape), _shape(m.expected_shape)
    if m.kind == "keepdim" and len(m.shape or []) > len(m.expected_shape or []):
        return (
            f"{name} has the right values but shape {shape}, where {of} has shape {want}: it keeps a dimension "
            f"{of} does not have; reduce without keepdim=True, or squeeze it (cmp's broadcasting hides this; "
            "later lines may broadcast wrongly)"
        )
    if m.kind == "keepdim":
        return (
            f"{name} has the right values but shape {shape}, where {of} has shape {want}: a reduction lost "
            f"a dimension; keep it with keepdim=True (cmp's broadcasting hides this; later lines may broadcast wrongly)"
        )
    if m.kind == "missing_sum":
        return (
            f"{of} (shape {want}) was broadcast in the forward pass, so its gradient is the sum over the "
            f"broadcast dimensions: {name} (shape {shape}) is the unsummed gradient; sum it down to {want} "
            f"(.sum(dim, keepdim=True))"
        )
    if m.kind == "transposed":
        return f"{name} is autograd's gradient transposed: swap the factors of the matrix product, or transpose"
    if m.kind == "sign":
        return f"{name} has the wrong sign: it is −1 times autograd's gradient of {of}"
    if m.kind == "factor":
        return f"{name} is {m.factor:.6g} times autograd's gradient of {of}: a constant factor is wrong or missing"
    if m.kind == "wrong_index":
        return f"{name} has the right values at the wrong positions: the index that places them is wrong"
    if m.kind == "missing_accumulation":
        return (
            f"{of} is used {p.uses} times in the forward pass, so its gradient is the sum of one term per use; "
            f"{name} has only part of it: add the other terms (+=)"
        )
    return f"{name} differs from autograd's gradient of {of} in a way none of the known mistakes explains"


def _shape(shape: list[int]) -> str:
    return "[" + ", ".join(str(n) for n in shape) + "]"


def _read(frame: Any) -> _Pair:
    """A "manual" frame's object, checked: exactly the fields confined/manual.py sends, each of its type."""
    fields = {"name", "of", "line", "reads", "accumulated", "uses", "written", "autograd", "again", "formula"}
    if type(frame) is not dict or set(frame) != fields:
        raise Malformed("a manual frame without exactly its fields")
    name, of = _text(frame["name"], "name"), _text(frame["of"], "of")
    if type(frame["line"]) is not int or type(frame["uses"]) is not int or type(frame["accumulated"]) is not bool:
        raise Malformed("a manual frame whose line, uses or accumulated is not what it should be")
    reads = frame["reads"]
    if type(reads) is not list or len(reads) > 10_000:
        raise Malformed("a manual frame whose reads is not a list")
    written, written_dtype = _array(frame["written"], "written")
    truth, truth_dtype = _array(frame["autograd"], "autograd")
    again = None if frame["again"] is None else _array(frame["again"], "again")[0]
    expected = expression(frame["formula"], frame["autograd"]["shape"])
    return _Pair(
        name=name,
        of=of,
        line=frame["line"],
        reads=[_text(r, "reads") for r in reads],
        accumulated=frame["accumulated"],
        uses=frame["uses"],
        written=written,
        written_dtype=written_dtype,
        truth=truth,
        truth_dtype=truth_dtype,
        again=again,
        expected=expected,
    )


def _text(value: Any, where: str) -> str:
    if type(value) is not str or not value.isidentifier() or len(value) > MAX_SHOWN:
        raise Malformed(f"a manual frame whose {where} is not a name")
    return value


def _array(data: Any, where: str) -> tuple[np.ndarray | None, str]:
    """{"shape", "dtype", "values": flat numbers or None} -> an array (None where its values were left out)."""
    if type(data) is not dict or set(data) != {"shape", "dtype", "values"}:
        raise Malformed(f"a manual frame's {where} is not an array")
    shape, dtype, values = data["shape"], data["dtype"], data["values"]
    if type(shape) is not list or len(shape) > 64 or not all(type(n) is int and 0 <= n < 2**31 for n in shape):
        raise Malformed(f"a manual frame's {where} has no shape")
    if type(dtype) is not str or len(dtype) > 20:
        raise Malformed(f"a manual frame's {where} has no dtype")
    if values is None:
        return None, dtype
    size = math.prod(shape)
    if type(values) is not list or len(values) != size or not all(type(v) in (int, float) for v in values):
        raise Malformed(f"a manual frame's {where} is not {size} numbers")
    return np.asarray(values, dtype=np.float64).reshape(shape), dtype
