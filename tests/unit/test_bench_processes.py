"""What the benches read of a running process (bench/processes.py), on real processes: a
broker's CPU per record and its peak memory come from these, so a child missed or a busy
process read as idle would make compare.py's rows wrong."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from processes import cpu_seconds, process_tree, tree_cpu_seconds, vm_hwm  # noqa: E402

# A child that burns CPU until killed, and starts a grandchild doing the same.
BURN = "import time\nwhile True: pass\n"
PARENT = ("import subprocess, sys\n"
          f"subprocess.Popen([sys.executable, '-c', {BURN!r}])\n"
          "while True: pass\n")


def _wait_for(predicate, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_a_process_tree_and_its_cpu_include_the_grandchild() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], start_new_session=True)
    try:
        _wait_for(lambda: len(process_tree(parent.pid)) == 2)
        child = process_tree(parent.pid)[1]
        before_tree, before_parent = tree_cpu_seconds(parent.pid), cpu_seconds(parent.pid)
        # Both burn on their own: wait until the child alone has used 0.2 s more.
        child_start = cpu_seconds(child)
        _wait_for(lambda: cpu_seconds(child) - child_start > 0.2)
        grown_tree = tree_cpu_seconds(parent.pid) - before_tree
        grown_parent = cpu_seconds(parent.pid) - before_parent
        # The parent's share was read a moment before its own figure: a margin for that.
        assert grown_tree >= grown_parent + 0.15
        assert vm_hwm(parent.pid) > 1024 * 1024   # an interpreter holds megabytes
    finally:
        os.killpg(parent.pid, 9)
        parent.wait()


def test_a_process_that_has_gone_reads_as_nothing() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert cpu_seconds(proc.pid) == 0.0
    assert vm_hwm(proc.pid) == 0
    assert process_tree(proc.pid) == [proc.pid]
