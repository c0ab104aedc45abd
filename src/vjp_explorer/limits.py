"""Resource limits, checked before work is done. Defaults are documented in docs/limits.md."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class Limits:
    """Every bound the tool enforces; change one with `--limit NAME=VALUE`."""

    program_chars: int = 20_000  # length of the program text, checked before ast.parse
    nodes: int = 5_000  # syntax nodes in the program
    depth: int = 60  # nesting depth of expressions
    statements: int = 500  # statements in the program text
    call_operands: int = 16  # tensor operands of one call (einsum, cat, stack)
    iterations: int = 10_000  # loop iterations, all loops together
    steps: int = 50_000  # executed assignments, all together
    literal: float = 1e15  # largest magnitude of a number literal
    elements: int = 50_000_000  # elements of any one value or intermediate tensor
    memory_bytes: int = 8_000_000_000  # the forward's estimate: 3 x the size of every result, all together
    multiply_adds: int = 100_000_000_000  # matrix products' multiply-adds (x3 for backward; the Jacobian's)
    value_chars: int = 2_000_000  # length of one value's text
    value_depth: int = 32  # nesting depth of a nested-list value
    file_bytes: int = 1_048_576  # size of an expression file
    file_depth: int = 16  # nesting of tables/arrays in an expression file
    jacobian_entries: int = 25_000_000  # entries of one materialised Jacobian
    jacobian_bytes: int = 400_000_000  # bytes of all materialised Jacobians together
    symbolic_entries: int = 20_000  # out x in entries the per-element sympy check handles
    symbolic_cost: int = 100_000  # estimated sympy work (expression nodes x symbols), decided before diff
    symbolic_seconds: float = 10.0  # wall-clock budget of the sympy check
    snippet_chars: int = 200_000  # length of a snippet's text
    snippet_nodes: int = 50_000  # syntax nodes of a snippet
    snippet_output_chars: int = 2_000_000  # characters a snippet prints
    snippet_seconds: float = 60.0  # wall-clock budget of a whole snippet
    # the confined child (confined/): enforced by the kernel (rlimits) and the parent's clock
    snippet_memory_bytes: int = 4_000_000_000  # private memory of the snippet's process (RLIMIT_DATA)
    snippet_cpu_seconds: int = 600  # CPU time of the snippet's process, all its threads together (RLIMIT_CPU)
    snippet_file_bytes: int = 1_000_000_000  # size one file in the scratch folder may grow to (RLIMIT_FSIZE)
    snippet_open_files: int = 256  # file descriptors the snippet's process may hold at once (RLIMIT_NOFILE)
    # the parent's own bounds on the child (confined/launch.py): what it may leave on disk and send back
    snippet_scratch_bytes: int = 2_000_000_000  # all files and folders of the scratch folder together
    snippet_events: int = 100_000  # backward/grad events the parent accepts from one run
    snippet_event_bytes: int = 100_000_000  # bytes of all event frames of one run together (docs/confinement.md)
    # bytes of all the calls' records one run sends to the judge (not events: the parent passes each on and
    # keeps none); past it a call is sent without its record and its check is skipped, saying so
    snippet_record_bytes: int = 2_000_000_000
    snippet_explained_calls: int = 50  # backward/grad calls explained in full (Jacobian and checks)
    snippet_jacobian_rows: int = 128  # output elements of an event's explicit Jacobian (one-hot v, batched)
    finite_difference_evals: int = 200  # program evaluations for the full finite-difference Jacobian
    finite_difference_work: int = 10_000_000  # elements computed in all by the finite-difference evaluations
    # leaf or output elements past which the forward-mode adjoint check (jvp) runs only where no independent
    # route (sympy, finite differences) decided: at 10^7 it costs about a forward and a backward more
    jvp_elements: int = 1_000_000

    def with_overrides(self, items: dict[str, str]) -> Limits:
        """A copy with `name=value` overrides; raises ValueError naming a bad one."""
        known = {f.name: f for f in fields(self)}
        changes: dict[str, float | int] = {}
        for key, text in items.items():
            norm = key.replace("-", "_")
            if norm not in known:
                raise KeyError(key)
            kind = type(getattr(self, norm))
            try:
                number = float(text)
            except ValueError:
                raise ValueError(f"{key}={text!r} is not a number") from None
            if not math.isfinite(number) or not number > 0:
                raise ValueError(f"{key} must be positive and finite, not {text!r}")
            if kind is int and (not number.is_integer() or number > 2**62):
                raise ValueError(f"{key} must be a whole number below 2**62, not {text!r}")
            low, high = _RANGES.get(norm, (0, math.inf))
            if not low <= number <= high:
                low_text = f"{int(low):,}" if float(low).is_integer() else f"{low:g}"
                span = f"from {low_text} to {high:g}" if high < math.inf else f"{low_text} or more"
                raise ValueError(f"{key} must be {span}, not {text!r}{_WHY.get(norm, '')}")
            value = int(number) if kind is int else number
            changes[norm] = value
        return replace(self, **changes)  # type: ignore[arg-type]


# limits with a range of their own: the sympy budget is a timer (setitimer), which reads below a
# millisecond as "no timer at all" and past the platform's time_t as an error; the snippet's process starts
# Python and torch before it reads a byte of the snippet (about 300 MB, a dozen files at once), so a limit
# below what that takes would end it before the snippet ran
_RANGES = {
    "symbolic_seconds": (0.001, 1e6),
    "snippet_memory_bytes": (250_000_000, math.inf),
    "snippet_open_files": (16, math.inf),
}
_WHY = {
    "snippet_memory_bytes": ": the snippet's process needs about 200 MB for Python and torch before the snippet runs",
    "snippet_open_files": ": the snippet's process opens about a dozen files to start Python and torch",
}

DEFAULT_LIMITS = Limits()


def limit_names() -> list[str]:
    """The names of all limits, for help and error messages."""
    return [f.name for f in fields(Limits)]
