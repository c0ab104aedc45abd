"""The parent's side of the judge: start its confined process beside the snippet's child, hand it each
call's record, and put its checks (only its checks) into the events the view shows.

The snippet's process may have rewritten anything of ours inside it: its checks are ignored, its events are
taken as claims. `Judge.take` checks an event against the schema (calls.validate_event; anything else is a
broken channel) and passes its record on; `Judge.settle` waits for the verdicts (within the run's clock),
replaces each event's checks with the judge's, and says which calls are unverified, and why: a record the
judge found inconsistent, a backward call the observer saw start whose event never came, a backward that
changed a leaf's .grad unobserved. A run with one never ends with exit 0 (snippet/door.py).
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, cast

from ..calls import CHECKED_IN_CHILD, RecordError, Verdict, validate_event, validate_record, validate_verdict
from ..limits import Limits
from . import protocol
from .payload import joined
from .protocol import FrameReader, ProtocolError, safe_text

# the calls whose checks only the judge makes: backward calls, and the functional calls whose result is
# Jᵀv, J, Ju or ∂²f/∂x² (confined/functional_judged.py); the other functional calls' checks still come from
# the child, and so do these calls' forms the judge has no reference for (calls.CHECKED_IN_CHILD)
FUNCTIONAL = (
    "torch.autograd.functional.vjp",
    "torch.autograd.functional.jacobian",
    "torch.autograd.functional.hessian",
    "torch.autograd.functional.jvp",
    "torch.autograd.forward_ad.unpack_dual",
    "torch.func.vjp",
    "torch.func.jvp",
    "torch.func.linearize",
    "torch.func.vmap",
    "torch.func.grad",
    "torch.func.jacrev",
    "torch.func.jacfwd",
    "torch.func.hessian",
)
# autograd.grad inside the snippet's own vmap: a backward call with a batch of v (functional_judged.batch_record)
BATCHED = "torch.autograd.grad in torch.vmap"
JUDGED = (
    "Tensor.backward",
    "torch.autograd.backward",
    "torch.autograd.grad",
    "engine.run_backward",
    BATCHED,
    *FUNCTIONAL,
)
_LIMITS = ("snippet_memory_bytes", "snippet_cpu_seconds", "snippet_file_bytes", "snippet_open_files")
FD = "the call's grads vs Jᵀv from central differences of the replayed forward (float64, no autograd)"
# bytes of records handed to the judge's writer but not yet written to its pipe: past it the parent waits
# (and the child with it), so what it holds of records stays bounded however long the run
IN_FLIGHT = protocol.MAX_RECORD_FRAME  # (one record past it still goes: the judge takes one at a time anyway)


@dataclass
class Calls:
    """What the observer said about calls besides their events: started, ended, unobserved backward passes."""

    started: dict[int, int] = field(default_factory=dict)  # started call -> its line
    ended: dict[int, bool] = field(default_factory=dict)  # started call -> whether backward returned
    reported: set[int] = field(default_factory=set)  # started calls whose event came
    unobserved: list[str] = field(default_factory=list)  # what the child said of a backward it did not observe


class Judge:
    """One judge process for one snippet run."""

    def __init__(self, limits: Limits, trust: bool, deadline: float | None = None) -> None:
        self.limits, self.trust = limits, trust
        self.verdicts: dict[int, Verdict] = {}
        self.failure: str | None = None  # why the judge could not answer (its answers are then skipped checks)
        self.calls = Calls()
        self._queue: queue.Queue[bytes | None] = queue.Queue()
        self.proc: subprocess.Popen[bytes] | None = None
        self._pending: tuple[int | None, Any] | None = None  # the record frame before its event: (call, record)
        self._room = threading.Condition()  # the writer's progress: in_flight shrinks
        self.in_flight = 0  # bytes queued for the judge, not yet written
        self.peak_in_flight = 0
        self.deadline = time.monotonic() + limits.snippet_seconds if deadline is None else deadline  # the run's

    def start(self) -> None:
        """Start the judge now, so that its import of torch overlaps the child's."""
        self.scratch = tempfile.mkdtemp(prefix="vjp-judge-")
        message_r, message_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-m", "vjp_explorer.confined.judge"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd=self.scratch,
                env=_environment(self.scratch),
                start_new_session=True,
                close_fds=True,
                pass_fds=(message_w,),
            )
        finally:
            os.close(message_w)
        self._message_fd = message_r
        config = {
            "type": "config",
            "message_fd": message_w,
            "scratch": self.scratch,
            "read_dirs": [],
            "limits": {name: getattr(self.limits, name) for name in _LIMITS},
            "trust": self.trust,
            "parent_pid": os.getpid(),
        }
        data = protocol.encode(config)
        self.in_flight += len(data)  # the writer takes off what it wrote, this too
        self._queue.put(data)
        self._writer = threading.Thread(target=self._write, daemon=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._writer.start()
        self._reader.start()

    # ---------------------------------------------------------------- what the child says

    def take(self, frame: dict[str, Any]) -> None:
        """A frame of the child about calls: checked (RecordError: a broken channel), a record passed on."""
        kind = frame["type"]
        if kind == "started":
            self.calls.started[frame["call"]] = frame["line"]
        elif kind == "ended":
            self.calls.ended[frame["call"]] = frame["ok"]
        elif kind == "unobserved":
            self.calls.unobserved.append(f"line {frame['line']}: {safe_text(frame['what'][:500])}")
        elif kind == "record":  # the record of the call whose event comes next
            self._pending = (frame["call"], validate_record(frame["record"]))
        elif kind == "record_over":  # a record past snippet_record_bytes, left undecoded (protocol.FrameReader)
            self._pending = (None, None)
        elif kind == "event":
            event = validate_event(frame["event"])
            if event["started"] is not None:
                self.calls.reported.add(event["started"])
            self._hand(cast(dict[str, Any], event))

    def _hand(self, event: dict[str, Any]) -> None:
        """Pass the event's record (sent before it, or, as a forged event may, inside it) to the judge, and
        keep of it only what merge() reads: the record itself is let go once written to the judge's pipe."""
        pending, self._pending = self._pending, None
        record = event["record"]
        why = None
        if record is None and pending is not None and pending[0] == event["index"]:
            record = pending[1]
        elif record is None and pending == (None, None):
            why = (
                f"not checked: the records this run sent to the judge passed {self.limits.snippet_record_bytes:,} "
                "bytes, the limit (--limit snippet_record_bytes=N raises it)"
            )
        if record is not None and self.proc is not None and not _own(record, event["call"]):
            why = self._queued({"type": "record", "event": {**event, "record": record}})
        if record is None and why is None:
            event["record"] = None
            return
        hook, customs = (record["hook"], record["customs"]) if record is not None else (None, [])
        own = record is not None and _own(record, event["call"])
        second = record is not None and record.get("second") is not None
        tangent = record is not None and record.get("tangent") is not None
        # what merge() reads of it
        event["record"] = {
            "hook": hook,
            "customs": customs,
            "why": why,
            "own": own,
            "second": second,
            "tangent": tangent,
        }

    def _queued(self, message: dict[str, Any]) -> str | None:
        """The judge's frame queued for the writer, once the bytes in flight leave room for it (the parent
        waits for the judge, until the run's deadline); why it was dropped instead, or None."""
        data = protocol.encode(message)
        with self._room:
            while self.in_flight and self.in_flight + len(data) > IN_FLIGHT:
                left = self.deadline - time.monotonic()
                if not self._writer.is_alive():
                    return f"not checked: {self.failure or 'the judge stopped reading'}"
                if left <= 0:
                    return "not checked: the judge fell behind the snippet until the run's time was up"
                self._room.wait(min(left, 0.5))
            self.in_flight += len(data)
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        self._queue.put(data)
        return None

    def _write(self) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            while (data := self._queue.get()) is not None:
                self.proc.stdin.write(data)
                self.proc.stdin.flush()
                with self._room:
                    self.in_flight -= len(data)
                    self._room.notify_all()
                del data  # the record's bytes go now, not with the next one
        except (BrokenPipeError, OSError):
            pass
        finally:
            try:
                self.proc.stdin.close()
            except OSError:
                pass

    def _read(self) -> None:
        reader = FrameReader()
        ready = False
        try:
            while data := os.read(self._message_fd, 1 << 16):
                for frame in reader.feed(data):
                    if not ready:
                        if frame["type"] != "ready":
                            self.failure = safe_text(str(frame.get("reason", "the judge could not start")))
                            return
                        ready = True
                    elif frame["type"] == "verdict":
                        v = validate_verdict(frame["verdict"])
                        self.verdicts[v["call"]] = v
            reader.close()
            if not ready:
                self.failure = "the judge's process ended before it was ready"
        except (ProtocolError, RecordError, OSError) as e:
            self.failure = f"the judge's answer was unreadable ({e})"

    # ---------------------------------------------------------------- the end

    def settle(self, events: list[tuple[int, dict[str, Any]]], deadline: float, stopped: bool) -> list[str]:
        """Wait for the verdicts (until `deadline`), put them into `events`; the unverified calls, in words."""
        self._queue.put(None)
        if self.proc is not None:
            self._reader.join(max(0.0, deadline - time.monotonic()))
            if self._reader.is_alive():
                self.failure = self.failure or "the judge ran out of the snippet's time (--limit snippet_seconds=N)"
            self.end()
        unverified: list[str] = []
        for _, event in events:
            why = self._merge(event)
            if why is not None:
                unverified.append(f"call {event['index']} ({event['call']}, line {event['line']}): {why}")
        if not stopped:  # a run the tool stopped ended mid-call: its last call is explained by why it stopped
            for k, line in self.calls.started.items():
                if k not in self.calls.ended:
                    unverified.append(f"a backward call at line {line} was seen starting but never ending")
                elif self.calls.ended[k] and k not in self.calls.reported:
                    unverified.append(
                        f"a backward call at line {line} ran, but its event never came: something in the snippet's "
                        "process dropped it"
                    )
        unverified += [f"an unobserved backward call ({u})" for u in self.calls.unobserved]
        return unverified

    def _merge(self, event: dict[str, Any]) -> str | None:
        """The judge's checks in place of the child's; why the call is unverified, or None."""
        own = event["record"] is not None and event["record"]["own"]
        if event["call"] in JUDGED and event["record"] is not None and event["index"] not in self.verdicts and not own:
            why = event["record"].get("why") or f"not checked: {self.failure or 'the judge gave no verdict for it'}"
            event.pop("record")
            event["checks"] = [_skipped(why)]
            return None  # the judge's own budget or failure: a skipped check, never a verdict
        return merge(event, self.verdicts.get(event["index"]))

    def end(self) -> None:
        """The judge killed (its answers are all in, or too late), reaped, its scratch folder removed."""
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # its own group: start_new_session
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
            self.proc = None
            self._reader.join(5.0)  # at end of file now that the judge is gone
            os.close(self._message_fd)
            shutil.rmtree(self.scratch, ignore_errors=True)  # the judge runs no snippet code: plain files


def _environment(scratch: str) -> dict[str, str]:
    """The judge's environment: what Python needs, one thread (the snippet's child has the other core), and
    the thread counts the child's kernels may run with (the user's setting, else the cores: torch takes the
    physical ones), for the rounding of a float32 reduction split among them."""
    given = next((os.environ[v] for v in ("TORCH_NUM_THREADS", "OMP_NUM_THREADS") if os.environ.get(v)), "")
    cores = min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 64)
    threads = given if given.isdigit() else f"{cores},{max(1, cores // 2)}"
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": scratch,
        "TMPDIR": scratch,
        "LC_ALL": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "VJP_SNIPPET_THREADS": threads,
    }


