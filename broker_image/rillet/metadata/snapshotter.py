"""Metadata snapshots: taken from the committed image, loaded at start, fetched when far behind.

Every node snapshots its own committed image once
metadata.log.max.record.bytes.between.snapshots of records were applied since the
last one, then drops the whole log segments the snapshot covers, so the metadata log
does not grow for ever. At start the latest snapshot is the image replay begins from.
A follower whose offset the leader no longer has (the leader answers its Fetch with a
snapshot id) pulls that snapshot with FetchSnapshot, installs it and continues from
its end offset.

Owned by the broker; event loop only (file writes run in worker threads).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from ..client.connection import BrokerConnection, raise_for
from .image import MetadataImage, replay
from .log import METADATA_TOPIC, MetadataLog
from .snapshot import SnapshotStore, image_records

log = logging.getLogger(__name__)
FETCH_SNAPSHOT = 59
CHUNK_BYTES = 1 << 20


class ImageOwner(Protocol):
    """Who holds the committed image (the controller): the snapshotter feeds it."""

    @property
    def image(self) -> MetadataImage: ...

    def load_image(self, image: MetadataImage) -> None: ...

    def apply_committed(self, batches: list[tuple[int, list[dict[str, Any]]]]) -> None: ...

    def install_image(self, image: MetadataImage) -> None: ...


class QuorumPeer(Protocol):
    """This node's quorum member (the RaftNode): who it is, its epoch, its connections."""

    @property
    def node_id(self) -> int: ...

    @property
    def epoch(self) -> int: ...

    def connection(self, to: int, kind: str = "control") -> BrokerConnection: ...


class Snapshotter:
    def __init__(self, store: SnapshotStore, metadata_log: MetadataLog,
                 controller: ImageOwner, cluster_id: str, threshold_bytes: int) -> None:
        self.store = store
        self.log = metadata_log
        self.controller = controller
        self.cluster_id = cluster_id
        self.threshold_bytes = threshold_bytes
        self.raft: QuorumPeer | None = None   # set once the quorum node exists
        self._since_last = 0
        self._taking: asyncio.Task[None] | None = None

    def restore(self) -> None:
        """Start from the latest snapshot, if any (before the quorum starts)."""
        latest = self.store.latest()
        if latest is None:
            return
        end, epoch = latest
        image = self._image_of(end, epoch)
        self.controller.load_image(image)
        if self.log.end_offset < end:
            # A crash between installing a fetched snapshot and resetting the log.
            self.log.reset_to_snapshot(end, epoch)
        self.log.snapshot_id = (end, epoch)
        log.info("metadata image loaded from snapshot at offset %d (epoch %d)", end, epoch)

    def _image_of(self, end: int, epoch: int) -> MetadataImage:
        records = self.store.read(end, epoch)
        return replay(MetadataImage(cluster_id=self.cluster_id), records, end - 1)

    # -- taking ----------------------------------------------------------------------------

    def on_commit(self, batches: list[tuple[int, list[dict[str, Any]], int]]) -> None:
        """Committed (last offset, records, size) batches, in log order."""
        self.controller.apply_committed([(last, records) for last, records, _ in batches])
        self._since_last += sum(size for _, _, size in batches)
        if self._since_last >= self.threshold_bytes and self._taking is None:
            self._since_last = 0
            self._taking = asyncio.ensure_future(self._take())
            self._taking.add_done_callback(self._taken)

    def _taken(self, task: asyncio.Task[None]) -> None:
        self._taking = None
        if not task.cancelled() and task.exception() is not None:
            log.error("metadata snapshot failed", exc_info=task.exception())

    async def _take(self) -> None:
        image = self.controller.image
        end = image.offset + 1
        epoch = self.log.epoch_at(end - 1)
        if end <= self.log.start_offset or epoch < 0:
            return
        records = image_records(image)
        await asyncio.to_thread(self.store.write, end, epoch, records)
        # Only whole segments can go: roll so everything the snapshot covers is closed.
        self.log.delete_before(end, epoch)
        await asyncio.to_thread(self.store.delete_older_than, end)
        log.info("metadata snapshot at offset %d (epoch %d); log now starts at %d", end, epoch,
                 self.log.start_offset)

    async def stop(self) -> None:
        if self._taking is not None:
            await asyncio.wait([self._taking], timeout=10)

    # -- fetching --------------------------------------------------------------------------

    async def fetch_from(self, leader: int, end: int, epoch: int) -> bool:
        """Pull snapshot (end, epoch) from `leader` and install it; False to retry later."""
        raft = self.raft
        assert raft is not None
        conn = raft.connection(leader, "snapshot")
        data = bytearray()
        while True:
            resp = await conn.request(FETCH_SNAPSHOT, 0, {
                "cluster_id": self.cluster_id, "replica_id": raft.node_id,
                "max_bytes": CHUNK_BYTES, "topics": [{"name": METADATA_TOPIC, "partitions": [{
                    "partition": 0, "current_leader_epoch": raft.epoch,
                    "snapshot_id": {"end_offset": end, "epoch": epoch},
                    "position": len(data)}]}]})
            raise_for(resp.error_code, "fetch snapshot")
            part = resp.topics[0].partitions[0]
            raise_for(part.error_code, "fetch snapshot")
            chunk = bytes(part.unaligned_records or b"")
            data += chunk
            if len(data) >= part.size or not chunk:
                break
        await asyncio.to_thread(self.store.install, end, epoch, bytes(data))
        image = await asyncio.to_thread(self._image_of, end, epoch)
        self.controller.install_image(image)
        self.log.reset_to_snapshot(end, epoch)
        self._since_last = 0
        log.info("installed the leader's metadata snapshot at offset %d (epoch %d)", end, epoch)
        return True
