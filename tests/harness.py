"""Real broker processes for tests: start, stop (SIGTERM), kill (SIGKILL), pause (SIGSTOP),
resume (SIGCONT), restart."""
from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

from rillet.local_cluster import is_listening, serve_command


def free_port(host: str = "127.0.0.1") -> int:
    return free_ports(1, host)[0]


def _listen_range() -> tuple[int, int]:
    """Ports below the kernel's ephemeral range (net.ipv4.ip_local_port_range).

    A port the kernel hands out for binding to port 0 comes from the range every outgoing
    connection on the machine also draws from: a client's socket could take it between the
    moment a test picks it and the moment its broker binds it, or while a stopped broker is
    down before its restart ("Address already in use"). Ports below that range are only ever
    taken by an explicit bind.
    """
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    return (10000, low) if low > 20000 else (1024, low)


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct ports free right now (all held open until all are chosen), picked at
    random outside the ephemeral range so concurrent test runs rarely even try the same."""
    low, high = _listen_range()
    socks: list[socket.socket] = []
    try:
        while len(socks) < count:
            s = socket.socket()
            try:
                s.bind((host, random.randrange(low, high)))
            except OSError:
                s.close()
                continue
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def listening(broker: "BrokerProcess") -> bool:
    """The default readiness: the client port accepts connections."""
    return is_listening(broker.host, broker.port)


def answering(broker: "BrokerProcess") -> bool:
    """Stricter readiness: the broker answers ApiVersions (a paused one still accepts TCP)."""
    return broker.answers()


class BrokerProcess:
    """One `rillet serve` process on 127.0.0.1; data survives stop/kill/start.

    `ready(broker)` says when a started broker counts as up (default: its client port
    listens); a cluster node may want more, e.g. that it answers, or has joined the quorum."""

    def __init__(self, data_dir: Path, port: int | None = None, node_id: int = 1,
                 config: dict[str, Any] | None = None, host: str = "127.0.0.1",
                 ready: Callable[["BrokerProcess"], bool] = listening) -> None:
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port or free_port(host)
        self.node_id = node_id
        self.config = dict(config or {})
        self.ready = ready
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.broker.log"
        # Added to the process's environment at every start (e.g. tests/clock_faults.py's
        # libfaketime settings).
        self.env: dict[str, str] = {}
        # Run in front of the broker's command line, e.g. tests/disk_faults.py's private
        # mount namespace with a small log dir.
        self.prefix: list[str] = []

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        settings = {"node.id": self.node_id,
                    "listeners": f"PLAINTEXT://{self.host}:{self.port}",
                    "log.dirs": str(self.data_dir), **self.config}
        return self.prefix + serve_command(settings)

    def start(self, timeout: float = 30.0, wait: bool = True) -> "BrokerProcess":
        """Start the process; with wait=False return at once (nodes of a cluster may only
        become ready together) and call wait_ready later."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env})
        log.close()
        self.paused = False
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                code = self.proc.returncode if self.proc else None
                raise RuntimeError(f"broker {self.node_id} exited with {code}:\n{self.log()}")
            if self.ready(self):
                return
            time.sleep(0.05)
        raise TimeoutError(f"broker {self.node_id} not ready within {timeout}s:\n{self.log()}")

    def answers(self, timeout: float = 1.0) -> bool:
        """True when an ApiVersions request gets its response within `timeout` seconds."""
        from tests.wire import Wire  # here: bench imports this module and needs no codec
        try:
            with Wire(self.bootstrap, timeout=timeout) as wire:
                return wire.request(18, 0, {}).error_code == 0
        except OSError:  # refused, reset, closed (ConnectionError) or timed out
            return False

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-20000:]
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets but runs no code (a GC pause, a hung VM)."""
        assert self.alive(), "not running"
        self.proc.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
        self.paused = True

    def resume(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
        self.paused = False

    def stop(self, timeout: float = 20.0) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        if self.paused:
            self.resume()  # a stopped process only acts on SIGTERM once it runs again
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(5)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()  # SIGKILL reaches a paused process too
            self.proc.wait(5)
        self.paused = False

    def restart(self) -> "BrokerProcess":
        self.stop()
        return self.start()
