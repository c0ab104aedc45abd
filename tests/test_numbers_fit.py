"""Numbers are never cut: every table is read back from the text at 40, 80 and 200 columns.

Each table of the output (its headers may wrap over several lines, and a wide one comes in blocks of
columns with the row labels repeated) is parsed back into (row label, column header) -> number, and every
number must equal the JSON's, formatted at the printed precision. A number split across lines, folded or
ended in an ellipsis cannot be read back whole.
"""

from __future__ import annotations

import json
import math
import re

import pytest

from documents import event, inputs, per_leaf
from vjp_explorer.render.numbers import fmt

SEED = ["run", "3*a+2*b*b+log(c)", "--a", "1,2,3", "--b", "3,4,5", "--c", "6,7,8", "--grad", "0.1,1,0.0001"]
WIDE = ["run", "W@x", "--x", "randn(12)", "--const", "W=randn(9,12)", "--grad", "ones", "--full", "--seed", "3"]
SNIPPET = ["run", "seed000_ex1", "--seed", "0"]
WIDTHS = [40, 80, 200]
NUMBER = re.compile(r"-?(?:\d+\.?\d*(?:e[+-]\d+)?|nan|inf)")


def tables(text: str) -> list[dict[tuple[str, str], str]]:
    """Every table in the text: {(row label, column header): cell}, the corner header under key ("", "").

    A table is found by its rule under the headers (━ and ╇); two tables side by side have two runs of it.
    """
    lines = text.splitlines()
    found: list[dict[tuple[str, str], str]] = []
    for k, rule in enumerate(lines):
        for span in re.finditer(r"[━╇]+", rule):
            a, b = span.span()
            top = k
            while top > 0 and "┃" in lines[top - 1][a:b]:
                top -= 1
            columns = [line[a:b].split("┃") for line in lines[top:k]]
            assert columns, rule
            heads = [" ".join(c[j].strip() for c in columns if c[j].strip()) for j in range(len(columns[0]))]
            table = {("", ""): heads[0]}
            row = k + 1
            while row < len(lines) and "│" in lines[row][a:b]:
                cells = [c.strip() for c in lines[row][a:b].split("│")]
                assert len(cells) == len(heads), (lines[row], heads)
                for h, c in zip(heads[1:], cells[1:], strict=True):
                    table[(cells[0], h)] = c
                row += 1
            found.append(table)
    return found


def show(x: float | None, digits: int = 6) -> str:
    return "None" if x is None else fmt(x, digits)


def flat(x) -> list:
    return [v for item in x for v in flat(item)] if isinstance(x, list) else [x]


def read_back(text: str, width: int) -> list[dict[tuple[str, str], str]]:
    assert "…" not in text, "an ellipsis in the output"
    for line in text.splitlines():
        assert len(line) <= width, line
    found = tables(text)
    for t in found:  # every cell of every table is one whole number
        for key, cell in t.items():
            if key != ("", "") and cell not in ("", "...", "-"):
                assert NUMBER.fullmatch(cell), (key, cell)
    return found


def merged(found: list[dict], corner: str) -> dict[tuple[str, str], str]:
    """The blocks of one table (same corner header) as one."""
    out: dict[tuple[str, str], str] = {}
    for t in found:
        if t[("", "")] == corner:
            out |= {k: v for k, v in t.items() if k != ("", "")}
    assert out, corner
    return out


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("args", [SEED, WIDE], ids=["seed", "wide"])
def test_every_number_of_a_run_reads_back_whole(vjp_at, args, width):
    text = vjp_at(width, *args)
    data = json.loads(vjp_at(width, *args, "--json"))
    found = read_back(text, width)
    out = event(data)["outputs"][0]["shape"]
    for leaf, jac in per_leaf(data, "jacobian").items():
        values = flat(inputs(data)[leaf]["value"])
        n = len(values)
        table = merged(found, "element")
        cols = {".grad (backward)": event(data)["grads"][leaf], "Jᵀv (from J)": per_leaf(data, "jtv")[leaf]}
        cols["Jᵀv (sympy)"] = per_leaf(data, "symbolic")[leaf]
        for j in range(n):
            row = f"{leaf}[{j}]"
            assert table[(row, "value")] == show(values[j])
            for head, numbers in cols.items():
                assert table[(row, head)] == show(flat(numbers)[j]), (row, head)
        matrix = merged(found, f"J = ∂y/∂{leaf}")
        entries = flat(jac["value"])
        for i in range(math.prod(out)):
            for j in range(n):
                assert matrix[(f"y[{i}]", f"{leaf}[{j}]")] == show(entries[i * n + j]), (i, j)
        assert len(matrix) == math.prod(out) * n  # each entry once: blocks repeat labels, not numbers


