"""explore(...) -> Result: the one entry point the CLI, the tests and notebooks use.

Data flows one way: text -> Program -> tensors -> derivatives -> checks -> Result.
torch and sympy are imported here, inside the functions, so that importing the
package (and `vjp --help`) costs neither.
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import FileFormatError, LimitError, ProgramError, ShapeError, UsageError
from .language import program as P
from .language.constructors import made_leaf_given, makes_random
from .language.parser import parse_program
from .language.values import ValueSpec, from_nested, parse_value
from .limits import DEFAULT_LIMITS, Limits
from .result import (
    Check,
    Control,
    Input,
    Intermediate,
    Jacobian,
    Note,
    Probe,
    ProbeV,
    Result,
    TensorData,
    element_label,
)

ValueLike = str | float | int | list[Any] | ValueSpec


@dataclass
class Request:
    """Everything one exploration needs; the CLI and expression files both build one."""

    program: str
    values: dict[str, ValueLike] = field(default_factory=dict)
    consts: dict[str, ValueLike] = field(default_factory=dict)
    grad: ValueLike | None = None
    output: str | None = None
    dtype: str = "float32"
    seed: int | None = None
    backward_calls: int = 1
    retain_graph: bool = True  # calls 1..N-1 keep the graph; False reproduces torch's error on call 2
    symbolic: bool = True
    device: str = "cpu"
    limits: Limits = DEFAULT_LIMITS
    explain: bool = False
    title: str | None = None
    source: str | None = None  # where the request came from (a file path), for messages
    description: str | None = None
    source_note: str | None = None  # an expression file's `source`: where the example comes from
    grad_label: str = "given"  # where v came from, for the output ("given", "given in the file")
    latex: bool = False  # formulas of `explain` as LaTeX
    reserved: frozenset[str] = frozenset()  # names the CLI keeps for its own options (--grad, --help, ...)
    expected: Any = None  # language.files.Expected: numbers a source printed, checked as "expected"
    expected_dropped: bool = False  # the file had [expect], but options overrode what it was for
    more_grads: tuple[ValueLike, ...] = ()  # a second, third ... --grad: linearity (docs/probes.md)
    upstream: str | None = None  # --upstream: v = dL/dy for this loss, written in y


def explore(program: str | Request, values: Mapping[str, ValueLike] | None = None, **options: Any) -> Result:
    """Run a program at the given values: backward(v), Jacobians, Jᵀv and the symbolic check."""
    req = program if isinstance(program, Request) else Request(program, dict(values or {}), **options)
    return _Run(req).result()


def _spec(value: ValueLike, label: str, limits: Limits, allow_ones: bool = False) -> ValueSpec:
    if isinstance(value, ValueSpec):
        return value
    if isinstance(value, str):
        return parse_value(value, label, limits, allow_ones=allow_ones)
    return from_nested(value, label, limits)


def _label(name: str) -> str:
    """How a value is named in messages."""
    return f"the value of {name!r}"


class _Run:
    def __init__(self, req: Request) -> None:
        self.req = req
        self.limits = req.limits
        self.t0 = time.perf_counter()
        self.timings: dict[str, float] = {}
        self.notes: list[Note] = []
        self.v_ones = False  # v is torch.ones_like(out) (--grad ones, or a scalar output's default)
        self.reweighed: list[str] = []  # checks that agree only when weighed at the size of their terms
        self.origin: Any = None  # engine.nonfinite.Origin: where a wrong nan or inf entered the backward pass
        self.singular: list[str] = []  # operations whose derivative is infinite or undefined at these values
        self.leaf_tensors: dict[str, Any] = {}  # the leaves, for the probe's budget
        self.upstream_loss: float | None = None  # --upstream: L at the output's value
        self.fwd: Any = None  # the forward pass (its trace replays for the basis)
        self.consts: dict[str, Any] = {}

    def lap(self, name: str, since: float) -> float:
        now = time.perf_counter()
        self.timings[name] = round(now - since, 6)
        return now

    # ------------------------------------------------------------------ steps
    def result(self) -> Result:
        req = self.req
        if req.dtype not in ("float32", "float64"):
            raise UsageError(f"--dtype must be float32 or float64, not {req.dtype!r}.")
        if not 1 <= req.backward_calls <= 100:
            raise UsageError("--backward-calls must be between 1 and 100.")
        if req.seed is not None and not 0 <= req.seed < 2**63:
            raise UsageError(f"--seed must be between 0 and 2**63 - 1, not {req.seed}.")
        prog = parse_program(req.program, req.output, self.limits)
        self.prog_output = prog.output
        t = self.lap("parse", self.t0)
        specs, const_specs = self._check_names(prog)
        kinds, grad_specs, up_prog = self._probe_specs(prog)
        grad_spec = grad_specs[0] if grad_specs else None
        t = self.lap("values", t)

        import torch

        from .engine.interpreter import DIAG, Interpreter, Val
        from .engine.tensors import DTYPES, make_tensor

        if req.device != "cpu":
            if req.device != "cuda" or not torch.cuda.is_available():
                raise UsageError(
                    f"--device {req.device}: not available here (torch.cuda.is_available() is False)."
                    if req.device == "cuda"
                    else f"--device must be cpu or cuda, not {req.device!r}."
                )
        dtype = DTYPES[req.dtype]
        t = self.lap("import torch", t)
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
                tensor = make_tensor(specs[name], _label(name), dtype, gen, req.device).requires_grad_(True)
                leaves[name] = tensor
                env[name] = Val(tensor, {name: DIAG}, (1, 1))
            else:
                tensor = make_tensor(const_specs[name], _label(name), dtype, gen, req.device)
                consts[name] = tensor
                env[name] = Val(tensor, {})
        self.leaf_tensors = leaves
        self.consts = consts
        t = self.lap("inputs", t)

        try:
            fwd = Interpreter(prog, self.limits, dtype, gen).run(env)
        except RecursionError:
            raise LimitError(
                "The program's expressions are nested too deeply to evaluate; split them into assignments."
            ) from None
        self.fwd = fwd
        out_val = fwd.output
        out = out_val.v
        if not isinstance(out, torch.Tensor) or not out.requires_grad:
            raise ProgramError(
                f"The output {prog.output!r} does not depend on any leaf"
                + (" (it is a constant)" if not isinstance(out, torch.Tensor) else "")
                + ", so there is nothing to differentiate. torch would say: 'element 0 of tensors "
                "does not require grad and does not have a grad_fn'.",
                hint=_output_hint(prog, env, torch),
            )
        if out.dtype != dtype:
            out = out.to(dtype)
        if kinds or up_prog is not None:
            vs = self._probe_vs(kinds, grad_specs, up_prog, out, prog, torch, gen, seed)
            v, grad_source = vs[0]
        else:
            v, grad_source = self._grad(grad_spec, out, prog, torch, gen)
        # the v that arrives at each intermediate: keep their grads
        inter_tensors = {
            n: env[n].v
            for n in prog.assigned
            if n in env and isinstance(env[n].v, torch.Tensor) and env[n].v.requires_grad and n not in leaves
        }
        for tensor in inter_tensors.values():
            if not tensor.is_leaf:
                tensor.retain_grad()
        t = self.lap("forward", t)

        from .engine.jacobian import compute_jacobians, random_vjp_check

        jacs = compute_jacobians(fwd, leaves, consts, v, self.limits, prog.output)
        t = self.lap("jacobian", t)
        probe: Probe | None = None
        probe_checks: dict[str, Check] = {}
        if kinds or up_prog is not None:
            probe, probe_checks = self._probe(kinds, vs, up_prog, out, leaves, jacs, prog)
            t = self.lap("probe", t)

        calls = req.backward_calls
        # autograd.grad (used for the Jacobian above) also fills retained grads: start clean
        for tensor in [*leaves.values(), *inter_tensors.values()]:
            tensor.grad = None
        saved = _saved_tensors(out) if calls > 1 and not req.retain_graph else []
        for k in range(calls):
            # every call but the last keeps the graph: backward frees the tensors it saved (exp's result, the
            # operands of *), and the next call needs them
            try:
                out.backward(v, retain_graph=req.retain_graph and k < calls - 1)
            except RuntimeError as e:
                if "a second time" not in str(e):
                    raise
                raise UsageError(
                    f"backward call {k + 1} of {calls} failed (--no-retain-graph): torch says '{_first_line(e)}'. "
                    f"Call 1 ran without retain_graph=True, so it freed the intermediate values the graph saved for "
                    f"backward ({', '.join(saved) or 'none listed'}); call {k + 1} needs them again.",
                    hint="Drop --no-retain-graph (vjp then passes retain_graph=True to calls 1 to N-1, as the "
                    "PyTorch message says), or, in your own code, run the forward again before each backward.",
                ) from None
        grads = {n: (x.grad if x.grad is not None else torch.zeros_like(x)) for n, x in leaves.items()}
        none_grads = [n for n, x in leaves.items() if x.grad is None]
        t = self.lap("backward", t)

        from .engine.tensors import all_finite

        # the singularity lint: cheap on small programs, and run on any size where a grad is not finite
        work = sum(math.prod(_step_shape(fwd, s)) for s in fwd.steps)
        if work <= LINT_WORK or not all(all_finite(g) for g in grads.values()):
            from .engine.lint import singularities

            self.singular = singularities(fwd.steps, leaves, consts, dtype, prog.source)
            t = self.lap("singularity lint", t)

        from .engine.compare import TOLERANCES, compare_tensors, skipped
        from .engine.tensors import to_data

        tol = TOLERANCES[req.dtype]
        checks: dict[str, Check] = {}
        mags = _magnitudes(v, jacs, calls)
        big = float(torch.finfo(dtype).max)
        # route 2: Jᵀv contracted from the explicit Jacobian (or the JVP identity where J is too big)
        have = [(n, grads[n], j.jtv * calls if calls > 1 else j.jtv) for n, j in jacs.items() if j.jtv is not None]
        if have:
            checks["jtv"] = compare_tensors("jtv", _JTV, have, tol, mags, big, autodiff=True)
        missing = [n for n, j in jacs.items() if j.jtv is None]
        if missing:
            a, b, size = random_vjp_check(
                fwd, leaves, consts, missing, {n: grads[n] / calls for n in missing}, v, prog.output
            )
            label = "<u, Jᵀv>"
            checks["jvp"] = compare_tensors(
                "jvp",
                "<u, Jᵀv> from backward(v) vs <Ju, v> from a forward-mode JVP, random u "
                f"(for {', '.join(missing)}, whose Jacobian is not materialised)",
                [(label, torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64))],
                tol,
                {label: torch.tensor(size, dtype=torch.float64)},  # a sum of many terms: their size sets the scale
                autodiff=True,
            )
        t = self.lap("jtv check", t)

        symbolic_grads: dict[str, TensorData] | None = None
        sym = None
        sym_sizes: Any = {}
        if not req.symbolic:
            checks["symbolic"] = skipped("symbolic", _SYM, "turned off (--no-symbolic)")
        else:
            sym, sym_grads, reason, sym_sizes = self._symbolic(fwd, leaves, consts, out, v, prog.output)
            if sym_grads is None:
                checks["symbolic"] = skipped("symbolic", _SYM, reason or "")
            else:
                if calls > 1:
                    sym_grads = {n: g * calls for n, g in sym_grads.items()}
                symbolic_grads = {n: to_data(g) for n, g in sym_grads.items()}
                sym_items = [(n, grads[n], sym_grads[n]) for n in leaves]
                huge = _huge_columns(sym, v) if sym is not None else {}
                known = sym_sizes if isinstance(sym_sizes, dict) else {}
                from .engine.symbolic import SymbolicTimeout, time_budget

                # the elementwise route's Jᵀv is evaluated in this comparison, chunk by chunk: the comparison
                # keeps to what is left of the sympy budget, as that evaluation did when it was a step of the
                # route. (A comparison that has finished stands: its second weighing is not cut short here.)
                try:
                    with time_budget(self._left(t, 0.05)):
                        first = compare_tensors(
                            "symbolic",
                            _SYM + (f" ({reason})" if reason else ""),
                            sym_items,
                            tol,
                            _larger({n: m * calls for n, m in known.items()}, mags),
                            big,
                            huge,
                            exact=True,
                        )
                except SymbolicTimeout:
                    total = self.limits.symbolic_seconds
                    checks["symbolic"] = skipped(
                        "symbolic",
                        _SYM,
                        f"sympy's Jᵀv was not evaluated and compared within {total:g} s in all "
                        "(--limit symbolic_seconds=S)",
                    )
                    symbolic_grads = None  # not shown: as costly to write as the comparison that ran out of time
                else:
                    checks["symbolic"] = first
                    if first.status == "disagree":
                        # the exact values are no measure of autograd's rounding where a derivative cancels (1 -
                        # tanh(u)**2 at a saturated u, the product rule's terms of (x + c)*(x - c)): weigh those
                        # elements again, at a few units of roundoff of the size of their terms
                        terms, why = self._later_sizes(sym, sym_sizes, v, leaves, t)
                        checks["symbolic"] = self._reweigh(
                            first,
                            sym_items,
                            {n: m * calls for n, m in terms.items()},
                            mags,
                            why,
                            {"tol": tol, "overflow_at": big, "finite": huge, "exact": True},
                        )
            if sym is None and sym_grads is not None and any(j.full is not None for j in jacs.values()):
                checks["jacobian"] = skipped(
                    "jacobian", _JAC, "the structure-aware route checks Jᵀv, not each entry of J"
                )
            if sym is not None:
                jitems = [
                    (f"d{prog.output}/d{n}", full.reshape(out.numel(), -1), sym.matrix(n))
                    for n in leaves
                    if (full := jacs[n].full) is not None
                ]
                jleaf = {f"d{prog.output}/d{n}": n for n in leaves}
                jhuge = {label: sym.finite_mask(jleaf[label]) for label, *_ in jitems if sym.huge.get(jleaf[label])}
                if jitems:
                    checks["jacobian"] = compare_tensors(
                        "jacobian", _JAC, jitems, tol, overflow_at=big, finite=jhuge, exact=True
                    )
                if jitems and checks["jacobian"].status == "disagree":
                    # as above, entry by entry (size_matrix is cached: the symbolic check may have asked already)
                    sizes, why = self._later_sizes(sym, None, None, leaves, t)
                    jsizes = {f"d{prog.output}/d{n}": m for n, m in sizes.items()}
                    checks["jacobian"] = self._reweigh(
                        checks["jacobian"],
                        jitems,
                        jsizes,
                        {},
                        why,
                        {"tol": tol, "overflow_at": big, "finite": jhuge, "exact": True},
                    )
            if checks.get("jtv") is not None and checks["jtv"].status == "disagree" and sym_grads is not None:
                # backward(v) adds v·(x - c) + v·(x + c) where the J route multiplies v by their (rounded)
                # sum: both autograd, both right up to the rounding of those terms. Weigh them as above
                terms, why = self._later_sizes(sym, sym_sizes, v, leaves, t)
                checks["jtv"] = self._reweigh(
                    checks["jtv"],
                    have,
                    {n: m * calls for n, m in terms.items()},
                    mags,
                    why,
                    {"tol": tol, "autodiff": True},
                )
        t = self.lap("symbolic", t)
        checks["finite_difference"] = self._finite_difference(
            fwd, leaves, consts, v, grads, calls, mags, {"tol": tol, "overflow_at": big}, (sym, sym_sizes, t)
        )
        t = self.lap("finite differences", t)
        if req.expected is not None:
            checks["expected"] = _expected_check(req.expected, prog, out, grads, fwd, req.source or "the file")
        checks.update(probe_checks)

        origin = None
        if any(c.spurious for c in checks.values()):
            from .engine.nonfinite import find_origin

            origin = find_origin(fwd.steps, prog.output, leaves, consts, v, prog.source)
            t = self.lap("nonfinite origin", t)

        # ------------------------------------------------------------------ notes
        self.origin = origin
        self._notes(prog, fwd, leaves, grads, jacs, v, grad_source, none_grads, calls, torch, checks)
        control = [
            Control(c.kind, prog.source.count("\n", 0, c.span[0]) + 1, c.count, _control_text(c.kind, c.count))
            for c in fwd.control
        ]
        jac_out: dict[str, Jacobian] = {}
        for n, j in jacs.items():
            jac_out[n] = Jacobian(
                leaf=n,
                shape=(*out.shape, *leaves[n].shape),
                method=j.method,
                structure=j.structure,
                value=to_data(j.full) if j.full is not None else None,
                diagonal=to_data(j.diagonal) if j.diagonal is not None else None,
                reason=j.reason,
                why=j.why,
            )
        inputs: dict[str, Input] = {}
        for n in prog.free:
            tensor = leaves[n] if n in leaves else consts[n]
            spec = specs.get(n) or const_specs[n]
            inputs[n] = Input(n, to_data(tensor), n in leaves, spec.text)
        intermediates = {
            n: Intermediate(n, to_data(x), to_data(x.grad) if x.grad is not None else None)
            for n, x in inter_tensors.items()
        }
        res = Result(
            program=prog.source,
            output_name=prog.output,
            dtype=req.dtype,
            device=req.device,
            inputs=inputs,
            output=to_data(out),
            grad=to_data(v),
            grad_source=grad_source,
            backward_calls=calls,
            grads={n: to_data(g) for n, g in grads.items()},
            jacobians=jac_out,
            # N x Jᵀv after N calls, as .grad and the symbolic route report it
            jtv={
                n: (to_data(j.jtv * calls if calls > 1 else j.jtv) if j.jtv is not None else None)
                for n, j in jacs.items()
            },
            symbolic=symbolic_grads,
            checks=checks,
            notes=self.notes,
            control=control,
            intermediates=intermediates,
            timings=self.timings,
            meta={
                "seed": seed,
                "title": req.title,
                "description": req.description,
                "file": req.source,
                "source_note": req.source_note,
                "uses_random": uses_random,
                "latex": req.latex,
            },
            probe=probe,
        )
        self.lap("result", t)
        self.timings["total"] = round(time.perf_counter() - self.t0, 6)
        if req.explain:
            from .explain import build_explanation

            res.explanation = build_explanation(res, prog, fwd, sym, self.limits)
        return res

    def _finite_difference(
        self,
        fwd: Any,
        leaves: dict[str, Any],
        consts: dict[str, Any],
        v: Any,
        grads: dict[str, Any],
        calls: int,
        mags: dict[str, Any],
        how: dict[str, Any],
        later: tuple[Any, Any, float],
    ) -> Check:
        """The finite-difference check: .grad against Jᵀv (or ⟨u, Jᵀv⟩) from central differences of the
        program in float64, within its budget, at a tolerance that takes the differences' error estimate."""
        import torch

        from .engine.compare import compare_tensors, skipped
        from .engine.finite_diff import DIRECTIONS, FDUnavailable, finite_differences

        lim = self.limits
        # what one evaluation reads and writes: its inputs (a matrix W of a matvec) and every step's result
        inputs = sum(x.numel() for x in [*leaves.values(), *consts.values()])
        work = max(1, inputs + sum(math.prod(_step_shape(fwd, s)) for s in fwd.steps))
        n = sum(x.numel() for x in leaves.values())
        if (4 * DIRECTIONS + 1) * work > lim.finite_difference_work:
            return skipped(
                "finite_difference",
                _FD,
                f"each evaluation of the program reads and computes {work:,} elements; "
                f"{4 * DIRECTIONS + 1} evaluations would pass the budget of {lim.finite_difference_work:,} "
                "(--limit finite_difference_work=N)",
            )
        max_evals = min(lim.finite_difference_evals, lim.finite_difference_work // work)
        try:
            fd = finite_differences(fwd.steps, self.prog_output, leaves, consts, v, max_evals)
        except FDUnavailable as e:
            return skipped("finite_difference", _FD, str(e))
        rtol = how["tol"].rtol
        if fd.method == "full":
            items, sizes = [], {}
            left: dict[str, list[str]] = {}  # why -> the elements finite differences are no reference at
            for name in leaves:
                mask = fd.left_out[name]
                got = grads[name].detach().cpu().clone()  # in its dtype: a second weighing uses its eps
                ref = fd.jtv[name] * calls
                got[mask] = 0.0
                ref[mask] = 0.0
                items.append((name, got, ref))
                size = fd.error[name] * calls / rtol
                sizes[name] = torch.maximum(size, mags[name].double().cpu()) if name in mags else size
                for k, cause in fd.causes.get(name, {}).items():
                    left.setdefault(cause, []).append(element_label(name, tuple(mask.shape), k))
            compares = f"{_FD}, every column of J ({fd.evals} evaluations)"
            check = compare_tensors("finite_difference", compares, items, magnitudes=sizes, exact=True, **how)
            if check.status == "disagree":
                sym, sym_sizes, started = later
                terms, why = self._later_sizes(sym, sym_sizes, v, leaves, started)
                terms = {k: m * calls for k, m in terms.items()}
                check = self._reweigh(check, items, terms, sizes, why, {**how, "exact": True})
            if left:
                parts = [
                    ", ".join(at[:6]) + (f" and {len(at) - 6} more" if len(at) > 6 else "") + f" ({cause})"
                    for cause, at in left.items()
                ]
                return replace(check, reason="not a reference at " + "; at ".join(parts))
            return check
        if not fd.directions:
            return skipped("finite_difference", _FD, f"no usable direction: {fd.kink_reason}")
        pairs: list[tuple[str, Any, Any]] = []
        scales: dict[str, Any] = {}
        for k, ((ref, err, _), u) in enumerate(zip(fd.directions, fd.us, strict=True)):
            products = [u[name] * grads[name].detach().double().cpu() for name in leaves]
            got = math.fsum(float(t.sum()) for t in products)
            # the size of what autograd added up: Σ_j |u_j|·Σᵢ|v[i]·J[i, j]| where J is known, else Σ|u·grad|
            size = math.fsum(
                float((u[name].abs() * mags[name].double().cpu()).sum())
                if name in mags
                else float(t.abs().nan_to_num(0.0, 0.0, 0.0).sum())
                for name, t in zip(leaves, products, strict=True)
            )
            label = f"<u{k + 1}, Jᵀv>"
            pairs.append(
                (label, torch.tensor(got, dtype=torch.float64), torch.tensor(ref * calls, dtype=torch.float64))
            )
            scales[label] = torch.tensor(max(size, err * calls / rtol), dtype=torch.float64)
        compares = (
            f"{_FD_DIR} ({len(fd.directions)} random u, {fd.evals} evaluations; the full Jacobian would take "
            f"{4 * n + 1}, more than finite_difference_evals = {lim.finite_difference_evals:,})"
        )
        check = compare_tensors("finite_difference", compares, pairs, magnitudes=scales, exact=True, **how)
        if check.status == "disagree":  # weighed again at the size of the terms autograd added, as written
            sym, sym_sizes, started = later
            terms, why = self._later_sizes(sym, sym_sizes, v, leaves, started)
            dtype = next(iter(grads.values())).dtype
            in_dtype = [(label, got.to(dtype), ref) for label, got, ref in pairs]
            along = (
                {
                    label: torch.tensor(
                        math.fsum(float((u[name].abs() * terms[name].double().cpu() * calls).sum()) for name in terms),
                        dtype=torch.float64,
                    )
                    for (label, _, _), u in zip(pairs, fd.us, strict=True)
                }
                if terms
                else {}
            )
            check = self._reweigh(check, in_dtype, along, scales, why, {**how, "exact": True})
        return replace(check, reason=fd.kink_reason or check.reason or None)

    def _check_names(self, prog: P.Program) -> tuple[dict[str, ValueSpec], dict[str, ValueSpec]]:
        req = self.req
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
            n = extra[0]
            if n == prog.output and prog.synthetic_output:
                why = f"the program has no variable {n!r} ({n!r} is only the name vjp gives its output)"
            elif n in prog.assigned:
                why = f"{n!r} is assigned by the program (an intermediate), so it takes no value"
            else:
                why = f"the program has no variable {n!r}"
            import difflib

            near = difflib.get_close_matches(n, free, n=1)
            err = UsageError(
                f"A value was given for {n!r}, but {why}. The program's inputs are: {have}.",
                hint=f"Did you mean {near[0]!r}?" if near else None,
            )
            if n not in prog.assigned:
                err.unknown_name = n  # type: ignore[attr-defined]  # the CLI adds "did you mean --option?"
            raise err
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
        specs = {**prog.made, **{n: _spec(req.values[n], _label(n), self.limits) for n in free if n in req.values}}
        const_specs = {n: _spec(req.consts[n], _label(n), self.limits) for n in free if n in req.consts}
        if not specs:
            raise UsageError(
                "Every input is a --const, so nothing requires grad and there is nothing to differentiate."
            )
        return specs, const_specs

    def _probe_specs(self, prog: P.Program) -> tuple[list[Any], list[ValueSpec | None], P.Program | None]:
        """The kinds (engine.probe.ProbeSpec, None for a value) and value specs of every --grad, and the
        parsed --upstream; empty lists and None for a plain run."""
        from .engine import probe as PR

        req = self.req
        texts = [g for g in (req.grad, *req.more_grads) if g is not None]
        up = None
        if req.upstream is not None:
            if texts:
                raise UsageError(
                    "--upstream makes v itself (v = dL/dy for its loss), so it takes no --grad: give one or the other."
                )
            return [], [], PR.upstream_program(req.upstream, prog.output, self.limits)
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
            None if k is not None else _spec(g, "--grad", self.limits, allow_ones=True)
            for g, k in zip(texts, kinds, strict=True)
        ]
        if len(texts) == 1 and kinds[0] is None:
            return [], specs, up  # a plain --grad: the run as before
        return kinds, specs, up

    def _probe_vs(
        self,
        kinds: list[Any],
        specs: list[ValueSpec | None],
        up_prog: P.Program | None,
        out: Any,
        prog: P.Program,
        torch: Any,
        gen: Any,
        seed: int,
    ) -> list[tuple[Any, str]]:
        """(v, source) for every --grad (or the one --upstream makes)."""
        from .engine import probe as PR

        shape = tuple(out.shape)
        if up_prog is not None:
            assert self.req.upstream is not None
            v, loss = PR.upstream_v(up_prog, out, prog.output, self.limits, self.req.upstream)
            self.upstream_loss = loss
            return [(v, "upstream")]
        n_random = sum(1 for k in kinds if k is not None and k.kind == "random")
        randoms = PR.random_v(shape, out.dtype, self.req.device, seed, n_random) if n_random else []
        vs: list[tuple[Any, str]] = []
        for k, spec in zip(kinds, specs, strict=True):
            if k is None:
                first_ones = self.v_ones
                v, source = self._grad(spec, out, prog, torch, gen)
                if vs:  # only the run's own v (the first) says whether v is ones
                    self.v_ones = first_ones
                vs.append((v, "ones" if source == "ones" else "given"))
            elif k.kind == "one-hot":
                flat = PR.one_hot_index(k, shape, prog.output)
                v = torch.zeros(out.numel(), dtype=out.dtype, device=out.device)
                v[flat] = 1
                vs.append((v.reshape(shape), "one-hot"))
            elif k.kind == "random":
                vs.append((randoms.pop(0), "random"))
            else:  # basis: the run itself uses v = ones, the sum of every e_i
                n = sum(x.numel() for x in self.leaf_tensors.values())
                PR.check_basis_budget(out.numel(), n, prog.output, self.limits.jacobian_entries)
                self.v_ones = True
                vs.append((torch.ones_like(out), "basis"))
        return vs

    def _probe(
        self,
        kinds: list[Any],
        vs: list[tuple[Any, str]],
        up_prog: P.Program | None,
        out: Any,
        leaves: dict[str, Any],
        jacs: dict[str, Any],
        prog: P.Program,
    ) -> tuple[Probe, dict[str, Check]]:
        """The probe's extra backward passes and checks, run while the graph is still there."""
        import torch

        from .engine import probe as PR
        from .engine.compare import TOLERANCES, compare_tensors, skipped
        from .engine.tensors import to_data

        tol = TOLERANCES[self.req.dtype]
        o = prog.output
        checks: dict[str, Check] = {}
        texts = [str(g) if not isinstance(g, ValueSpec) else g.text for g in (self.req.grad, *self.req.more_grads)]
        if up_prog is not None:
            formula = self.req.upstream or ""
            loss = PR.upstream_loss(up_prog, out, o, self.limits, out.dtype, formula)
            chain = torch.autograd.grad(loss, list(leaves.values()), retain_graph=True, allow_unused=True)
            direct = PR.grads_for(out, leaves, vs[0][0])
            items = [
                (n, direct[n], torch.zeros_like(x) if g is None else g)
                for (n, x), g in zip(leaves.items(), chain, strict=True)
            ]
            checks["upstream"] = compare_tensors(
                "upstream",
                f"Jᵀv with v = dL/d{o} vs dL/dx from one backward through the program and the loss (the chain rule)",
                items,
                tol,
                autodiff=True,
            )
            note = PR.NOTES["upstream"].format(out=o, formula=formula.strip())
            return Probe("upstream", [formula], note, formula=formula.strip(), loss=self.upstream_loss), checks
        if len(vs) > 1:
            coeffs = PR.coefficients(len(vs))
            combo, together, summed, each, sizes = PR.linearity_items(
                lambda v: PR.grads_for(out, leaves, v), [v for v, _ in vs], coeffs
            )
            text = PR.combo_text(coeffs)
            checks["linearity"] = compare_tensors(
                "linearity",
                f"backward({text}) vs the same combination of each backward(v_k): Jᵀ(αv + βw) = αJᵀv + βJᵀw",
                [(n, together[n], summed[n]) for n in leaves],
                tol,
                magnitudes=sizes,
                autodiff=True,
            )
            pvs = [
                ProbeV(t, s, to_data(v), {n: to_data(g) for n, g in e.items()})
                for t, (v, s), e in zip(texts, vs, each, strict=True)
            ]
            note = PR.NOTES["several"].format(combo=text)
            for k, (_, s) in zip(kinds, vs, strict=True):
                if s in ("one-hot", "random") and k is not None:
                    note += " " + self._kind_note(k, s, out, o)
            return (
                Probe(
                    "several",
                    texts,
                    note,
                    vs=pvs,
                    coefficients=coeffs,
                    combined=to_data(combo),
                    combined_grads={n: to_data(g) for n, g in together.items()},
                ),
                checks,
            )
        kind, source = kinds[0], vs[0][1]
        if source == "basis":
            func = any(j.method in ("jacrev", "jacfwd") for j in jacs.values())
            started = time.perf_counter()
            rows, method = PR.basis_rows(out, leaves, self.fwd, self.consts, o, use_func=func)
            self.lap("basis rows", started)  # the backward passes alone; "probe" adds the check
            m = out.numel()
            have = [
                (f"d{o}/d{n}", rows[n].reshape(m, -1), j.full.reshape(m, -1))
                for n, j in jacs.items()
                if j.full is not None
            ]
            compares = f"rows of J from one backward per one-hot v ({method}) vs J from the Jacobian route"
            checks["basis"] = (
                compare_tensors("basis", compares, have, tol, autodiff=True)
                if have
                else skipped("basis", compares, "no Jacobian was materialised to compare with")
            )
            note = PR.NOTES["basis"].format(out=o)
            return Probe("basis", texts, note, rows={n: to_data(r) for n, r in rows.items()}, method=method), checks
        probe = Probe(source, texts, self._kind_note(kind, source, out, o))
        if source == "one-hot":
            from .result import unravel

            flat = PR.one_hot_index(kind, tuple(out.shape), o)
            probe.index = unravel(tuple(out.shape), flat)
            probe.element = element_label(o, tuple(out.shape), flat)
        return probe, checks

    def _kind_note(self, kind: Any, source: str, out: Any, o: str) -> str:
        from .engine import probe as PR

        if source == "one-hot":
            flat = PR.one_hot_index(kind, tuple(out.shape), o)
            el = element_label(o, tuple(out.shape), flat)
            return f"{kind.text}: " + PR.NOTES["one-hot"].format(el=el, k=flat)
        return f"{kind.text}: " + PR.NOTES["random"]

    def _grad(self, spec: ValueSpec | None, out: Any, prog: P.Program, torch: Any, gen: Any) -> tuple[Any, str]:
        shape = list(out.shape)
        if spec is None:
            if out.numel() != 1:
                raise ShapeError(
                    f"The output {prog.output!r} has shape {shape} ({out.numel()} values), so backward() needs v: "
                    "torch says 'grad can be implicitly created only for scalar outputs'. The default v = 1 "
                    "exists only for single-number outputs.",
                    hint=f"Add --grad with shape {shape} (v holds dL/d{prog.output}: how much a downstream loss "
                    f"cares about each output), or --grad ones, which equals backward of {prog.output}.sum().",
                )
            self.v_ones = True
            return torch.ones_like(out), "default (scalar output)"
        if spec.generator == "ones_like":
            self.v_ones = True
            return torch.ones_like(out), "ones"
        from .engine.tensors import make_tensor

        if spec.shape != tuple(out.shape):
            raise ShapeError(
                f"--grad has shape {list(spec.shape)} but the output {prog.output!r} has shape {shape}. "
                f"v lives in output space: it needs one weight per output element ({out.numel()}), while the "
                f"grads live in input space. torch says: 'Mismatch in shape: grad_output[0] has a shape of "
                f"torch.Size({list(spec.shape)}) and output[0] has a shape of torch.Size({shape})'.",
                spec.text,
                0,
                len(spec.text),
                hint="Give --grad with the output's shape, or --grad ones.",
                label="--grad",
            )
        # the same generator as the inputs, after them: the seed shown reproduces v too
        return make_tensor(spec, "--grad", out.dtype, gen, self.req.device), self.req.grad_label

    def _symbolic(
        self, fwd: Any, leaves: dict[str, Any], consts: dict[str, Any], out: Any, v: Any, output: str
    ) -> tuple[Any, dict[str, Any] | None, str | None, Sizes]:
        """(the per-element SymbolicJacobian or None, Jᵀv per leaf from sympy or None, a reason or note,
        the size of Jᵀv's terms per leaf where the route gives it, now or when asked (Sizes))."""
        import torch

        from .engine import symbolic as S

        m = out.numel()
        n = sum(x.numel() for x in leaves.values())
        entries = m * n
        work = sum(math.prod(_step_shape(fwd, s)) for s in fwd.steps)
        # a constant the executed steps never read (one used only in an if's condition) gets no symbols
        read = {e.id for s in fwd.steps for e in P.walk_exprs(s.expr) if isinstance(e, P.Name)}
        consts_read = sum(x.numel() for k, x in consts.items() if k in read)
        budget = self.limits.symbolic_seconds
        elementwise = S.is_elementwise(fwd.steps, fwd.output.deps)
        reason = None
        if entries > self.limits.symbolic_entries:
            reason = (
                f"too large for the exact per-element check: {m:,} outputs x {n:,} inputs = {entries:,} "
                f"derivatives (limit {self.limits.symbolic_entries:,}; --limit symbolic_entries=N)"
            )
        elif work + consts_read > self.limits.symbolic_entries * 5:
            reason = (
                f"the program computes {work:,} intermediate elements and reads {consts_read:,} constant ones, "
                "more than 5 x symbolic_entries for per-element sympy (--limit symbolic_entries=N)"
            )
        elif m * min(fwd.output.size[0], 10**12) * min(fwd.output.size[1], n) > self.limits.symbolic_cost:
            nodes, syms = fwd.output.size
            reason = (
                f"the exact per-element derivatives would cost about {m:,} outputs x {nodes:,} expression "
                f"nodes x {min(syms, n):,} symbols, more than the budget of {self.limits.symbolic_cost:,} "
                "(--limit symbolic_cost=N)"
            )
        else:
            lv = {k: (tuple(x.shape), x.detach().double().reshape(-1).tolist()) for k, x in leaves.items()}
            cv = {k: (tuple(x.shape), x.detach().double().reshape(-1).tolist()) for k, x in consts.items() if k in read}
            t0 = time.perf_counter()
            try:
                with S.time_budget(budget):
                    sym = S.symbolic_jacobian(fwd.steps, output, lv, cv, keep_formulas=self.req.explain)
            except S.SymbolicTimeout:
                reason = f"sympy did not finish within {budget:g} s (--limit symbolic_seconds=S)"
                sym = None
            except S.Unsupported as e:
                return None, None, f"not supported symbolically: {e}", {}
            except RecursionError:
                return None, None, "the expression is too deep for sympy", {}
            except (OverflowError, ValueError, ZeroDivisionError) as e:
                return None, None, f"sympy could not evaluate the exact derivatives here ({type(e).__name__}: {e})", {}
            budget = self._left(t0, 0.05)  # one budget for both routes
            if sym is not None:
                vf = v.detach().double().cpu().reshape(-1)
                grads = {}
                for name, x in leaves.items():
                    J = sym.matrix(name)
                    # a zero v drops a term, unless its derivative is infinite or undefined: 0·inf has no value
                    keep = (J != 0) & ((vf != 0)[:, None] | ~torch.isfinite(J))
                    terms = torch.where(keep, vf[:, None] * J, torch.zeros_like(J))
                    grads[name] = terms.sum(0).reshape(x.shape)
                return sym, grads, None, {}
        if not elementwise:
            return self._matrix_route(fwd, leaves, consts, v, output, reason or "", budget)
        # structure-aware: an elementwise program is one scalar formula, differentiated once per leaf
        return self._structured(
            "the elementwise route",
            "failed",
            reason or "",
            budget,
            lambda: (
                *S.elementwise_vjp(fwd.steps, output, leaves, consts, v, fwd.output.deps, self.v_ones),
                "elementwise program: each leaf's scalar derivative from sympy, evaluated on all elements",
            ),
        )

    def _matrix_route(
        self, fwd: Any, leaves: dict[str, Any], consts: dict[str, Any], v: Any, output: str, reason: str, budget: float
    ) -> tuple[None, dict[str, Any] | None, str, Sizes]:
        """Jᵀv from sympy's matrix calculus on MatrixSymbols: a sympy cost that does not grow with n."""
        from .engine import matrix_calculus as M

        def run() -> tuple[dict[str, Any], dict[str, Any], str]:
            grads, sizes, how = M.matrix_vjp(fwd.steps, output, leaves, consts, v, self.limits.elements)
            return grads, sizes, f"{M.NOTE}, {how}"

        return self._structured("matrix calculus", "cannot follow this program", reason, budget, run)

    def _structured(
        self, route: str, failed: str, reason: str, budget: float, run: Any
    ) -> tuple[None, dict[str, Any] | None, str, Sizes]:
        """A structure-aware route within what is left of the sympy budget: (None, Jᵀv, note, sizes), or the
        reason the per-element check gave and this route's own."""
        from .engine import symbolic as S

        try:
            with S.time_budget(budget):
                grads, sizes, note = run()
        except S.SymbolicTimeout:
            total = self.limits.symbolic_seconds
            return None, None, f"{reason}; {route} did not finish within {total:g} s in all either", {}
        except (S.Unsupported, RecursionError, OverflowError, ValueError, ZeroDivisionError) as e:
            return None, None, f"{reason}; {route} {failed}: {e}", {}
        return None, grads, note, sizes

    def _left(self, since: float, floor: float) -> float:
        """What is left of the sympy budget (symbolic_seconds) after the time since `since`, at least `floor`."""
        return max(floor, self.limits.symbolic_seconds - (time.perf_counter() - since))

    def _later_sizes(
        self, sym: Any, sizes: Any, v: Any, leaves: dict[str, Any], started: float
    ) -> tuple[dict[str, Any], str | None]:
        """After a disagreement: the size of the terms autograd adds up, per leaf, where the route defers it
        (the per-element route: its size_matrix, as Σᵢ |v[i]|·size[i, j] with v, entry by entry without;
        the elementwise route: its sizes function), within what is left of the sympy budget. Returns the
        sizes and, where none could be had, why."""
        import torch

        from .engine import symbolic as S

        left = self._left(started, 0.5)
        try:
            with S.time_budget(left):
                if sym is not None:
                    mats = {n: m for n in sym.values if (m := sym.size_matrix(n)) is not None}
                    if v is None:
                        return mats, None
                    av = v.detach().double().cpu().reshape(-1).abs().nan_to_num(0.0, 0.0, 0.0)
                    return {n: (av @ m).reshape(leaves[n].shape) for n, m in mats.items()}, None
                if callable(sizes):
                    return {n: torch.as_tensor(m).reshape(leaves[n].shape) for n, m in sizes().items()}, None
        except S.SymbolicTimeout:
            return {}, f"the size of the terms was not computed within the sympy budget of {left:.3g} s"
        except (S.Unsupported, RecursionError, OverflowError, ValueError, ZeroDivisionError) as e:
            return {}, f"the size of the terms could not be computed ({type(e).__name__})"
        return {}, None

    def _reweigh(
        self, first: Check, items: Any, terms: dict[str, Any], mags: dict[str, Any], why: str | None, how: Any
    ) -> Check:
        """A failed check weighed once more: each element's scale also takes ROUNDOFF_UNITS·eps·(size of its
        terms) / rtol, so the allowance there is that many units of roundoff of the terms, not rtol of them."""

        import torch

        from .engine.compare import compare_tensors

        if not terms:
            return replace(first, reason=why) if why else first
        eps = torch.finfo(items[0][1].dtype).eps if items[0][1].is_floating_point() else 2.0**-52
        factor = ROUNDOFF_UNITS * eps / how["tol"].rtol
        scaled = {n: m.double() * factor for n, m in terms.items()}
        again = compare_tensors(first.name, first.compares, items, magnitudes=_larger(scaled, mags), **how)
        if again.status == "agree":
            self.reweighed.append(first.name)
        return again

    def _notes(
        self,
        prog: P.Program,
        fwd: Any,
        leaves: dict[str, Any],
        grads: dict[str, Any],
        jacs: dict[str, Any],
        v: Any,
        grad_source: str,
        none_grads: list[str],
        calls: int,
        torch: Any,
        checks: dict[str, Check],
    ) -> None:
        from .engine.tensors import all_equal_to, all_finite

        add = self.notes.append
        if prog.output_note:  # first: the other notes use the output's name
            add(Note("output_named", prog.output_note))
        overflowed = {e for c in checks.values() for e in c.overflow}
        spurious = {e for c in checks.values() for e in c.spurious}
        undefined = {e for c in checks.values() for e in c.undefined}
        out = prog.output
        if grad_source.startswith("default"):
            add(
                Note(
                    "default_v",
                    f"{out!r} is a single number, so backward() uses v = 1: the grads are the plain "
                    f"derivatives d{out}/dx.",
                )
            )
        for n in none_grads:
            add(
                Note(
                    "unused_leaf",
                    f"{n!r} does not influence {out!r}: its Jacobian block is zero and its grad is "
                    f"zeros here (torch itself leaves {n}.grad as None).",
                )
            )
        all_ones = self.v_ones or all_equal_to(v, 1.0)
        dense = [n for n, j in jacs.items() if j.structure == "dense"]
        if all_ones and dense and v.numel() > 1:
            add(
                Note(
                    "ones_not_derivative",
                    f"v = ones with a non-diagonal Jacobian ({', '.join(dense)}): each grad "
                    f"element is a column sum of J, sum_i d{out}[i]/dx[j], not 'the derivative of each output'.",
                )
            )
        elif all_ones and v.numel() > 1 and jacs and all(j.structure in ("diagonal", "zero") for j in jacs.values()):
            add(
                Note(
                    "ones_diagonal",
                    "v = ones and every Jacobian block is diagonal: here (and only then) each grad "
                    f"element is the derivative of the matching output element, d{out}[k]/dx[k].",
                )
            )
        if self.req.expected_dropped:
            add(
                Note(
                    "expect_skipped",
                    "the file's [expect] numbers were not checked: options on the command line "
                    "changed what they were printed for.",
                )
            )
        if calls > 1:
            add(
                Note(
                    "accumulated",
                    f"backward ran {calls} times without zeroing: .grad accumulates, so each grad is "
                    f"{calls} x Jᵀv; every route here reports that same quantity, {calls} x Jᵀv, as .grad holds it. "
                    "Zero .grad (x.grad = None) between calls to get Jᵀv alone.",
                )
            )
            add(
                Note(
                    "retain_graph",
                    ("call 1" if calls == 2 else f"calls 1 to {calls - 1}")
                    + " passed retain_graph=True: each backward frees the intermediate values "
                    "the graph saved for it (exp's result, the operands of *), and the next call needs them. "
                    "Without it torch raises 'Trying to backward through the graph a second time' on call 2 "
                    "(--no-retain-graph shows it). The last call frees the graph.",
                )
            )
        if self.singular:
            add(
                Note(
                    "singularity",
                    "at these values a derivative is infinite or undefined (found from the program and the values, "
                    "before backward's numbers are read): " + "; ".join(self.singular) + ".",
                )
            )
        for n, g in grads.items():
            if not all_finite(g):  # (one float pass; the mask only where there is something to find)
                bad = ~torch.isfinite(g)
                k = int(bad.reshape(-1).nonzero()[0])
                val = float(g.reshape(-1)[k])
                label = element_label(n, tuple(g.shape), k)
                if label in spurious:
                    add(
                        Note(
                            "wrong_nonfinite_grad",
                            f"{label}.grad is {val} ({int(bad.sum())} non-finite element(s) in {n}.grad) but the exact "
                            "derivative there is finite: backward's value is wrong, not undefined"
                            + (f"; {self.origin.text()}" if self.origin is not None else "."),
                        )
                    )
                    continue
                if label in overflowed:
                    why = (
                        f"{self.req.dtype} overflowed: the exact derivative is finite but larger than the dtype's range"
                        + (" (run with --dtype float64)" if self.req.dtype != "float64" else ", the largest torch has")
                    )
                elif val != val:  # nan
                    why = (
                        "nan comes from 0 x inf or 0/0 in the chain rule (e.g. a factor that is 0 times a derivative "
                        "that is infinite here, such as sqrt or log at 0), or from a point where the derivative "
                        "is undefined"
                    )
                elif label in undefined:
                    why = "the exact derivative is infinite here too (e.g. log or 1/x at 0, sqrt at 0)"
                else:
                    why = "the derivative is infinite at this point (e.g. log or 1/x at 0, sqrt at 0)"
                add(
                    Note(
                        "nonfinite_grad",
                        f"{label}.grad is {val} ({int(bad.sum())} non-finite element(s) in {n}.grad): {why}.",
                    )
                )
        y = fwd.output.v.detach()
        # (one float pass, in which nan propagates: a bool mask and .any() cost several on CPU)
        if y.numel() and math.isnan(float(torch.aminmax(y.reshape(-1))[0])):
            nan_y = torch.isnan(y)
            k = int(nan_y.reshape(-1).nonzero()[0])
            add(
                Note(
                    "nan_output",
                    f"{element_label(out, tuple(y.shape), k)} is nan ({int(nan_y.sum())} nan element(s) in {out}): "
                    "the forward left the real numbers or met 0/0 there (the log or sqrt of a negative number, a "
                    "negative number to a fractional power, 0/0, inf - inf). backward does not look: it multiplies "
                    "the local derivatives it computes from the inputs (log's is 1/x, whatever log(x) gave), so the "
                    ".grad there may even be finite, the derivative of no real function. Where the exact derivative "
                    "is undefined too, the exact checks list such elements as undefined.",
                )
            )
        if self.reweighed:
            c = checks[self.reweighed[0]]
            which = " and ".join(f"the {n} check" for n in self.reweighed)
            add(
                Note(
                    "rounding_allowance",
                    f"{which} {'agree' if len(self.reweighed) > 1 else 'agrees'} only when weighed at the size "
                    f"of the numbers autograd adds up (max |Δ| = {c.max_abs_diff or 0:.3g}, max rel = "
                    f"{c.max_rel_diff or 0:.3g}; largest difference at {c.worst}): there the exact "
                    "value is a sum or difference of numbers much larger than itself, such as the product rule's "
                    "terms in (x + 1e7)*(x - 1e7), 1 - tanh(u)**2 where tanh(u) rounds to 1, or s*(1 - s) for a "
                    f"saturated sigmoid, and {self.req.dtype} rounding of those numbers is that large. Such "
                    f"elements are allowed {ROUNDOFF_UNITS} units of roundoff of that size, no more."
                    + (" --dtype float64 gives more digits there." if self.req.dtype != "float64" else ""),
                )
            )
        failed = [c.name for c in checks.values() if c.status == "disagree" and c.name in ("symbolic", "jacobian")]
        only_wrong_nonfinite = all(not checks[c].worst or checks[c].worst in spurious for c in failed)
        if only_wrong_nonfinite and self.origin is not None and not self.origin.overflow:
            failed = []  # not float32's doing: float64 multiplies 0 by inf too
        if failed and self.req.dtype == "float32":
            add(Note("float32_disagrees", _float32_hint(failed, fwd, leaves, torch)))
        aug = [s for s in _walk_statements(prog.body) if isinstance(s, P.Assign) and s.augmented]
        if aug:
            names = sorted({s.target for s in aug})
            on_leaf = [n for n in names if n in prog.free]
            text = (
                f"{', '.join(n + ' += ...' for n in names)} (and -=, *=, /=) runs out of place, as "
                f"{names[0]} = {names[0]} + ...: a new tensor. In PyTorch an in-place += on a tensor that "
                "autograd saved for backward raises 'one of the variables needed for gradient computation has "
                "been modified by an inplace operation'"
            )
            if on_leaf:
                text += (
                    f"; on the leaf {on_leaf[0]!r} it raises 'a leaf Variable that requires grad is being used in an "
                    "in-place operation'"
                )
            add(Note("augmented_assignment", text + "."))
        for c in fwd.control:
            line = prog.source.count("\n", 0, c.span[0]) + 1
            add(
                Note(
                    "control_flow",
                    f"line {line}: {_control_text(c.kind, c.count)}; the graph (and so J) records only "
                    "the path taken at these inputs.",
                )
            )


