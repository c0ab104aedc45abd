"""The graph's cotangents never print `-0` (issue 42): a zero has no sign worth reading."""

from __future__ import annotations

import re

NEGATIVE_ZERO = re.compile(r"(?<![\d.eE])-0(?![\d.eE])")


def test_relu_cotangents_show_no_negative_zero(vjp):
    # relu's backward multiplies v by 0 where x < 0: -1 * 0 is -0.0 in IEEE arithmetic, shown as 0
    r = vjp("run", "relu(x)*2", "--x", "-1,2,-3,4", "--grad", "-1,1,1,-1", "--graph")
    assert r.exit_code == 0, r.stderr
    tree = r.stdout[r.stdout.index("backward(v)") :]
    assert "receives [0, 2, 0, -2]" in " ".join(tree.split()), tree
    assert not NEGATIVE_ZERO.search(tree), tree


def test_the_short_form_keeps_real_negatives():
    from vjp_explorer.render.graph_view import short

    assert short({"values": [-0.0, 0.0, -1.5, -0.0001]}) == "[0, 0, -1.5, -0.0001]"
