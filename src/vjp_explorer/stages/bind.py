"""Bind values: the request checked, each free name of the program given its value, tensors made.

Inputs: the request and the parsed program. Outputs: the value specs (before any torch), then Bound: the
leaves (requires_grad), the constants, the interpreter's environment, the dtype and the seed.
"""

from __future__ import annotations

import difflib
import secrets
from dataclasses import dataclass
from typing import Any

from ..errors import Origin, ProgramError, UsageError
from ..language import program as P
from ..language.constructors import made_leaf_given, makes_random
from ..language.values import ValueSpec, from_nested, parse_value
from ..limits import Limits
from ..request import Request, ValueLike


def check_request(req: Request) -> None:
    """The settings that need no program: dtype, backward calls, seed."""
    of = req.origins.of
    if req.dtype not in ("float32", "float64"):
        raise UsageError(f"must be float32 or float64, not {req.dtype!r}.", origin=of("dtype"))
    if not 1 <= req.backward_calls <= 100:
        raise UsageError(f"must be between 1 and 100, not {req.backward_calls}.", origin=of("backward_calls"))
    if req.seed is not None and not 0 <= req.seed < 2**63:
        raise UsageError(f"must be between 0 and 2**63 - 1, not {req.seed}.", origin=of("seed"))


def spec_of(value: ValueLike, origin: Origin, limits: Limits, allow_ones: bool = False) -> ValueSpec:
    """A value as given (text, number, nested list, a torch tensor or numpy array, or a spec) -> its
    ValueSpec; errors name `origin`."""
    if isinstance(value, ValueSpec):
        return value
    if isinstance(value, str):
        return parse_value(value, origin, limits, allow_ones=allow_ones)
    return from_nested(_plain(value), origin, limits)


def _plain(value: Any) -> Any:
    """A tensor or an array (or a numpy number) as the nested lists of its numbers; anything else as it is.
    A tensor is read detached: only its numbers count, the run makes its own leaves."""
    if hasattr(value, "detach") and hasattr(value, "tolist"):  # torch.Tensor
        return value.detach().cpu().tolist()
    if hasattr(value, "__array__") and not isinstance(value, list | int | float):  # numpy arrays and numbers
        import numpy as np

        return np.asarray(value).tolist()
    return value


def value_origin(req: Request, name: str) -> Origin:
    """Where the value of the program's free name `name` came from."""
    return req.origins.of(f"{'constants' if name in req.consts else 'inputs'}.{name}")


def check_names(req: Request, prog: P.Program) -> tuple[dict[str, ValueSpec], dict[str, ValueSpec]]:
    """Every free name of the program has exactly one value, and every value a name: (leaf specs, constant
    specs), in program order."""
    free = [n for n in prog.free if n not in prog.made]  # leaves the program makes take no option
    made_leaf_given(prog, {**req.values, **req.consts})
    both = sorted(set(req.values) & set(req.consts))
    if both:
        raise UsageError(f"{both[0]!r} is given both as an input and as a constant; give it once.")
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
        raise _unknown_name(extra[0], prog, free, have, value_origin(req, extra[0]))
    missing = [n for n in free if n not in given]
    if missing:
        n = missing[0]
        span = prog.first_use.get(n, (0, 1))
        raise ProgramError(
            f"No value for {n!r}. The program's inputs are: {have}; {req.origins.missing(n)}.",
            prog.source,
            span[0],
            span[1],
            label=req.origins.of("program").where,
        )
    given_specs = {n: spec_of(given[n], value_origin(req, n), req.limits) for n in free}
    specs = {**prog.made, **{n: s for n, s in given_specs.items() if n in req.values}}
    const_specs = {n: s for n, s in given_specs.items() if n in req.consts}
    if not specs:
        raise UsageError("Every input is a constant, so nothing requires grad and there is nothing to differentiate.")
    return specs, const_specs


def _unknown_name(n: str, prog: P.Program, free: list[str], have: str, origin: Origin) -> UsageError:
    if n == prog.output and prog.synthetic_output:
        why = f"the program has no variable {n!r} ({n!r} is only the name vjp gives its output)"
    elif n in prog.assigned:
        why = f"{n!r} is assigned by the program (an intermediate), so it takes no value"
    else:
        why = f"the program has no variable {n!r}"
    near = difflib.get_close_matches(n, free, n=1)
    err = UsageError(
        f"a value was given for {n!r}, but {why}. The program's inputs are: {have}.",
        hint=f"Did you mean {near[0]!r}?" if near else None,
        origin=origin,
    )
    if n not in prog.assigned:
        err.unknown_name = n  # type: ignore[attr-defined]  # the CLI adds "did you mean --option?"
    return err


