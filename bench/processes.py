"""What the benches read of a running process from /proc: its descendants, its peak memory,
the CPU time it has used. Linux only, stdlib only."""
from __future__ import annotations

import os
import re
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


def process_tree(root: int) -> list[int]:
    """``root`` and every process below it (children of any of their threads)."""
    pids, frontier = [root], [root]
    while frontier:
        pid = frontier.pop()
        try:
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
        except OSError:   # gone meanwhile
            continue
        for task in tasks:
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                pids.append(child)
                frontier.append(child)
    return pids


def vm_hwm(pid: int) -> int:
    """The process's peak resident set in bytes (0 once it has gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    match = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
    return int(match.group(1)) * 1024 if match else 0


def cpu_seconds(pid: int) -> float:
    """CPU time the process's live threads have run so far (schedstat: nanoseconds on a CPU,
    finer than the clock ticks of /proc/PID/stat), for a short measurement of a process whose
    threads all outlive it, as a rillet broker's do. A thread that ends takes its time with it:
    use ``tree_cpu_seconds`` for a JVM, which ends compiler threads as it likes. Raises
    OSError when the process has gone."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):   # a thread that just ended
            continue
    return total / 1e9


def user_system_seconds(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of the process so far, threads that have ended included
    (/proc/PID/stat fields 14 and 15, in clock ticks: 10 ms, fine for runs of seconds). Raises
    OSError when the process has gone."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / _TICK, int(fields[12]) / _TICK


def pids_user_system(pids: list[int]) -> tuple[float, float]:
    """(user, system) CPU seconds of ``pids`` so far; a process that has gone counts 0."""
    user = system = 0.0
    for pid in pids:
        try:
            u, s = user_system_seconds(pid)
        except OSError:
            continue
        user, system = user + u, system + s
    return user, system


def tree_cpu_seconds(root: int) -> float:
    """User + system CPU seconds of ``root`` and its descendants so far, ended threads
    included; a process that has gone counts 0."""
    return sum(pids_user_system(process_tree(root)))
