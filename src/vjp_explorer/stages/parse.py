"""Parse: the request's program text into the IR (language.program), errors pointing where it came from.

Inputs: the request. Output: the Program.
"""

from __future__ import annotations

from ..errors import VjpError
from ..language import program as P
from ..language.parser import parse_program
from ..request import Request


def parse_request(req: Request) -> P.Program:
    """The program of the request; a marker under its text is labelled with where the text came from."""
    try:
        return parse_program(req.program, req.output, req.limits, req.origins.of("output"))
    except VjpError as e:
        if e.source == req.program and e.origin is None:
            e.label = req.origins.of("program").where
        raise
