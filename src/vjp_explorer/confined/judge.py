"""The judge: the checks of a snippet's calls, in a confined process of its own that never runs the
snippet's code: `python -I -m vjp_explorer.confined.judge`, started by judging.py beside the snippet's child.

It confines itself as the child does (sandbox.confine, before torch starts a thread), says "ready", imports
torch, then reads call records (calls.EVENT, checked by the parent) on stdin and answers each with a
verdict (calls.VERDICT, made by verdict.py) on its message pipe. It imports nothing of the snippet's.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from . import protocol, sandbox
from .child import CONFIG_LIMIT, limits_from
from .kernel import ConfinementUnavailable

# bytes of one record frame from the parent (it checked the record already): the record and its event
RECORD_LIMIT = protocol.MAX_RECORD_FRAME + protocol.MAX_FRAME


def main() -> int:
    config = protocol.read_frame(0, CONFIG_LIMIT)
    if config is None or config.get("type") != "config":
        return 3
    out = int(config["message_fd"])
    abi = 0
    if not config["trust"]:
        try:
            abi = sandbox.confine(Path(config["scratch"]), [], limits_from(config["limits"]), int(config["parent_pid"]))
        except ConfinementUnavailable as e:
            protocol.write_frame(out, {"type": "unavailable", "reason": e.reason})
            return 0
    protocol.write_frame(out, {"type": "ready", "confined": not config["trust"], "landlock_abi": abi})
    import torch  # after the confinement: its import starts threads, which confine() must not find

    from .verdict import verdict

    torch.set_num_threads(1)  # the snippet's child has the other core
    while True:
        frame = protocol.read_frame(0, RECORD_LIMIT)
        if frame is None or frame.get("type") != "record":
            return 0
        answer = verdict(frame["event"])
        try:
            protocol.write_frame(out, {"type": "verdict", "verdict": answer})
        except protocol.FrameTooLarge:
            answer["jtv"] = answer["jacobian"] = answer["finite_difference"] = [None] * len(answer["jtv"])
            answer["reference"] = [None] * len(answer["reference"])
            protocol.write_frame(out, {"type": "verdict", "verdict": answer})


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)
