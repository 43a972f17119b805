"""meta.properties: formats a log dir on first start and checks it on every other."""
from __future__ import annotations

import base64
import uuid
from pathlib import Path

from .config import ConfigError, read_properties
from .storage.durable_file import write_durably

META_FILE = "meta.properties"


def new_cluster_id() -> str:
    """Kafka-style cluster id: a random UUID, base64url without padding (22 chars)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def ensure_formatted(log_dirs: list[Path], node_id: int, cluster_id: str | None,
                     require_id: bool = False) -> str:
    """The cluster id of these dirs; formats unformatted dirs; refuses mismatches.

    require_id: a node of a multi-node quorum never invents an id, or each node
    would format itself into a cluster of its own.
    """
    found: dict[Path, dict[str, str]] = {}
    for d in log_dirs:
        meta = d / META_FILE
        if meta.exists():
            found[d] = read_properties(meta)
    ids = {props.get("cluster.id") for props in found.values()}
    if len(ids) > 1:
        raise ConfigError(f"log dirs belong to different clusters: {sorted(map(str, ids))}")
    for d, props in found.items():
        if props.get("node.id") != str(node_id):
            raise ConfigError(
                f"{d / META_FILE} was formatted for node.id {props.get('node.id')}, "
                f"this node is {node_id}")
    existing = next(iter(ids), None) if ids else None
    if existing and cluster_id and existing != cluster_id:
        raise ConfigError(f"log dirs hold cluster {existing}, config cluster.id is {cluster_id}")
    if require_id and not existing and not cluster_id:
        raise ConfigError("cluster.id must be set to format the storage of a node of a "
                          "multi-node quorum (the same id on every node; e.g. "
                          f"{new_cluster_id()})")
    chosen = existing or cluster_id or new_cluster_id()
    for d in log_dirs:
        if d in found:
            continue
        d.mkdir(parents=True, exist_ok=True)
        write_durably(d / META_FILE, f"version=1\ncluster.id={chosen}\nnode.id={node_id}\n"
                      .encode())
    return chosen
