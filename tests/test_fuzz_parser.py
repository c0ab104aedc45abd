"""Property tests of the program parser and the value parser over generated text.

Whatever the text, the result is a valid Program / ValueSpec or one of our own
errors (a VjpError subclass): never another exception, never a hang. Text comes
from three sources: any Unicode, printable ASCII, and "grammar-ish" soups of the
tokens hostile input is made of (names, numbers, operators, brackets, dots,
`torch.`, dunders, look-alike Unicode).
"""

from __future__ import annotations

import math
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vjp_explorer.errors import Origin, VjpError
from vjp_explorer.language import program as P
from vjp_explorer.language.parser import parse_program
from vjp_explorer.language.unicode import describe, first_bad_char, visible
from vjp_explorer.language.values import ValueSpec, from_nested, parse_value
from vjp_explorer.limits import DEFAULT_LIMITS

FUZZ = settings(
    max_examples=300,
    deadline=timedelta(milliseconds=500),
    database=None,  # no .hypothesis/ directory written by the test run
    suppress_health_check=[HealthCheck.too_slow],
)
FEW = settings(FUZZ, max_examples=60)

PRINTABLE = "".join(chr(c) for c in range(32, 127)) + "\n\t"

PROGRAM_TOKENS = [
    # names, reserved words and functions
    "x",
    "y",
    "a",
    "b",
    "i",
    "z1",
    "torch",
    "range",
    "log",
    "sum",
    "exp",
    "matmul",
    "norm",
    "T",
    "data",
    "_x",
    "__class__",
    "__import__",
    "__dict__",
    "__builtins__",
    "os",
    "system",
    "eval",
    "exec",
    "open",
    # numbers, sane and not
    "0",
    "1",
    "2",
    "2.5",
    ".5",
    "1e-5",
    "1e400",
    "9" * 400,
    "0x1f",
    "1_000",
    "1j",
    "10**9",
    "9**9**9",
    # operators and punctuation
    "+",
    "-",
    "*",
    "/",
    "**",
    "@",
    "^",
    "//",
    "%",
    "~",
    "<",
    "<=",
    "==",
    "!=",
    ">",
    "=",
    ":=",
    "+=",
    "->",
    " and ",
    " or ",
    "not ",
    " if ",
    " else ",
    " in ",
    " is ",
    "lambda ",
    "yield ",
    "await ",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    ".",
    ":",
    ";",
    "*",
    "**",
    "torch.",
    ".T",
    ".sum()",
    "dim=",
    "keepdim=True",
    "p=2",
    "dim=(0, 1)",
    "range(",
    # the PyTorch people paste: indexing, masks, made tensors, tuples
    "...",
    "None",
    "::",
    "-1",
    "&",
    "|",
    "torch.tensor([",
    "torch.ones(",
    "requires_grad=True",
    ".requires_grad_()",
    "dtype=torch.long",
    "torch.where(",
    ".masked_fill(",
    ".chunk(2)",
    ".reshape(",
    "torch.cat([",
    ".gather(",
    "float('inf')",
    "math.pi",
    ", = ",
    "for ",
    "while ",
    "if ",
    "def ",
    "class ",
    "import ",
    "from ",
    "return ",
    # strings, comments, whitespace, line structure
    "'s'",
    '"s"',
    "f'{x}'",
    "b'x'",
    "#",
    "# [/red]",
    " ",
    "\n",
    "\n    ",
    "\t",
    "\\",
    "\r",
    "\r\n",
    # look-alike and invisible Unicode, control characters
    "\uff4c",
    "\U0001d465",
    "\u2212",
    "\u00d7",
    "\u00f7",
    "\u00b2",
    "\u00a0",
    "\u200b",
    "\u200d",
    "\u202e",
    "\u0661",
    "\uff11",
    "\u00e9",
    "\u03b1",
    "\x1b",
    "\x00",
    "\udcff",
    "\ufeff",
]
VALUE_TOKENS = [
    "[",
    "]",
    ",",
    " ",
    "\n",
    "0",
    "1",
    "-1",
    "2.5",
    ".5",
    "1e3",
    "1e",
    "1e+",
    "1e400",
    "-",
    "+",
    ".",
    "9" * 400,
    "0x10",
    "1_0",
    "nan",
    "inf",
    "-inf",
    "x",
    "ones",
    "zeros",
    "full",
    "arange",
    "linspace",
    "eye",
    "rand",
    "randn",
    "torch.",
    "(",
    ")",
    "100000",
    "1e20",
    "__import__",
    "[/red]",
    "\u0661",
    "\u2212",
    "\u200b",
]

