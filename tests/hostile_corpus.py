"""The adversarial corpus for tests/test_hostile.py: command lines that try to escape, hang, blow up or confuse.

Each case is (id, argv after `vjp run`, phrase): the run must exit 2 (bad input) with
`phrase` in its stderr. OK_CASES are hostile-looking but legal: they must exit 0 and
print the user's text literally.
"""

from __future__ import annotations

import pytest


def case(cid: str, args: list[str], phrase: str) -> object:
    return pytest.param(cid, args, phrase, id=cid)


X1 = ["--x", "1"]
X3 = ["--x", "1,2,3", "--grad", "ones"]

ESCAPES = [
    case("import-call", ["__import__('os').system('ls')", *X1], "'__import__'"),
    case("class-bases", ["().__class__.__bases__"], "'__bases__' is not allowed"),
    case("dunder-attr", ["x.__class__", *X1], "'__class__' is not allowed"),
    case("dunder-chain", ["x.__class__.__mro__[1].__subclasses__()", *X1], "is not allowed"),
    case("torch-dict", ["torch.__dict__", *X1], "'__dict__' is not allowed"),
    case(
        "torch-submodule",
        ["torch.nn.functional.interpolate(x)", *X1],
        "torch.nn.functional.interpolate is not available",
    ),
    case("torch-load", ["torch.load('f.pt')", *X1], "Unknown function 'torch.load'"),
    case("method-self", ["x.sum.__self__", *X1], "'__self__' is not allowed"),
    case("dunder-method", ["x.__add__(x)", *X1], "'__add__' is not allowed"),
    case("transpose-class", ["x.T.__class__", *X1], "'__class__' is not allowed"),
    case("data-class", ["x.data.__class__", *X1], "'__class__' is not allowed"),
    case("builtins-name", ["__builtins__", *X1], "'__builtins__' is not allowed"),
    case("underscore-name", ["_x * 2", "--var", "_x=1"], "'_x' is not allowed"),
    case("lambda", ["lambda: x", *X1], "Lambdas are not part of the language"),
    case("list-comp", ["[x for i in range(3)]", *X1], "Comprehensions"),
    case("dict-comp", ["{i: x for i in range(3)}", *X1], "Comprehensions"),
    case("genexp", ["sum(x for i in range(3))", *X1], "Generator expressions"),
    case("walrus", ["(y := x) * 2", *X1], "walrus"),
    case("string", ["'abc'"], "Strings are not part of the language"),
    case("f-string", ["f'{x}'", *X1], "Strings are not part of the language"),
    case("bytes", ["b'\\x00'"], "Strings are not part of the language"),
    case("string-arg", ["log('x')", *X1], "Strings are not part of the language"),
    case("import", ["import os"], "Imports are not part of the language"),
    case("from-import", ["from os import system"], "Imports are not part of the language"),
    case("starred-call", ["log(*x)", *X1], "'*' unpacking"),
    case("kwargs-call", ["log(**x)", *X1], "'**' unpacking"),
    case("exec", ["exec('import os')"], "Unknown function 'exec'"),
    case("eval", ["eval('1+1')"], "Unknown function 'eval'"),
    case("compile", ["compile('1', 'f', 'exec')"], "Unknown function 'compile'"),
    case("open", ["open('/etc/passwd')"], "Unknown function 'open'"),
    case("getattr", ["getattr(x, '__class__')", *X1], "Unknown function 'getattr'"),
    case("globals", ["globals()"], "Unknown function 'globals'"),
    case("breakpoint", ["breakpoint()"], "Unknown function 'breakpoint'"),
    case("print", ["print(x)", *X1], "Unknown function 'print'"),
    case("type-call", ["type(x)", *X1], "Unknown function 'type'"),
    case("decorator", ["@log\ndef f(x):\n    return x", *X1], "Defining functions"),
    case("def", ["def f(x): return x", *X1], "Defining functions"),
    case("async-def", ["async def f(): pass"], "Defining functions"),
    case("class", ["class A: pass"], "Classes are not part of the language"),
    case("global", ["global x\ny = x", *X1], "'global'"),
    case("del", ["del x", *X1], "'del'"),
    case("with", ["with x: pass", *X1], "'with'"),
    case("try", ["try:\n    y = x\nexcept Exception:\n    y = x", *X1], "'try'"),
    case("assert", ["assert x", *X1], "'assert'"),
    case("raise", ["raise x", *X1], "'raise'"),
    case("return", ["y = x\nreturn y", *X1], "'return'"),
    case("yield", ["yield x", *X1], "'yield' is not part"),
    case("await", ["await x", *X1], "'await' is not part"),
    case("match", ["match x:\n    case 1:\n        y = x", *X1], "'match'"),
    case("subscript", ["x[0]", "--x", "1,2", "--grad", "ones"], "Indexing (x[...])"),
    case("slice", ["x[0:1]", "--x", "1,2", "--grad", "ones"], "Indexing (x[...])"),
    case("ternary", ["x if x else x", *X1], "use an if statement"),
    case("ellipsis", ["..."], "'...'"),
    case("none", ["None"], "keyword value"),
    case("tuple-unpack", ["x, y = 1, 2"], "one plain name"),
    case("uncalled-function", ["torch.log", *X1], "call it"),
    case("dim-escape", ["sum(x, dim=__import__('os'))", *X1], "dim must be an integer literal"),
    case("dunder-keyword", ["x.sum(__class__=1)", *X1], "no keyword '__class__'"),
    case("loop-over-tensor", ["for i in x:\n    y = x", *X1], "range(N) only"),
    case("stdin-escape", ["-", *X1], "'__import__'"),  # the program arrives on stdin (see STDIN)
]
STDIN = {"stdin-escape": "__import__('os').system('id')"}

