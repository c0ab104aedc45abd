"""docs/api.md is run as documented: its ```python blocks are doctests, in order, in one namespace."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

API = Path(__file__).resolve().parents[1] / "docs" / "api.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def test_every_block_is_an_example():
    blocks = BLOCK.findall(API.read_text())
    assert len(blocks) >= 6
    assert all(block.lstrip().startswith(">>> ") for block in blocks)


def test_the_documented_examples_give_the_documented_outputs():
    text = "\n".join(BLOCK.findall(API.read_text()))
    test = doctest.DocTestParser().get_doctest(text, {}, "docs/api.md", str(API), 0)
    out: list[str] = []
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test, out=out.append)
    assert runner.failures == 0, "".join(out)
    assert runner.tries == len(test.examples) > 20
