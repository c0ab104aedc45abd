"""The frames between the parent and the confined child: a 4-byte big-endian length, then UTF-8 JSON.

Plain data only, never pickle: the parent must not run anything the child sends. Arrays, when events carry
them, travel as {"dtype", "shape", "data": base64 bytes}. The parent reads the child's frames with a
FrameReader, which bounds each frame's size before it allocates for it; `validate` checks each frame's
fields and their types against FRAMES, the one table of what the child may say.
"""

from __future__ import annotations

import json
import os
import struct
import unicodedata
from collections.abc import Callable
from typing import Any

MAX_FRAME = 8 << 20  # bytes of one frame from the child; more is a protocol error, not an allocation
# bytes of one "record" frame (a call's record for the judge, which the parent passes on and lets go): a
# mid-size model's record (its parameters, grads and forward as base64) is past MAX_FRAME
MAX_RECORD_FRAME = 64 << 20
_RECORD_HEAD = b'{"type":"record",'  # how encode() starts a record frame: a larger frame must start so
_HEADER = struct.Struct(">I")


class ProtocolError(Exception):
    """A frame that is not what the protocol says: too big, not JSON, an unknown type, a wrong field."""


def encode(message: dict[str, Any]) -> bytes:
    """One frame: the length, then the JSON (non-finite numbers are JSON's NaN/Infinity, read back alike)."""
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
    return _HEADER.pack(len(body)) + body


class FrameTooLarge(ValueError):
    """A frame the reader would refuse (past MAX_FRAME): not written, so the sender can send less."""


def write_frame(fd: int, message: dict[str, Any]) -> None:
    """Send one frame on a pipe, whole (a pipe write may be partial); FrameTooLarge, unsent, past MAX_FRAME
    (MAX_RECORD_FRAME for a "record" frame)."""
    encoded = encode(message)
    if len(encoded) - _HEADER.size > (MAX_RECORD_FRAME if message.get("type") == "record" else MAX_FRAME):
        raise FrameTooLarge(f"a frame of {len(encoded):,} bytes")
    data = memoryview(encoded)
    while data:
        data = data[os.write(fd, data) :]


def read_frame(fd: int, limit: int = MAX_FRAME) -> dict[str, Any] | None:
    """Read one frame, blocking (the child's side); None at end of file before a frame starts."""
    header = _read_exact(fd, _HEADER.size)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    if size > limit:
        raise ProtocolError(f"a frame of {size:,} bytes (at most {limit:,})")
    body = _read_exact(fd, size)
    if body is None:
        raise ProtocolError("the pipe closed inside a frame")
    return decode(body)


def _read_exact(fd: int, size: int) -> bytes | None:
    parts: list[bytes] = []
    got = 0
    while got < size:
        chunk = os.read(fd, min(size - got, 1 << 20))
        if not chunk:
            if got:
                raise ProtocolError("the pipe closed inside a frame")
            return None
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def decode(body: bytes) -> dict[str, Any]:
    """A frame's body -> a dict with a "type"; ProtocolError for anything else (deep nesting included)."""
    try:
        message = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ProtocolError(f"a frame that is not JSON ({type(e).__name__})") from None
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise ProtocolError("a frame that is not an object with a type")
    return message


class FrameReader:
    """The parent's incremental reader: feed it bytes as they come, take whole frames out.

    "record" frames (a call's record, for the judge) have a budget of their own, `record_budget` bytes
    in all, and may be up to MAX_RECORD_FRAME each: they are not events, and the parent passes them on
    and lets them go. A record frame past the budget is not decoded at all: it comes out as
    {"type": "record_over", "bytes": its size} (a type the child cannot send: validate refuses it)."""

    def __init__(self, limit: int = MAX_FRAME, record_budget: int = 0) -> None:
        self.limit = limit
        self.buffer = bytearray()
        # what the event frames so far cost: their bytes, and their JSON items (`[`, `{` and `,`), each of
        # which costs up to about 100 bytes once decoded where a byte of text costs at most 4
        self.event_bytes = 0
        self.event_items = 0
        self.record_budget = record_budget
        self.record_bytes = 0  # of the record frames decoded (within the budget)
        self.records = 0
        self.records_over = 0  # record frames past the budget, left undecoded

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        """The frames completed by `data`; ProtocolError on the first bad one."""
        self.buffer += data
        frames = []
        while len(self.buffer) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self.buffer)
            if size > self.limit and not self._record_sized(size):
                raise ProtocolError(f"a frame of {size:,} bytes (at most {self.limit:,})")
            if len(self.buffer) < _HEADER.size + size:
                break
            record = self.buffer.startswith(_RECORD_HEAD, _HEADER.size)
            if record and self.record_bytes + size > self.record_budget:  # before any work on it
                del self.buffer[: _HEADER.size + size]
                self.records_over += 1
                frames.append({"type": "record_over", "bytes": size})
                continue
            body = bytes(self.buffer[_HEADER.size : _HEADER.size + size])
            del self.buffer[: _HEADER.size + size]
            frame = validate(decode(body))
            if (record or size > self.limit) and frame["type"] != "record":  # a forged head: JSON's last key wins
                raise ProtocolError(f"a {safe_text(frame['type'][:40])!r} frame dressed as a record")
            if frame["type"] == "record":  # (written otherwise than encode() does, it is within MAX_FRAME)
                if self.record_bytes + size > self.record_budget:
                    self.records_over += 1
                    frame = {"type": "record_over", "bytes": size}
                else:
                    self.record_bytes += size
                    self.records += 1
            elif frame["type"] == "event":
                self.event_bytes += size
                self.event_items += body.count(b"[") + body.count(b"{") + body.count(b",")
            frames.append(frame)
        return frames

    def _record_sized(self, size: int) -> bool:
        """Whether a frame past `limit` may still come: a record frame within MAX_RECORD_FRAME (known by its
        head, which must have arrived before its body is waited for)."""
        head = self.buffer[_HEADER.size : _HEADER.size + len(_RECORD_HEAD)]
        if len(head) < len(_RECORD_HEAD):
            return _RECORD_HEAD.startswith(bytes(head)) and size <= MAX_RECORD_FRAME and self.record_budget > 0
        return head == _RECORD_HEAD and size <= MAX_RECORD_FRAME and self.record_budget > 0

    def close(self) -> None:
        """At end of file: bytes left over are half a frame."""
        if self.buffer:
            raise ProtocolError(f"{len(self.buffer)} bytes of an unfinished frame")


