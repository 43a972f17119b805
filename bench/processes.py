"""What the benches read of a running process from /proc: its descendants, its peak memory,
the CPU time its threads have used. Linux only, stdlib only."""
from __future__ import annotations

import re
from pathlib import Path


def process_tree(root: int) -> list[int]:
    """``root`` and every process below it."""
    pids, frontier = [root], [root]
    while frontier:
        pid = frontier.pop()
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
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
    """CPU time the process's threads have run so far (schedstat: nanoseconds on a CPU), which
    other processes' load on the machine does not inflate as it does the wall clock."""
    total = 0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:   # the process has gone
        return 0.0
    for task in tasks:
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):   # a thread that just ended
            continue
    return total / 1e9


def tree_cpu_seconds(root: int) -> float:
    """``cpu_seconds`` summed over ``root`` and its descendants."""
    return sum(cpu_seconds(pid) for pid in process_tree(root))