# the calls whose result is Ju by forward mode: their reference is the judge's only
_TANGENTS = (
    "torch.func.jvp",
    "torch.func.linearize",
    "torch.autograd.functional.jvp",
    "torch.autograd.forward_ad.unpack_dual",
)
# the functional calls whose results are Jᵀv itself, one block per input (J's calls go as a contraction)
_JTV_RESULTS = ("torch.autograd.functional.vjp", "torch.func.vjp", "torch.func.grad")


def paired(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events among an observer's frames, each with its record (sent in a frame of its own just before
    it) put back in: what a judge in this very process reads (the %%vjp magic's)."""
    events, pending = [], None
    for frame in frames:
        if frame["type"] == "record":
            pending = frame
        elif frame["type"] == "event":
            event = frame["event"]
            if event["record"] is None and pending is not None and pending["call"] == event["index"]:
                event["record"] = pending["record"]
            events.append(event)
            pending = None
    return events


def merge(event: dict[str, Any], verdict: Verdict | None) -> str | None:
    """One event of the child with the judge's verdict on it: the judge's checks in place of any the child
    sent, the arrays the view shows beside the grads, what follows from the checks; why the call is
    unverified (a judged call without its record, or one the judge found inconsistent), or None."""
    record = event.pop("record")
    if event["call"] not in JUDGED:
        return None  # a functional call: checked in the child still (docs/confinement.md says so)
    if record is not None and _own(record, event["call"]):  # a derivative of a derivative: the child's check
        event["notes"].append(
            "Checked in the snippet's own process (differences of its function), not by the judge, which has no "
            "reference for this form of call yet: this check is the snippet's word."
        )
        return None
    if record is None or verdict is None:
        event["checks"] = [_skipped("the call came without its record: nothing to replay")]
        return "it came without the record of its forward"
    event["checks"] = verdict["checks"]
    if event["call"] in _TANGENTS:  # Ju: the judge's reference beside the results, or none; never the child's
        event["reference"] = []
    arrays = zip(verdict["jtv"], verdict["jacobian"], verdict["finite_difference"], verdict["omitted"], strict=True)
    for x, (jtv, jac, fd, omitted) in zip(event["inputs"], arrays, strict=False):
        x["jtv"], x["jacobian"], x["finite_difference"] = jtv, jac, fd
        x["omitted"] += omitted
    for note in verdict["notes"]:
        event["notes"] = joined(event["notes"], note)
    if record.get("tangent"):  # Ju: the judge's reference beside the results, never the child's
        refs = verdict["reference"]
        event["reference"] = [
            {**r, "dtype": "float64", "values": ref}
            for r, ref in zip(event["results"], refs, strict=False)
            if ref is not None and len(refs) == len(event["results"])
        ]
    elif event["call"] in _JTV_RESULTS and not record.get("second"):  # the judge's reference beside the results
        fds = verdict["finite_difference"]
        event["reference"] = [
            {**r, "dtype": "float64", "values": fd}
            for r, fd in zip(event["results"], fds, strict=False)
            if fd is not None and len(fds) == len(event["results"])
        ]
    _after(event, record)
    return verdict["unverified"]


def _own(record: dict[str, Any], call: str) -> bool:
    """Whether a record (whole, or as the parent keeps it) says its call was checked in the child itself:
    believed of a functional call only (a backward call's checks are the judge's, whatever its record says)."""
    whole = record.get("forward", 0) is None and record.get("unreplayable") == CHECKED_IN_CHILD
    return call in FUNCTIONAL and (bool(record.get("own")) or whole)


def _after(event: dict[str, Any], record: dict[str, Any]) -> None:
    """What follows from the judge's checks: a hook of the snippet that changed the gradient (a difference
    by its design), the custom Function to suspect, and whether finite differences see a non-finite grad too."""
    checks = event["checks"]
    bad = any(c["status"] == "disagree" for c in checks)
    nonfinite = event["diagnosis"]  # the child's word on a nan or inf grad, where the call has one
    if record["hook"] is not None and bad:
        why = "a hook of the snippet changed the gradient on its way, so .grad is not Jᵀv by design"
        for c in checks:
            if c["status"] == "disagree":
                c["status"], c["reason"] = "skipped", f"{why}; {c['reason']}" if c["reason"] else why
        event["notes"].append(
            f"A hook of the snippet ({record['hook']}) changed a gradient during this call: {why[46:]}."
        )
        bad = False
    if record["customs"] and bad:
        what, which = (
            ("derivative Ju", "jvp (its forward-mode formula)") if record.get("tangent") else ("gradient", "backward")
        )
        event["diagnosis"] = (event["diagnosis"] + " " if event["diagnosis"] else "") + (
            f"The {what} passes through the custom Function {', '.join(record['customs'])}: finite differences of "
            f"its forward are the reference, so look at its {which} first (a factor, a sign, a transposed or "
            "missing term)."
        )
    fd = next((c for c in checks if c["name"] == "finite_difference"), None)
    if nonfinite and fd is not None and fd["status"] == "agree" and fd["overflow"]:
        event["diagnosis"] = (
            f"The grad overflowed its dtype at {', '.join(fd['overflow'][:6])}: finite differences give a finite "
            "value there, past the dtype's largest number (float64, or a smaller v, keeps it finite). "
            + event["diagnosis"]
        )
    elif nonfinite and fd is not None and fd["status"] == "agree":
        event["diagnosis"] = (
            "Finite differences find no finite derivative here either, so a non-finite grad is what the math "
            "gives (the derivative is infinite or undefined at this point). " + event["diagnosis"]
        )


def _skipped(why: str) -> dict[str, Any]:
    return {
        "name": "finite_difference",
        "status": "skipped",
        "compares": FD,
        "max_abs_diff": None,
        "max_rel_diff": None,
        "tolerance": None,
        "reason": why,
        "undefined": [],
        "overflow": [],
        "worst": None,
        "spurious": [],
        "nonfinite": [],
        "independent": None,
    }
