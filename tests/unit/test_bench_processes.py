"""What the benches read of a running process (bench/processes.py), on real processes: a
broker's CPU per record and its peak memory come from these, so a child missed, a busy
process read as idle or an ended thread's time lost would make compare.py's rows wrong."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.polling import wait_until

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from processes import (  # noqa: E402
    cpu_seconds, process_tree, tree_cpu_seconds, user_system_seconds, vm_hwm)

# A parent that starts a busy child from a thread (as a JVM forks from any thread) and waits
# in that thread: the child stays the thread's (one that ends hands its children to another).
PARENT = ("import subprocess, sys, threading\n"
          "def start():\n"
          "    subprocess.Popen([sys.executable, '-c', 'while True: pass']).wait()\n"
          "t = threading.Thread(target=start); t.start(); t.join()\n")
# Busy in a thread for 0.3 s of CPU, which then ends; the process waits to be read.
THREAD_THEN_WAIT = ("import sys, threading, time\n"
                    "def burn():\n"
                    "    start = time.process_time()\n"
                    "    while time.process_time() - start < 0.3: pass\n"
                    "t = threading.Thread(target=burn); t.start(); t.join()\n"
                    "print('done', flush=True)\n"
                    "sys.stdin.read()\n")


def test_a_process_tree_and_its_cpu_include_a_child_started_from_a_thread() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], start_new_session=True)
    try:
        wait_until(lambda: len(process_tree(parent.pid)) == 2, timeout=30,
                   what="the child to start")
        child = process_tree(parent.pid)[1]
        before = tree_cpu_seconds(parent.pid)
        wait_until(lambda: tree_cpu_seconds(parent.pid) - before >= 0.3, timeout=30,
                   what="the busy child's CPU to show in the tree's")
        # The parent itself only waits: the time is the child's.
        assert cpu_seconds(child) >= 0.3
        assert vm_hwm(parent.pid) > 1024 * 1024   # an interpreter holds megabytes
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()


def test_the_cpu_of_a_thread_that_has_ended_still_counts() -> None:
    proc = subprocess.Popen([sys.executable, "-c", THREAD_THEN_WAIT], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "done"
        assert tree_cpu_seconds(proc.pid) >= 0.3 - 0.02   # 10 ms clock ticks
        user, system = user_system_seconds(proc.pid)
        assert user > 0 and system > 0 and user + system == tree_cpu_seconds(proc.pid)
        # The live-threads figure has lost it: why a JVM is read with tree_cpu_seconds.
        assert cpu_seconds(proc.pid) < 0.3
    finally:
        proc.communicate("")


def test_a_process_that_has_gone() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert tree_cpu_seconds(proc.pid) == 0.0
    assert vm_hwm(proc.pid) == 0
    for read in (cpu_seconds, user_system_seconds):
        with pytest.raises(OSError):
            read(proc.pid)
