"""--code's script counted in the verdict line (issue 40): a script that reproduces .grad with every node from
the formula table shares no kernel with autograd's backward, so it is an independent route, named by its file;
one with a recorded or ATen node, or one that did not reproduce, is not counted.

The runs are chosen so that the other independent routes are few or none (sympy off and finite differences
short of budget for a program; a forward made in another thread, which the log cannot replay, for a snippet),
and the gradients are compared with the hand-derived ones, so the count is not the only thing checked.
"""

from __future__ import annotations

import json
import math
import textwrap

from vjp_explorer.verdicts import Check, headline, script_route

SEED = ["3*a+2*b*b+log(c)", "--a", "1,2,3", "--b", "3,4,5", "--c", "6,7,8", "--grad", "0.1,1,0.0001"]
SHORT = ["--no-symbolic", "--limit", "finite_difference_evals=1"]  # finite differences along 2 random u only
THREADED = textwrap.dedent(
    """
    import threading
    import torch
    a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    out = {}
    t = threading.Thread(target=lambda: out.update(y=torch.sin(a) * a))
    t.start()
    t.join()
    out["y"].sum().backward()
    """
)


def summary(**over):
    base = {"file": "call2.py", "nodes": 4, "reproduces": True, "max_abs_diff": 0.0, "independent": True}
    return {**base, **over}


def test_only_a_reproducing_script_from_the_table_is_a_route():
    (route,) = script_route(summary())
    assert route.independent and route.status == "agree" and route.name == "the backward script call2.py"
    assert script_route(summary(reproduces=False)) == []
    assert script_route(summary(independent=False, not_in_table=["CubeBackward"])) == []
    assert script_route({"file": None, "skipped": "too big"}) == []
    assert script_route({"record": {}, "tensors": {}}) == []  # captured, never run (vjp live)
    assert script_route(None) == []
    fd = Check("finite_difference", "agree", "independent: ...")
    said = headline([fd, *script_route(summary())])
    assert said == "2 independent routes agree (finite differences, the backward script call2.py)"
    bad = Check("finite_difference", "disagree", "independent: ...")
    assert headline([bad, *script_route(summary())]) == "finite_difference disagrees"  # never hidden by it


def test_a_programs_verdict_line_counts_its_script(vjp, tmp_path):
    without = vjp("run", *SEED, *SHORT)
    assert without.exit_code == 0, without.output
    assert without.stdout.strip().splitlines()[-1] == "1 independent route agrees (finite differences)"
    out = tmp_path / "code"
    out.mkdir()
    r = vjp("run", *SEED, *SHORT, "--code", str(out), "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert (
        doc["events"][0]["backward_code"]["reproduces"] is True
        and doc["events"][0]["backward_code"]["independent"] is True
    )
    v, b, c = [0.1, 1, 0.0001], [3, 4, 5], [6, 7, 8]
    by_hand = {"b": [4 * x * w for x, w in zip(b, v, strict=True)], "c": [w / x for x, w in zip(c, v, strict=True)]}
    for name, want in by_hand.items():
        assert all(
            math.isclose(g, w, rel_tol=1e-6) for g, w in zip(doc["events"][0]["grads"][name], want, strict=True)
        ), name
    shown = vjp("run", *SEED, *SHORT, "--code", str(tmp_path / "again"))
    assert shown.exit_code == 2 and "does not exist" in shown.stderr  # checked before the run
    (tmp_path / "again").mkdir()
    shown = vjp("run", *SEED, *SHORT, "--code", str(tmp_path / "again"))
    assert shown.exit_code == 0, shown.output
    last = " ".join(shown.stdout.split("\n\n")[-1].split())
    assert last.endswith("2 independent routes agree (finite differences, the backward script call1.py)"), last


def test_a_snippet_call_no_other_route_checked_is_checked_by_its_script(vjp, tmp_path):
    src = tmp_path / "threaded.py"
    src.write_text(THREADED)
    without = vjp("run", str(src))
    assert without.exit_code == 0, without.output
    assert "1 not checked (each says why)" in " ".join(without.stdout.split())
    out = tmp_path / "code"
    out.mkdir()
    r = vjp("run", str(src), "--code", str(out), "--json")
    assert r.exit_code == 0, r.output
    (event,) = json.loads(r.stdout)["events"]
    assert event["backward_code"]["reproduces"] is True and event["backward_code"]["independent"] is True
    assert not any(c["independent"] and c["status"] == "agree" for c in event["checks"].values())
    want = [math.cos(x) * x + math.sin(x) for x in (1.0, 2.0, 3.0)]  # d/da Σ sin(a)·a, by hand
    assert all(math.isclose(g, w, rel_tol=1e-5) for g, w in zip(event["grads"]["a"], want, strict=True))
    (tmp_path / "again").mkdir()
    shown = vjp("run", str(src), "--code", str(tmp_path / "again"))
    text = " ".join(shown.stdout.split())
    assert "1 checked by its backward script alone (call1.py)" in text and "not checked" not in text
