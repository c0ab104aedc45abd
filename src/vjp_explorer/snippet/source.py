"""A pasted snippet's text -> code to run, plus what the source says it printed.

Handles REPL transcripts (`>>> ` and `... ` lines are code, the other lines are what the session printed),
IPython ones (`In [n]:` and `...:` lines are code, read as the `>>>` form) and trailing comments that show
output (`print(a.grad) # tensor([0.3000, ...])`). What the source claims is compared by value (print formats
drift between torch versions); a traceback it shows is a claimed error. No torch here.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass, field

from ..errors import ProgramSyntaxError

# a number as Python and torch print one (not the digits inside a name such as float32 or MulBackward0)
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|inf\b|nan\b)")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_GRAD_FN = re.compile(r"grad_fn=<[^>]*>")  # the node's name changed across versions (AddBackward -> AddBackward0)
# pre-0.4 prints (`Variable containing:`, `[torch.FloatTensor of size 2]`, a `1e-02 *` scale): not comparable
_OLD_FORMAT = re.compile(
    r"Variable containing:|^\s*\[torch\.[\w.]*Tensor of size [\dx ]*\]|\d\.\d+e[-+]\d+\s*\*", re.MULTILINE
)
# a comment that reads like printed output rather than prose: only these words, numbers and brackets
_OUTPUT_WORDS = {"tensor", "Parameter", "containing", "True", "False", "None", "requires_grad", "grad_fn", "dtype"}
_OUTPUT_LEAD = re.compile(r"^(?:->|=>|→|=|(?:out(?:put)?|prints?|result|gives)\s*:)\s*", re.IGNORECASE)
_REPR_PARTS = re.compile(r"torch\.Size\b|dtype=torch\.\w+|device='[\w:]*'|\.\.\.|…")
# IPython's prompts: `In [3]: code`, `   ...: more code`, `Out[3]: value`
_IPY_IN = re.compile(r"^In \[\d*\]:(?: (.*))?$")
_IPY_MORE = re.compile(r"^\s*\.\.\.+:(?: (.*))?$")
_IPY_OUT = re.compile(r"^Out\[\d*\]:(?: (.*))?$")


def visible(text: str) -> str:
    """Text from outside, safe for a terminal (the project's one helper for it, in language/unicode.py)."""
    from ..language.unicode import visible as made_visible

    return made_visible(text)


@dataclass
class Source:
    """The code to run and what the pasted text says each statement printed."""

    original: str
    code: str
    repl: bool
    line_map: list[int]  # line of `code` (0-based) -> line of `original` (1-based)
    claimed: dict[int, list[str]] = field(default_factory=dict)  # code line (1-based) -> claimed output lines
    claimed_from: dict[int, str] = field(default_factory=dict)  # code line -> "transcript" | "comment"
    pasted: str = ""  # the text as pasted: `original` differs for an IPython transcript (read as `>>>` lines)

    def original_line(self, code_line: int) -> int:
        """The line of the pasted text that holds code line `code_line` (1-based)."""
        if 1 <= code_line <= len(self.line_map):
            return self.line_map[code_line - 1]
        return code_line


def read_source(text: str, label: str) -> Source:
    """Split a pasted text into code and claimed output."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if text.startswith("\ufeff"):
        text = text[1:]
    pasted = text
    lines = text.split("\n")
    ipython = ipython_as_repl(lines)
    if ipython is not None:  # the same lines, as the `>>>` transcript the child reads (runner.py)
        lines = ipython
        text = "\n".join(lines)
    repl = any(line.startswith(">>>") for line in lines)
    if not repl:
        return Source(text, text, False, list(range(1, len(lines) + 1)), pasted=pasted)
    code: list[str] = []
    line_map: list[int] = []
    outputs: dict[int, list[str]] = {}
    for number, line in enumerate(lines, start=1):
        if line.startswith((">>> ", "... ")) or line in (">>>", "..."):
            code.append(line[4:])
            line_map.append(number)
        elif line.strip() and code:
            outputs.setdefault(len(code), []).append(line)
    src = Source(text, "\n".join(code) + "\n", True, line_map, pasted=pasted)
    # output lines belong to the statement that ends just before them
    for after, out in outputs.items():
        src.claimed[after] = out
        src.claimed_from[after] = "transcript"
    return src


def ipython_as_repl(lines: list[str]) -> list[str] | None:
    """An IPython transcript (its first line `In [n]: ...`) as the same lines with `>>> ` and `... ` prompts
    and each `Out[n]: ` taken off its value; None for any other text. Line numbers stay those of the paste."""
    first = next((line for line in lines if line.strip()), "")
    if not _IPY_IN.match(first):
        return None
    out: list[str] = []
    in_cell = False
    for line in lines:
        if (m := _IPY_IN.match(line)) is not None:
            out.append(">>> " + m.group(1) if m.group(1) else ">>>")
            in_cell = True
        elif in_cell and (m := _IPY_MORE.match(line)) is not None:
            out.append("... " + m.group(1) if m.group(1) else "...")
        else:
            in_cell = False
            m = _IPY_OUT.match(line)
            out.append(line if m is None else m.group(1) or "")
    return out


def parse(src: Source, label: str, max_chars: int, max_nodes: int) -> ast.Module:
    """The snippet's syntax tree, refused with a pointed message if it is not Python or too large."""
    if len(src.code) > max_chars:
        raise ProgramSyntaxError(
            f"The snippet is {len(src.code):,} characters long; the limit is {max_chars:,}.",
            hint="Raise it with --limit snippet_chars=N.",
        )
    try:
        tree = ast.parse(src.code, filename=label)
    except SyntaxError as e:
        line = src.original_line(e.lineno or 1)
        text = (e.text or "").rstrip("\n")
        col = max(0, (e.offset or 1) - 1)
        raise ProgramSyntaxError(
            f"{label}, line {line}: not valid Python: {e.msg.rstrip('.')}" + ("" if e.msg.endswith("?") else "."),
            source=text,
            start=col,
            label=f"{label}, line {line}",
            hint="A snippet is Python code (a REPL transcript with >>> prompts works too).",
        ) from None
    except (RecursionError, MemoryError, ValueError) as e:
        raise ProgramSyntaxError(f"{label}: the snippet is nested too deeply to read ({type(e).__name__}).") from None
    count = sum(1 for _ in ast.walk(tree))
    if count > max_nodes:
        raise ProgramSyntaxError(
            f"{label}: the snippet has {count:,} syntax nodes; the limit is {max_nodes:,}.",
            hint="Raise it with --limit snippet_nodes=N.",
        )
    _comments_as_output(src, tree)
    return tree


def _comments_as_output(src: Source, tree: ast.Module) -> None:
    """`print(x) # tensor([...])`: a comment after a print or a displayed expression that reads like output."""
    shows: set[int] = set()
    for node in tree.body:  # a statement's own line: a print inside a loop prints once per pass
        if isinstance(node, ast.Expr) and node.lineno == node.end_lineno:
            call = node.value
            is_print = isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "print"
            if isinstance(call, ast.Call) and is_print and any(_text(a) for a in call.args):
                continue  # print("shape:", x.shape) # (2, 2): the comment shows the value, not the line
            # a script shows a bare expression's value only in a REPL
            if is_print or (src.repl and (not isinstance(call, ast.Call) or _displays(call))):
                shows.add(node.lineno)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(src.code).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        line = tok.start[0]
        body = _OUTPUT_LEAD.sub("", tok.string.lstrip("#").strip())
        if line in shows and line not in src.claimed and output_like(body):
            src.claimed[line] = [body]
            src.claimed_from[line] = "comment"


def _text(node: ast.expr) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


def _displays(call: ast.Call) -> bool:
    """A bare call whose value a REPL shows (x.grad.zero_() shows the zeroed tensor; y.backward() shows nothing)."""
    return not (isinstance(call.func, ast.Attribute) and call.func.attr in ("backward", "append", "step", "zero_grad"))


def output_like(text: str) -> bool:
    """Whether a comment reads as what a print shows (`tensor([2., 4.])`, `22`, `(tensor(1.), None)`, `True`,
    `torch.Size([2, 3])`) rather than prose (`6a+4 is 6*3+4 = 22`): numbers, brackets, commas and a few
    words of torch's reprs only. Conservative: a comment read as a claim it is not shows a false ≠."""
    rest = _GRAD_FN.sub(" ", text.replace("Parameter containing:", "Parameter "))
    rest = _REPR_PARTS.sub(" ", rest)
    rest = _NUMBER.sub(" 0 ", rest)
    words = re.findall(r"[A-Za-z_]\w*", rest)
    if any(w not in _OUTPUT_WORDS for w in words):
        return False
    return rest.strip() != "" and re.fullmatch(r"[\s\[\](),=0]*", re.sub(r"[A-Za-z_]\w*", " ", rest)) is not None


def comparable(claimed: list[str]) -> bool:
    """Whether a claimed output can be compared with what torch prints now: not a pre-0.4 print."""
    return _OLD_FORMAT.search("\n".join(claimed)) is None


def _normal(text: str) -> str:
    return _GRAD_FN.sub("grad_fn=<>", _ADDRESS.sub("0x", text))


def same_output(claimed: list[str], printed: str) -> bool:
    """Whether the source's claimed output matches what ran, by value (the same numbers to the precision the
    source shows them, the text between them the same but for spacing), or with the `...` of an abridged line."""
    want = _normal(" ".join(" ".join(claimed).split()))
    got = _normal(" ".join(printed.split()))
    if "grad_fn=" not in want:  # torch 0.4.0 printed no grad_fn
        got = re.sub(r",\s*grad_fn=<>", "", got)
    if want == got or same_values(want, got):
        return True
    if "..." in want:  # `tensor([3.0000e-01, ...])`: the visible parts must appear in order
        pos = 0
        for part in (p.strip(" ,") for p in want.split("...")):
            found = got.find(part, pos)
            if part and found < 0:
                return False
            pos = found + len(part) if part else pos
        return True
    return False


def same_values(want: str, got: str) -> bool:
    """The same text but for spacing and the same numbers, each within half a unit of the last digit shown
    (`tensor([ 1.,  2.])` of torch 0.4 is `tensor([1., 2.])` now; `0.7311` is 0.73106)."""
    a, b = _NUMBER.findall(want), _NUMBER.findall(got)
    if not a or len(a) != len(b):
        return False
    if "".join(_NUMBER.sub("#", want).split()) != "".join(_NUMBER.sub("#", got).split()):
        return False
    return all(_close(x, y) for x, y in zip(a, b, strict=True))


def _close(x: str, y: str) -> bool:
    u, v = float(x), float(y)
    if u != u or v != v:  # nan
        return u != u and v != v
    if u in (float("inf"), float("-inf")) or v in (float("inf"), float("-inf")):
        return u == v
    return abs(u - v) <= _half_unit(x) + _half_unit(y) + 1e-12 * max(1.0, abs(u), abs(v))


def _half_unit(number: str) -> float:
    """Half a unit of a number's last digit shown: 0.00005 for 0.7311; 0 for 22 or 22. (whole numbers)."""
    mantissa, _, exponent = number.lower().lstrip("+-").partition("e")
    decimals = len(mantissa.partition(".")[2])
    if not decimals and not exponent:
        return 0.0
    return 0.5 * 10.0 ** (int(exponent or 0) - decimals)


@dataclass(frozen=True)
class ClaimedError:
    """The exception a transcript's traceback shows: its type (the last part of a dotted name) and the
    first line of its message."""

    type: str
    message: str

    def shown(self) -> str:
        return f"{self.type}: {self.message}" if self.message else self.type


_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?::\s?(.*))?$")
_IPY_TRACEBACK = re.compile(r"^([A-Za-z_][\w.]*)\s+Traceback \(most recent call last\)")


