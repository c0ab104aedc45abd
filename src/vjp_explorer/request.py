"""What one exploration is asked to do: the program, its values, v and the options, as plain fields.

The CLI and expression files both build a Request; `api.explore` takes one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import Origin
from .language.values import ValueSpec
from .limits import DEFAULT_LIMITS, Limits

ValueLike = str | float | int | list[Any] | ValueSpec


KEYWORDS = {"grad": "gradient"}  # explore()'s word for a request field, where the two differ


@dataclass
class Origins:
    """Where each value of a request came from, so that messages point there (errors.Origin).

    Keys: program, grad, upstream, output, dtype, seed, backward_calls, device, inputs.NAME,
    constants.NAME. A key with no entry is named as the Python API names it. A front end with its own
    words (the command line, an expression file) subclasses this or fills `given`.
    """

    given: dict[str, Origin] = field(default_factory=dict)

    def of(self, key: str) -> Origin:
        if key in self.given:
            return self.given[key]
        table, _, name = key.partition(".")
        where = f"{'values' if table == 'inputs' else 'consts'}[{name!r}]" if name else KEYWORDS.get(key, key)
        return Origin(where)

    def missing(self, name: str) -> str:
        """How to give the program's free name `name`, which has no value."""
        return f"give it in values ({name}=...), or in consts for a constant"


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
    surface: str = "api"  # who asked: "api" (Python) or "cli"; texts name options in its words (wording.py)
    progress: Callable[[str], None] | None = None  # told what the run starts doing next (the CLI's status line)
    latex: bool = False  # formulas of `explain` as LaTeX
    origins: Origins = field(default_factory=Origins)  # where each value came from, for messages
    expected: Any = None  # language.files.Expected: numbers a source printed, checked as "expected"
    expected_dropped: bool = False  # the file had [expect], but options overrode what it was for
    more_grads: tuple[ValueLike, ...] = ()  # a second, third ... --grad: linearity (docs/probes.md)
    upstream: str | None = None  # --upstream: v = dL/dy for this loss, written in y
    graph: bool = False  # --graph, --dot: the backward graph of the real call (engine/program_graph.py)
    code: bool = False  # --code DIR: the backward call as a script (engine/backward_capture.py, backward_code/)