program_soup = st.lists(st.sampled_from(PROGRAM_TOKENS), max_size=40).map("".join)
value_soup = st.lists(st.sampled_from(VALUE_TOKENS), max_size=40).map("".join)


def parse_or_error(text: str) -> P.Program | None:
    """The Program, or None if the parser refused it with one of our errors."""
    try:
        prog = parse_program(text)
    except VjpError as e:
        e.render()  # drawing the marker must work for every span it reports
        return None
    assert isinstance(prog, P.Program)
    assert prog.output in prog.assigned or prog.output in prog.free
    return prog


def value_or_error(text: str, allow_ones: bool = False) -> ValueSpec | None:
    """The ValueSpec (checked for consistency), or None if it was refused with our error."""
    try:
        spec = parse_value(text, Origin("--x", "--x"), allow_ones=allow_ones)
    except VjpError as e:
        e.render()
        return None
    check_spec(spec)
    return spec


def check_spec(spec: ValueSpec) -> None:
    assert all(isinstance(d, int) and d >= 1 for d in spec.shape)
    assert len(spec.shape) <= DEFAULT_LIMITS.value_depth
    if spec.generator == "ones_like":
        return
    assert spec.numel <= DEFAULT_LIMITS.elements
    if spec.data is not None:
        assert len(spec.data) == spec.numel
        assert all(math.isfinite(v) for v in spec.data)
    else:
        assert spec.generator is not None


# ---------------------------------------------------------------------------- programs
@FUZZ
@given(st.text(max_size=200))
def test_parser_on_any_text(text):
    parse_or_error(text)


@FUZZ
@given(st.text(alphabet=PRINTABLE, max_size=300))
def test_parser_on_printable_ascii(text):
    parse_or_error(text)


@FUZZ
@given(program_soup)
def test_parser_on_token_soup(text):
    parse_or_error(text)


@FUZZ
@given(st.lists(program_soup, min_size=1, max_size=6))
def test_parser_on_multiline_token_soup(lines):
    parse_or_error("\n".join(lines))


names = st.sampled_from(["a", "b", "x", "w"])
numbers = st.sampled_from(["0", "1", "2", "0.5", "3", "1e-3", "10"])
unary_fns = st.sampled_from(["log", "exp", "sin", "tanh", "sigmoid", "relu", "sqrt", "abs", "torch.exp"])


