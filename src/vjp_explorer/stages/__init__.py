"""The stages of one exploration, each with explicit inputs and outputs: bind values, forward, v, backward
calls, Jacobians, the exact routes, checks, notes, and the assembly of the plain Result."""
