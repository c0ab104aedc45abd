"""In Jupyter, results show themselves: `_repr_html_` gives what the terminal shows, as HTML."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

from vjp_explorer import Result, SnippetResult, explore, run_snippet

ROOT = Path(__file__).resolve().parents[1]


def _text(page: str) -> str:
    """The text of an HTML fragment (parsing it also shows that it is well-formed enough to parse)."""
    parts: list[str] = []
    parser = HTMLParser()
    parser.handle_data = parts.append  # type: ignore[method-assign]
    parser.feed(page)
    parser.close()
    return "".join(parts)


def test_a_program_result_shows_its_grads_as_html():
    r = explore("3*a+2*b*b+log(c)", {"a": "1,2,3", "b": "3,4,5", "c": "6,7,8"}, grad="0.1,1,0.0001")
    assert isinstance(r, Result)
    page = r._repr_html_()
    assert page.startswith("<pre") and page.rstrip().endswith("</pre>")
    shown = _text(page)
    for number in ("0.3", "0.0003", "1.2", "16", "0.002", "0.0166667", "0.142857", "1.25e-05"):
        assert f" {number} " in shown  # each .grad element, in the table's cells
    assert "leaf b" in shown and "checks" in shown


def test_a_snippet_result_shows_itself_too():
    r = run_snippet((ROOT / "expressions/snippets/seed000_ex1.py").read_text(), seed=0)
    assert isinstance(r, SnippetResult)
    shown = _text(r._repr_html_())
    assert "backward #1" in shown and "tensor([3.0000e-01, 3.0000e+00, 3.0000e-04])" in shown
    assert "0.0166667" in shown


def test_user_text_is_escaped():
    r = run_snippet("import torch\nx = torch.tensor([1.0], requires_grad=True)\nprint('<b>hi</b>')\n", seed=0)
    page = r._repr_html_()
    assert "<b>" not in page and "&lt;b&gt;hi&lt;/b&gt;" in page
