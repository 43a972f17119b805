"""Container probes (tcpSocket, httpGet, exec) with kubelet's thresholds and timing."""
from __future__ import annotations

import http.client
import socket
import ssl
import subprocess
import time
from dataclasses import dataclass, field


@dataclass
class ProbeState:
    """Timing and counters of one probe of one container attempt."""

    spec: dict
    started: float = field(default_factory=time.monotonic)
    next_due: float = 0.0
    successes: int = 0
    failures: int = 0
    result: bool | None = None  # None until the thresholds decided once

    def __post_init__(self) -> None:
        self.next_due = self.started + float(self.spec.get("initialDelaySeconds", 0))

    def due(self, now: float) -> bool:
        return now >= self.next_due

    def record(self, ok: bool, now: float) -> bool | None:
        """Counts one outcome; returns the (possibly new) verdict."""
        self.next_due = now + float(self.spec.get("periodSeconds", 10))
        if ok:
            self.successes += 1
            self.failures = 0
            if self.successes >= int(self.spec.get("successThreshold", 1)):
                self.result = True
        else:
            self.failures += 1
            self.successes = 0
            if self.failures >= int(self.spec.get("failureThreshold", 3)):
                self.result = False
        return self.result


def resolve_port(port: int | str, container: dict) -> int:
    """A probe port is a number or the name of one of the container's ports."""
    if isinstance(port, int) or str(port).isdigit():
        return int(port)
    for p in container.get("ports", []) or []:
        if p.get("name") == port:
            return int(p["containerPort"])
    raise ValueError(f"no container port named {port}")


def run_probe(spec: dict, container: dict, pod_ip: str, exec_argv_prefix: list[str]) -> bool:
    """One probe attempt; True on success. exec_argv_prefix is e.g. ["podman", "exec", cid]."""
    timeout = float(spec.get("timeoutSeconds", 1))
    try:
        if "tcpSocket" in spec:
            ts = spec["tcpSocket"]
            with socket.create_connection((ts.get("host") or pod_ip, resolve_port(ts["port"], container)),
                                          timeout=timeout):
                return True
        if "httpGet" in spec:
            hg = spec["httpGet"]
            host, port = hg.get("host") or pod_ip, resolve_port(hg["port"], container)
            if hg.get("scheme", "HTTP").upper() == "HTTPS":
                ctx = ssl._create_unverified_context()  # kubelet does not verify probe certs
                conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                    host, port, timeout=timeout, context=ctx)
            else:
                conn = http.client.HTTPConnection(host, port, timeout=timeout)
            try:
                headers = {h["name"]: h["value"] for h in hg.get("httpHeaders", []) or []}
                conn.request("GET", hg.get("path", "/"), headers=headers)
                return 200 <= conn.getresponse().status < 400
            finally:
                conn.close()
        if "exec" in spec:
            proc = subprocess.run([*exec_argv_prefix, *spec["exec"]["command"]],
                                  capture_output=True, timeout=timeout + 5)
            return proc.returncode == 0
    except (OSError, ValueError, subprocess.TimeoutExpired, http.client.HTTPException):
        return False
    return False  # grpc and unknown handlers: not supported here, reported as failing
