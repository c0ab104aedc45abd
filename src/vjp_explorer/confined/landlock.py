"""Landlock through ctypes: which paths this process may read or write, and no TCP, from here on.

The kernel's interface is three system calls and three structs (Documentation/userspace-api/landlock.rst);
a few lines of ctypes spare the project a dependency. Only what the running kernel's ABI knows is handled,
so the same code runs on ABI 1 (Linux 5.13) and confines as much as that kernel can.
"""

from __future__ import annotations

import ctypes
import os
import stat
from pathlib import Path

from .kernel import ARCH, SUPPORTED_ARCHES, ConfinementUnavailable, syscall

# x86_64 and aarch64 share these numbers (they were added after the generic table was unified)
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

# file system rights, by the ABI that introduced them
_FS_ABI1 = (1 << 13) - 1  # execute .. make_sym
_FS_REFER, _FS_TRUNCATE, _FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV  # the rights a rule on a file may hold
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1

READ = READ_FILE | READ_DIR  # read-only, and no execute: no program may start anyway (seccomp denies execve)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)) in the kernel's header: 12 bytes
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def abi_version() -> int:
    """The kernel's Landlock ABI (0 where there is none: not Linux, too old, or disabled at boot)."""
    if ARCH not in SUPPORTED_ARCHES:
        return 0
    try:
        return syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except OSError:
        return 0


def handled_fs(abi: int) -> int:
    """Every file system right the ABI knows: handled, so denied unless a rule grants it."""
    rights = _FS_ABI1
    rights |= _FS_REFER if abi >= 2 else 0
    rights |= _FS_TRUNCATE if abi >= 3 else 0
    rights |= _FS_IOCTL_DEV if abi >= 5 else 0
    return rights


def restrict(rules: list[tuple[Path, int]], abi: int) -> None:
    """Confine this thread (and what it starts later) to `rules`: (path, rights) pairs; nothing else.

    A path that does not exist is skipped. Needs no_new_privs set first. Raises ConfinementUnavailable.
    """
    if abi < 1:
        raise ConfinementUnavailable("the kernel has no Landlock (Linux 5.13 or later, enabled in the LSM list)")
    fs = handled_fs(abi)
    attr = _RulesetAttr(
        handled_access_fs=fs,
        handled_access_net=(_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0,  # no rule: no TCP at all
        scoped=(_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL) if abi >= 6 else 0,
    )
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else 16 if abi >= 4 else 8
    try:
        ruleset = syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    except OSError as e:
        raise ConfinementUnavailable(f"Landlock refused a ruleset: {e.strerror}") from None
    try:
        for path, rights in rules:
            _add_path(ruleset, path, rights & fs)
        syscall(_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    except OSError as e:
        raise ConfinementUnavailable(f"Landlock refused to confine: {e.strerror}") from None
    finally:
        os.close(ruleset)


def _add_path(ruleset: int, path: Path, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # not on this system (no /lib64 on aarch64, say): nothing to grant
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= _FILE_ONLY  # the kernel refuses directory rights on a file (EINVAL)
        rule = _PathBeneathAttr(allowed_access=rights, parent_fd=fd)
        beneath = ctypes.c_int(_RULE_PATH_BENEATH)
        syscall(_ADD_RULE, ctypes.c_int(ruleset), beneath, ctypes.byref(rule), ctypes.c_uint32(0))
    finally:
        os.close(fd)