@pytest.mark.parametrize("width", WIDTHS)
def test_every_number_of_a_snippet_reads_back_whole(vjp_at, width):
    text = vjp_at(width, *SNIPPET)
    data = json.loads(vjp_at(width, *SNIPPET, "--json"))
    table = merged(read_back(text, width), "element")
    heads = {
        "value": "value",
        ".grad (was None)": "grad_after",
        "Jᵀv (J)": "jtv",
        "Jᵀv (FD)": "finite_difference",
    }
    for x in data["events"][0]["inputs"]:
        for head, key in heads.items():
            for j, number in enumerate(flat(x[key])):
                assert table[(f"{x['name']}[{j}]", head)] == show(number), (x["name"], j, head)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_header_keeps_each_number_of_a_value_on_one_line(vjp_at, width):
    text = vjp_at(width, *SEED)
    words = text.split()
    for shown in ("[22.7918,", "39.9459,", "61.0794]", "[0.1,", "0.0001]"):
        assert shown in words, shown


def test_a_number_table_splits_into_blocks_of_columns_never_digits():
    import io

    from rich.console import Console

    from vjp_explorer.render.fit import NumberTable

    t = NumberTable("J = ∂y/∂x", [f"x[{j}]" for j in range(12)])
    t.add_row("y[0]", *(f"-0.12345{j}e-05" for j in range(12)))
    console = Console(file=io.StringIO(), width=40, color_system=None)
    console.print(t)
    text = console.file.getvalue()
    assert all(len(line) <= 40 for line in text.splitlines())
    cells = merged(tables(text), "J = ∂y/∂x")
    assert [cells[("y[0]", f"x[{j}]")] for j in range(12)] == [f"-0.12345{j}e-05" for j in range(12)]


@pytest.mark.parametrize("width", [40, 63, 80, 200])
@pytest.mark.parametrize("styled", [False, True])
def test_a_long_table_written_as_plain_lines_is_what_rich_prints(width, styled, monkeypatch):
    """Past PLAIN_ROWS rows a block's body is written line by line (a loop's 3,000 folded calls took 3 s in
    Rich's layout): the text must be Rich's own, character for character, blocks, gaps and wide labels too."""
    import io

    from rich.console import Console
    from rich.padding import Padding

    from vjp_explorer.render import fit

    table = fit.NumberTable("call", ["output", "‖model.0.weight.grad‖", "‖b.grad‖", "jtv", "fin. diff."])
    for k in range(120):
        label = f"#{k}" if k % 7 else f"層{k}"  # a label two cells wide per character
        table.add_row(label, fmt(math.sin(k) * 10 ** (k % 9 - 4)), fmt(k * 0.37), "0", "agree", "skipped")
        if k == 60:
            table.add_row(None)

    def printed() -> str:
        console = Console(file=io.StringIO(), width=width, force_terminal=styled, color_system="standard")
        console.print(Padding(table, (0, 0, 0, 7)))
        return console.file.getvalue()  # type: ignore[attr-defined]

    fast = printed()
    monkeypatch.setattr(fit, "PLAIN_ROWS", 10**9)
    assert fast == printed()
