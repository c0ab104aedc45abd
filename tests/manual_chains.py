"""Whole chains of hand-written gradients in the learners' style, for tests/test_manual.py: a makemore-style
MLP with batch norm and cross-entropy (Karpathy's "Becoming a Backprop Ninja"), a two-layer net, and
micrograd-style scalars, each correct as written; `plant` swaps one line for a planted mistake.

The independent route is the learners' own: `oracle` runs the same snippet with plain Python and torch,
`retain_grad()` on every paired tensor before backward, and their `cmp` after the chain.
"""

from __future__ import annotations

import json

from snippet_oracle import plain_python

MAKEMORE_FORWARD = """\
import torch
import torch.nn.functional as F
g = torch.Generator().manual_seed(2147483647)
vocab_size, block_size, n_embd, n_hidden, n = 27, 3, 10, 64, 32
C  = torch.randn((vocab_size, n_embd), generator=g)
W1 = torch.randn((n_embd * block_size, n_hidden), generator=g) * (5/3)/((n_embd * block_size)**0.5)
b1 = torch.randn(n_hidden, generator=g) * 0.1
W2 = torch.randn((n_hidden, vocab_size), generator=g) * 0.1
b2 = torch.randn(vocab_size, generator=g) * 0.1
bngain = torch.randn((1, n_hidden), generator=g)*0.1 + 1.0
bnbias = torch.randn((1, n_hidden), generator=g)*0.1
parameters = [C, W1, b1, W2, b2, bngain, bnbias]
for p in parameters:
    p.requires_grad = True
Xb = torch.randint(0, vocab_size, (n, block_size), generator=g)
Yb = torch.randint(0, vocab_size, (n,), generator=g)

emb = C[Xb]
embcat = emb.view(emb.shape[0], -1)
hprebn = embcat @ W1 + b1
bnmeani = 1/n*hprebn.sum(0, keepdim=True)
bndiff = hprebn - bnmeani
bndiff2 = bndiff**2
bnvar = 1/(n-1)*(bndiff2).sum(0, keepdim=True)
bnvar_inv = (bnvar + 1e-5)**-0.5
bnraw = bndiff * bnvar_inv
hpreact = bngain * bnraw + bnbias
h = torch.tanh(hpreact)
logits = h @ W2 + b2
logit_maxes = logits.max(1, keepdim=True).values
norm_logits = logits - logit_maxes
counts = norm_logits.exp()
counts_sum = counts.sum(1, keepdims=True)
counts_sum_inv = counts_sum**-1
probs = counts * counts_sum_inv
logprobs = probs.log()
loss = -logprobs[range(n), Yb].mean()

for p in parameters:
    p.grad = None
"""

MAKEMORE_BACKWARD = """\
dlogprobs = torch.zeros_like(logprobs)
dlogprobs[range(n), Yb] = -1.0/n
dprobs = (1.0/probs) * dlogprobs
dcounts_sum_inv = (counts * dprobs).sum(1, keepdim=True)
dcounts = counts_sum_inv * dprobs
dcounts_sum = (-counts_sum**-2) * dcounts_sum_inv
dcounts += torch.ones_like(counts) * dcounts_sum
dnorm_logits = counts * dcounts
dlogits = dnorm_logits.clone()
dlogit_maxes = (-dnorm_logits).sum(1, keepdim=True)
dlogits += F.one_hot(logits.max(1).indices, num_classes=logits.shape[1]) * dlogit_maxes
dh = dlogits @ W2.T
dW2 = h.T @ dlogits
db2 = dlogits.sum(0)
dhpreact = (1.0 - h**2) * dh
dbngain = (bnraw * dhpreact).sum(0, keepdim=True)
dbnraw = bngain * dhpreact
dbnbias = dhpreact.sum(0, keepdim=True)
dbndiff = bnvar_inv * dbnraw
dbnvar_inv = (bndiff * dbnraw).sum(0, keepdim=True)
dbnvar = (-0.5*(bnvar + 1e-5)**-1.5) * dbnvar_inv
dbndiff2 = (1.0/(n-1))*torch.ones_like(bndiff2) * dbnvar
dbndiff += (2*bndiff) * dbndiff2
dhprebn = dbndiff.clone()
dbnmeani = (-dbndiff).sum(0, keepdim=True)
dhprebn += 1.0/n * (torch.ones_like(hprebn) * dbnmeani)
dembcat = dhprebn @ W1.T
dW1 = embcat.T @ dhprebn
db1 = dhprebn.sum(0)
demb = dembcat.view(emb.shape)
dC = torch.zeros_like(C)
for k in range(Xb.shape[0]):
    for j in range(Xb.shape[1]):
        ix = Xb[k,j]
        dC[ix] += demb[k,j]
print(f"loss {loss.item():.4f}")
"""

