"""The TLS contexts this node dials other nodes with: a plain value, so that a node whose
listeners are all PLAINTEXT holds two Nones and never loads security/tls.py (on_demand.py
builds it, loading tls.py only for an SSL listener).

Thread safety: an immutable value.
"""
from __future__ import annotations

import ssl
from dataclasses import dataclass


@dataclass(frozen=True)
class OutboundTls:
    """The contexts this node dials other nodes with: the controller listener's (Raft, broker
    registration and heartbeats, forwarded admin requests) and the broker listener's
    (replication). None where that listener is PLAINTEXT."""

    controller: ssl.SSLContext | None = None
    brokers: ssl.SSLContext | None = None