UNICODE = [
    case("fullwidth-log", ["ｌｏｇ(x)", *X1], "FULLWIDTH LATIN SMALL LETTER L ('ｌ'); did you mean 'l'?"),
    case("math-italic-x", ["𝑥 * 2", *X1], "MATHEMATICAL ITALIC SMALL X ('𝑥'); did you mean 'x'?"),
    case("nbsp", ["x\u00a0* 2", *X1], "NO-BREAK SPACE"),
    case("ideographic-space", ["x\u3000* 2", *X1], "IDEOGRAPHIC SPACE"),
    case("zero-width-space", ["x\u200b*2", *X1], "ZERO WIDTH SPACE (U+200B), which is invisible"),
    case("zero-width-joiner", ["x\u200d*2", *X1], "ZERO WIDTH JOINER"),
    case("bom-in-program", ["\ufeffx*2", *X1], "ZERO WIDTH NO-BREAK SPACE"),
    case("bidi-override", ["x*2 \u202e# 2*x", *X1], "RIGHT-TO-LEFT OVERRIDE"),
    case("bidi-isolate", ["x\u2066*2", *X1], "LEFT-TO-RIGHT ISOLATE"),
    case("line-separator", ["x\u2028*2", *X1], "LINE SEPARATOR"),
    case("unicode-minus", ["x \u2212 1", *X1], "MINUS SIGN ('\u2212'); did you mean '-'?"),
    case("times-sign", ["x \u00d7 2", *X1], "MULTIPLICATION SIGN ('\u00d7'); did you mean '*'?"),
    case("division-sign", ["x \u00f7 2", *X1], "DIVISION SIGN ('\u00f7'); did you mean '/'?"),
    case("superscript-two", ["x\u00b2", *X1], "SUPERSCRIPT TWO ('\u00b2'); did you mean '**2'?"),
    case("caret-power", ["x^2", *X1], "write powers as '**'"),
    case("caret-syntax", ["x^^2", *X1], "Powers are written '**'"),
    case("accented-name", ["\u00e9 * 2", *X1], "did you mean 'e'?"),
    case("greek-name", ["\u03b1 * 2", *X1], "did you mean 'alpha'?"),
    case("combining-accent", ["x\u0301 * 2", *X1], "COMBINING ACUTE ACCENT"),
    case("escape-sequence", ["x*2\x1b[2J", *X1], "control character '\\x1b'"),
    case("undecodable-byte", ["x*\udcff", *X1], "0xFF, which is not valid UTF-8"),
    case("arabic-indic-value", ["x*2", "--x", "\u0661,\u0662", "--grad", "ones"], "ARABIC-INDIC DIGIT ONE"),
    case("fullwidth-digit-value", ["x*2", "--x", "\uff11,\uff12", "--grad", "ones"], "did you mean '1'?"),
    case("minus-sign-value", ["x*2", "--x", "\u22121"], "MINUS SIGN"),
    case("nbsp-value", ["x*2", "--x", "1\u00a0,2", "--grad", "ones"], "NO-BREAK SPACE"),
    case("zwsp-value", ["x*2", "--x", "1,2\u200b", "--grad", "ones"], "ZERO WIDTH SPACE"),
    case("arabic-decimal-value", ["x*2", "--x", "1\u066b5"], "did you mean '.'?"),
    case("escape-in-value", ["x*2", "--x", "1\x1b[31m"], "control character '\\x1b'"),
    case("unicode-var-option", ["x*2", "--\u00e9", "1"], "neither an option nor a valid variable name"),
]

