"""Value text (`1,2,3`, `[[1,2],[3,4]]`, `ones(2,2)`, `randn(3)`) -> a ValueSpec.

Parsed by a small hand-written scanner with an explicit stack (no recursion, no
eval): a nested list cannot blow the stack, and sizes are known before anything
is allocated.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import NoReturn

from ..errors import LimitError, Origin, ValueSyntaxError
from ..limits import DEFAULT_LIMITS, Limits
from .unicode import first_bad_char, sentence, visible

_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
# what a user may have meant as one number: 1e, 1e+, 0x10, 1_000, 1.2.3, 2x
_NUMBERISH = re.compile(r"[+-]?[0-9.][0-9A-Za-z_.]*(?:(?<=[eE])[+-][0-9A-Za-z_.]*)?")
_NOT_FINITE = ("nan", "inf", "infinity")
_AFTER_NUMBER = frozenset(" \t\r\n,[]")  # what may follow a number in a literal
# torch tensors have at most 64 dimensions, whatever --limit value_depth says; this also
# keeps the shape bookkeeping below (tuples as long as the nesting) small
_MAX_DIMS = 64

GENERATORS = {
    "ones": "ones(d1, d2, ...): all ones",
    "zeros": "zeros(d1, ...): all zeros",
    "full": "full(d1, ..., fill): every element = fill",
    "arange": "arange(stop) / arange(start, stop[, step])",
    "linspace": "linspace(start, stop, steps)",
    "eye": "eye(n[, m]): identity matrix",
    "rand": "rand(d1, ...): uniform on [0, 1), seeded by --seed",
    "randn": "randn(d1, ...): standard normal, seeded by --seed",
}


@dataclass(frozen=True)
class ValueSpec:
    """A parsed value: literal numbers with a shape, a generator call, or 'ones' (for v)."""

    text: str
    shape: tuple[int, ...]
    data: tuple[float, ...] | None = None  # row-major, for literals
    generator: str | None = None
    args: tuple[float, ...] = ()

    @property
    def numel(self) -> int:
        """How many elements the value has."""
        return math.prod(self.shape)


_A_VALUE = Origin("value")


def parse_value(
    text: str, origin: Origin = _A_VALUE, limits: Limits = DEFAULT_LIMITS, allow_ones: bool = False
) -> ValueSpec:
    """Parse one value's text; raise ValueSyntaxError (with a marker) or LimitError, both carrying `origin`."""
    return _ValueParser(text, origin, limits, allow_ones).parse()


def generator_spec(name: str, args: tuple[float, ...], text: str, origin: Origin, limits: Limits) -> ValueSpec:
    """The ValueSpec of a generator such as ones(2, 3) whose number arguments are already read (`text`
    is how it was written, for messages)."""
    return _ValueParser(text, origin, limits, False).generator(name, args, 0, len(text))


def from_nested(obj: object, origin: Origin, limits: Limits = DEFAULT_LIMITS) -> ValueSpec:
    """A ValueSpec from an already-parsed number or nested list (an expression file's TOML array)."""
    if isinstance(obj, bool) or not isinstance(obj, int | float | list):
        raise ValueSyntaxError("expected a number, a (nested) list of numbers or a string.", origin=origin)
    if not isinstance(obj, list):
        v = _to_float(obj, origin)
        return ValueSpec(_clip(repr(obj), 80), (), (v,))
    flat: list[float] = []
    shape: list[int] | None = None
    # iterative walk, level by level: every list at one depth must have the same length
    level: list[object] = [obj]
    dims: list[int] = []
    while level and isinstance(level[0], list):
        if len(dims) >= limits.value_depth:
            raise LimitError(f"lists are nested more than {limits.value_depth} deep.", origin=origin)
        n = len(level[0])  # type: ignore[arg-type]
        nxt: list[object] = []
        for item in level:
            if not isinstance(item, list) or len(item) != n:
                raise ValueSyntaxError(f"the nested lists are ragged (not all rows have {n} items).", origin=origin)
            nxt.extend(item)
        dims.append(n)
        if math.prod(dims) > limits.elements:
            raise LimitError(f"more than {limits.elements:,} elements.", origin=origin)
        level = nxt
    shape = dims
    for item in level:
        if isinstance(item, bool) or not isinstance(item, int | float):
            shown = _clip(repr(item))
            raise ValueSyntaxError(f"{shown} is not a number (or the nested lists are ragged).", origin=origin)
        flat.append(_to_float(item, origin))
    if 0 in shape:
        raise ValueSyntaxError("an empty list has nothing to differentiate.", origin=origin)
    return ValueSpec(repr(obj)[:80], tuple(shape), tuple(flat))


