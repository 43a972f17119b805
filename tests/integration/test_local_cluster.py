"""`rillet cluster` (rillet.local_cluster.main): starts the nodes, prints where they are, stops
them all on SIGTERM or Ctrl-C, and a second run finds the same cluster."""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

from rillet.local_cluster import PORT_STRIDE
from tests.harness import free_port
from tests.polling import read_until
from tests.wire import Wire


def _free_base_port(nodes: int) -> int:
    """A base port whose whole layout (client and controller port per node) is free now."""
    for _ in range(50):
        base = free_port()
        if base + PORT_STRIDE * nodes > 65535:
            continue
        socks = []
        try:
            for i in range(nodes):
                for port in (base + PORT_STRIDE * i, base + PORT_STRIDE * i + 1):
                    s = socket.socket()
                    socks.append(s)
                    s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port layout found")


def _run(data: Path, base: int, out: Path) -> subprocess.Popen[bytes]:
    with open(out, "wb") as f:
        return subprocess.Popen(
            [sys.executable, "-m", "rillet.local_cluster", "--nodes", "2", "--data", str(data),
             "--base-port", str(base), "--racks", "east,west"],
            stdout=f, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _wait_for_bootstrap(proc: subprocess.Popen[bytes], out: Path) -> str:
    text = read_until(out.read_text, lambda t: "bootstrap.servers=" in t or proc.poll() is not None,
                      90)
    match = re.search(r"bootstrap.servers=(\S+)", text)
    assert match, text
    return text


def _stop(proc: subprocess.Popen[bytes], sig: signal.Signals) -> int:
    proc.send_signal(sig)
    try:
        return proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def test_rillet_cluster_runs_every_node_and_stops_them_all(tmp_path: Path) -> None:
    base = _free_base_port(2)
    data, out = tmp_path / "data", tmp_path / "out.txt"
    proc = _run(data, base, out)
    try:
        text = _wait_for_bootstrap(proc, out)
        assert f"bootstrap.servers=127.0.0.1:{base},127.0.0.1:{base + PORT_STRIDE}" in text
        assert f"node 2: 127.0.0.1:{base + PORT_STRIDE}, controller 127.0.0.1:" in text
        assert "rack west" in text and "NOT listening" not in text
        pids = [int(p) for p in re.findall(r"pid (\d+)", text)]
        for port in (base, base + PORT_STRIDE):
            with Wire(f"127.0.0.1:{port}") as wire:
                assert wire.request(18, 0, {}).error_code == 0
    finally:
        code = _stop(proc, signal.SIGTERM)
    assert code == 0, out.read_text()
    assert "all nodes stopped" in out.read_text()
    for pid in pids:  # reaped by the runner, so gone
        assert not Path(f"/proc/{pid}").exists()
    cluster_id = (data / "cluster.id").read_text().strip()
    assert (data / "node-1.log").exists() and (data / "node-2" / "meta.properties").exists()
    _assert_clean_shutdown(data)

    # Again, on the same data: the same cluster id, the formatted dirs accepted; Ctrl-C.
    proc = _run(data, base, out)
    try:
        text = _wait_for_bootstrap(proc, out)
        assert f"rillet cluster {cluster_id}:" in text and "NOT listening" not in text
    finally:
        code = _stop(proc, signal.SIGINT)
    assert code == 0, out.read_text()
    _assert_clean_shutdown(data)


def _assert_clean_shutdown(data: Path) -> None:
    """A clean stop writes no ERROR line nor traceback into any node's log (issue 32: a
    quorum Fetch parked on the stopping leader ended in 'NotController: this node is
    shutting down' tracebacks)."""
    for log in sorted(data.glob("node-*.log")):
        bad = [line for line in log.read_text().splitlines()
               if " ERROR " in line or line.startswith("Traceback")]
        assert not bad, f"{log.name}:\n" + "\n".join(bad[:20])


def test_a_bad_layout_is_refused_before_anything_starts(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "rillet.local_cluster", "--nodes", "2", "--data",
         str(tmp_path / "d"), "--set", "node.id=7"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "node.id" in result.stderr
    assert not (tmp_path / "d").exists()
