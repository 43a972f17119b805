"""Cluster DNS names as hosts entries, kept current from Services and EndpointSlices.

Records, as cluster DNS would serve them, but only ever pointing at pod IPs:
  <svc>.<ns>.svc.cluster.local            -> the ready endpoints' pod IPs (ClusterIP or headless;
                                             no ClusterIP is ever handed out)
  <host>.<svc>.<ns>.svc.cluster.local     -> that endpoint (StatefulSet pods via their headless
                                             service)
Each pod gets its own hosts file (bind-mounted at /etc/hosts, rewritten in place) holding these
plus the short forms valid in its namespace (`svc`, `svc.ns`, `host.svc`...), because a hosts file
knows no search domains. The host's /etc/hosts gets the fully qualified names in a marked block
so tests and clients on the host resolve them too.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from . import host
from .kube import Kube

SUFFIX = f"svc.{host.CLUSTER_DOMAIN}"


@dataclass(frozen=True)
class PodEntry:
    ns: str
    dir: Path
    ip: str
    fqdn: str
    hostname: str


class Dns:
    """Owns every hosts file it writes; `sync` is called by the agent's DNS thread only."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self._pods: dict[str, PodEntry] = {}
        self._lock = threading.Lock()
        self._records: list[tuple[str, str, str, str]] = []  # (ip, ns, svc, host or "")

    def register(self, uid: str, ns: str, pod_dir: Path, ip: str, fqdn: str, hostname: str) -> None:
        entry = PodEntry(ns, pod_dir, ip, fqdn, hostname)
        pod_dir.mkdir(parents=True, exist_ok=True)
        (pod_dir / "resolv.conf").write_text(
            f"search {ns}.{SUFFIX} {SUFFIX} {host.CLUSTER_DOMAIN}\n"
            "nameserver 127.0.0.1\noptions ndots:5 timeout:1 attempts:1\n")
        with self._lock:
            self._pods[uid] = entry
            records = list(self._records)
        self._write_pod(entry, records)

    def unregister(self, uid: str) -> None:
        with self._lock:
            self._pods.pop(uid, None)

    def sync(self) -> None:
        """Re-reads Services and EndpointSlices and rewrites every hosts file that changed."""
        services = {(s["metadata"]["namespace"], s["metadata"]["name"]): s
                    for s in self.kube.list("Service")}
        records: list[tuple[str, str, str, str]] = []
        for sl in self.kube.list("EndpointSlice"):
            ns = sl["metadata"]["namespace"]
            svc = sl["metadata"].get("labels", {}).get("kubernetes.io/service-name")
            if not svc or (ns, svc) not in services:
                continue
            if services[(ns, svc)]["spec"].get("type") == "ExternalName":
                continue
            for ep in sl.get("endpoints", []) or []:
                if (ep.get("conditions") or {}).get("ready") is False:
                    continue
                for ip in ep.get("addresses", []) or []:
                    records.append((ip, ns, svc, ep.get("hostname") or ""))
        records.sort()
        with self._lock:
            self._records = records
            pods = list(self._pods.values())
        for entry in pods:
            self._write_pod(entry, records)
        # Both writers skip files whose content is unchanged.
        host.hosts_block_set(sorted({f"{ip} {name}" for ip, name in self._fqdn_lines(records)}))

    @staticmethod
    def _fqdn_lines(records) -> list[tuple[str, str]]:
        out = []
        for ip, ns, svc, hostname in records:
            out.append((ip, f"{svc}.{ns}.{SUFFIX}"))
            if hostname:
                out.append((ip, f"{hostname}.{svc}.{ns}.{SUFFIX}"))
        return out

    def _write_pod(self, entry: PodEntry, records) -> None:
        lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback",
                 f"{entry.ip}\t{entry.fqdn} {entry.hostname}" if entry.fqdn != entry.hostname
                 else f"{entry.ip}\t{entry.hostname}"]
        for ip, ns, svc, hostname in records:
            names = [f"{svc}.{ns}.{SUFFIX}", f"{svc}.{ns}.svc", f"{svc}.{ns}"]
            if ns == entry.ns:
                names.append(svc)
            if hostname:
                names = [f"{hostname}.{n}" for n in names]
            lines.append(f"{ip}\t{' '.join(names)}")
        host.write_in_place(entry.dir / "hosts", "\n".join(lines) + "\n")
