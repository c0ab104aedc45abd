"""Confine this process before it reads a snippet: rlimits, no privileges, Landlock, then seccomp.

Runs in the child (confined/child.py). Each step only narrows what the process may do, and none can be
undone from inside: rlimits are lowered soft and hard, no_new_privs and the capabilities dropped are for
good, Landlock domains and seccomp filters only stack. Why each choice: docs/confinement.md.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import site
import sys
import sysconfig
from pathlib import Path

from ..limits import Limits
from . import landlock, seccomp
from .kernel import ARCH, SUPPORTED_ARCHES, ConfinementUnavailable, libc, prctl

_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS = 1, 4, 24, 38
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_CAP_VERSION_3 = 0x20080522

# shared and PROT_NONE mappings count in the address space, not in RLIMIT_DATA: the address space gets
# room for torch's reservations (thread arenas, stacks) but still bounds a bomb of shared mappings
_AS_FACTOR, _AS_SLACK = 2, 2 << 30


def confine(scratch: Path, read_dirs: list[Path], limits: Limits, parent_pid: int | None = None) -> int:
    """Confine this process for good; returns the Landlock ABI used. Raises ConfinementUnavailable.

    `scratch` becomes the only place it may write; `read_dirs` (the user's --allow-read) are readable
    besides what Python and its packages need. Must run while the process has one thread: Landlock and
    seccomp bind the calling thread and the threads it starts later, not those already running.
    """
    reason = unavailable()
    if reason:
        raise ConfinementUnavailable(reason)
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        raise RuntimeError(f"confine() must run before any thread starts ({threads} are running)")
    set_rlimits(limits)
    prctl(_PR_SET_NO_NEW_PRIVS, 1)
    prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)  # the parent died before PDEATHSIG was armed: nobody is left to report to
    prctl(_PR_SET_DUMPABLE, 0)
    abi = landlock.abi_version()
    landlock.restrict(rules(scratch, read_dirs), abi)
    drop_capabilities()
    seccomp.install()
    return abi


def unavailable() -> str | None:
    """Why this machine cannot confine a snippet, or None when it can (cheap: one system call)."""
    if sys.platform != "linux":
        return f"confining a snippet needs Linux's Landlock and seccomp; this is {sys.platform}"
    if ARCH not in SUPPORTED_ARCHES:
        return f"the confinement knows the system calls of x86_64 and aarch64, not {ARCH}"
    if landlock.abi_version() < 1:
        return "the kernel offers no Landlock (Linux 5.13 or later, landlock in its LSM list; a container may hide it)"
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            if not any(line.startswith("Seccomp_filters:") for line in status):
                return "the kernel offers no seccomp filters"
    except OSError:
        return "/proc is not mounted, so the confinement cannot check the kernel"
    return None


def set_rlimits(limits: Limits) -> None:
    """The kernel's own bounds: memory, CPU time, file size, open files, no core dumps."""
    memory = limits.snippet_memory_bytes
    cpu = limits.snippet_cpu_seconds
    _lower(resource.RLIMIT_DATA, memory, memory)
    _lower(resource.RLIMIT_AS, _AS_FACTOR * memory + _AS_SLACK, _AS_FACTOR * memory + _AS_SLACK)
    _lower(resource.RLIMIT_CPU, cpu, cpu + 1)  # SIGXCPU first, SIGKILL a second later if it is caught
    _lower(resource.RLIMIT_FSIZE, limits.snippet_file_bytes, limits.snippet_file_bytes)
    _lower(resource.RLIMIT_NOFILE, limits.snippet_open_files, limits.snippet_open_files)
    _lower(resource.RLIMIT_CORE, 0, 0)


def _lower(which: int, soft: int, hard: int) -> None:
    old_soft, old_hard = resource.getrlimit(which)
    if old_hard != resource.RLIM_INFINITY:
        hard = min(hard, old_hard)
    resource.setrlimit(which, (min(soft, hard), hard))


def rules(scratch: Path, read_dirs: list[Path]) -> list[tuple[Path, int]]:
    """Landlock's rules: Python and its packages, the system's libraries, a little of /proc and /sys
    (this process's own entry, never all of /proc: another process's environ stays out of reach), the
    user's --allow-read folders read-only, and the scratch folder read-write."""
    read = landlock.READ
    python = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *site.getsitepackages()}
    python |= set(sysconfig.get_paths().values())
    python |= {p for p in sys.path if p and os.path.isdir(p)}
    python.add(str(Path(__file__).resolve().parents[1]))  # this package, wherever it is installed from
    system = ["/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/share/zoneinfo", "/usr/share/locale"]
    files = ["/etc/ld.so.cache", "/etc/localtime", "/dev/urandom", "/dev/random", "/proc/cpuinfo", "/proc/meminfo"]
    own = [f"/proc/{os.getpid()}", "/sys/devices/system/cpu", "/sys/devices/system/node"]
    granted = [(Path(p), read) for p in [*sorted(python), *system, *files, *own]]
    granted.append((Path("/dev/null"), landlock.READ_FILE | landlock.WRITE_FILE))
    granted += [(Path(d), read) for d in read_dirs]
    granted.append((scratch, landlock.handled_fs(99)))  # every right; restrict() keeps those the ABI has
    return granted


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> None:
    """No capability left, nor any to regain: root (as in CI) then reads and writes only as Landlock says."""
    try:
        last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        try:
            prctl(_PR_CAPBSET_DROP, cap)
        except OSError:
            break  # EPERM without CAP_SETPCAP (not root): then there is nothing to drop
    try:
        prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL)
    except OSError:
        pass  # a kernel before 4.3 has no ambient set
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        err = ctypes.get_errno()
        raise ConfinementUnavailable(f"could not drop capabilities: {os.strerror(err)}")
