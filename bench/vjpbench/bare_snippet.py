"""The baseline for (s): a seed snippet run by plain Python with torch, as a script, nothing else.

Usage: python bare_snippet.py FILE.py   # seeded with torch.manual_seed(0), prompts of a REPL transcript
                                        # removed, left through os._exit as vjp does (same fast exit)
"""

from __future__ import annotations

import os
import sys

import torch


def code_of(text: str) -> str:
    lines = text.splitlines()
    if not any(line.startswith(">>>") for line in lines):
        return text
    return "\n".join(line[4:] for line in lines if line.startswith((">>> ", "... "))) + "\n"


if __name__ == "__main__":
    torch.manual_seed(0)
    with open(sys.argv[1], encoding="utf-8") as f:
        source = code_of(f.read())
    namespace = {"torch": torch, "__name__": "__main__"}
    exec(compile(source, sys.argv[1], "exec"), namespace)  # the benchmark's own baseline, on our seed files
    sys.stdout.flush()
    os._exit(0)