MAKEMORE = MAKEMORE_FORWARD + "loss.backward()\n\n" + MAKEMORE_BACKWARD

# a two-layer net with a mean squared error, its gradients named in all three ways and once by a comment
TWO_LAYER = """\
import torch
torch.manual_seed(0)
x = torch.randn(8, 4)
y = torch.randn(8, 3)
W1 = torch.randn(4, 16, requires_grad=True)
b1 = torch.zeros(16, requires_grad=True)
W2 = torch.randn(16, 3, requires_grad=True)
b2 = torch.zeros(3, requires_grad=True)
h_pre = x @ W1 + b1
h = torch.relu(h_pre)
out = h @ W2 + b2
loss = ((out - y) ** 2).mean()
loss.backward()
g = 2 * (out - y) / out.numel()  # grad of out
W2_grad = h.T @ g
grad_b2 = g.sum(0)
dh = g @ W2.T
dh_pre = dh * (h_pre > 0)
dW1 = x.T @ dh_pre
db1 = dh_pre.sum(0)
print(f"loss {loss.item():.4f}")
"""

# micrograd's first example, spelled in torch, and a value used twice (x feeds both e and L)
MICROGRAD = """\
import torch
a = torch.tensor(2.0, requires_grad=True)
b = torch.tensor(-3.0, requires_grad=True)
c = torch.tensor(10.0, requires_grad=True)
f = torch.tensor(-2.0, requires_grad=True)
e = a * b
d = e + c
x = d * f
L = x * x + a
L.backward()
dL = 1.0
dx = 2 * x.item() * dL
dd = f.item() * dx
df = d.item() * dx
de = dd
dc = dd
db = a.item() * de
da = b.item() * de
da += dL
print(L.item())
"""


def plant(text: str, line: str, mistake: str) -> str:
    """`text` with its one line `line` replaced by `mistake` (None: removed)."""
    lines = text.split("\n")
    assert lines.count(line) == 1, line
    at = lines.index(line)
    lines[at : at + 1] = [] if mistake is None else [mistake]
    return "\n".join(lines)


def line_of(text: str, line: str) -> int:
    """The 1-based number of the one line `line` in `text`."""
    lines = text.split("\n")
    assert lines.count(line) == 1, line
    return lines.index(line) + 1


_CMP = """
import json as _json
def _cmp(dt, t):
    g = t.grad.to(torch.float64)
    dt = torch.as_tensor(dt, dtype=torch.float64)
    try:
        torch.broadcast_shapes(dt.shape, g.shape)
    except RuntimeError:  # cmp itself would raise here: shapes that do not broadcast (a transposed gradient)
        return [False, False, None]
    return [bool(torch.all(dt == g)), bool(torch.allclose(dt, g)), float((dt - g).abs().max())]
print(_json.dumps({_n: _cmp(globals()[_n], globals()[_t]) for _n, _t in PAIRS}))
"""


def oracle(text: str, pairs: dict[str, str], backward: str) -> tuple[str, dict[str, list]]:
    """The learners' cmp per hand-written gradient, by plain Python: retain_grad() on each tensor just before
    the line `backward`, cmp(name, dt, t) after the whole snippet. What the snippet printed, and
    name -> [exact, approximate, maxdiff]."""
    retain = "".join(f"{t}.retain_grad()\n" for t in pairs.values())
    head, tail = text.split(backward + "\n", 1)
    code = head + retain + backward + "\n" + tail + f"PAIRS = {list(pairs.items())!r}\n" + _CMP
    (result,) = plain_python([code])
    assert result["error"] is None, result["error"]
    printed, _, last = result["stdout"].rstrip("\n").rpartition("\n")
    return (printed + "\n" if printed else ""), json.loads(last)
