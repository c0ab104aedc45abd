"""The vjp benchmark suite: whole-process cost, Jacobian and symbolic-check timings (see bench/README.md)."""