def _clip(text: str, width: int = 40) -> str:
    """Long user text shortened for a message (the marker shows where it is)."""
    return text if len(text) <= width else text[: width - 3] + "..."


def _not_a_number(token: str) -> str:
    """Why `token` (which looks like a number) is not one, as a phrase."""
    shown = repr(_clip(token))
    body = token.lstrip("+-")
    if "_" in body:
        return f"{shown} is not a number: write it without '_' separators"
    if body[:2].lower() in ("0x", "0o", "0b"):
        return f"{shown} is not a number: write it in decimal"
    if body[-1:] in "eE" or body[-2:-1] in ("e", "E") and body[-1] in "+-":
        return f"{shown} is not a number: the exponent is missing (write e.g. 1e5)"
    if body.count(".") > 1:
        return f"{shown} is not a number: it has more than one '.'"
    return f"{shown} is not a number"


def _to_float(item: int | float, origin: Origin) -> float:
    """A TOML number as a finite float; an int too large for a float is refused, not an OverflowError."""
    try:
        v = float(item)
    except OverflowError:
        v = math.inf
    if not math.isfinite(v):
        # str() of an int with thousands of digits raises; such an int is shown by its size
        if isinstance(item, int) and item.bit_length() > 2000:
            shown = f"an integer of {item.bit_length():,} bits"
        else:
            shown = _clip(str(item))
        raise ValueSyntaxError(f"{shown} is not a finite number; inputs must be finite.", origin=origin)
    return v