# the size of Jᵀv's terms per leaf, from a route: known up front (matrix calculus), or a function that gives
# it when a check fails without it (the elementwise route)
Sizes = dict[str, Any] | Callable[[], dict[str, Any]]

_SYM = ".grad from backward(v) vs Jᵀv from sympy's exact derivatives"
_JTV = ".grad from backward(v) vs Jᵀv from the explicit Jacobian"
_JAC = "explicit Jacobian (autodiff) vs sympy's exact derivatives, entry by entry"
_FD = ".grad from backward(v) vs Jᵀv from central differences of the program in float64 (no autograd)"
_FD_DIR = "<u, .grad> from backward(v) vs (f(x + hu) - f(x - hu))/2h · v, central differences in float64"
# the second weighing after a disagreement: this many units of roundoff (eps of the dtype) of the size of
# the terms autograd adds up. A bound on rounding, not a new rtol: a gradient off by more still disagrees
ROUNDOFF_UNITS = 16
# the singularity lint runs on programs that compute at most this many elements (a second, gradient-free
# pass over the trace), and on any size where a grad is nan or inf
LINT_WORK = 100_000


def _first_line(err: BaseException) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


def _saved_tensors(out: Any) -> list[str]:
    """What the graph behind `out` saved for backward, as 'ExpBackward0: result', one per node."""
    seen: set[int] = set()
    stack, found = [out.grad_fn], []
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        names = [a.removeprefix("_saved_") for a in dir(node) if a.startswith("_saved_")]
        if names:
            found.append(f"{type(node).__name__}: {' and '.join(names)}")
        stack += [nf for nf, _ in node.next_functions]
    return found[:8]