def _expressions():
    leaf = st.one_of(names, numbers)

    def extend(inner):
        return st.one_of(
            st.tuples(inner, st.sampled_from(["+", "-", "*", "/"]), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(unary_fns, inner).map(lambda t: f"{t[0]}({t[1]})"),
            inner.map(lambda e: f"-{e}"),
            inner.map(lambda e: f"({e}).sum()"),
            inner.map(lambda e: f"({e})**2"),
        )

    return st.recursive(leaf, extend, max_leaves=12)


@FUZZ
@given(_expressions(), st.booleans())
def test_parser_accepts_programs_in_the_language(expr, assign):
    src = f"z = {expr}\nz = z * 1" if assign else expr
    try:
        prog = parse_program(src)
    except VjpError as e:
        # a constant subexpression such as (0 / 0) or 10**(10**10) is refused on purpose
        assert "constant expression" in e.message, e.render()
        return
    assert prog.output == ("z" if assign else "y")
    used = {n for n in "abxw" if n in expr}
    assert set(prog.free) <= used


CHAINS = {
    "unary": lambda n: "x*" + "-" * n + "x",
    "not": lambda n: "not " * n + "x",
    "power": lambda n: "x" + "**x" * n,
    "sum": lambda n: "x" + "+x" * n,
    "product": lambda n: "x" + "*x" * n,
    "attribute": lambda n: "x" + ".T" * n,
    "method": lambda n: "x" + ".sum()" * n,
    "parens": lambda n: "(" * n + "x" + ")" * n,
    "calls": lambda n: "log(" * n + "x" + ")" * n,
    "ifs": lambda n: "y = x\n" + "".join(" " * i + "if x > 0:\n" for i in range(n)) + " " * n + "y = x",
}


@FEW
@given(st.sampled_from(sorted(CHAINS)), st.integers(min_value=1, max_value=4000))
def test_deep_chains_are_refused_not_crashed(kind, n):
    src = CHAINS[kind](n)
    if len(src) > DEFAULT_LIMITS.program_chars:
        src = src[: DEFAULT_LIMITS.program_chars]  # a cut chain is still a hostile chain
    try:
        parse_program(src)
    except VjpError as e:
        e.render()
        return
    assert n <= DEFAULT_LIMITS.depth  # anything deeper must have been refused


# ---------------------------------------------------------------------------- values
@FUZZ
@given(st.text(max_size=200), st.booleans())
def test_value_parser_on_any_text(text, allow_ones):
    value_or_error(text, allow_ones)


@FUZZ
@given(st.text(alphabet=PRINTABLE, max_size=300))
def test_value_parser_on_printable_ascii(text):
    value_or_error(text)


@FUZZ
@given(value_soup, st.booleans())
def test_value_parser_on_token_soup(text, allow_ones):
    value_or_error(text, allow_ones)


finite = st.floats(allow_nan=False, allow_infinity=False, width=64)


@st.composite
def rectangular(draw):
    """A nested list of finite floats with a rectangular shape, and that shape."""
    shape = draw(st.lists(st.integers(1, 3), min_size=1, max_size=4))
    flat = draw(st.lists(finite, min_size=math.prod(shape), max_size=math.prod(shape)))
    items: list = flat
    for n in reversed(shape[1:]):
        items = [items[i : i + n] for i in range(0, len(items), n)]
    return items, tuple(shape), flat


@FUZZ
@given(rectangular(), st.sampled_from([", ", ",", " , ", ",\n"]))
def test_value_parser_round_trips_nested_lists(case, sep):
    items, shape, flat = case

    def text(obj):
        return "[" + sep.join(text(o) for o in obj) + "]" if isinstance(obj, list) else repr(obj)

    spec = parse_value(text(items))
    assert spec.shape == shape
    assert spec.data == tuple(flat)
    check_spec(from_nested(items, Origin("inputs.x")))


json_like = st.recursive(
    st.one_of(st.integers(), st.floats(), st.booleans(), st.text(max_size=5), st.none()),
    lambda inner: st.lists(inner, max_size=4),
    max_leaves=20,
)


@FUZZ
@given(json_like)
def test_from_nested_on_any_toml_like_object(obj):
    try:
        spec = from_nested(obj, Origin("inputs.x"))
    except VjpError as e:
        e.render()
        return
    check_spec(spec)


@FEW
@given(st.integers(min_value=1, max_value=100_000), st.sampled_from(["[", "[1,", "[[1],"]))
def test_deep_values_are_refused_not_crashed(n, opener):
    value_or_error(opener * n + "1" + "]" * n)


# ---------------------------------------------------------------------------- unicode
@FUZZ
@given(st.text(max_size=100))
def test_visible_keeps_positions_and_removes_terminal_controls(text):
    shown = visible(text)
    assert len(shown) == len(text)
    for ch in shown:
        assert ch == "\n" or ch.isprintable() or ch == "\ufffd", repr(ch)
    shown.encode("utf-8")  # no lone surrogates left to fail on output


@FUZZ
@given(st.text(max_size=100))
def test_first_bad_char_names_a_refused_character(text):
    bad = first_bad_char(text)
    if bad is None:
        assert all(ch.isascii() and (ch.isprintable() or ch in "\n\r\t") for ch in text)
        return
    pos, what = bad
    assert all(ch.isascii() and (ch.isprintable() or ch in "\n\r\t") for ch in text[:pos])
    assert what and "\x1b" not in what


@FUZZ
@given(st.characters(min_codepoint=128))
def test_describe_any_non_ascii_character(ch):
    text = describe(ch)
    assert text.startswith("the ")
    text.encode("utf-8")  # a surrogate is named (U+D800, "the byte 0xFF"), never printed raw