SMALL_MEMORY = ["--limit", "memory_bytes=100000000"]
BOMBS = [
    # the whole run's budgets, refused before the work from shapes and counts
    case("matmul-work", ["a@a", "--a", "ones(7000,7000)", "--grad", "ones"], "multiply_adds = 1e+11"),
    case(
        "matmul-loop-work",
        ["y = a\nfor i in range(100):\n    y = y@a", "--a", "ones(1000,1000)", "--grad", "ones"],
        "--limit multiply_adds=N",
    ),
    case(  # as 10,000 steps on 10^6 elements (120 GB by the estimate) meets 8 GB, with the limit made small
        "loop-memory",
        ["y = x\nfor i in range(10000):\n    y = sin(y)", "--x", "randn(1000000)", "--grad", "ones", *SMALL_MEMORY],
        "memory_bytes = 100 MB",
    ),
    case(
        "many-big-steps",
        [
            ";".join(f"y{i} = x*{i}" for i in range(60)),
            "--x",
            "ones(50000000)",
            "--grad",
            "ones",
            "--limit",
            "memory_bytes=2e9",
        ],
        "the run's memory estimate",
    ),
    case(
        "matmul-broadcast-operand",
        ["a@b", "--a", "ones(1,1000,1000)", "--b", "ones(1000,1000,1)", "--grad", "ones"],
        "shape [1000, 1000, 1000]",
    ),
    case(
        "memory-limit-lowered",
        ["x*2", "--x", "ones(1000)", "--grad", "ones", "--limit", "memory_bytes=1000"],
        "--limit memory_bytes=N",
    ),
    case("deep-parens", ["(" * 200 + "x" + ")" * 200, *X1], "nested more than 60 deep"),
    case("deep-unary-minus", ["x*" + "-" * 500 + "x", *X1], "nests more than 60 levels deep"),
    case("huge-unary-minus", ["x*" + "-" * 15000 + "x", *X1], "unary operators"),
    case("deep-not", ["not " * 3000 + "x", *X1], "unary operators"),
    case("power-tower", ["x" + "**x" * 3000, *X1], "'**' operators"),
    case("long-sum", ["x" + "+x" * 5000, *X1], "'+'/'-' operators"),
    case("attribute-chain", ["x" + ".T" * 3000, *X1], "attribute accesses, calls or indexes"),
    case("method-chain", ["x" + ".sum()" * 2000, *X1], "attribute accesses, calls or indexes"),
    case("subscript-chain", ["x" + "[0]" * 3000, *X1], "attribute accesses, calls or indexes"),
    case(
        "nested-ifs",
        ["y = x\n" + "".join("    " * i + "if x > 0:\n" for i in range(70)) + "    " * 70 + "y = x", *X1],
        "nested more than 60 levels deep",
    ),
    case("depth-raised", ["x*" + "-" * 15000 + "x", *X1, "--limit", "depth=100000"], "nested too deeply"),
    case("power-overflow", ["x*9**9**9", *X1], "constant expression overflows"),
    case("power-tower-const", ["x**(2**2**2**2**2)", *X1], "constant expression overflows"),
    case("float-overflow", ["x*1e400", *X1], "larger than 1e+15"),
    case("literal-limit", ["x*1e16", *X1], "--limit literal"),
    case("huge-int-literal", ["x*" + "9" * 5000, *X1], "5,000 digits"),
    case("const-div-zero", ["x*(1/0)", *X1], "divides by zero"),
    case("const-not-real", ["x*(-8)**0.5", *X1], "no real value"),
    case("huge-shape", ["x*2", "--x", "ones(100000,100000)", "--grad", "ones"], "10,000,000,000 elements"),
    case("huge-eye", ["x*2", "--x", "eye(100000)"], "10,000,000,000 elements"),
    case("huge-randn", ["x*2", "--x", "randn(1e20)"], "elements; the limit is"),
    case("huge-arange", ["x*2", "--x", "arange(1e300)"], "about 1e+300 elements"),
    case("infinite-arange", ["x*2", "--x", "arange(-1e308, 1e308, 1e-300)"], "more than 1e+308 elements"),
    case("huge-linspace", ["x*2", "--x", "linspace(0, 1, 1e12)"], "elements"),
    case("many-dims", ["x*2", "--x", "ones(" + ",".join(["1"] * 100) + ")"], "more than 32 dimensions"),
    case(
        "huge-broadcast",
        ["x*y", "--x", "zeros(100000,1)", "--y", "zeros(1,100000)", "--grad", "ones"],
        "shape [100000, 100000]",
    ),
    case("huge-matmul", ["x@y", "--x", "ones(5000,1)", "--y", "ones(1,100000)", "--grad", "ones"], "elements"),
    case("long-program", ["x" + " " * 20000, *X1], "characters long"),
    case("many-statements", ["y = x\n" * 600 + "y", *X1], "statements"),
    case("many-nodes", ["y = x*x*x*x*x*x*x*x*x*x*x*x\n" * 400, *X1], "syntax nodes"),
    case("while-const-true", ["y = x\nwhile 1 < 2:\n    y = y*1", *X1], "always true"),
    case("while-not-zero", ["y = x\nwhile not 0:\n    y = y*1", *X1], "always true"),
    case("while-true", ["y = x\nwhile True:\n    y = y*1", *X1], "keyword value"),
    case("while-runaway", ["y = x\nwhile x > 0:\n    y = y*1", *X1], "10,000 iterations"),
    case("range-expression", ["y = x\nfor i in range(10**9):\n    y = y*1", *X1], "integer literals"),
    case("range-huge", ["y = x\nfor i in range(1000000000):\n    y = y*1", *X1], "1,000,000,000 times"),
    case(
        "nested-loops", ["y = x\nfor i in range(1000):\n    for j in range(1000):\n        y = y*1", *X1], "iterations"
    ),
    case("deep-value", ["x*2", "--x", "[" * 100000 + "1" + "]" * 100000], "nested more than 32 deep"),
    case("long-value", ["x*2", "--x", "1," * 1_000_001 + "1"], "characters long"),
    case("huge-number-value", ["x*2", "--x", "9" * 5000], "overflows to infinity"),
    case("dims-tuple", ["x.sum(dim=(" + "0," * 100 + "))", *X1], "more than 64 dimensions"),
]

