"""A seccomp-BPF filter built by hand: no new processes or programs, no sockets, no touching others.

The filter is a short list of classic BPF instructions over `struct seccomp_data` (nr, arch, ip, args):
it kills the process on a foreign architecture (and, on x86_64, on the x32 ABI, whose numbers would dodge
the table), answers EPERM to the calls in DENIED, lets `clone` through only for threads, makes `clone3`
look absent (ENOSYS, so glibc falls back to `clone`, whose flags a filter can read: clone3's are behind a
pointer), lets the kill family aim only at this process and the calls that change a process's limits,
priority, affinity, scheduling or memory placement only at itself, and refuses shared anonymous memory
(which no memory limit counts). Everything else is allowed: Python, torch and its thread pool keep
working; the file system and TCP are Landlock's to bound.
"""

from __future__ import annotations

import ctypes
import errno
import os

from .kernel import ARCH, ConfinementUnavailable, prctl

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_X32_BIT = 0x40000000

# Denied with EPERM. Names missing from an architecture's table do not exist there (aarch64 has no fork).
DENIED = (
    "execve execveat fork vfork ptrace process_vm_readv process_vm_writev "
    "socket socketpair connect bind listen accept accept4 "
    "mount umount2 unshare setns pivot_root chroot open_tree move_mount fsopen fsconfig fsmount fspick "
    "mount_setattr bpf perf_event_open userfaultfd keyctl add_key request_key kexec_load kexec_file_load "
    "init_module finit_module delete_module io_uring_setup io_uring_enter io_uring_register personality "
    "pidfd_open pidfd_getfd pidfd_send_signal process_madvise kcmp name_to_handle_at open_by_handle_at "
    "acct swapon swapoff reboot sethostname setdomainname syslog settimeofday clock_settime adjtimex "
    "quotactl vhangup iopl ioperm uselib "
    # SysV IPC and POSIX message queues: objects shared with other processes that outlive the run
    "shmget shmat shmctl shmdt semget semop semctl semtimedop msgget msgsnd msgrcv msgctl "
    "mq_open mq_unlink mq_timedsend mq_timedreceive mq_notify mq_getsetattr "
    # memory no limit counts: a memfd is shared memory, and secret memory is locked
    "memfd_create memfd_secret "
    # a file's mode, owner, times and extended attributes: Landlock does not bound them, and seccomp cannot
    # see a path; the fd-based calls go too, since an fd opened read-only (--allow-read) suffices for them
    "chmod fchmod fchmodat fchmodat2 chown fchown lchown fchownat utime utimes futimesat utimensat "
    "setxattr lsetxattr fsetxattr setxattrat removexattr lremovexattr fremovexattr removexattrat readlink readlinkat"
).split()
# Allowed only when their first argument is this process's id: a thread's tgkill to its own group, a raise().
SELF_ONLY = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")
# Allowed only when their first argument is 0 (this process) or this process's id: resource limits,
# scheduling, affinity and page migration of another process (the parent, a sibling) are out of reach.
SELF_OR_ZERO = (
    "prlimit64 sched_setaffinity sched_setscheduler sched_setparam sched_setattr migrate_pages move_pages"
).split()
# Allowed only for (which, who) = (a process, 0 or this process): never a process group or a user.
WHO_SELF = {"setpriority": 0, "ioprio_set": 1}  # PRIO_PROCESS, IOPRIO_WHO_PROCESS
# mmap flags: MAP_SHARED (MAP_SHARED_VALIDATE has it too) with MAP_ANONYMOUS is shared memory, counted by
# neither RLIMIT_DATA nor a file's size limit; a shared mapping of a file stays (the scratch bounds files)
_MAP_SHARED, _MAP_ANONYMOUS = 0x01, 0x20
# prctl options denied: undoing PR_SET_PDEATHSIG would let the child outlive a killed parent (and its
# clock); PR_SET_DUMPABLE would reopen /proc/<pid> to others
_PRCTL_DENIED = (1, 4)  # PR_SET_PDEATHSIG, PR_SET_DUMPABLE