def traceback_at(claimed: list[str]) -> int | None:
    """The index of the claimed line that starts a traceback (Python's or IPython's), or None."""
    for k, line in enumerate(claimed):
        text = line.strip()
        if text.startswith("Traceback (most recent call last)") or _IPY_TRACEBACK.match(text):
            return k
    return None


def claimed_error(lines: list[str]) -> ClaimedError | None:
    """The exception a traceback shows (the last one of a chain): the first line after its frames at the
    indentation of `Traceback`; for IPython's, the `Type: message` line its header names. None if unreadable."""
    starts = [k for k, line in enumerate(lines) if traceback_at([line]) is not None]
    if not starts:
        return None
    head = lines[starts[-1]]
    ipython = _IPY_TRACEBACK.match(head.strip())
    indent = len(head) - len(head.lstrip())
    for line in lines[starts[-1] + 1 :]:
        text = line.strip()
        if not text:
            continue
        if ipython is not None:
            if text.startswith(ipython.group(1) + ":") or text == ipython.group(1):
                return _error(text)
        elif len(line) - len(line.lstrip()) <= indent:
            return _error(text)
    return ClaimedError(ipython.group(1).rpartition(".")[2], "") if ipython is not None else None


def _error(text: str) -> ClaimedError | None:
    m = _EXCEPTION_LINE.match(text)
    if m is None:
        return None
    return ClaimedError(m.group(1).rpartition(".")[2], (m.group(2) or "").strip())


