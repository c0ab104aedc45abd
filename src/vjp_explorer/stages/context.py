"""What the stages of one run share: the request, its limits, the clock, and facts found on the way.

The facts are those a later stage reads: whether v is ones, which checks were weighed again, where a wrong
nan entered.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ..limits import Limits
from ..request import Request

# what a run does after each lap, for Request.progress: a stage's name is recorded when it ends
NEXT = {
    "parse": "reading the values",
    "values": "importing torch",
    "import torch": "making the inputs",
    "inputs": "running the program",
    "forward": "building the Jacobians",
    "jacobian": "calling backward(v)",
    "basis rows": "checking the probe",
    "probe": "calling backward(v)",
    "backward": "checking: .grad against Jᵀv from J",
    "jtv check": "checking: where derivatives are singular",
    "singularity lint": "checking: sympy's exact derivatives",
    "symbolic": "checking: finite differences",
    "finite differences": "putting the result together",
}


@dataclass
class RunContext:
    """The shared state of one run; every stage that needs more takes it as an argument."""

    req: Request
    t0: float = field(default_factory=time.perf_counter)
    timings: dict[str, float] = field(default_factory=dict)
    v_ones: bool = False  # v is torch.ones_like(out) (--grad ones, or a scalar output's default)
    reweighed: list[str] = field(default_factory=list)  # checks that agree only when weighed at their terms' size
    origin: Any = None  # engine.nonfinite.Origin: where a wrong nan or inf entered the backward pass
    singular: list[str] = field(default_factory=list)  # operations whose derivative is infinite or undefined here
    upstream_loss: float | None = None  # --upstream: L at the output's value
    recorder: Any = None  # engine.program_graph.RecordingInterpreter, with --graph: the backward graph it saw
    # () -> per leaf, Σ|terms| backward adds up (engine/term_sizes.py), computed on first use and kept
    backward_terms: Any = None
    jacobian_terms: Any = None  # () -> per leaf, the same per entry of J (m × n), or {}
    # per leaf, the finite differences' Jᵀv (as .grad holds it; nan where they are no reference), where
    # the route built every column of J
    finite_difference: dict[str, Any] = field(default_factory=dict)
    _terms: dict[str, Any] | None = None

    def terms(self) -> dict[str, Any]:
        """Per leaf, the size of the terms backward adds up (once per run; {} where it cannot be had)."""
        if self._terms is None:
            self._terms = {} if self.backward_terms is None else self.backward_terms()
        return self._terms

    @property
    def limits(self) -> Limits:
        return self.req.limits

    def lap(self, name: str, since: float) -> float:
        """Record the time since `since` under name; returns now, the start of the next lap."""
        now = time.perf_counter()
        self.timings[name] = round(now - since, 6)
        if self.req.progress is not None and name in NEXT:
            self.req.progress(NEXT[name])
        return now

    def left(self, since: float, floor: float) -> float:
        """What is left of the sympy budget (symbolic_seconds) after the time since `since`, at least `floor`."""
        return max(floor, self.limits.symbolic_seconds - (time.perf_counter() - since))
