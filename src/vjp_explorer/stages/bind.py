"""Bind values: the request checked, each free name of the program given its value, tensors made.

Inputs: the request and the parsed program. Outputs: the value specs (before any torch), then Bound: the
leaves (requires_grad), the constants, the interpreter's environment, the dtype and the seed.
"""

from __future__ import annotations

import difflib
import secrets
from dataclasses import dataclass
from typing import Any

from ..errors import ProgramError, UsageError
from ..language import program as P
from ..language.constructors import made_leaf_given, makes_random
from ..language.values import ValueSpec, from_nested, parse_value
from ..limits import Limits
from ..request import Request, ValueLike


def check_request(req: Request) -> None:
    """The options that need no program: dtype, backward calls, seed."""
    if req.dtype not in ("float32", "float64"):
        raise UsageError(f"--dtype must be float32 or float64, not {req.dtype!r}.")
    if not 1 <= req.backward_calls <= 100:
        raise UsageError("--backward-calls must be between 1 and 100.")
    if req.seed is not None and not 0 <= req.seed < 2**63:
        raise UsageError(f"--seed must be between 0 and 2**63 - 1, not {req.seed}.")


def spec_of(value: ValueLike, label: str, limits: Limits, allow_ones: bool = False) -> ValueSpec:
    """A value as given (text, number, nested list or spec) -> its ValueSpec."""
    if isinstance(value, ValueSpec):
        return value
    if isinstance(value, str):
        return parse_value(value, label, limits, allow_ones=allow_ones)
    return from_nested(value, label, limits)


def value_label(name: str) -> str:
    """How a value is named in messages."""
    return f"the value of {name!r}"


def check_names(req: Request, prog: P.Program) -> tuple[dict[str, ValueSpec], dict[str, ValueSpec]]:
    """Every free name of the program has exactly one value, and every value a name: (leaf specs, constant
    specs), in program order."""
    free = [n for n in prog.free if n not in prog.made]  # leaves the program makes take no option
    made_leaf_given(prog, {**req.values, **req.consts})
    both = sorted(set(req.values) & set(req.consts))
    if both:
        raise UsageError(f"{both[0]!r} is given both as a value and as a --const; give it once.")
    given = {**req.values, **req.consts}
    if not free and not prog.made:
        raise ProgramError(
            "The program has no inputs: every name in it is assigned, or it uses none, so it is a constant "
            "and there is nothing to differentiate.",
            hint="Use a variable that you give a value, e.g. 3*a --a 1,2.",
        )
    have = ", ".join(free) or f"none, it makes its own leaves ({', '.join(prog.made)})"
    extra = [n for n in given if n not in free]
    if extra:
        raise _unknown_name(extra[0], prog, free, have)
    missing = [n for n in free if n not in given]
    if missing:
        n = missing[0]
        span = prog.first_use.get(n, (0, 1))
        how = (
            f"give it with --var {n}=VALUE (--{n} is one of vjp's own options)"
            if n in req.reserved
            else f"give each with --{n} VALUE (or --var {n}=VALUE, or --const {n}=VALUE for a constant)"
        )
        if req.source:  # the program came from an expression file
            how = f"add {n} to [inputs] in {req.source} ([constants] for a constant), or {how}"
        raise ProgramError(
            f"No value for {n!r}. The program's inputs are: {have}; {how}.",
            prog.source,
            span[0],
            span[1],
        )
    specs = {**prog.made, **{n: spec_of(req.values[n], value_label(n), req.limits) for n in free if n in req.values}}
    const_specs = {n: spec_of(req.consts[n], value_label(n), req.limits) for n in free if n in req.consts}
    if not specs:
        raise UsageError("Every input is a --const, so nothing requires grad and there is nothing to differentiate.")
    return specs, const_specs


def _unknown_name(n: str, prog: P.Program, free: list[str], have: str) -> UsageError:
    if n == prog.output and prog.synthetic_output:
        why = f"the program has no variable {n!r} ({n!r} is only the name vjp gives its output)"
    elif n in prog.assigned:
        why = f"{n!r} is assigned by the program (an intermediate), so it takes no value"
    else:
        why = f"the program has no variable {n!r}"
    near = difflib.get_close_matches(n, free, n=1)
    err = UsageError(
        f"A value was given for {n!r}, but {why}. The program's inputs are: {have}.",
        hint=f"Did you mean {near[0]!r}?" if near else None,
    )
    if n not in prog.assigned:
        err.unknown_name = n  # type: ignore[attr-defined]  # the CLI adds "did you mean --option?"
    return err


