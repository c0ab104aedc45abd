"""Run one command as the only child of this small, fresh process; print its cost as one JSON line:
wall time, CPU time (user + sys) and peak RSS.

Usage: python child.py TIMEOUT_S MAX_RSS_KB CMD [ARG...]

Because this process has exactly one child, getrusage(RUSAGE_CHILDREN).ru_maxrss is that
child's peak RSS. (The bench runner imports torch; Linux carries a forked process's pre-exec
RSS into ru_maxrss, so measuring straight from the runner would count the runner's memory.)
The child's stdout goes to /dev/null; a watchdog kills it past TIMEOUT_S or MAX_RSS_KB.
Standard library only, on purpose.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import threading
import time

POLL_S = 0.2


def rss_kb(pid: int) -> int:
    """Current resident set size of a process, from /proc (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def watchdog(proc: subprocess.Popen, done: threading.Event, timeout: float, max_rss_kb: int, why: list[str]) -> None:
    start = time.monotonic()
    while not done.wait(POLL_S):
        if time.monotonic() - start > timeout:
            why.append(f"killed: timeout after {timeout:g} s")
        elif rss_kb(proc.pid) > max_rss_kb:
            why.append(f"killed: RSS above {max_rss_kb / 2**20:.1f} GiB")
        else:
            continue
        proc.kill()
        return


def main() -> None:
    timeout, max_rss_kb, cmd = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    why: list[str] = []
    done = threading.Event()
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        threading.Thread(target=watchdog, args=(proc, done, timeout, max_rss_kb, why), daemon=True).start()
        returncode = proc.wait()
        wall = time.perf_counter() - start
        done.set()
        err.seek(0)
        stderr_tail = err.read()[-1500:].decode(errors="replace")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        json.dumps(
            {
                "wall_s": wall,
                "cpu_s": usage.ru_utime + usage.ru_stime,
                "max_rss_kb": usage.ru_maxrss,
                "returncode": returncode,
                "killed": why[0] if why else None,
                "stderr_tail": stderr_tail,
            }
        )
    )


if __name__ == "__main__":
    main()
