"""The stages of one exploration, each a module with explicit inputs and outputs.

In order: bind values, forward (and v), probe, the backward call(s), the exact routes, checks, notes, and
the assembly of the plain Result (api.explore runs them).
"""