VALUES = [
    # numbers that parse but do not fit the dtype: refused where they enter, not a torch RuntimeError
    case("full-overflow", ["x*2", "--x", "full(2, 1e300)", "--grad", "ones"], "full() is given 1e+300"),
    case("linspace-overflow", ["x*2", "--x", "linspace(0, 1e39, 2)", "--grad", "ones"], "does not fit in float32"),
    case("arange-overflow", ["x*2", "--x", "arange(0, 1e39, 1e38)", "--grad", "ones"], "does not fit in float32"),
    case("full-overflow-grad", ["x*2", "--x", "1,2", "--grad", "full(2, -1e39)"], "does not fit in float32"),
    case("limit-seconds-huge", ["x*2", *X1, "--limit", "symbolic_seconds=1e300"], "symbolic_seconds must be from"),
    case("limit-seconds-tiny", ["x*2", *X1, "--limit", "symbolic_seconds=1e-9"], "symbolic_seconds must be from"),
    case("limit-nan", ["x*2", *X1, "--limit", "elements=nan"], "positive and finite"),
    case("double-comma", ["x*2", "--x", "1,2,,3", "--grad", "ones"], "an item is missing before ','"),
    case("trailing-comma", ["x*2", "--x", "1,2,", "--grad", "ones"], "a trailing ','"),
    case("leading-comma", ["x*2", "--x", ",1"], "starts with ','"),
    case("trailing-comma-list", ["x*2", "--x", "[1,2,]", "--grad", "ones"], "trailing ','"),
    case("ragged", ["x*2", "--x", "[[1,2],[3]]", "--grad", "ones"], "ragged lists"),
    case("ragged-mixed", ["x*2", "--x", "[1,[2]]", "--grad", "ones"], "ragged lists"),
    case("unclosed", ["x*2", "--x", "[[1,2],[3,4]", "--grad", "ones"], "'[' is never closed"),
    case("unmatched-close", ["x*2", "--x", "[1,2]]", "--grad", "ones"], "unmatched ']'"),
    case("nan", ["x*2", "--x", "nan"], "nan is not allowed"),
    case("inf", ["x*2", "--x", "inf"], "inf is not allowed"),
    case("minus-inf", ["x*2", "--x", "-inf"], "-inf is not allowed"),
    case("nan-in-list", ["x*2", "--x", "1,NaN,2", "--grad", "ones"], "NaN is not allowed"),
    case("1e999", ["x*2", "--x", "1e999"], "overflows to infinity"),
    case("float32-overflow", ["x*2", "--x", "1e300"], "does not fit in float32"),
    case("empty", ["x*2", "--x", ""], "the value is empty"),
    case("blank", ["x*2", "--x", "   "], "the value is empty"),
    case("empty-list", ["x*2", "--x", "[]"], "an empty list"),
    case("empty-nested", ["x*2", "--x", "[[]]"], "an empty list"),
    case("word", ["x*2", "--x", "hello"], "unknown generator 'hello'"),
    case("typo-generator", ["x*2", "--x", "onez(3)"], "Did you mean ones?"),
    case("missing-comma", ["x*2", "--x", "1 2"], "a ',' is missing"),
    case("semicolon", ["x*2", "--x", "1;2"], "unexpected character ';'"),
    case("tuple-value", ["x*2", "--x", "(1,2)"], "unexpected character '('"),
    case("exponent-missing", ["x*2", "--x", "1e+"], "the exponent is missing"),
    case("hex-value", ["x*2", "--x", "0x10"], "write it in decimal"),
    case("underscore-value", ["x*2", "--x", "1_000"], "without '_'"),
    case("two-dots", ["x*2", "--x", "1.2.3"], "more than one '.'"),
    case("lone-minus", ["x*2", "--x", "-"], "a number must follow '-'"),
    case("nul-byte", ["x*2", "--x", "1\x00"], "control character '\\x00'"),
    case("generator-unclosed", ["x*2", "--x", "ones(2"], "'(' is never closed"),
    case("generator-trailing", ["x*2", "--x", "ones(2)x"], "unexpected text after the generator"),
    case("generator-zero", ["x*2", "--x", "ones(0)"], "positive integers"),
    case("generator-fraction", ["x*2", "--x", "ones(2.5)"], "positive integers"),
    case("generator-nan", ["x*2", "--x", "full(2, nan)"], "nan is not allowed"),
    case("generator-word-arg", ["x*2", "--x", "ones(n)"], "'n' is not a number"),
    case("value-escape", ["x*2", "--x", "__import__('os')"], "unknown generator '__import__'"),
    case("value-dotted-escape", ["x*2", "--x", "os.system('ls')"], "unknown generator 'os.system'"),
    case("ones-alone", ["x*2", "--x", "ones"], "give a shape"),
    case("value-is-program", ["x*2", "--x", "x"], "unknown generator 'x'"),
]

