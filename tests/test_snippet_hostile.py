"""Snippets come from strangers: nothing outside the whitelist is reachable, every bomb is refused with exit 2."""

from __future__ import annotations

import time

import pytest

from vjp_explorer.errors import VjpError
from vjp_explorer.limits import DEFAULT_LIMITS
from vjp_explorer.snippet import run_snippet

REFUSED = {
    "import os": "import os",
    "import subprocess": "import subprocess",
    "from os import system": "from os import",
    "import torch.utils": "import torch.utils",
    "open('/etc/passwd')": "'open'",
    "__import__('os')": "'__import__'",
    "eval('1+1')": "'eval'",
    "exec('x=1')": "'exec'",
    "getattr(torch, 'load')": "'getattr'",
    "globals()": "'globals'",
    "torch.load('x.pt')": "torch.load",
    "torch.save(1, 'x')": "torch.save",
    "torch.hub": "torch.hub",
    "torch.ops": "torch.ops",
    "torch._C": "'_C'",
    "x = torch.ones(1)\nx.__class__": "'__class__'",
    "(lambda: 0).__globals__": "'__globals__'",
    "f = lambda: 0\nf.__code__": "'__code__'",
    "import numpy as np\nnp.load('x.npy')": "numpy.load",
    "import numpy as np\nnp.ones(3).tofile('f')": ".tofile",
    "import numpy as np\nnp.ones(3).ctypes": ".ctypes",
    "import numpy as np\nnp.frombuffer(b'1234')": "numpy.frombuffer",
    "import numpy as np\nnp.lib": "numpy.lib",
    "from numpy import fromfile": "numpy.fromfile",
    "import numpy.ctypeslib": "import numpy.ctypeslib",
    "x = torch.ones(1)\nx.storage()": ".storage",
    "'{0.__class__}'.format(1)": "format field",
    "class A: pass": "class A",
    "class A(torch.nn.Module):\n    x = 1": "Assign in the body of class A",
    "class A(torch.nn.Module):\n    def __call__(self): pass": "The method A.__call__",
    "class A(torch.nn.Module):\n    def __init__(self):\n        self.parameters = 1\nA()": "Setting .parameters",
    "class A(torch.nn.Module):\n    def __init__(self):\n        self.forward = 1\nA()": "Setting .forward",
    "class A(torch.nn.Module):\n    pass\nA()._modules": "_modules",
    "class A(torch.nn.Module):\n    pass\nA().__dict__": "__dict__",
    "class A(torch.nn.Module, metaclass=type): pass": "class A",
    "class A(torch.nn.Module):\n    @staticmethod\n    def f(): pass": "decorator",
    "class A(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        super().f()\nA()": "super",
    "class A(torch.autograd.Function):\n    x = 1": "Assign in the body of class A",
    "class A(torch.autograd.Function):\n    @property\n    def forward(ctx): pass\n"
    "    @staticmethod\n    def backward(ctx, g): pass": "decorator",
    "class A(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n        return ctx.__dict__\n"
    "    @staticmethod\n    def backward(ctx, g):\n        return g\nA.apply(torch.ones(1))": "'__dict__'",
    "global x": "Global",
    "type(1).__subclasses__()": "'__subclasses__'",
    "type(1).mro()": ".mro",
    "print(1, file=None)": "file=",
    "import torch.nn.functional as F\nF.interpolate": "interpolate",
    "async def f(): pass": "AsyncFunctionDef",
    "x = torch.ones(2)\nx.apply_(lambda v: v)": ".apply_",
    "m = torch.nn.Linear(2, 2)\nm.__dict__": "'__dict__'",
    "m = torch.nn.Linear(2, 2)\nm.state_dict()": ".state_dict",
}


@pytest.mark.parametrize("code", list(REFUSED), ids=list(REFUSED))
def test_outside_the_whitelist_is_refused_by_name(code):
    with pytest.raises(VjpError) as e:
        run_snippet(code, seed=0)
    assert REFUSED[code] in e.value.render()
    assert e.value.exit_code == 2