class _ValueParser:
    def __init__(self, text: str, origin: Origin, limits: Limits, allow_ones: bool) -> None:
        self.text = text
        self.origin = origin
        self.limits = limits
        self.allow_ones = allow_ones

    def err(self, message: str, start: int, end: int | None = None, hint: str | None = None) -> ValueSyntaxError:
        return ValueSyntaxError(message, self.text, start, end, hint, origin=self.origin)

    @property
    def max_depth(self) -> int:
        return min(self.limits.value_depth, _MAX_DIMS)

    def parse(self) -> ValueSpec:
        text = self.text
        if len(text) > self.limits.value_chars:
            raise LimitError(
                f"the value is {len(text):,} characters long; the limit is "
                f"{self.limits.value_chars:,} (--limit value_chars=N).",
                origin=self.origin,
            )
        bad = first_bad_char(text, allow_newlines=True)
        if bad is not None:
            pos, what = bad
            # the marker is drawn on a copy with control characters made visible, so an
            # escape sequence or a bidi override in the value cannot act on the terminal
            raise ValueSyntaxError(
                sentence(f"the value contains {what}"), visible(text), pos, pos + 1, origin=self.origin
            )
        stripped = text.strip()
        if not stripped:
            hint = "Give a number, a list such as 1,2,3, or ones(3)."
            raise self.err("the value is empty.", 0, max(1, len(text)), hint)
        m = _WORD.match(stripped)
        if m and not _NUMBER.match(stripped):
            return self._word(m.group(0), text.index(stripped))
        return self._literal()

    # ------------------------------------------------------------------ words
    def _word(self, word: str, at: int) -> ValueSpec:
        text = self.text
        name = word.removeprefix("torch.")
        end = at + len(word)
        if name == "ones" and not text[end:].strip():
            if not self.allow_ones:
                raise self.err("'ones' alone means v = ones like the output; give a shape here: ones(3).", at, end)
            return ValueSpec(text, (), generator="ones_like")
        if name.lower() in _NOT_FINITE:
            raise self.err(f"{word} is not allowed: inputs must be finite numbers.", at, end)
        if name not in GENERATORS:
            import difflib

            near = difflib.get_close_matches(name[:40], list(GENERATORS), n=2)
            hint = "Value forms: a number, 1,2,3, [[1,2],[3,4]], or " + ", ".join(GENERATORS) + "."
            if near:
                hint = f"Did you mean {near[0]}? " + hint
            raise self.err(f"unknown generator {_clip(word)!r}.", at, end, hint)
        rest = text[end:]
        lead = len(rest) - len(rest.lstrip())
        p = end + lead
        if p >= len(text) or text[p] != "(":
            raise self.err(f"{name} needs arguments: {GENERATORS[name]}.", at, end)
        close = text.find(")", p)
        if close == -1:
            raise self.err("'(' is never closed.", p)
        if text[close + 1 :].strip():
            raise self.err("unexpected text after the generator.", close + 1, len(text))
        inner = text[p + 1 : close]
        args: list[float] = []
        pos = p + 1
        if inner.strip():
            for piece in inner.split(","):
                s = piece.strip()
                off = pos + (len(piece) - len(piece.lstrip()))
                if not s:
                    raise self.err("an argument is missing.", off)
                mm = _NUMBER.fullmatch(s)
                if not mm:
                    if s.lower().lstrip("+-") in _NOT_FINITE:
                        raise self.err(f"{s} is not allowed: arguments must be finite numbers.", off, off + len(s))
                    raise self.err(f"{_not_a_number(s)}.", off, off + len(s), f"{name} takes: {GENERATORS[name]}.")
                v = float(s)
                if not math.isfinite(v):
                    raise self.err(f"{_clip(s)} overflows to infinity.", off, off + len(s))
                args.append(v)
                pos += len(piece) + 1
        return self.generator(name, tuple(args), at, close + 1)

    def generator(self, name: str, args: tuple[float, ...], start: int, end: int) -> ValueSpec:
        def ints(vals: tuple[float, ...]) -> tuple[int, ...]:
            for v in vals:
                if not v.is_integer() or v < 1:
                    raise self.err(f"{name}(): sizes must be positive integers, got {v:g}.", start, end)
            return tuple(int(v) for v in vals)

        if name in ("ones", "zeros", "rand", "randn"):
            if not args:
                raise self.err(f"{name}() needs a shape: {GENERATORS[name]}.", start, end)
            shape = ints(args)
        elif name == "full":
            if len(args) < 2:
                raise self.err("full() needs sizes and a fill value: full(2, 3, 0.5).", start, end)
            shape = ints(args[:-1])
        elif name == "eye":
            if len(args) not in (1, 2):
                raise self.err("eye() takes n or n, m.", start, end)
            shape = ints(args) if len(args) == 2 else ints(args) * 2
        elif name == "arange":
            if not 1 <= len(args) <= 3:
                raise self.err("arange() takes stop, or start, stop[, step].", start, end)
            a, b, s = (0.0, args[0], 1.0) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else 1.0)
            if s == 0:
                raise self.err("arange(): step must not be zero.", start, end)
            count = (b - a) / s  # a float: may be inf (arange(-1e308, 1e308, 1e-300))
            if not count > 0:
                raise self.err("arange(): the range is empty.", start, end)
            if count > self.limits.elements:
                raise self._too_big(count)
            shape = (math.ceil(count),)
        else:  # linspace
            if len(args) != 3:
                raise self.err("linspace() takes start, stop, steps.", start, end)
            shape = ints(args[2:])
        if len(shape) > self.max_depth:
            raise self.err(f"{name}(): more than {self.max_depth} dimensions.", start, end)
        n = math.prod(shape)
        if n > self.limits.elements:
            raise self._too_big(n)
        return ValueSpec(self.text, shape, generator=name, args=args)

    def _too_big(self, n: float) -> LimitError:
        # 1e300 elements is shown as such, not as a 300-digit number
        count = f"{int(n):,}" if n < 1e15 else f"about {float(n):.3g}" if n < 1e308 else "more than 1e+308"
        return LimitError(
            f"the value would have {count} elements; the limit is {self.limits.elements:,} (--limit elements=N).",
            self.text,
            0,
            len(self.text),
            origin=self.origin,
        )

    # ------------------------------------------------------------------ literals
    def _literal(self) -> ValueSpec:
        text = self.text
        i = 0
        n = len(text)
        flat: list[float] = []
        # the open lists, innermost last; the bottom frame is the top level (1,2,3 is a list too)
        stack = [_Frame(-1)]
        expect_item = True  # after '[' or ',' an item must follow
        depth = 0
        while i < n:
            ch = text[i]
            if ch in " \t\r\n":
                i += 1
                continue
            if ch == "[":
                if not expect_item:
                    raise self.err("a ',' is missing before '['.", i)
                depth += 1
                if depth > self.max_depth:
                    why = "(--limit value_depth=N)" if self.max_depth < _MAX_DIMS else "(torch's most dimensions)"
                    raise LimitError(
                        f"lists are nested more than {self.max_depth} deep {why}.",
                        text,
                        i,
                        i + 1,
                        origin=self.origin,
                    )
                stack.append(_Frame(i))
                expect_item = True
                i += 1
                continue
            if ch == "]":
                if len(stack) == 1:
                    raise self.err("unmatched ']'.", i)
                frame = stack.pop()
                depth -= 1
                if expect_item:
                    if frame.count == 0:
                        raise self.err("an empty list has nothing to differentiate.", frame.start, i + 1)
                    raise self.err("a trailing ',' before ']'.", i)
                self._add_item(stack[-1], frame.shape(), frame.start, i + 1)
                expect_item = False
                i += 1
                continue
            if ch == ",":
                if expect_item:
                    raise self.err("an item is missing before ','." if i else "the value starts with ','.", i)
                expect_item = True
                i += 1
                continue
            m = _NUMBER.match(text, i)
            if m is None:
                self._not_a_number_at(i)
            if not expect_item:
                raise self.err("a ',' is missing between numbers.", i, m.end())
            if m.end() < n and text[m.end()] not in _AFTER_NUMBER:
                # the number runs into other text (1e+, 0x10, 1_000, 1.2.3): say what is wrong with all of it
                whole = _NUMBERISH.match(text, i)
                if whole is not None and whole.end() > m.end():
                    raise self.err(f"{_not_a_number(whole.group(0))}.", i, whole.end())
            v = float(m.group(0))
            if not math.isfinite(v):
                raise self.err(f"{_clip(m.group(0))} overflows to infinity; inputs must be finite.", i, m.end())
            flat.append(v)
            if len(flat) > self.limits.elements:
                raise self._too_big(len(flat))
            self._add_item(stack[-1], (), i, m.end())
            expect_item = False
            i = m.end()
        if len(stack) > 1:
            raise self.err("'[' is never closed.", stack[-1].start)
        if expect_item:
            raise self.err("a trailing ','." if flat else "the value has no numbers.", max(0, n - 1))
        top = stack[0]
        # one item at the top level is that item (5 is a scalar, [1,2] a vector); more form a list
        shape = top.first if top.count == 1 and top.first is not None else top.shape()
        return ValueSpec(text, shape, tuple(flat))

    def _not_a_number_at(self, i: int) -> NoReturn:
        """Raise the error for text at i that does not start a number."""
        text, ch = self.text, self.text[i]
        w = _WORD.match(text, i + 1 if ch in "+-" else i)
        if w is not None:
            word = text[i : w.end()]
            if w.group(0).lower() in _NOT_FINITE:
                raise self.err(f"{word} is not allowed: inputs must be finite numbers.", i, w.end())
            raise self.err(f"{_clip(word)!r} is not a number (generators such as ones(3) stand alone).", i, w.end())
        if ch in "+-":
            raise self.err(f"a number must follow {ch!r}.", i, i + 1)
        raise self.err(
            f"unexpected character {ch!r}.", i, i + 1, "Value forms: 0.1, 1,2,3, [[1,2],[3,4]], ones(2,2), randn(3)."
        )

    def _add_item(self, frame: _Frame, shape: tuple[int, ...], start: int, end: int) -> None:
        """Count one item of an open list; every item must have the shape of the first."""
        frame.count += 1
        if frame.first is None:
            frame.first = shape
        elif frame.first != shape:
            raise self.err(
                f"ragged lists: this item has shape {list(shape)} but the first one has {list(frame.first)}.",
                start,
                end,
            )


@dataclass
class _Frame:
    """An open list while scanning: where it starts, how many items so far, the first item's shape."""

    start: int
    count: int = 0
    first: tuple[int, ...] | None = None

    def shape(self) -> tuple[int, ...]:
        return (self.count, *(self.first or ()))