OPTIONS = [
    case("grad-as-option", ["grad*2", "--grad", "1"], "No value for 'grad'"),
    case("given-twice", ["x*2", "--x", "1", "--x", "2"], "given twice"),
    case("given-twice-var", ["x*2", "--x", "1", "--var", "x=2"], "given twice"),
    case("var-and-const", ["x*2", "--x", "1", "--const", "x=2"], "given twice"),
    case("unused-name", ["x*2", *X1, "--z", "2"], "no variable 'z'"),
    case("intermediate-given", ["y = x*2\nz = y", *X1, "--y", "2"], "intermediate"),
    case("typo-grad", ["x*2", *X1, "--grads", "ones"], "'grads'"),
    case("typo-dtype", ["x*2", *X1, "--dtyp", "float64"], "'dtyp'"),
    case("missing-value", ["x*2", "--x"], "needs a value"),
    case("var-without-eq", ["x*2", "--var", "x"], "NAME=VALUE"),
    case("var-empty-name", ["x*2", "--var", "=1"], "NAME=VALUE"),
    case("bad-output", ["x*2", *X1, "--output", "nope"], "not a variable of the program"),
    case("bad-dtype", ["x*2", *X1, "--dtype", "float16"], "float32 or float64"),
    case("bad-device", ["x*2", *X1, "--device", "tpu"], "cpu or cuda"),
    case("unknown-limit", ["x*2", *X1, "--limit", "bogus=1"], "unknown limit 'bogus'"),
    case("limit-not-number", ["x*2", *X1, "--limit", "nodes=abc"], "--limit"),
    case("limit-negative", ["x*2", *X1, "--limit", "nodes=-1"], "positive"),
    case("limit-inf", ["x*2", *X1, "--limit", "nodes=1e400"], "--limit"),
    case("limit-nan", ["x*2", *X1, "--limit", "nodes=nan"], "--limit"),
    case("seed-overflow", ["x*2", "--x", "randn(2)", "--grad", "ones", "--seed", "9" * 30], "--seed"),
    case("digits-negative", ["x*2", *X1, "--digits", "-5"], "--digits"),
    case("backward-calls-zero", ["x*2", *X1, "--backward-calls", "0"], "between 1 and 100"),
    case("all-const", ["x*2", "--const", "x=1"], "nothing to differentiate"),
    case("no-program", ["--x", "1"], "Give a program"),
    case("empty-program", ["", *X1], "The program is empty"),
    case("single-dash-option", ["x*2", "-x", "1"], "No such option: -x"),
    case("bare-expression-not-last", ["x; x*2", *X1], "thrown away"),
    case("name-is-function", ["log = x", *X1], "'log' is a function"),
    case("reserved-name", ["range * 2"], "reserved"),
]

GRAD = [
    case("grad-wrong-length", ["x*2", "--x", "1,2,3", "--grad", "1,2"], "--grad has shape [2]"),
    case("grad-missing", ["x*2", "--x", "1,2,3"], "backward() needs v"),
    case("grad-extra-dim", ["x*2", "--x", "1,2,3", "--grad", "[[1,2,3]]"], "--grad has shape [1, 3]"),
    case("grad-for-scalar", ["x", *X1, "--grad", "1,2"], "--grad has shape [2]"),
    case("grad-generator-shape", ["x*2", "--x", "1,2", "--grad", "ones(3)"], "--grad has shape [3]"),
    case("grad-nan", ["x*2", *X1, "--grad", "nan"], "nan is not allowed"),
    case("grad-empty", ["x*2", *X1, "--grad", ""], "the value is empty"),
    case("grad-unclosed", ["x*2", "--x", "1,2", "--grad", "ones(2,"], "never closed"),
]

MARKUP = [
    case("markup-value", ["x*2 # [/red]", "--x", "[/red]"], "[/red]"),
    case("markup-grad", ["x*2", *X1, "--grad", "[/red]"], "[/red]"),
    case("markup-var-name", ["x*2", *X1, "--var", "[/red]=1"], "'[/red]'"),
    case("markup-output", ["x*2", *X1, "--output", "[/red]"], "'[/red]'"),
    case("markup-bold-value", ["x*2", "--x", "[bold]1[/bold]"], "[bold]1[/bold]"),
    case("markup-program-error", ["y = x*2 # [/red]\nz = y + '[/red]'", *X1], "[/red]"),
    case("markup-unclosed-bracket-program", ["x*2 + [/red]", *X1], "[/red]"),
]