# From the kernel's arch/x86/entry/syscalls/syscall_64.tbl and include/uapi/asm-generic/unistd.h.
_NUMBERS = {
    "x86_64": {
        "execve": 59, "execveat": 322, "fork": 57, "vfork": 58, "clone": 56, "clone3": 435, "ptrace": 101,
        "process_vm_readv": 310, "process_vm_writev": 311, "socket": 41, "socketpair": 53, "connect": 42,
        "bind": 49, "listen": 50, "accept": 43, "accept4": 288, "mount": 165, "umount2": 166, "unshare": 272,
        "setns": 308, "pivot_root": 155, "chroot": 161, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
        "keyctl": 250, "add_key": 248, "request_key": 249, "kexec_load": 246, "kexec_file_load": 320,
        "init_module": 175, "finit_module": 313, "delete_module": 176, "personality": 135, "kcmp": 312,
        "name_to_handle_at": 303, "open_by_handle_at": 304, "acct": 163, "swapon": 167, "swapoff": 168,
        "reboot": 169, "sethostname": 170, "setdomainname": 171, "syslog": 103, "settimeofday": 164,
        "clock_settime": 227, "adjtimex": 159, "quotactl": 179, "vhangup": 153, "iopl": 172, "ioperm": 173,
        "uselib": 134, "prctl": 157, "kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129,
        "rt_tgsigqueueinfo": 297, "shmget": 29, "shmat": 30, "shmctl": 31, "shmdt": 67, "semget": 64,
        "semop": 65, "semctl": 66, "semtimedop": 220, "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71,
        "mq_open": 240, "mq_unlink": 241, "mq_timedsend": 242, "mq_timedreceive": 243, "mq_notify": 244,
        "mq_getsetattr": 245, "memfd_create": 319, "chmod": 90, "fchmod": 91, "fchmodat": 268, "chown": 92,
        "fchown": 93, "lchown": 94, "fchownat": 260, "utime": 132, "utimes": 235, "futimesat": 261,
        "utimensat": 280, "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190, "removexattr": 197,
        "lremovexattr": 198, "fremovexattr": 199, "prlimit64": 302, "sched_setaffinity": 203,
        "sched_setscheduler": 144, "sched_setparam": 142, "sched_setattr": 314, "migrate_pages": 256,
        "move_pages": 279, "setpriority": 141, "ioprio_set": 251, "mmap": 9, "readlink": 89, "readlinkat": 267,
    },
    "aarch64": {
        "execve": 221, "execveat": 281, "clone": 220, "clone3": 435, "ptrace": 117, "process_vm_readv": 270,
        "process_vm_writev": 271, "socket": 198, "socketpair": 199, "bind": 200, "listen": 201, "accept": 202,
        "connect": 203, "accept4": 242, "mount": 40, "umount2": 39, "unshare": 97, "setns": 268,
        "pivot_root": 41, "chroot": 51, "bpf": 280, "perf_event_open": 241, "userfaultfd": 282, "keyctl": 219,
        "add_key": 217, "request_key": 218, "kexec_load": 104, "kexec_file_load": 294, "init_module": 105,
        "finit_module": 273, "delete_module": 106, "personality": 92, "kcmp": 272, "name_to_handle_at": 264,
        "open_by_handle_at": 265, "acct": 89, "swapon": 224, "swapoff": 225, "reboot": 142,
        "sethostname": 161, "setdomainname": 162, "syslog": 116, "settimeofday": 170, "clock_settime": 112,
        "adjtimex": 171, "quotactl": 60, "vhangup": 58, "prctl": 167, "kill": 129, "tkill": 130, "tgkill": 131,
        "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240, "shmget": 194, "shmat": 196, "shmctl": 195,
        "shmdt": 197, "semget": 190, "semop": 193, "semctl": 191, "semtimedop": 192, "msgget": 186,
        "msgsnd": 189, "msgrcv": 188, "msgctl": 187, "mq_open": 180, "mq_unlink": 181, "mq_timedsend": 182,
        "mq_timedreceive": 183, "mq_notify": 184, "mq_getsetattr": 185, "memfd_create": 279, "fchmod": 52,
        "fchmodat": 53, "fchown": 55, "fchownat": 54, "utimensat": 88, "setxattr": 5, "lsetxattr": 6,
        "fsetxattr": 7, "removexattr": 14, "lremovexattr": 15, "fremovexattr": 16, "prlimit64": 261,
        "sched_setaffinity": 122, "sched_setscheduler": 119, "sched_setparam": 118, "sched_setattr": 274,
        "migrate_pages": 238, "move_pages": 239, "setpriority": 140, "ioprio_set": 30, "mmap": 222, "readlinkat": 78,
    },
}  # fmt: skip
# numbered alike on both (added after the tables were unified)
_COMMON = {
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428, "move_mount": 429,
    "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "pidfd_open": 434, "pidfd_send_signal": 424,
    "pidfd_getfd": 438, "process_madvise": 440, "mount_setattr": 442, "memfd_secret": 447, "fchmodat2": 452,
    "setxattrat": 463, "removexattrat": 466,
}  # fmt: skip

_CLONE_THREAD = 0x00010000

# classic BPF opcodes and seccomp's return values
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K, _AND_K = 0x20, 0x15, 0x35, 0x45, 0x06, 0x54
_RET_KILL_PROCESS, _RET_ERRNO, _RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
_OFF_NR, _OFF_ARCH, _OFF_ARG0_LOW = 0, 4, 16  # offsets in struct seccomp_data (little-endian: low word first)