def _flatten(x: Any) -> list[float]:
    out: list[float] = []
    stack = [x]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(reversed(item))
        else:
            out.append(float(item))
    return out


def _expected_check(exp: Any, prog: P.Program, out: Any, grads: dict[str, Any], fwd: Any, where: str) -> Check:
    """The run against the numbers the source document printed (an expression file's [expect])."""
    import torch

    from .engine.compare import compare_tensors
    from .result import Tolerance

    wanted: list[tuple[str, Any, Any]] = []
    if exp.output is not None:
        wanted.append((prog.output, out, exp.output))
    for name, numbers in (exp.grads or {}).items():
        if name not in grads:
            raise FileFormatError(
                f"{where}: key 'expect.grads.{name}': {name!r} is not a leaf of the program ({', '.join(grads)})."
            )
        wanted.append((f"{name}.grad", grads[name], numbers))
    items = []
    for label, tensor, numbers in wanted:
        want = _flatten(numbers)
        if tensor.numel() != len(want):
            raise FileFormatError(
                f"{where}: [expect]: {label} has {tensor.numel()} element(s) but the file lists {len(want)} number(s)."
            )
        items.append((label, tensor.detach().cpu(), torch.tensor(want, dtype=torch.float64).reshape(tensor.shape)))
    if exp.loops is not None:
        counts = [c.count for c in fwd.control if c.kind != "if"]
        if len(counts) != len(exp.loops):
            raise FileFormatError(
                f"{where}: [expect]: 'loops' lists {len(exp.loops)} loop(s) but the run went through {len(counts)}."
            )
        items.append(("loop iterations", torch.tensor(counts, dtype=torch.float64), torch.tensor(exp.loops).double()))
    return compare_tensors(
        "expected",
        "the run vs the numbers the source printed ([expect] of the file)",
        items,
        Tolerance(exp.rtol, exp.atol),
    )