SYNTAX = [
    case("invalid-decimal", ["x*1if x else 2", *X1], "invalid decimal literal"),
    case("implicit-multiplication", ["2(x + 1)", *X1], "Multiplication is written with '*'"),
    case("double-equals-assign", ["y = = x", *X1], "not valid Python syntax"),
    case("missing-colon", ["y = x\nif x > 0\n    y = x", *X1], "not valid Python syntax"),
    case("bad-indent", ["\ty = x", *X1], "indent"),
    case("unterminated-string", ["x + 'abc", *X1], "not valid Python syntax"),
    case("dangling-operator", ["x +", *X1], "not valid Python syntax"),
    case("close-before-open", [")(", *X1], "Unmatched ')'"),
    case("mismatched-brackets", ["log(x]", *X1], "Unmatched ']'"),
    case("unclosed-call", ["log(x", *X1], "'(' is never closed"),
    case("backslash-continuation", ["x \\", *X1], "not valid Python syntax"),
]

XS = ["--x", "1,2,3", "--grad", "ones"]
XM = ["--x", "ones(2,2)", "--grad", "ones"]
CHAIN = ",".join("abcdefghijklmnopq"[k : k + 2] for k in range(16))  # ab,bc,...,pq: 17 labels, 16 operands
# strings, equations and parameters of the arithmetic, linear-algebra and loss entries (issue 18)
MATH = [
    case("einsum-many-labels", [f"torch.einsum('{'a' * 150}', x)", *XS], "names 150"),
    case(
        "einsum-all-letters",
        ["torch.einsum('abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ', x)", *XS],
        "names 52",
    ),
    case(
        "einsum-chain-work",
        [f"torch.einsum('{CHAIN}->aq', {', '.join(['x'] * 16)})", "--x", "ones(40,40)"],
        "multiply_adds",
    ),
    case("einsum-operands", ["torch.einsum('ij,jk->ik', x)", *XM], "names 2 operand(s); 1 are given"),
    case("einsum-sizes", ["torch.einsum('ij,jk->ik', x, y)", *XM, "--y", "ones(3,2)"], "sizes 2 and 3"),
    case("einsum-char", ["torch.einsum('ij;jk', x, x)", *XM], "may hold only the letters"),
    case("einsum-arrows", ["torch.einsum('ij->ji->ij', x)", *XM], "more than one '->'"),
    case("einsum-output", ["torch.einsum('ij->iz', x)", *XM], "names one no operand has"),
    case("einsum-dots", ["torch.einsum('i..j', x)", *XM], "'...' once"),
    case("einsum-not-string", ["torch.einsum(x, x)", *XM], "equation must be a string literal"),
    case("einsum-escape", ["torch.einsum('__import__', x)", *XM], "may hold only the letters"),
    case("reduction-bogus", ["F.mse_loss(x, x * 2, reduction='bogus')", *XS], "reduction must be one of"),
    case("reduction-number", ["F.l1_loss(x, x, reduction=1)", *XS], "reduction must be 'none' or"),
    case("string-as-tensor", ["F.mse_loss(x, 'x')", *XS], "Strings are not part of the language"),
    case("string-as-number", ["torch.add(x, x, alpha='2')", *XS], "alpha must be a number literal"),
    case("rounding-bogus", ["torch.div(x, x, rounding_mode='round')", *XS], "rounding_mode must be one of"),
    case("norm-ord-string", ["torch.norm(x, p='nuc')", *XS], "p must be a number literal, 'fro' or float('inf')"),
    case("norm-inf-string", ["torch.linalg.vector_norm(x, ord='inf')", *XS], "ord must be a number literal or"),
    case("norm-spectral", ["torch.linalg.norm(x, ord=2)", *XM], "singular values"),
    case("det-huge", ["torch.det(x)", "--x", "ones(7000,7000)"], "multiply_adds = 1e+11"),
    case("inverse-huge", ["torch.linalg.inv(x)", "--x", "ones(6000,6000)", "--grad", "ones"], "multiply_adds"),
    case("det-vector", ["torch.det(x)", *XS], "at least 2 dimensions"),
    case("dropout-random", ["F.dropout(x)", *XS], "vjp refuses it"),
    case("max-dim-literal", ["torch.max(x, 1)", *XS], "reduces along a dimension"),
    case("layer-norm-string", ["F.layer_norm(x, 'abc')", *XS], "normalized_shape must be integer literals"),
    case("outer-huge", ["torch.outer(x, x)", "--x", "ones(100000)", "--grad", "ones"], "--limit"),
    case("bmm-2d", ["torch.bmm(x, x)", *XM], "bmm() failed"),
]
BAD_INPUT = ESCAPES + UNICODE + BOMBS + VALUES + OPTIONS + GRAD + MARKUP + SYNTAX + MATH

