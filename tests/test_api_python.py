"""The Python API as a notebook user meets it (issue 31): numbers as numpy arrays and tensors, tensors in,
PyTorch's `gradient=`, `print`/`rich.print`/`repr`, `dir()`, and no command-line words in what it shows."""

from __future__ import annotations

import io
import re
import warnings

import numpy as np
import pytest
import torch
from rich.console import Console

import vjp_explorer as vx

PROGRAM = "3*a + 2*b*b + log(c)"
VALUES = {"a": [1.0, 2.0, 3.0], "b": [3.0, 4.0, 5.0], "c": [6.0, 7.0, 8.0]}
V = [0.1, 1.0, 0.0001]


def plain_torch_grads() -> dict[str, torch.Tensor]:
    """The independent route: the same program in plain torch, its real backward(v)."""
    t = {n: torch.tensor(x, requires_grad=True) for n, x in VALUES.items()}
    y = 3 * t["a"] + 2 * t["b"] * t["b"] + torch.log(t["c"])
    y.backward(torch.tensor(V))
    return {n: x.grad for n, x in t.items()}


def test_the_numbers_are_numpy_arrays_that_numpy_and_torch_take_as_they_are():
    r = vx.explore(PROGRAM, VALUES, gradient=V)
    want = plain_torch_grads()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. torch's warning about a non-writable array
        for n in VALUES:
            assert isinstance(r.grads[n], np.ndarray)
            np.testing.assert_array_equal(np.asarray(r.grads[n]), want[n].numpy())
            assert torch.equal(torch.as_tensor(r.grads[n]), want[n])
        assert torch.as_tensor(r.jacobians["a"].diagonal).tolist() == [3.0, 3.0, 3.0]
    assert np.asarray(r.output).shape == (3,) and r.output.dtype == np.float32
    # arithmetic gives plain arrays, and a slice is a plain array too
    assert type(r.grads["b"] * 2) is np.ndarray and type(r.grads["b"][:2]) is np.ndarray


def test_inputs_and_v_may_be_tensors_and_arrays_and_grad_is_the_same_keyword():
    a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)  # a leaf of the user's: only its numbers are read
    values = {"a": a, "b": np.array([3.0, 4.0, 5.0]), "c": torch.tensor([6.0, 7.0, 8.0], dtype=torch.float64)}
    want = plain_torch_grads()
    for kw in ({"gradient": torch.tensor(V)}, {"gradient": np.array(V)}, {"grad": torch.tensor(V)}):
        r = vx.explore(PROGRAM, values, **kw)
        for n in VALUES:
            np.testing.assert_allclose(r.grads[n], want[n].numpy(), rtol=1e-6)
    assert a.grad is None  # the user's tensor is left alone
    scalar = vx.explore("x * x", {"x": np.float32(3.0)})
    assert float(scalar.grads["x"]) == 6.0


def test_v_given_twice_is_bad_input_and_an_error_names_the_keyword_used():
    with pytest.raises(vx.VjpError) as e:
        vx.explore("x * 2", {"x": "1,2"}, gradient="1,1", grad="1,1")
    assert int(e.value.exit_code) == 2 and "gradient=" in str(e.value)
    with pytest.raises(vx.VjpError) as e:
        vx.explore("x * 2", {"x": "1,2"}, gradient=torch.ones(3))
    assert e.value.render().startswith("gradient: v has shape [3]")


def test_print_and_rich_print_show_the_report_and_repr_is_one_line(capsys):
    r = vx.explore(PROGRAM, VALUES, gradient=V)
    print(r)
    shown = capsys.readouterr().out
    assert "leaf b" in shown and ".grad (backward)" in shown and "independent routes agree" in shown
    console = Console(file=io.StringIO(), width=100, color_system=None)
    console.print(r)
    assert console.file.getvalue().splitlines()[0].startswith("program  3*a + 2*b*b + log(c)")
    line = repr(r)
    assert "\n" not in line and len(line) < 200
    assert line.startswith("<Result '3*a + 2*b*b + log(c)'") and "leaves a, b, c" in line and "agree" in line


def test_dir_lists_the_public_api():
    names = dir(vx)
    assert names == sorted(vx.__all__)
    assert {"explore", "run_snippet", "check", "Result", "VjpError", "Limits"} <= set(names)
    for name in names:
        assert getattr(vx, name) is not None


CLI_WORDS = re.compile(r"(?<![\w-])--[a-z]")


@pytest.mark.parametrize(
    ("program", "values", "options", "api_word"),
    [
        (PROGRAM, VALUES, {"gradient": V}, "given with gradient="),
        ("x * x", {"x": "1,2"}, {"gradient": "e1"}, 'gradient="e1"'),
        ("log(exp(x))", {"x": "100"}, {}, 'dtype="float64"'),
        ("exp(a) * b", {"a": "1,2", "b": "3,4"}, {"gradient": "ones", "backward_calls": 2}, "retain_graph=False"),
    ],
)
def test_what_the_api_shows_names_keywords_not_options(program, values, options, api_word):
    r = vx.explore(program, values, **options)
    for shown in (str(r), r._repr_html_(), " ".join(n.text for n in r.notes)):
        assert not CLI_WORDS.search(shown), CLI_WORDS.search(shown)
    assert api_word in str(r) + " ".join(n.text for n in r.notes)


def test_a_snippet_in_a_notebook_names_the_seed_keyword():
    s = vx.run_snippet("import torch\nx = torch.randn(3, requires_grad=True)\n(x * x).sum().backward()\n", seed=7)
    page = s._repr_html_()
    assert "seed 7 (seed=7)" in page and "--seed" not in page


def test_an_error_from_the_api_names_the_keyword_to_change():
    with pytest.raises(vx.VjpError) as e:
        vx.explore("exp(a) * 2", {"a": "1,2"}, gradient="ones", backward_calls=2, retain_graph=False)
    text = e.value.render()
    assert "retain_graph=False" in text and not CLI_WORDS.search(text), text
    assert "exp's result" in text  # what this graph saved, by name


@pytest.mark.parametrize(
    ("call", "api_word"),
    [
        (lambda: vx.explore("3*a", {"a": "1,2,3"}), 'gradient="ones"'),
        (lambda: vx.explore("exp(x)", {"x": "1,2"}, gradient="ones", limits=vx.Limits(steps=0)), "limits=Limits("),
    ],
)
def test_errors_worded_by_the_engine_name_keywords_from_the_api(call, api_word):
    with pytest.raises(vx.VjpError) as e:
        call()
    text = e.value.render()
    assert api_word in text and not CLI_WORDS.search(text), text


def test_a_probe_note_names_the_keyword():
    r = vx.explore("x * x", {"x": "1,2,3"}, gradient="basis")
    assert r.probe is not None and r.probe.note.startswith('gradient="basis"')
    assert not CLI_WORDS.search(str(r))