def _output_hint(prog: P.Program, env: dict[str, Any], torch: Any) -> str:
    others = [
        n
        for n in prog.assigned
        if n != prog.output and n in env and isinstance(env[n].v, torch.Tensor) and env[n].v.requires_grad
    ]
    if others:
        return (
            f"The output is the last variable assigned ({prog.output!r}); to differentiate another one, "
            f"name it: --output {others[-1]}."
        )
    return "Use the leaves in the output, or pass them with --NAME/--var instead of --const."


def _walk_statements(body: tuple[P.Stmt, ...]) -> list[P.Stmt]:
    out: list[P.Stmt] = []
    stack = list(reversed(body))
    while stack:
        s = stack.pop()
        out.append(s)
        if isinstance(s, P.If):
            stack += list(reversed(s.orelse)) + list(reversed(s.body))
        elif isinstance(s, P.While | P.For):
            stack += list(reversed(s.body))
    return out


def _float32_hint(failed: list[str], fwd: Any, leaves: dict[str, Any], torch: Any) -> str:
    """What to try when a float32 run disagrees with the exact routes: float64, and whether the program's
    values come near the edges of float32's range (where squares and products underflow or overflow)."""
    tiny, huge = math.inf, 0.0
    values = [*leaves.values(), *(getattr(val, "v", None) for val in fwd.env.values())]
    for t in values:
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel():
            a = t.detach().abs().double().reshape(-1)
            a = a[torch.isfinite(a)]
            if a.numel():
                huge = max(huge, float(a.max()))
                if bool((a > 0).any()):
                    tiny = min(tiny, float(a[a > 0].min()))
    text = (
        f"the {' and '.join(failed)} check{'s disagree' if len(failed) > 1 else ' disagrees'} in float32, which "
        "keeps about 7 significant digits "
        "between 1.2e-38 and 3.4e38"
    )
    if tiny < 1e-19 or huge > 1e19:
        edge = f"{tiny:.3g}" if tiny < 1e-19 else f"{huge:.3g}"
        text += (
            f": values of the program here reach {edge}, whose square (in x*x, a norm, a product) is out of "
            "that range, so torch's float32 result loses its digits there"
        )
    return text + ". Run with --dtype float64: if it agrees there, the difference is float32's, not autograd's."