def _arg_low(k: int) -> int:
    """Where argument k's low word is: pid_t and int arguments are read by the kernel from it alone."""
    return _OFF_ARG0_LOW + 8 * k


_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


Instruction = tuple[int, int, int, int]


def numbers(arch: str) -> dict[str, int]:
    """The system call numbers the filter names, for `arch`."""
    return {**_NUMBERS[arch], **_COMMON}


def program(arch: str, pid: int) -> list[Instruction]:
    """The filter, as (code, jt, jf, k) instructions, for a process `pid` on `arch`."""
    table = numbers(arch)
    deny = _RET_ERRNO | errno.EPERM
    prog: list[Instruction] = [
        (_LD_W_ABS, 0, 0, _OFF_ARCH),
        (_JEQ_K, 1, 0, _AUDIT_ARCH[arch]),
        (_RET_K, 0, 0, _RET_KILL_PROCESS),
        (_LD_W_ABS, 0, 0, _OFF_NR),
    ]
    if arch == "x86_64":
        prog += [(_JGE_K, 0, 1, _X32_BIT), (_RET_K, 0, 0, _RET_KILL_PROCESS)]
    for name in DENIED:
        if name in table:
            prog += [(_JEQ_K, 0, 1, table[name]), (_RET_K, 0, 0, deny)]
    prog += [(_JEQ_K, 0, 1, table["clone3"]), (_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS)]
    # clone: a thread (CLONE_THREAD set) passes, a process does not
    prog += [
        (_JEQ_K, 0, 4, table["clone"]),
        (_LD_W_ABS, 0, 0, _OFF_ARG0_LOW),
        (_JSET_K, 0, 1, _CLONE_THREAD),
        (_RET_K, 0, 0, _RET_ALLOW),
        (_RET_K, 0, 0, deny),
    ]
    # each block returns, so the accumulator holding an argument never meets the next number test
    for name in SELF_ONLY:
        prog += [
            (_JEQ_K, 0, 4, table[name]),
            (_LD_W_ABS, 0, 0, _OFF_ARG0_LOW),  # pid_t is an int: the kernel reads the low word only
            (_JEQ_K, 0, 1, pid),
            (_RET_K, 0, 0, _RET_ALLOW),
            (_RET_K, 0, 0, deny),
        ]
    # each block returns; jf skips the rest of the block when the number is not the one tested
    for name in SELF_OR_ZERO:
        prog += [
            (_JEQ_K, 0, 5, table[name]),
            (_LD_W_ABS, 0, 0, _arg_low(0)),
            (_JEQ_K, 1, 0, 0),
            (_JEQ_K, 0, 1, pid),
            (_RET_K, 0, 0, _RET_ALLOW),
            (_RET_K, 0, 0, deny),
        ]
    for name, which in WHO_SELF.items():
        prog += [
            (_JEQ_K, 0, 7, table[name]),
            (_LD_W_ABS, 0, 0, _arg_low(0)),
            (_JEQ_K, 0, 4, which),
            (_LD_W_ABS, 0, 0, _arg_low(1)),
            (_JEQ_K, 1, 0, 0),
            (_JEQ_K, 0, 1, pid),
            (_RET_K, 0, 0, _RET_ALLOW),
            (_RET_K, 0, 0, deny),
        ]
    shared_anonymous = _MAP_SHARED | _MAP_ANONYMOUS
    prog += [
        (_JEQ_K, 0, 5, table["mmap"]),
        (_LD_W_ABS, 0, 0, _arg_low(3)),
        (_AND_K, 0, 0, shared_anonymous),
        (_JEQ_K, 0, 1, shared_anonymous),
        (_RET_K, 0, 0, deny),
        (_RET_K, 0, 0, _RET_ALLOW),
    ]
    # prctl: a denied option gets EPERM; anything else falls through to the final allow
    prog += [(_JEQ_K, 0, 1 + 2 * len(_PRCTL_DENIED), table["prctl"]), (_LD_W_ABS, 0, 0, _OFF_ARG0_LOW)]
    for option in _PRCTL_DENIED:
        prog += [(_JEQ_K, 0, 1, option), (_RET_K, 0, 0, deny)]
    prog.append((_RET_K, 0, 0, _RET_ALLOW))  # the end of the prctl block and of the filter alike
    return prog


def install() -> None:
    """Install the filter on this thread (threads started later inherit it). Needs no_new_privs first."""
    if ARCH not in _AUDIT_ARCH:
        raise ConfinementUnavailable(f"the system call filter knows no table for the {ARCH or 'this'} machine")
    prog = program(ARCH, os.getpid())
    filters = (_SockFilter * len(prog))(*(_SockFilter(*ins) for ins in prog))
    fprog = _SockFprog(len(prog), filters)
    try:
        prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog))
    except OSError as e:
        raise ConfinementUnavailable(f"the kernel refused a seccomp filter: {e.strerror}") from None
