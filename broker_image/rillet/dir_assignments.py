"""The broker's replica -> log dir assignments the controller has yet to record (KIP-858).

Filled by whoever learns where a replica lives: the LogCreator when it makes or finds a
replica's log in a dir other than the one its metadata names (or cannot, because that dir
is not online here: LOST), and the log dir failure channel (every replica of a failed dir
goes to LOST). The lifecycle (lifecycle.py) drains it with AssignReplicasToDirs, retried
until the controller took each one; a later assignment of the same replica replaces an
earlier one not yet sent. Event loop only.
"""
from __future__ import annotations

import asyncio
import uuid
from typing import Mapping

TopicPartition = tuple[str, int]


class DirAssignmentQueue:
    """Owner of the pending assignments (see the module doc)."""

    def __init__(self) -> None:
        self.pending: dict[TopicPartition, uuid.UUID] = {}
        self.ready = asyncio.Event()

    def put(self, assignments: Mapping[TopicPartition, uuid.UUID]) -> None:
        if assignments:
            self.pending.update(assignments)
            self.ready.set()

    def taken(self, sent: Mapping[TopicPartition, uuid.UUID]) -> None:
        """`sent` reached the controller: done, unless a newer one came meanwhile."""
        for tp, directory in sent.items():
            if self.pending.get(tp) == directory:
                del self.pending[tp]
        if not self.pending:
            self.ready.clear()