def _control_text(kind: str, count: int) -> str:
    if kind == "if":
        return "the if took its " + ("first branch" if count else "else branch")
    return f"the {kind} loop ran {count} time" + ("" if count == 1 else "s")


def _step_shape(fwd: Any, s: Any) -> tuple[int, ...]:
    val = fwd.env.get(s.target)
    return tuple(getattr(val.v, "shape", ())) if val is not None else ()


def _huge_columns(sym: Any, v: Any) -> dict[str, Any]:
    """Per leaf of the per-element route with an exact entry beyond float64 (2**(10**10)): the grad elements
    whose Jᵀv takes such an entry with v != 0, finite exactly though the float64 sum reads inf."""
    nz = v.detach().reshape(-1).cpu() != 0
    out = {}
    for n, entries in sym.huge.items():
        if entries:
            J = sym.matrix(n)
            out[n] = ((~J.isfinite() & sym.finite_mask(n)) & nz[:, None]).any(0)
    return out


def _larger(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Per leaf, the elementwise larger of two size estimates (where only one exists, that one)."""
    import torch

    return {n: torch.maximum(a[n], b[n].to(a[n].dtype)) if n in a and n in b else a.get(n, b.get(n)) for n in {*a, *b}}


def _magnitudes(v: Any, jacs: dict[str, Any], calls: int) -> dict[str, Any]:
    """Per leaf element, Σᵢ |v[i]·∂y[i]/∂x[j]|: the size of the terms a grad element sums, for tolerances."""
    out = {}
    av = None  # |v|, made only for a leaf that needs it
    for n, j in jacs.items():
        # a diagonal block has one term per element: Σ|v·J| is |v[k]·J[k,k]|, the size of the reference
        # itself, which the comparison already uses; no full-size magnitude array is needed
        if j.diagonal is None and j.full is not None:
            if av is None:
                av = v.detach().abs().reshape(-1).nan_to_num(0.0, 0.0, 0.0)
            leaf_shape = j.full.shape[v.dim() :]
            jm = j.full.detach().abs().reshape(av.numel(), -1).nan_to_num(0.0, 0.0, 0.0)
            m = (av @ jm).reshape(leaf_shape)
            out[n] = m * calls if calls > 1 else m
    return out


__all__ = ["Request", "explore"]
