"""The fix of each diagnosis, written for the snippet's own line (snippet/fixes.py), and the child's facts read
field by field (snippet/why.py): plain data in, text out, no child needed. Expected texts are written by hand."""

from __future__ import annotations

from vjp_explorer.confined.protocol import safe_text
from vjp_explorer.snippet.fixes import fix_for
from vjp_explorer.snippet.why import _read, word


def _fix(kind: str, cause: dict, lines: list[str], facts: dict | None = None, tensor: str = "x") -> str:
    d = {"kind": kind, "tensor": tensor, "line": len(lines), "cause": cause, "saved": None, "spurious": None}
    return fix_for(kind, tensor, len(lines), cause, d, facts or {}, lines)


def test_an_in_place_change_is_rewritten_out_of_place_at_its_line():
    assert "`x = x * 2`" in _fix("inplace_modified", {"line": 1, "op": "mul_"}, ["x *= 2", "y.backward()"])
    assert "`h = h.relu()`" in _fix("inplace_modified", {"line": 1, "op": "relu_"}, ["h.relu_()", "."])
    assert "`h = h.clamp(min=0)`" in _fix("inplace_modified", {"line": 1, "op": "clamp_"}, ["h.clamp_(min=0)", "."])
    sliced = _fix("inplace_modified", {"line": 1, "op": "__setitem__"}, ["h[:, 0] = 0", "."])
    assert "`h = h.clone()` just before `h[:, 0] = 0`" in sliced
    # a REPL transcript's line, prompt and all, as it was pasted
    assert "`b = b.add(1)`" in _fix("inplace_modified", {"line": 1, "op": "add_"}, [">>> b.add_(1)", "."])
    stepped = _fix("inplace_modified", {"line": 1, "op": "add_"}, ["opt.step()", "."], {"stepped": True}, "w")
    assert "finish every backward through the old graph before `opt.step()` changes `w`" in stepped


def test_a_masked_singularity_gets_the_double_where_in_its_own_words():
    line = "out = torch.where(m, r, torch.log(r))"
    fixed = _fix("nonfinite_grad", {"line": 1, "op": "log"}, [line])
    assert "`out = torch.where(m, r, torch.log(torch.where(m, 1.0, r)))`" in fixed  # the branch taken where ~m
    plain = _fix("nonfinite_grad", {"line": 1, "op": "log"}, ["y = torch.log(p)"])
    assert "`torch.log(p.clamp_min(1e-12))`" in plain
    product = _fix("nonfinite_grad", {"line": 1, "op": "sqrt"}, ["loss = torch.sqrt(loss * 0)"])
    assert "`torch.sqrt((loss * 0).clamp_min(1e-12))`" in product


def test_a_cut_and_a_missing_requires_grad_are_fixed_at_their_line():
    assert "`z = w * 2`" in _fix("no_grad_fn", {"line": 1, "op": ".detach()"}, ["z = w.detach() * 2", "."])
    assert "`z = w * 2`" in _fix("grad_none", {"line": 1, "op": ".data"}, ["z = w.data * 2", "."])
    made = _fix(
        "no_grad_fn", {"line": 1, "op": "requires_grad never set"}, ["x = torch.ones(3)", "."], {"leaves": ["x"]}
    )
    assert made == "line 1: `x = torch.ones(3, requires_grad=True)`."


def test_the_childs_facts_are_checked_and_made_safe():
    raw = {
        "kind": "grad_none",
        "tensor": "w\x1b[31m",
        "line": 4,
        "cause": {"line": 2, "op": ".detach()"},
        "facts": {},
    }
    d = _read(raw, safe_text)
    assert d["tensor"] == "w\\x1b[31m" and d["cause"] == {"line": 2, "op": ".detach()"}
    diagnosis = word(d, ["import torch", "v = w.detach()", "", "print(w.grad)"])
    assert diagnosis.to_dict()["cause"] == {"line": 2, "op": ".detach()"} and "spurious" not in diagnosis.to_dict()
    for forged in ({**raw, "kind": "rm -rf"}, {**raw, "line": "4"}, {**raw, "cause": {"line": 2.5, "op": "x"}}):
        try:
            _read(forged, safe_text)
        except (KeyError, TypeError, ValueError):
            continue
        raise AssertionError(f"accepted {forged}")


def test_only_diagnoses_that_tell_the_first_runs_story_are_kept():
    from vjp_explorer.snippet.result import Diagnosis
    from vjp_explorer.snippet.why import consistent

    def d(kind: str, line: int) -> Diagnosis:
        return Diagnosis(kind, "x", line, {"line": 1, "op": "add_"}, "fix", "text")

    message = "one of the variables needed for gradient computation has been modified by an inplace operation"
    found = [d("grad_none", 3), d("inplace_modified", 6), d("inplace_modified", 9), d("nonfinite_grad", 4)]
    # the first run raised the in-place error at line 6 and saw no nan: the second run's other stories go
    assert consistent(found, message, 6, []) == [found[0], found[1]]
    # the first run did not raise: no raised kind is said
    assert consistent(found, None, None, []) == [found[0]]
