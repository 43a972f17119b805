"""The cluster id format: what a broker formats its storage with when none is given, and
what the operator generates once per Cluster and keeps in its status."""
from __future__ import annotations

import base64
import uuid


def new_cluster_id() -> str:
    """Kafka-style cluster id: a random UUID, base64url without padding (22 chars)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
