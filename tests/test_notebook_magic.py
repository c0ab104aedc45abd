"""Notebooks natively (issue 42), in a real notebook executed by a real kernel (nbclient): `%load_ext
vjp_explorer` and `%%vjp` explain a cell's backward calls in one HTML display and leave its variables in the
namespace; `r.graph` displays inline as SVG, drawn without Graphviz; a bad program is one clean error with
the column marker. The numbers are hand-derived: y = 3x² + x at x = [1, 2, 3], v = [0.1, 1, 0.0001] gives
x.grad = (6x + 1)·v = [0.7, 13, 0.0019]; for y = 3a + 2b² + log(c), a.grad = 3v = [0.3, 3, 0.0003]."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from html import unescape

import nbclient
import nbformat
import pytest

SVG = "{http://www.w3.org/2000/svg}"
CELLS = [
    "%load_ext vjp_explorer",
    "%%vjp\nimport torch\nx = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)\ny = 3 * x ** 2 + x\n"
    "y.backward(torch.tensor([0.1, 1.0, 0.0001]))",
    "import json\nprint(json.dumps([x.grad.tolist(), list(y.shape)]))",
    "print(torch.Tensor.backward.__module__, torch.autograd.grad.__module__, torch.autograd.Function.apply.__module__)",
    "from vjp_explorer import explore\n"
    'r = explore("3*a+2*b*b+log(c)", {"a": "1,2,3", "b": "3,4,5", "c": "6,7,8"}, gradient="0.1,1,0.0001", '
    "graph=True)\nr.graph",
    'explore("sinn(x)", {"x": "1"})',
    "%%vjp\nw = torch.ones(2, requires_grad=True)\n(w * 5).sum().backward()\nraise ValueError('after the call')",
    "print(w.grad.tolist())",
    "z = torch.tensor([1.0, 2.0], requires_grad=True)\nz",  # shown: IPython's `_` and `_9` hold z too
    "%%vjp\n(z * z).sum().backward()",
]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    where = tmp_path_factory.mktemp("nb")
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", allow_errors=True, resources={"metadata": {"path": where}}
    )
    client.execute()
    return [cell.outputs for cell in nb.cells]


def shown(cell):
    return [o for o in cell if o.output_type in ("execute_result", "display_data")]


def test_the_magic_explains_the_cells_backward_in_one_html_display(outputs):
    assert outputs[0] == []
    (display,) = shown(outputs[1])
    assert [o.output_type for o in outputs[1]] == ["display_data"], outputs[1]  # no error, no stray output
    html = display.data["text/html"]
    assert "backward #1" in html and "y.backward(torch.tensor([0.1, 1.0, 0.0001]))" in html
    text = unescape(re.sub(r"<[^>]+>", "", html))
    rows = {line.split()[0]: line.split() for line in text.splitlines() if line.strip().startswith("x[")}
    for k, grad in enumerate(("0.7", "13", "0.0019")):  # element, value, .grad, Jᵀv (J), Jᵀv (FD)
        row = [c for c in rows[f"x[{k}]"] if c != "│"]
        assert row[2:] == [grad, grad, grad], row
    assert "finite_difference" in html and "agree" in html and "disagree" not in html


def test_the_cells_variables_stay_in_the_notebook(outputs):
    (out,) = outputs[2]
    grad, shape = json.loads(out.text)
    assert grad == pytest.approx([0.7, 13.0, 0.0019], rel=1e-6) and shape == [3]


def test_torch_is_put_back_after_the_cell(outputs):
    (out,) = outputs[3]
    assert out.text.split() == ["torch._tensor", "torch.autograd", "torch.autograd.function"], out.text


def test_r_graph_displays_inline_as_svg(outputs):
    (display,) = shown(outputs[4])
    svg = display.data["image/svg+xml"]
    root = ET.fromstring(svg)
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "AccumulateGrad → a.grad" in texts and "receives [0.3, 3, 0.0003]" in texts, texts
    assert any(t.startswith("AddBackward0 (output y)") for t in texts)
    boxes = [
        (float(r.get("x")), float(r.get("y")), float(r.get("width")), float(r.get("height")))
        for r in root.iter(f"{SVG}rect")
    ]
    assert len(boxes) == 9  # the nodes backward ran: 3 accumulations, 6 operations
    for k, (x, y, w, h) in enumerate(boxes):  # no two boxes overlap
        for x2, y2, w2, h2 in boxes[k + 1 :]:
            assert x + w <= x2 or x2 + w2 <= x or y + h <= y2 or y2 + h2 <= y
    for line in root.iter(f"{SVG}line"):  # every arrow points down, from a sender to a receiver
        assert float(line.get("y2")) > float(line.get("y1"))


def test_a_bad_program_is_one_clean_error_with_its_marker(outputs):
    (error,) = outputs[5]
    assert error.output_type == "error"
    text = "\n".join(error.traceback)
    assert "Did you mean sin, sinh, sign?" in text and "sinn(x)" in text and "^^^^" in text, text
    assert "File " not in text and "site-packages" not in text and "vjp_explorer/" not in text, text


def test_a_cell_that_raises_shows_its_calls_then_its_error_and_keeps_what_ran(outputs):
    kinds = [o.output_type for o in outputs[6]]
    assert kinds == ["display_data", "error"], kinds
    assert "backward #1" in outputs[6][0].data["text/html"]
    assert outputs[6][1].ename == "ValueError"
    assert json.loads(outputs[7][0].text) == [5.0, 5.0]


def test_the_calls_name_the_users_variables_not_ipythons(outputs):
    (display,) = shown(outputs[9])
    text = unescape(re.sub(r"<[^>]+>", "", display.data["text/html"]))
    rows = [line.split() for line in text.splitlines() if line.strip().startswith(("z[", "_["))]
    assert [r[0] for r in rows] == ["z[0]", "z[1]"], text
    assert [r[4] for r in rows] == ["2", "4"]  # .grad = 2z, by hand


def test_every_attribute_the_observer_patches_is_put_back_in_process():
    """In this process: after a cell (one that raises too), torch's modules and classes hold exactly the
    objects they held before, and no dispatch mode is left on; the cell's variables are kept."""
    import sys
    import types

    import torch
    import torch.autograd.functional
    import torch.func
    from torch.autograd.function import _HookMixin
    from torch.autograd.variable import Variable

    from vjp_explorer.magic import explain_cell

    # every torch module loaded (forward_ad's make_dual/unpack_dual were once left wrapped: a later
    # program's forward-mode check then ran 18 nested observers), and the classes the observer patches
    modules = [m for n, m in sorted(sys.modules.items()) if n.split(".")[0] == "torch" and m is not None]
    watched = [*modules, torch.Tensor, torch.autograd.Function, _HookMixin, torch.nn.Module,
               torch.autograd.graph.saved_tensors_hooks, torch.autograd.graph.Node, Variable]  # fmt: skip
    before = [dict(vars(obj)) for obj in watched]
    namespace = {"torch": torch}
    cell = "x = torch.tensor([1.0, 2.0], requires_grad=True)\nx.register_hook(lambda g: g)\n(x * 3).sum().backward()"
    result, raised = explain_cell(cell + "\n1 / 0", namespace)
    assert isinstance(raised, ZeroDivisionError) and len(result.events) == 1
    assert namespace["x"].grad.tolist() == [3.0, 3.0]
    for obj, was in zip(watched, before, strict=True):
        now = dict(vars(obj))
        changed = sorted(  # (a submodule imported meanwhile is an attribute its package gains: not a patch)
            k
            for k in set(was) | set(now)
            if was.get(k, now) is not now.get(k, was) and not isinstance(now.get(k), types.ModuleType)
        )
        assert changed == [], (obj, changed)
    assert torch._C._len_torch_dispatch_stack() == 0
    # the engine is torch's own again: a backward after the cell is plain torch, observed by nobody
    assert type(Variable._execution_engine) is torch._C._ImperativeEngine
    y = torch.tensor([2.0], requires_grad=True)
    (y * y).sum().backward()
    assert y.grad.tolist() == [4.0] and torch._C._len_torch_dispatch_stack() == 0
