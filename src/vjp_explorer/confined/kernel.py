"""What the confinement's modules share: libc through ctypes, raw system calls, the machine, the one error."""

from __future__ import annotations

import ctypes
import os
import platform

ARCH = platform.machine() if platform.system() == "Linux" else ""  # "x86_64", "aarch64", or another
SUPPORTED_ARCHES = ("x86_64", "aarch64")

libc = ctypes.CDLL(None, use_errno=True)
_syscall = libc.syscall
_syscall.restype = ctypes.c_long


class ConfinementUnavailable(Exception):
    """The kernel lacks a mechanism the confinement needs; `reason` says which, for the user."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def check(result: int) -> int:
    """A libc call's result, or OSError with its errno when it failed (-1)."""
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def syscall(number: int, *args: object) -> int:
    """A raw system call (for those glibc has no wrapper for); OSError on failure."""
    return check(int(_syscall(ctypes.c_long(number), *args)))


def prctl(option: int, arg2: int = 0, arg3: int = 0, arg4: int = 0, arg5: int = 0) -> int:
    """prctl(2) with unsigned long arguments; OSError on failure."""
    ulong = ctypes.c_ulong
    return check(int(libc.prctl(ctypes.c_int(option), ulong(arg2), ulong(arg3), ulong(arg4), ulong(arg5))))