def probe_specs(req: Request, prog: P.Program) -> tuple[list[Any], list[ValueSpec | None], P.Program | None]:
    """The kinds (engine.probe.ProbeSpec, None for a value) and value specs of every --grad, and the
    parsed --upstream; empty lists and None for a plain run."""
    from ..engine import probe as PR

    texts = [g for g in (req.grad, *req.more_grads) if g is not None]
    grad = req.origins.of("grad")
    if req.upstream is not None:
        if texts:
            raise UsageError(
                f"this makes v itself (v = dL/dy for its loss), so it takes no {grad.where}: give one or the other.",
                origin=req.origins.of("upstream"),
            )
        return [], [], PR.upstream_program(req.upstream, prog.output, req.limits, req.origins.of("upstream"))
    if req.grad is None and req.more_grads:
        raise UsageError("a second v needs a first one.", origin=grad)
    if len(texts) > PR.MAX_GRADS:
        raise UsageError(f"at most {PR.MAX_GRADS} values of v in one run, not {len(texts)}.", origin=grad)
    kinds = [PR.parse_probe(g, grad) if isinstance(g, str) else None for g in texts]
    if len(texts) > 1 and any(k is not None and k.kind == "basis" for k in kinds):
        raise UsageError(
            "basis already runs one backward per one-hot v; give it alone, not with other values of v.", origin=grad
        )
    specs = [
        None if k is not None else spec_of(g, grad, req.limits, allow_ones=True)
        for g, k in zip(texts, kinds, strict=True)
    ]
    if len(texts) == 1 and kinds[0] is None:
        return [], specs, None  # a plain --grad: the run as before
    return kinds, specs, None


def integer_constants(prog: P.Program, specs: dict[str, ValueSpec], const_specs: dict[str, ValueSpec]) -> set[str]:
    """The constants to bind as int64: whole numbers used where torch needs integers.

    The command line and expression files have no integer type (`--const target=1,0,4` is floats), while the
    torch code a program comes from holds an int64 tensor there: an index `x[i]`, or an operand the registry
    marks as indices (the class targets of cross_entropy, nll_loss, one_hot; gather's index). cross_entropy's
    target of the input's own rank holds probabilities and stays float.
    """
    from ..ops import REGISTRY

    used: set[str] = set()
    for stmt in P.iter_stmts(prog.body):
        for top in P.stmt_exprs(stmt):
            for e in P.walk_exprs(top):
                if isinstance(e, P.Index):
                    used |= {i.id for i in e.items if isinstance(i, P.Name)}
                elif isinstance(e, P.Call) and e.func in REGISTRY:
                    spec = REGISTRY[e.func]
                    for k in spec.index_args:
                        arg = e.args[k] if k < len(e.args) else None
                        if isinstance(arg, P.Name) and not (spec.probabilities and _same_rank(arg, e.args[0], specs)):
                            used.add(arg.id)
    return {n for n in used if n in const_specs and _whole(const_specs[n])}


def _same_rank(target: P.Name, input_: P.Expr, specs: dict[str, ValueSpec]) -> bool:
    """Whether a target has the input's rank (probabilities); an input computed in the program counts as a
    batch, so a target of one dimension holds its class indices."""
    known = specs.get(input_.id) if isinstance(input_, P.Name) else None
    rank = len(known.shape) if known is not None else 2
    return target.id in specs and len(specs[target.id].shape) == rank


def _whole(spec: ValueSpec) -> bool:
    if spec.data is not None:
        return all(float(v).is_integer() for v in spec.data)
    if spec.generator in ("zeros", "ones", "eye"):
        return True
    return spec.generator in ("full", "arange") and all(float(a).is_integer() for a in spec.args)


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
            "cuda is not available here (torch.cuda.is_available() is False)."
            if req.device == "cuda"
            else f"must be cpu or cuda, not {req.device!r}.",
            origin=req.origins.of("device"),
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
    dtype_origin = req.origins.of("dtype")
    integers = integer_constants(prog, {**specs, **const_specs}, const_specs)
    for name in prog.free:  # program order, so random draws do not depend on option order
        origin = Origin(f"the leaf {name!r} the program makes") if name in prog.made else value_origin(req, name)
        if name in specs:
            tensor = make_tensor(specs[name], origin, dtype, gen, req.device, dtype_origin).requires_grad_(True)
            leaves[name] = tensor
            env[name] = Val(tensor, {name: DIAG}, (1, 1))
        else:
            tensor = make_tensor(const_specs[name], origin, dtype, gen, req.device, dtype_origin)
            if name in integers:
                tensor = tensor.long()
            consts[name] = tensor
            env[name] = Val(tensor, {})
    return Bound(dtype, seed, uses_random, gen, leaves, consts, env)