# hostile-looking but legal: must run (exit 0) and show the user's text literally
OK_CASES = [
    # a big constant the per-element sympy route would have expanded into millions of symbols
    pytest.param(
        ["if sum(c) > 0:\n    y = x*2\nelse:\n    y = x", *X1, "--const", "c=ones(3000000)"],
        "symbolic           agree",
        id="big-const-in-condition",
    ),
    pytest.param(["sum(c)*x", *X1, "--const", "c=ones(3000000)"], "symbolic           agree", id="big-const-read"),
    # a dense Jacobian whose rows would cost more arithmetic than the budget: checked by a JVP instead
    pytest.param(
        ["tanh(W@x)", "--const", "W=ones(200,200)", "--x", "ones(200)", "--grad", "ones"]
        + ["--limit", "multiply_adds=1e6"],
        "passes through the program's matrix",
        id="jacobian-arithmetic",
    ),
    pytest.param(["x*2 # [/red]", *X1], "[/red]", id="markup-comment"),
    pytest.param(
        ["x*2 # [bold red]boom[/] [link=file:///etc/passwd]x[/link]", "--x", "1,2", "--grad", "ones"],
        "[link=file:///etc/passwd]",
        id="markup-link-comment",
    ),
    pytest.param(["grad*2", "--var", "grad=1"], "grad", id="var-named-grad"),
    pytest.param(["help*2", "--var", "help=1"], "help", id="var-named-help"),
    pytest.param(["y = x\r\nz = y*2", *X1], "z", id="crlf-line-endings"),
    pytest.param(["y = x\rz = y*2", *X1], "z", id="cr-line-endings"),
    pytest.param(
        ["y + out + output + result", "--var", "y=1", "--var", "out=1", "--var", "output=1", "--var", "result=1"],
        "y1",
        id="all-output-names-taken",
    ),
    pytest.param(["x # ( [ {", *X1], "x", id="brackets-in-comment"),
    pytest.param(["x*2**-2000", *X1], "x", id="const-underflow"),
    pytest.param(["x*" + "-" * 50 + "x", *X1], "x", id="unary-chain-within-limit"),
]

# expression files: name -> (file content as bytes or a callable(tmp_path) -> path, phrase)
FILE_CASES = {
    "not-utf8": (b'program = "x*2"\n[inputs]\nx = "1,\xff2"\n', "not UTF-8"),
    "bad-toml": (b'program = "x*2\n[inputs', "not valid TOML"),
    "too-big": (b'program = "x*2"\n# ' + b"a" * 1_100_000 + b"\n[inputs]\nx = 1\n", "bytes"),
    "deep-arrays": (b'program = "x*2"\n[inputs]\nx = ' + b"[" * 5000 + b"]" * 5000 + b"\n", "nested too deeply"),
    "deep-inline-tables": (
        b'program = "x*2"\ninputs = ' + b"{a=" * 2000 + b"1" + b"}" * 2000 + b"\n",
        "nested too deeply",
    ),
    "deep-value": (b'program = "x*2"\n[inputs]\nx = ' + b"[" * 40 + b"1" + b"]" * 40 + b"\n", "nested more than 32"),
    "escape-program": (b"program = \"__import__('os').system('ls')\"\n[inputs]\nx = 1\n", "'__import__'"),
    "dunder-program": (b'program = "x.__class__"\n[inputs]\nx = 1\n', "'__class__' is not allowed"),
    "program-not-string": (b"program = 5\n[inputs]\nx = 1\n", "expected the program"),
    "unknown-key": (b'program = "x*2"\nprogam = 1\n[inputs]\nx = 1\n', "unknown key 'progam'"),
    "nul-byte": (b'program = "x*2"\n[inputs]\nx = 1\n\x00', "NUL"),
    "escape-char-program": (b'program = "x*2\\u001b[2J"\n[inputs]\nx = 1\n', "control character '\\x1b'"),
    "nan-input": (b'program = "x*2"\n[inputs]\nx = nan\n', "finite"),
    "ragged-input": (b'program = "x*2"\n[inputs]\nx = [[1,2],[3]]\n', "ragged"),
    "bool-input": (b'program = "x*2"\n[inputs]\nx = [true]\n', "not a number"),
    "string-in-array": (b'program = "x*2"\n[inputs]\nx = ["a"]\n', "not a number"),
    "huge-hex-int": (b'program = "x*2"\n[inputs]\nx = [1, 0x' + b"f" * 5000 + b"]\n", "not a finite number"),
    "markup-value": (b'program = "x*2 # [/red]"\n[inputs]\nx = "[/red]"\n', "[/red]"),
    "long-program": (b'program = "x' + b" " * 30000 + b'"\n[inputs]\nx = 1\n', "characters long"),
    "huge-decimal-int": (b'program = "x*2"\n[inputs]\nx = [1, ' + b"9" * 5000 + b"]\n", "digits"),
    # dotted keys in every spelling TOML allows: tomllib takes time quadratic in the parts
    "dotted-quoted": (b'program = "x*2"\n[inputs]\nx = 1\n' + b'"a".' * 40000 + b'"a" = 1\n', "dotted key"),
    "dotted-literal-spaced": (b'program = "x*2"\n' + b"'a' . " * 40000 + b"'a' = 1\n", "dotted key"),
    "dotted-escaped": (b'program = "x*2"\n' + b'"a\\"b" .\t' * 40000 + b"a = 1\n", "dotted key"),
    "dotted-mixed-header": (b'program = "x*2"\n[' + b"a.'b'.\"c\"." * 20000 + b"d]\nx = 1\n", "dotted key"),
    "dotted-inline-table": (b'program = "x*2"\ninputs = {' + b'"x".' * 40000 + b"x = 1}\n", "dotted key"),
    # numbers of [expect] that would make the file's own check meaningless or crash it
    "expect-rtol-nan": (b'program = "x*2"\n[inputs]\nx = 1\n[expect]\ngrads.x = 5\nrtol = nan\n', "expect.rtol"),
    "expect-rtol-negative": (b'program = "x*2"\n[inputs]\nx = 1\n[expect]\nrtol = -1\n', "expect.rtol"),
    "expect-rtol-huge": (b'program = "x*2"\n[inputs]\nx = 1\n[expect]\nrtol = 1e300\n', "from 0 to 1"),
    "expect-atol-inf": (b'program = "x*2"\n[inputs]\nx = 1\n[expect]\natol = inf\n', "expect.atol"),
    "expect-400-digits": (
        b'program = "x*2"\n[inputs]\nx = 1\n[expect]\ngrads.x = [' + b"9" * 400 + b"]\n",
        "(400 digits)",
    ),
    "expect-output-nan": (b'program = "x*2"\n[inputs]\nx = 1\n[expect]\noutput = nan\n', "finite numbers"),
}

