"""A real notebook, executed by a real Jupyter kernel: each result shows once, as HTML.

Rich, asked inside `_repr_html_` for the HTML, would otherwise notice the kernel and send a display of
its own, so that every result showed twice.
"""

from __future__ import annotations

from pathlib import Path

import nbclient  # the test extra has them: CI runs this test, never skips it
import nbformat

ROOT = Path(__file__).resolve().parents[1]

CELLS = [
    "import vjp_explorer",
    'vjp_explorer.explore("3*a+2*b*b+log(c)", {"a": "1,2,3", "b": "3,4,5", "c": "6,7,8"}, grad="0.1,1,0.0001")',
    f"vjp_explorer.run_snippet(open({str(ROOT / 'expressions/snippets/seed000_ex1.py')!r}).read(), seed=0)",
    'r = vjp_explorer.explore("x*x", {"x": "1,2"}, grad="1,1")\ndisplay(r)',
]


def test_each_result_shows_once_as_html(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": tmp_path}})
    client.execute()
    outputs = [cell.outputs for cell in nb.cells]
    assert outputs[0] == []
    for cell in outputs[1:]:
        shown = [o for o in cell if o.output_type in ("execute_result", "display_data")]
        assert len(shown) == 1, [o.get("data", o).keys() for o in cell]
        assert len(cell) == 1, cell  # nothing on stdout or stderr either
        assert shown[0].data["text/html"].startswith("<pre")
    assert "0.0166667" in outputs[1][0].data["text/html"]
    assert "backward #1" in outputs[2][0].data["text/html"]
