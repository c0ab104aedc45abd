"""Backward as code (`--code DIR`): the formula table keyed by autograd's node names, the script writer, and
the files it writes and runs."""