def probe_specs(req: Request, prog: P.Program) -> tuple[list[Any], list[ValueSpec | None], P.Program | None]:
    """The kinds (engine.probe.ProbeSpec, None for a value) and value specs of every --grad, and the
    parsed --upstream; empty lists and None for a plain run."""
    from ..engine import probe as PR

    texts = [g for g in (req.grad, *req.more_grads) if g is not None]
    if req.upstream is not None:
        if texts:
            raise UsageError(
                "--upstream makes v itself (v = dL/dy for its loss), so it takes no --grad: give one or the other."
            )
        return [], [], PR.upstream_program(req.upstream, prog.output, req.limits)
    if req.grad is None and req.more_grads:
        raise UsageError("A second --grad needs a first one.")
    if len(texts) > PR.MAX_GRADS:
        raise UsageError(f"At most {PR.MAX_GRADS} --grad values in one run, not {len(texts)}.")
    kinds = [PR.parse_probe(g) if isinstance(g, str) else None for g in texts]
    if len(texts) > 1 and any(k is not None and k.kind == "basis" for k in kinds):
        raise UsageError(
            "--grad basis already runs one backward per one-hot v; give it alone, not with other --grad values."
        )
    specs = [
        None if k is not None else spec_of(g, "--grad", req.limits, allow_ones=True)
        for g, k in zip(texts, kinds, strict=True)
    ]
    if len(texts) == 1 and kinds[0] is None:
        return [], specs, None  # a plain --grad: the run as before
    return kinds, specs, None


@dataclass
class Bound:
    """The program's free names bound to tensors."""

    dtype: Any  # torch.dtype
    seed: int
    uses_random: bool
    gen: Any  # torch.Generator: the inputs draw from it first, then v
    leaves: dict[str, Any]
    consts: dict[str, Any]
    env: dict[str, Any]  # name -> engine.interpreter.Val


def bind_values(
    req: Request,
    prog: P.Program,
    specs: dict[str, ValueSpec],
    const_specs: dict[str, ValueSpec],
    kinds: list[Any],
    grad_specs: list[ValueSpec | None],
) -> Bound:
    """Make the tensors: leaves with requires_grad, constants without, random ones from one seeded generator."""
    import torch

    from ..engine.interpreter import DIAG, Val
    from ..engine.tensors import DTYPES, make_tensor

    if req.device != "cpu" and (req.device != "cuda" or not torch.cuda.is_available()):
        raise UsageError(
            f"--device {req.device}: not available here (torch.cuda.is_available() is False)."
            if req.device == "cuda"
            else f"--device must be cpu or cuda, not {req.device!r}."
        )
    dtype = DTYPES[req.dtype]
    drawn = [*specs.values(), *const_specs.values(), *(s for s in grad_specs if s is not None)]
    uses_random = (
        makes_random(prog)
        or any(s.generator in ("rand", "randn") for s in drawn)
        or any(k is not None and k.kind == "random" for k in kinds)
    )
    seed = req.seed if req.seed is not None else (secrets.randbelow(2**31) if uses_random else 0)
    gen = torch.Generator().manual_seed(seed)
    leaves: dict[str, torch.Tensor] = {}
    consts: dict[str, torch.Tensor] = {}
    env: dict[str, Val] = {}
    for name in prog.free:  # program order, so random draws do not depend on option order
        if name in specs:
            tensor = make_tensor(specs[name], value_label(name), dtype, gen, req.device).requires_grad_(True)
            leaves[name] = tensor
            env[name] = Val(tensor, {name: DIAG}, (1, 1))
        else:
            tensor = make_tensor(const_specs[name], value_label(name), dtype, gen, req.device)
            consts[name] = tensor
            env[name] = Val(tensor, {})
    return Bound(dtype, seed, uses_random, gen, leaves, consts, env)