# text from outside that tries to drive the terminal: ESC sequences (CSI, OSC title and clipboard), C1
# controls, BEL, bidi overrides. Each run must show them made visible, on stdout and stderr alike.
EVIL = "\x1b]0;pwned\x07\x1b]52;c;aGVsbG8=\x07\x1b[2J\x9b31m\u202eevil\u2066\x08\r"
TERMINAL = [
    pytest.param(["run", "x*2", *X1, f"--a{EVIL}", "1"], 2, id="option-name"),
    pytest.param(["run", "x*2", *X1, "--limit", f"{EVIL}=3"], 2, id="limit-name"),
    pytest.param(["run", "x*2", *X1, "--limit", f"elements={EVIL}"], 2, id="limit-value"),
    pytest.param(["run", "x*2", "--var", f"{EVIL}=1"], 2, id="var-name"),
    pytest.param(["run", "x*2", "--x", f"1,{EVIL}"], 2, id="value"),
    pytest.param(["run", "x*2", *X1, "--grad", EVIL], 2, id="grad"),
    pytest.param(["run", f"x*2 # {EVIL}", *X1], 2, id="program-comment"),
    pytest.param(["run", "--file", f"/nonexistent/{EVIL}.toml"], 2, id="file-path"),
    pytest.param(["explain", f"/nonexistent/{EVIL}"], 2, id="explain-path"),
    pytest.param(["run", "x*2", *X1, "--output", EVIL], 2, id="output-name"),
    pytest.param(["run", "x*2", *X1, "--dtype", EVIL], 2, id="dtype"),
]
# the same in a TOML string (TOML refuses raw control characters: the file spells them \\u001b)
EVIL_TOML = "".join(c if c.isprintable() and c.isascii() else f"\\u{ord(c):04x}" for c in EVIL)
# (file content, exit code): the file's own words and keys
TERMINAL_FILES = {
    "raw-escape": (f'title = "T{EVIL}"\nprogram = "y = x*2"\n[inputs]\nx = 1\n', 2),
    "title-description-source": (
        f'title = "T{EVIL_TOML}"\ndescription = "D{EVIL_TOML}"\nsource = "S{EVIL_TOML}"\n'
        'program = "y = x*2"\n[inputs]\nx = 1\n',
        0,
    ),
    "expect-key": (f'program = "y = x*2"\n[inputs]\nx = 1\n[expect]\n"k{EVIL_TOML}" = 1\n', 2),
    "expect-grads-name": (f'program = "y = x*2"\n[inputs]\nx = 1\n[expect]\ngrads."k{EVIL_TOML}" = 1\n', 2),
    "top-key": (f'program = "y = x*2"\n"k{EVIL_TOML}" = 1\n[inputs]\nx = 1\n', 2),
    "input-name": (f'program = "y = x*2"\n[inputs]\nx = 1\n"k{EVIL_TOML}" = 2\n', 2),
    "input-value": (f'program = "y = x*2"\n[inputs]\nx = "1{EVIL_TOML}"\n', 2),
    "program": (f'program = "y = x*2 # {EVIL_TOML}"\n[inputs]\nx = 1\n', 2),
}