def _int(value: Any) -> bool:
    return type(value) is int and -(2**63) <= value < 2**63


def _optional_int(value: Any) -> bool:
    return value is None or _int(value)


def _str(value: Any) -> bool:
    return type(value) is str


def _bool(value: Any) -> bool:
    return type(value) is bool


Check = Callable[[Any], bool]

# the snippet's own exception, as Python raised it; `resource` names a limit it hit (memory, file size, ...)
_ERROR: dict[str, Check] = {
    "exc_type": _str,
    "message": _str,
    "line": _optional_int,
    "traceback": _str,
    "errno": _optional_int,
    "resource": lambda s: s in (None, "memory", "file_size", "open_files"),
    # what the confinement refused behind it, and the library it came through ("" where none is known)
    "refusal": lambda s: s in (None, "process", "network", "files", "system", "cwd"),
    "via": _str,
}

# Every frame the child may send, with each field's check. The child's code is ours, but it runs the
# snippet's code in the same process: everything here may have been forged, so it is checked, never run.
FRAMES: dict[str, dict[str, Check]] = {
    # the child confined itself (or, with trust, did not) and waits for the snippet
    "ready": {"confined": _bool, "landlock_abi": _int},
    # the child could not confine itself: the kernel lacks a mechanism; nothing ran
    "unavailable": {"reason": _str},
    # output a long statement printed so far (sent every 64 KiB); the rest comes with its "statement"
    "output": {"line": _int, "stream": lambda s: s in ("stdout", "stderr"), "text": _str},
    # one top-level statement ended, with what it printed (an "error" or "exit" follows if the snippet stops
    # there; a "raised" where a transcript's statement raised and the session went on)
    "statement": {"line": _int, "end_line": _int, "stdout": _str, "stderr": _str},
    # the functions the snippet registered with atexit ran (after its last statement), with what they printed
    "at_exit": {"stdout": _str, "stderr": _str},
    # the snippet raised and stops there (a script, or a transcript at a limit or sys.exit's like)
    "error": _ERROR,
    # a REPL transcript's statement raised and the session went on, as the REPL does: read the next line
    "raised": {**_ERROR, "resource": lambda s: s is None},
    # an attempt the confinement refuses (audited): a process started, the network reached, at this line
    "refused": {"kind": lambda s: s in ("process", "network"), "what": _str, "line": _int},
    # the snippet called sys.exit(code): code is the exit status python would give
    "exit": {"line": _int, "code": _int, "message": _str},
    # one backward or grad call, explained in the child (observe.py); checked field by field where it is read
    "event": {"event": lambda d: isinstance(d, dict)},
    # why the snippet failed, found in a second run with autograd's instruments (diagnose.py); read field by
    # field where it is read (snippet/why.py)
    "diagnosis": {"diagnosis": lambda d: isinstance(d, dict)},
    # a backward call the observer is about to run (its `call` number), and whether it returned: a call that
    # started and returned is owed an event; one missing is a call the snippet hid (confined/judging.py)
    "started": {"call": _int, "line": _int},
    "ended": {"call": _int, "ok": _bool},
    # a backward pass that wrote a leaf's .grad outside every observed call (the engine reached some other way)
    "unobserved": {"line": _int, "what": _str},
    # the record of the call whose event comes next: what the judge needs (calls.RECORD, checked by
    # judging.Judge); the parent passes it on and keeps none of it (FrameReader counts it apart from events)
    "record": {"call": _int, "record": lambda d: isinstance(d, dict)},
    # the judge's answer about one call (confined/judge.py; checked field by field against calls.VERDICT)
    "verdict": {"verdict": lambda d: isinstance(d, dict)},
    # one hand-written gradient after the snippet's last statement (manual.py); checked field by field where
    # it is read (snippet/manual.py)
    "manual": {"manual": lambda d: isinstance(d, dict)},
    # every statement ran
    "done": {},
}


def validate(message: dict[str, Any]) -> dict[str, Any]:
    """The message, if its type is known and its fields are exactly those FRAMES says, each of its type."""
    fields = FRAMES.get(message["type"])
    if fields is None:
        raise ProtocolError(f"a frame of unknown type {safe_text(message['type'][:40])!r}")
    given = set(message) - {"type"}
    if given != set(fields):
        raise ProtocolError(f"a {message['type']!r} frame with fields {sorted(given)[:10]} (wants {sorted(fields)})")
    for name, check in fields.items():
        if not check(message[name]):
            raise ProtocolError(f"a {message['type']!r} frame whose {name!r} is not what it should be")
    return message


_KEEP = {"\n", "\t"}


def safe_text(text: str) -> str:
    """`text` safe to print on a terminal: control and format characters (escape sequences, bidi
    overrides, a lone carriage return) shown as escapes; newlines and tabs kept."""
    if text.isprintable():
        return text
    return "".join(ch if _shown(ch) else ch.encode("unicode_escape").decode("ascii") for ch in text)


def _shown(ch: str) -> bool:
    return ch in _KEEP or ch.isprintable() or unicodedata.category(ch) == "Zs"