def same_error(claimed: ClaimedError, type_: str, message: str) -> bool:
    """Whether the snippet raised what the source shows: the same exception type and the message's first
    line the same but for spacing and addresses, or a prefix of it (an older torch's shorter message)."""
    if claimed.type != type_.rpartition(".")[2]:
        return False
    want = " ".join(_ADDRESS.sub("0x", claimed.message).split())
    lines = message.strip().split("\n")
    got = " ".join(_ADDRESS.sub("0x", lines[0] if lines else "").split())
    if not want or want == got:
        return True
    return got.startswith(want) and not got[len(want)].isalnum()


@dataclass(frozen=True)
class Verdict:
    """A claim against the run: the same or not, of printed output or of an error, and the claim's words."""

    same: bool
    error: bool
    shown: str


def judge(claimed: list[str], printed: str, raised: tuple[str, str] | None, comment: bool = False) -> Verdict | None:
    """What a claim says against what ran (`raised`: the exception type and message where this statement
    raised); None where it cannot be compared (a pre-0.4 print, a traceback that does not read). A `comment`
    is written by hand (`# 22` for `tensor(22.)`, `# (2, 2)` for a torch.Size): where it shows numbers, those
    are compared, and where it shows another count of them than printed, it is not compared."""
    at = traceback_at(claimed)
    if at is None:
        if not comparable(claimed):
            return None
        if same_output(claimed, printed):
            return Verdict(True, False, " ".join(claimed))
        want, got = _NUMBER.findall(" ".join(claimed)), _NUMBER.findall(printed)
        if comment and want:
            if len(want) != len(got):
                return None
            return Verdict(all(_close(x, y) for x, y in zip(want, got, strict=True)), False, " ".join(claimed))
        return Verdict(False, False, " ".join(claimed))
    before = claimed[:at]
    if before and comparable(before) and not same_output(before, printed):
        return Verdict(False, False, " ".join(before))
    error = claimed_error(claimed[at:])
    if error is None:
        return None
    same = raised is not None and same_error(error, raised[0], raised[1])
    return Verdict(same, True, error.shown())


def verdict_of(claimed: list[str], origin: str, printed: str, raised: tuple[str, str] | None) -> Verdict | None:
    """A statement's claim (`origin` transcript or comment) against what it printed or raised; None where the
    two are not compared (a pre-0.4 print; a comment on a statement that printed nothing)."""
    verdict = judge(claimed, printed, raised, comment=origin == "comment")
    if verdict is None or (origin == "comment" and not verdict.error and not printed.strip()):
        return None
    return verdict