BOMBS = {
    "while True:\n    pass": "steps",
    "def f(n):\n    return f(n + 1)\nf(0)": "nest deeper",
    "torch.zeros(10**6, 10**6)": "elements",
    "torch.ones(100000, 100000)": "elements",
    "torch.randn((10**5, 10**5))": "elements",
    "torch.full((10**5, 10**5), 1.0)": "elements",
    "torch.arange(0, 1e12)": "elements",
    "torch.linspace(0, 1, 10**10)": "elements",
    "x = torch.ones(10**4, 1)\ny = x + x.T\nz = y.reshape(1, -1) + y.reshape(-1, 1)": "elements",
    "a = torch.ones(7000, 7000)\nb = a @ a @ a @ a": "multiply-adds",
    "x = torch.ones(1000)\nx.repeat(10**6)": "elements",
    "torch.outer(torch.ones(30000), torch.ones(30000))": "elements",
    "import numpy as np\nnp.zeros((10**5, 10**5))": "elements",
    "import numpy as np\nnp.outer(np.ones(30000), np.ones(30000))": "elements",
    "import numpy as np\nnp.ones((30000, 1)) * np.ones(30000)": "elements",
    "import numpy as np\nnp.random.normal(0, 1, size=(10**5, 10**5))": "elements",
    "import numpy as np\nnp.arange(10**12)": "elements",
    "import numpy as np\na = np.ones((7000, 7000))\na.dot(a).dot(a)": "multiply-adds",
    "layer = torch.nn.Linear(100000, 100000)": "elements",
    "from torch import nn\nlayer = nn.Bilinear(in1_features=3000, in2_features=3000, out_features=3000)": "elements",
    "10 ** 10 ** 8": "bits",
    "[0] * 10**10": "repeating",
    "'a' * 10**10": "repeating",
    "list(range(10**12))": "items",
    "sum(range(10**12))": "items",
    "s = 'ab'\nfor i in range(40):\n    s = s + s": "items",
    "f'{1:>1000000000}'": "format width",
    "'%1000000000d' % 1": "format width",
    "x = torch.ones(10)\nwhile True:\n    x = x + 1": "steps",
    "for i in range(10**9):\n    print('x' * 1000)": "printed more than",
    "print('x' * 5_000_000)": "printed more than",
    "(" * 300 + "1" + ")" * 300: "not valid Python",
    "x = 1" + " + 1" * 3000: "nested too deeply",
    "x = " + "[" * 150 + "]" * 150: "nests deeper than",
}


@pytest.mark.parametrize("code", list(BOMBS), ids=[c[:40] for c in BOMBS])
def test_bombs_are_refused_quickly(code):
    limits = DEFAULT_LIMITS.with_overrides({"snippet_steps": "20000", "snippet_output_chars": "100000"})
    start = time.monotonic()
    with pytest.raises(VjpError) as e:
        run_snippet(code, seed=0, limits=limits)
    assert time.monotonic() - start < 10
    assert BOMBS[code] in e.value.render()
    assert e.value.exit_code == 2


def test_a_hook_that_raises_stops_the_snippet_as_python_would():
    code = """x = torch.ones(2, requires_grad=True)
def hook(g):
    raise ValueError('boom')
x.register_hook(hook)
(x * 2).sum().backward()
"""
    r = run_snippet(code, seed=0)
    assert r.error is not None and (r.error.type, r.error.message) == ("ValueError", "boom")


def test_printing_a_huge_tensor_is_summarised_by_torch():
    r = run_snippet("x = torch.zeros(10**6)\nprint(x)\n", seed=0)
    assert "..." in r.stdout and len(r.stdout) < 200


def test_try_except_catches_only_the_snippets_own_errors():
    code = "try:\n    import os\nexcept Exception:\n    print('caught')\n"
    with pytest.raises(VjpError):
        run_snippet(code, seed=0)
    code = "try:\n    x = 1 / 0\nexcept ZeroDivisionError as e:\n    print('caught', e)\n"
    assert run_snippet(code, seed=0).stdout == "caught division by zero\n"


def test_the_snippet_leaves_torch_settings_as_they_were():
    import torch

    run_snippet(
        "torch.set_printoptions(precision=1)\ntorch.set_default_dtype(torch.float64)\ntorch.set_grad_enabled(False)\n",
        seed=0,
    )
    assert torch.get_default_dtype() == torch.float32
    assert torch.is_grad_enabled()
    assert str(torch.tensor([1.23456])) == "tensor([1.2346])"


def test_error_points_at_the_line(vjp):
    res = vjp("run", "--snippet", "import torch\nx = torch.ones(2)\ny = x.cuda_thing()\n")
    assert res.exit_code == 2
    assert "line 3" in res.stderr and "^" in res.stderr and "Traceback" not in res.stderr


def test_control_characters_never_reach_the_terminal(vjp):
    res = vjp("run", "--snippet", "print('\\x1b]0;pwned\\x07\\x1b[2J')\n# \u202e comment\n", "--seed", "0")
    assert res.exit_code == 0
    assert "\x1b" not in res.stdout and "\u202e" not in res.stdout
    res = vjp("run", "--snippet", "print('\\x1b[2J')", "--json")
    assert "\x1b" not in res.stdout


def test_a_v_that_is_not_a_tensor_is_left_to_torch():
    # found by fuzzing: the probes assumed a tensor v; torch itself raises TypeError here, and so do we
    r = run_snippet("a = torch.ones(1, requires_grad=True)\n(a * 2).backward(float('nan'))\n", seed=0)
    assert r.error is not None and r.error.type == "TypeError" and r.events == []
